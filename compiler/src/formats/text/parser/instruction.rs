//! One instruction: its name, shape, opcode, operands, callees written
//! inline, and the annotations any instruction may carry.

use super::*;

/// An instruction as written, before names resolve.
pub(super) struct ParsedInstruction<'i> {
    pub(super) instr: Instruction,
    pub(super) operands: Vec<Pair<'i>>,
    pub(super) is_root: bool,
    pub(super) at: Pair<'i>,
    pub(super) unshaped: bool,
    /// `control-predecessors={a, b}`: the names, and where they are.
    pub(super) control: Option<(Vec<String>, Pair<'i>)>,
    /// The name as written, without its sigil: the key operands name it by.
    pub(super) source_name: &'i str,
    /// What reading it changed or assumed, for the module's notes.
    pub(super) note: Option<String>,
    /// The op a short-form async start wraps (see [`Attrs::wrapped`]).
    pub(super) wrapped: Option<Box<Op>>,
    /// Computations written inline as an attribute's value
    /// (`to_apply={ ... }`), callees first; the op names the last as `_`.
    pub(super) inline: Vec<Computation>,
}

/// The op an instruction's body writes, its operands as written, and a
/// note when reading it assumed something. Shared by named instructions and
/// those written in place of an operand.
pub(super) fn instruction_body<'i>(
    body: Pair<'i>,
    shape_pair: Option<Pair<'i>>,
    declared: &Shape,
    name: &str,
    attrs: &mut Attrs<'i>,
) -> Result<(Op, Vec<Pair<'i>>, Option<String>), ParseError> {
    if shape_pair.is_none() && body.as_rule() != Rule::op_body {
        return err_at(
            &body,
            "a parameter or constant needs its result shape written",
        );
    }
    let mut operands = Vec::new();
    let mut note = None;
    let op = match body.as_rule() {
        Rule::parameter_body => {
            attrs.opcode = "parameter".into();
            Op::Parameter(int(&body
                .into_inner()
                .next()
                .expect("grammar: parameter number"))?)
        }
        Rule::constant_body => {
            attrs.opcode = "constant".into();
            let lit = body.into_inner().next().expect("grammar: literal");
            if lit.as_rule() == Rule::elided {
                return err_at(
                    &lit,
                    "constant value was elided as {...}; dump with large constants printed",
                );
            }
            let shape_pair = shape_pair.expect("checked: written");
            if let Shape::Tuple(_) = declared {
                return match literal_tree(lit, declared, &shape_pair)? {
                    LiteralTree::Tuple(elems) => Ok((Op::TupleConstant(elems), Vec::new(), None)),
                    LiteralTree::Array(_) => unreachable!("a tuple shape reads as a tuple"),
                };
            }
            let (value, reading) = literal(lit, declared, &shape_pair)?;
            // Where the note points is found only for a note: finding a
            // line and column scans the text from its start.
            let at = || {
                let (line, col) = lit.line_col();
                format!("{line}:{col}: '{name}'")
            };
            note = match reading {
                LiteralReading::AsWritten => None,
                LiteralReading::FirstOnly => Some(format!(
                    "{} writes one value for {declared}; XLA's parser makes it the first element and every other element zero, and so does hlatc",
                    at()
                )),
                LiteralReading::ComplexNan => Some(format!(
                    "{} writes a complex value with a NaN part; XLA's parser copies a NaN real part into the imaginary part and reads an imaginary NaN through f64, and so does hlatc",
                    at()
                )),
            };
            Op::Constant(value)
        }
        Rule::op_body => {
            let mut bi = body.into_inner();
            let opcode_pair = bi.next().expect("grammar: opcode");
            operands = bi.collect();
            attrs.opcode = opcode_pair.as_str().to_string();
            op_from_attrs(&opcode_pair, attrs)?
        }
        r => unreachable!("grammar: unexpected {r:?} as instruction body"),
    };
    Ok((op, operands, note))
}

