//! One instruction: its name, shape, opcode, operands, callees written
//! inline, and the annotations any instruction may carry.

use super::*;

/// An instruction's shape, op and operands as written, before names
/// resolve. What else it carries stays in its [`Attrs`] until the
/// instruction is built, and is then set on it in place ([`annotate`]):
/// an instruction is 648 bytes, and each move of one a copy.
pub(super) struct ParsedInstruction<'i> {
    pub(super) shape: Shape,
    pub(super) op: Op,
    pub(super) operands: &'i [syntax::Operand<'i>],
    /// What reading it changed or assumed, for the module's notes.
    pub(super) note: Option<String>,
    /// The op a short-form async start wraps (see [`Attrs::wrapped`]).
    pub(super) wrapped: Option<Box<Op>>,
    /// Computations written inline as attributes' values (`to_apply={
    /// ... }`), one group per attribute, each callees first and the
    /// inline one last ([`Attrs::inline`] says which attribute wrote it).
    pub(super) inline: Vec<Vec<Computation>>,
}

/// `control-predecessors={a, b}`: the names, and where they are written.
pub(super) struct ControlPredecessors<'i> {
    pub(super) names: Vec<String>,
    pub(super) at: AttrPlace<'i>,
}

/// An instruction written in place of an operand, before names resolve.
/// It has no name until [`name_nested`] gives it XLA's, and no attributes.
pub(super) struct ParsedNested<'i> {
    pub(super) instr: Instruction,
    pub(super) operands: &'i [syntax::Operand<'i>],
    /// Written without a result shape, which is to be inferred.
    pub(super) unshaped: bool,
    pub(super) note: Option<String>,
}

/// The op an instruction's body writes, its operands as written, and a
/// note when reading it assumed something. Shared by named instructions and
/// those written in place of an operand; `shape_at` is where the result
/// shape is written, if it is.
pub(super) fn instruction_body<'i>(
    body: &'i syntax::Body<'i>,
    shape_at: Option<Span<'i>>,
    declared: &Shape,
    name: &str,
    attrs: &mut Attrs<'i>,
) -> Result<(Op, &'i [syntax::Operand<'i>], Option<String>), ParseError> {
    match body {
        syntax::Body::Op { opcode, operands } => {
            attrs.opcode = opcode.as_str();
            Ok((op_named(opcode.as_str(), opcode, attrs)?, operands, None))
        }
        syntax::Body::Parameter { at, number } => {
            written_shape(shape_at, at)?;
            attrs.opcode = "parameter";
            Ok((Op::Parameter(int(number)?), &[], None))
        }
        syntax::Body::Constant { at, value } => {
            let shape_at = written_shape(shape_at, at)?;
            attrs.opcode = "constant";
            let (op, note) = constant(value, declared, &shape_at, name)?;
            Ok((op, &[], note))
        }
    }
}

/// Where a parameter's or constant's result shape is written: it must be.
fn written_shape<'i>(shape_at: Option<Span<'i>>, body: &Span<'i>) -> Result<Span<'i>, ParseError> {
    shape_at.map_or_else(
        || {
            err_at(
                body,
                "a parameter or constant needs its result shape written",
            )
        },
        Ok,
    )
}

/// A constant of `declared` shape, and a note where XLA's parser reads
/// its value otherwise than its face value.
fn constant(
    value: &syntax::ConstantValue<'_>,
    declared: &Shape,
    shape_at: &Span<'_>,
    name: &str,
) -> Result<(Op, Option<String>), ParseError> {
    let lit = match value {
        syntax::ConstantValue::Elided(at) => {
            return err_at(
                at,
                "constant value was elided as {...}; dump with large constants printed",
            )
        }
        syntax::ConstantValue::Literal(lit) => lit,
    };
    if let Shape::Tuple(elements) = declared {
        let elements = tuple_elements(lit, elements, declared, shape_at)?;
        return Ok((Op::TupleConstant(elements), None));
    }
    let (value, reading) = literal(lit, declared, shape_at)?;
    // Where the note points is found only for a note: finding a line and
    // column scans the text from its start.
    let at = || {
        let (line, col) = lit.at().line_col();
        format!("{line}:{col}: '{name}'")
    };
    let note = match reading {
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
    Ok((Op::Constant(value), note))
}

pub(super) fn nested_instruction<'i>(
    n: &'i syntax::NestedInstruction<'i>,
) -> Result<ParsedNested<'i>, ParseError> {
    let declared = match &n.shape {
        Some(s) => shape(s)?,
        None => Shape::Tuple(Vec::new()),
    };
    let mut attrs = Attrs::new(n.at);
    let shape_at = n.shape.as_ref().map(syntax::Shape::at);
    let (op, operands, note) =
        instruction_body(&n.body, shape_at, &declared, "(nested)", &mut attrs)?;
    if attrs.wrapped.is_some() {
        return err_at(
            &n.at,
            "an async start written in place of an operand; give it a name",
        );
    }
    attrs.finish()?;
    Ok(ParsedNested {
        instr: Instruction::new(String::new(), declared, op),
        operands,
        unshaped: n.shape.is_none(),
        note,
    })
}