/// An instruction written in place of an operand: its op, its own operands,
/// whether it was written without a shape, and a note. It has no name until
/// [`name_nested`] gives it XLA's, and no attributes.
pub(super) fn nested_instruction<'i>(
    p: Pair<'i>,
) -> Result<(Instruction, Vec<Pair<'i>>, bool, Option<String>), ParseError> {
    let mut it = p.into_inner();
    let first = it.next().expect("grammar: nested body");
    let (shape_pair, body) = if first.as_rule() == Rule::shape {
        (Some(first), it.next().expect("grammar: nested body"))
    } else {
        (None, first)
    };
    let declared = match &shape_pair {
        Some(s) => shape(*s)?,
        None => Shape::Tuple(Vec::new()),
    };
    let mut attrs = Attrs {
        map: BTreeMap::new(),
        at: p,
        opcode: String::new(),
        wrapped: None,
    };
    let (op, operands, note) =
        instruction_body(body, shape_pair, &declared, "(nested)", &mut attrs)?;
    if attrs.wrapped.is_some() {
        return err_at(
            &p,
            "an async start written in place of an operand; give it a name",
        );
    }
    attrs.finish()?;
    let instr = Instruction::new(String::new(), declared, op);
    Ok((instr, operands, shape_pair.is_none(), note))
}

pub(super) fn instruction<'i>(p: Pair<'i>) -> Result<ParsedInstruction<'i>, ParseError> {
    let at = p;
    let mut it = p.into_inner().peekable();
    let is_root = it.peek().is_some_and(|q| q.as_rule() == Rule::root_kw);
    if is_root {
        it.next();
    }
    let source_name = strip_sigil(it.next().expect("grammar: name").as_str());
    let name = source_name.to_string();
    let shape_pair = it.next_if(|q| q.as_rule() == Rule::shape);
    let unshaped = shape_pair.is_none();
    let declared = match &shape_pair {
        Some(s) => shape(*s)?,
        // A placeholder until the operands are known.
        None => Shape::Tuple(Vec::new()),
    };
    let body = it.next().expect("grammar: body");
    let mut attrs = Attrs {
        map: BTreeMap::new(),
        at,
        opcode: String::new(),
        wrapped: None,
    };
    let mut inline = Vec::new();
    for a in it {
        let (k, mut v, ap) = attribute(a)?;
        if attrs.map.contains_key(&k) {
            return err_at(&ap, format!("attribute '{k}' given twice"));
        }
        if let Some(hoisted) = inline_computation(&k, &v, &ap)? {
            inline.extend(hoisted);
            v = Value::Word(INLINE_NAME.to_string());
        }
        attrs.map.insert(k, (v, ap));
    }
    let (op, operands, note) = instruction_body(body, shape_pair, &declared, &name, &mut attrs)?;
    let wrapped = attrs.wrapped.take();
    let metadata = match attrs.take("metadata") {
        None => Metadata::default(),
        Some((v, p)) => metadata(v.into_string_map(&p)?, &p)?,
    };
    let frontend_attributes = match attrs.take("frontend_attributes") {
        None => BTreeMap::new(),
        Some((v, p)) => v.into_string_map(&p)?,
    };
    let sharding = match attrs.take("sharding") {
        None => None,
        Some((_, p)) => Some(sharding(&p)?),
    };
    let backend_config = attrs.backend_config()?;
    let parameter_replication = parameter_replication(&mut attrs)?;
    // Rare: most instructions have no attribute left by now, and three
    // lookups each were 1% of parsing a JAX dump.
    let (statistics, result_accuracy, original_value) = if attrs.map.is_empty() {
        (None, None, None)
    } else {
        annotations(&mut attrs, &op)?
    };
    let control = match attrs.take("control-predecessors") {
        None => None,
        Some((Value::Words(names), p)) => Some((
            names.iter().map(|n| strip_sigil(n).to_string()).collect(),
            p,
        )),
        Some((Value::Ints(v), p)) if v.is_empty() => Some((Vec::new(), p)),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'control-predecessors' must list instruction names, got {}",
                    other.kind()
                ),
            )
        }
    };
    attrs.finish()?;
    let instr = Instruction {
        name,
        shape: declared,
        op,
        metadata,
        frontend_attributes,
        sharding,
        backend_config,
        parameter_replication,
        statistics,
        result_accuracy,
        original_value,
    };
    Ok(ParsedInstruction {
        instr,
        operands,
        is_root,
        at,
        unshaped,
        control,
        source_name,
        note,
        wrapped,
        inline,
    })
}

/// What XLA's reader names a computation written inline.
pub(super) const INLINE_NAME: &str = "_";

/// The attributes that name one called computation.
pub(super) const CALLEE_ATTRIBUTES: [&str; 8] = [
    "to_apply",
    "calls",
    "condition",
    "body",
    "select",
    "scatter",
    "true_computation",
    "false_computation",
];

/// A computation written in place of a callee's name (`to_apply={ x = ...
/// ROOT r = ... }`), read as a module of its own whose entry is named
/// `_`, as XLA's reader names it: its computations, callees first, the
/// inline one last. None when the value is no such body.
pub(super) fn inline_computation(
    key: &str,
    value: &Value,
    attribute: &Pair<'_>,
) -> Result<Option<Vec<Computation>>, ParseError> {
    let Value::Raw(text) = value else {
        return Ok(None);
    };
    if !CALLEE_ATTRIBUTES.contains(&key) || !text.contains('=') {
        return Ok(None);
    }
    const PREFIX: &str = "HloModule _\n\nENTRY _ ";
    let src = format!("{PREFIX}{text}\n");
    let (m, _) = parse_module_noted(&src).map_err(|e| {
        let value = (*attribute)
            .into_inner()
            .nth(1)
            .expect("grammar: attribute value");
        // Line 3 of the module read holds the value's first line, after
        // the prefix's `ENTRY _ `.
        let (line, column) = value.line_col();
        ParseError {
            line: line + e.line.saturating_sub(3),
            column: if e.line == 3 {
                column
                    + e.column
                        .saturating_sub(PREFIX.len() - "HloModule _\n\n".len() + 1)
            } else {
                e.column
            },
            message: format!(
                "in the computation written inline as '{key}': {}",
                e.message
            ),
        }
    })?;
    let entry = m.entry;
    let mut comps = m.computations;
    let inline = comps.remove(entry);
    comps.push(inline);
    Ok(Some(comps))
}

/// Gives the computations `inline` names no computation in `taken` or
/// already adopted uses (`_`, then `_.1`, ...), renaming their callers
/// among them and in `op`, and adopts them.
pub(super) fn adopt_inline(
    adopted: &mut Vec<Computation>,
    mut inline: Vec<Computation>,
    op: &mut Op,
    taken: &dyn Fn(&str) -> bool,
) {
    for i in 0..inline.len() {
        let old = inline[i].name.clone();
        let free = |n: &str| {
            !taken(n)
                && !adopted.iter().any(|c| c.name == n)
                && !inline
                    .iter()
                    .enumerate()
                    .any(|(j, c)| j != i && c.name == n)
        };
        if free(&old) {
            continue;
        }
        let base = old.split('.').next().unwrap_or(&old).to_string();
        let new = (1..)
            .map(|k| format!("{base}.{k}"))
            .find(|n| free(n))
            .expect("some suffix is free");
        inline[i].name = new.clone();
        for c in inline.iter_mut() {
            let ids: Vec<_> = c.ids().collect();
            for id in ids {
                for callee in c.instr_mut(id).op.called_computations_mut() {
                    if *callee == old {
                        *callee = new.clone();
                    }
                }
            }
        }
        if i + 1 == inline.len() {
            for callee in op.called_computations_mut() {
                if *callee == old {
                    *callee = new.clone();
                }
            }
        }
    }
    adopted.extend(inline);
}

pub(super) fn metadata(m: BTreeMap<String, String>, at: &Pair<'_>) -> Result<Metadata, ParseError> {
    metadata_fields(m).or_else(|message| err_at(at, message))
}

/// Metadata from its `key=value` fields, refusing a field it does not know.
pub(super) fn metadata_fields(mut m: BTreeMap<String, String>) -> Result<Metadata, String> {
    let mut int = |key: &str| -> Result<i64, String> {
        match m.remove(key) {
            Some(s) => s
                .parse()
                .map_err(|_| format!("metadata {key} must be an integer, got {s}")),
            None => Ok(0),
        }
    };
    let source_line = int("source_line")?;
    let source_end_line = int("source_end_line")?;
    let source_column = int("source_column")?;
    let source_end_column = int("source_end_column")?;
    let stack_frame_id = int("stack_frame_id")?;
    let stack_frame_id = i32::try_from(stack_frame_id)
        .map_err(|_| format!("metadata stack_frame_id {stack_frame_id} is out of range"))?;
    let md = Metadata {
        op_type: m.remove("op_type").unwrap_or_default(),
        op_name: m.remove("op_name").unwrap_or_default(),
        source_file: m.remove("source_file").unwrap_or_default(),
        source_line,
        source_end_line,
        source_column,
        source_end_column,
        stack_frame_id,
        scheduling_name: m.remove("scheduling_name").unwrap_or_default(),
        deduplicated_name: m.remove("deduplicated_name").unwrap_or_default(),
    };
    if let Some(key) = m.keys().next() {
        return Err(format!("unsupported metadata field '{key}'"));
    }
    Ok(md)
}