/// Reads `p` but for what any instruction may carry, which is left in
/// `attrs` for [`annotate`].
pub(super) fn instruction<'i>(
    p: &'i syntax::Instruction<'i>,
    attrs: &mut Attrs<'i>,
) -> Result<ParsedInstruction<'i>, ParseError> {
    let declared = match &p.shape {
        Some(s) => shape(s)?,
        // A placeholder until the operands are known.
        None => Shape::Tuple(Vec::new()),
    };
    let inline = read_attributes(&p.attributes, attrs)?;
    let shape_at = p.shape.as_ref().map(syntax::Shape::at);
    let (op, operands, note) =
        instruction_body(&p.body, shape_at, &declared, p.name.text(), attrs)?;
    Ok(ParsedInstruction {
        shape: declared,
        op,
        operands,
        note,
        wrapped: attrs.wrapped.take(),
        inline,
    })
}

/// Reads `written` into `attrs`, each once; a computation written inline
/// as a callee is read, returned and named `_` in its place.
fn read_attributes<'i>(
    written: &'i [syntax::Attribute<'i>],
    attrs: &mut Attrs<'i>,
) -> Result<Vec<Vec<Computation>>, ParseError> {
    let mut inline = Vec::new();
    for a in written {
        let (k, mut v, ap) = attribute(a)?;
        if attrs.map.contains_key(k) {
            return err_at(&ap, format!("attribute '{k}' given twice"));
        }
        if let Some(group) = inline_computation(k, &v, &ap)? {
            attrs.inline.insert(k, inline.len());
            inline.push(group);
            v = Value::Word(INLINE_NAME.to_string());
        }
        attrs.map.insert(k, (v, ap));
    }
    Ok(inline)
}

/// What any instruction may carry, taken from `attrs` onto `instr`, and
/// its control predecessors; an attribute left over is refused.
pub(super) fn annotate<'i>(
    instr: &mut Instruction,
    mut attrs: Attrs<'i>,
) -> Result<Option<ControlPredecessors<'i>>, ParseError> {
    carried(instr, &mut attrs)?;
    let control = control_predecessors(&mut attrs)?;
    attrs.finish()?;
    Ok(control)
}

/// Metadata, frontend attributes, sharding, backend config, parameter
/// replication, statistics, result accuracy and origin.
fn carried(instr: &mut Instruction, attrs: &mut Attrs<'_>) -> Result<(), ParseError> {
    if let Some((v, p)) = attrs.take("metadata") {
        instr.metadata = metadata(v.into_string_map(&p)?, &p)?;
    }
    if let Some((v, p)) = attrs.take("frontend_attributes") {
        instr
            .set_written_frontend_attributes(v.into_string_map(&p)?)
            .or_else(|e| err_at(&p, e.to_string()))?;
    }
    if let Some((_, p)) = attrs.take("sharding") {
        instr.sharding = Some(sharding(&p)?);
    }
    instr.backend_config = attrs.backend_config()?;
    instr.parameter_replication = parameter_replication(attrs)?;
    // Rare: most instructions have no attribute left by now, and three
    // lookups each were 1% of parsing a JAX dump.
    if !attrs.map.is_empty() {
        (
            instr.statistics,
            instr.result_accuracy,
            instr.original_value,
        ) = annotations(attrs, &instr.op)?;
    }
    Ok(())
}

/// `control-predecessors={a, b}`, where written.
fn control_predecessors<'i>(
    attrs: &mut Attrs<'i>,
) -> Result<Option<ControlPredecessors<'i>>, ParseError> {
    Ok(match attrs.take("control-predecessors") {
        None => None,
        Some((Value::Words(names), at)) => Some(ControlPredecessors {
            names: names.iter().map(|n| strip_sigil(n).to_string()).collect(),
            at,
        }),
        Some((Value::Ints(v), at)) if v.is_empty() => Some(ControlPredecessors {
            names: Vec::new(),
            at,
        }),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'control-predecessors' must list instruction names, got {}",
                    other.kind()
                ),
            )
        }
    })
}