/// An instruction's `statistics=`, `result_accuracy=` (on the ops XLA
/// lets carry it) and `origin=`.
#[allow(clippy::type_complexity)]
pub(super) fn annotations(
    attrs: &mut Attrs,
    op: &Op,
) -> Result<
    (
        Option<Box<crate::ir::statistics::Statistics>>,
        Option<Box<ResultAccuracy>>,
        Option<Box<crate::ir::original_value::OriginalValue>>,
    ),
    ParseError,
> {
    let statistics = attrs
        .take("statistics")
        .map(|(_, p)| {
            read_whole_value(
                &p,
                "statistics",
                crate::formats::text::annotations::parse_statistics,
            )
        })
        .transpose()?;
    let result_accuracy = match attrs.take("result_accuracy") {
        None => None,
        Some((_, p)) => {
            let accuracy = read_whole_value(&p, "result_accuracy", |text| {
                crate::formats::text::annotations::parse_result_accuracy(text)
            })?;
            // Written, it must fit the op even when it reads as none.
            let problem = match &accuracy {
                Some(a) => a.problem_on(op),
                None => ResultAccuracy::refused_on(op),
            };
            if let Some(problem) = problem {
                return err_at(&p, problem);
            }
            accuracy
        }
    };
    let original_value = attrs
        .take("origin")
        .map(|(_, p)| {
            read_whole_value(
                &p,
                "origin",
                crate::formats::text::annotations::parse_original_value,
            )
        })
        .transpose()?
        .map(Box::new);
    Ok((
        statistics.map(Box::new),
        result_accuracy.map(Box::new),
        original_value,
    ))
}

/// `parameter_replication={true,false}`: one flag per leaf buffer.
pub(super) fn parameter_replication(attrs: &mut Attrs) -> Result<Option<Vec<bool>>, ParseError> {
    Ok(match attrs.take("parameter_replication") {
        None => None,
        Some((Value::Words(ws), p)) => Some(
            ws.iter()
                .map(|w| match w.as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => err_at(
                        &p,
                        format!("'parameter_replication' lists true or false, got '{other}'"),
                    ),
                })
                .collect::<Result<Vec<bool>, _>>()?,
        ),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'parameter_replication' must be a list like {{true,false}}, got {}",
                    other.kind()
                ),
            )
        }
    })
}

/// The sharding of a `sharding=...` attribute, with an error pointing
/// inside its text.
pub(super) fn sharding(attribute: &Pair<'_>) -> Result<Sharding, ParseError> {
    read_whole_value(attribute, "sharding", |text| {
        crate::formats::text::sharding::parse_sharding(text, &metadata_fields)
    })
}

/// Reads an attribute's value (taken whole by the grammar) with `read`; an
/// error points at the byte inside the value where it went wrong.
pub(super) fn read_whole_value<T>(
    attribute: &Pair<'_>,
    what: &str,
    read: impl FnOnce(&str) -> Result<T, crate::formats::text::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    let value = (*attribute)
        .into_inner()
        .nth(1)
        .expect("grammar: attribute value");
    read_text_at(&value, 0, what, || read(value.as_str()))
}

/// Runs `read` over text that starts `offset` bytes into `value`; an
/// error points at the byte where it went wrong.
pub(super) fn read_text_at<T>(
    value: &Pair<'_>,
    offset: usize,
    what: &str,
    read: impl FnOnce() -> Result<T, crate::formats::text::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    read().map_err(|e| {
        let (line, column) = value.line_col_at(offset + e.offset);
        ParseError {
            line,
            column,
            message: format!("{what}: {}", e.message),
        }
    })
}
