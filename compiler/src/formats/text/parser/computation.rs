//! A computation: its instructions in order, operands resolved by name
//! (nested ones added before their users), unwritten shapes inferred.

use super::*;

pub(super) struct PendingInstr<'i> {
    pub(super) id: InstrId,
    pub(super) operands: Vec<OperandRef<'i>>,
    /// Written without a result shape, or with one XLA's parser replaces:
    /// inferred once its operands are.
    pub(super) unshaped: Option<(Pair<'i>, Option<Shape>)>,
}

/// An operand as written: a name to look up once the computation is read,
/// or an instruction written in its place, already added.
pub(super) enum OperandRef<'i> {
    Named(Pair<'i>),
    Nested(InstrId),
}

/// Where an instruction's shape comes from: the operands (written without
/// one, or one XLA's parser replaces, kept for the note) or as written.
pub(super) fn shape_source<'i>(
    op: &Op,
    declared: &Shape,
    unshaped: bool,
    at: Pair<'i>,
) -> Option<(Pair<'i>, Option<Shape>)> {
    if xla_derives_shape(op) {
        Some((at, (!unshaped).then(|| declared.clone())))
    } else {
        unshaped.then_some((at, None))
    }
}

/// Adds the instructions written in place of operands, each after its own
/// operands (as XLA adds them, so a schedule of the written order holds),
/// and refers to each by its id. They are named later, when every written
/// name is known, in the order they are written.
pub(super) fn add_nested<'i>(
    operands: Vec<Pair<'i>>,
    comp: &mut Computation,
    pending: &mut Vec<PendingInstr<'i>>,
    anonymous: &mut Vec<InstrId>,
    notes: &mut Vec<String>,
) -> Result<Vec<OperandRef<'i>>, ParseError> {
    let mut refs = Vec::with_capacity(operands.len());
    for o in operands {
        let is_body = o.into_inner().last().is_some_and(|n| {
            matches!(
                n.as_rule(),
                Rule::op_body | Rule::constant_body | Rule::parameter_body
            )
        });
        if !is_body {
            refs.push(OperandRef::Named(o));
            continue;
        }
        let (instr, inner, unshaped, note) = nested_instruction(o)?;
        notes.extend(note);
        let source = shape_source(&instr.op, &instr.shape, unshaped, o);
        let slot = anonymous.len();
        anonymous.push(InstrId::end());
        let inner = add_nested(inner, comp, pending, anonymous, notes)?;
        let id = comp.add(instr, &[]);
        anonymous[slot] = id;
        pending.push(PendingInstr {
            id,
            operands: inner,
            unshaped: source,
        });
        refs.push(OperandRef::Nested(id));
    }
    Ok(refs)
}

/// Names each instruction written in place of an operand as XLA does,
/// `{opcode}.anon`, then `.anon.1`, ... past every name already taken.
pub(super) fn name_nested(
    comp: &mut Computation,
    anonymous: &[InstrId],
    written: &FxHashMap<&str, InstrId>,
) {
    let mut taken: FxHashSet<String> = FxHashSet::default();
    for &id in anonymous {
        let base = format!("{}.anon", comp.instr(id).op.opcode());
        let mut name = base.clone();
        let mut k = 0;
        while written.contains_key(name.as_str()) || taken.contains(&name) {
            k += 1;
            name = format!("{base}.{k}");
        }
        taken.insert(name.clone());
        comp.instr_mut(id).name = name;
    }
}

/// One computation, and the computations its short-form async starts wrap
/// (which come before it, as callees do).
// Kept out of line: inlined into `parse_module_noted` it cost the JAX 7B
// step's parse 2% more instructions (callgrind: 188.2 M against 184.0 M).
#[inline(never)]
pub(super) fn computation(
    p: Pair<'_>,
    callees: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
    notes: &mut Vec<String>,
) -> Result<(Computation, bool, Vec<Computation>), ParseError> {
    let mut it = p.into_inner().peekable();
    let is_entry = it.peek().is_some_and(|q| q.as_rule() == Rule::entry_kw);
    if is_entry {
        it.next();
    }
    let name_pair = it.next().expect("grammar: computation name");
    let written = p
        .into_inner()
        .filter(|q| q.as_rule() == Rule::instruction)
        .count();
    let mut comp = Computation::with_capacity(strip_sigil(name_pair.as_str()), written);
    let mut pending = Vec::with_capacity(written);
    let mut control = Vec::new();
    let mut by_name: FxHashMap<&str, InstrId> =
        FxHashMap::with_capacity_and_hasher(written, Default::default());
    let mut anonymous = Vec::new();
    let mut wrapped_ops = Vec::new();
    let mut hoisted = Vec::new();
    let mut async_without_callee = false;
    let mut root = None;
    let mut last = None;
    for q in it {
        match q.as_rule() {
            Rule::signature => {}
            Rule::attribute => {
                let (key, value, at) = attribute(q)?;
                match (key.as_str(), value) {
                    ("execution_thread", Value::Str(thread)) => {
                        comp.execution_thread =
                            (thread != crate::ir::computation::MAIN_THREAD).then_some(thread)
                    }
                    ("execution_thread", other) => {
                        return err_at(
                            &at,
                            format!(
                                "'execution_thread' must be a quoted string, got {}",
                                other.kind()
                            ),
                        )
                    }
                    _ => return err_at(&at, format!("unsupported computation attribute '{key}'")),
                }
            }
            Rule::instruction => {
                let ParsedInstruction {
                    instr,
                    operands,
                    is_root,
                    at,
                    unshaped,
                    control: written_control,
                    source_name,
                    note,
                    wrapped,
                    inline,
                } = instruction(q)?;
                notes.extend(note);
                let source = shape_source(&instr.op, &instr.shape, unshaped, at);
                async_without_callee |=
                    matches!(&instr.op, Op::Async { calls, .. } if calls.is_empty());
                // Operands written in place come first, as in XLA.
                let operands =
                    add_nested(operands, &mut comp, &mut pending, &mut anonymous, notes)?;
                let id = comp.add(instr, &[]);
                if !inline.is_empty() {
                    let op = &mut comp.instr_mut(id).op;
                    adopt_inline(&mut hoisted, inline, op, &|n| callees(n).is_some());
                }
                if let Some(op) = wrapped {
                    wrapped_ops.push((id, *op, at));
                }
                if by_name.insert(source_name, id).is_some() {
                    let name = &comp.instr(id).name;
                    return err_at(&at, format!("instruction name '{name}' is defined twice"));
                }
                if is_root {
                    if root.is_some() {
                        return err_at(&at, "a second ROOT instruction");
                    }
                    root = Some(id);
                }
                last = Some(id);
                if let Some(c) = written_control {
                    control.push((id, c));
                }
                pending.push(PendingInstr {
                    id,
                    operands,
                    unshaped: source,
                });
            }
            r => unreachable!("grammar: unexpected {r:?} in computation"),
        }
    }
    // Operands may name instructions defined further down, as in XLA.
    let mut edges = Vec::with_capacity(pending.len());
    let mut unshaped = Vec::new();
    for PendingInstr {
        id,
        operands,
        unshaped: without_shape,
    } in pending
    {
        let mut ids = Vec::with_capacity(operands.len());
        for o in operands {
            let o = match o {
                OperandRef::Nested(nid) => {
                    ids.push(nid);
                    continue;
                }
                OperandRef::Named(o) => o,
            };
            let name_pair = o.into_inner().last().expect("grammar: operand name");
            let n = strip_sigil(name_pair.as_str());
            match by_name.get(n) {
                Some(&oid) => ids.push(oid),
                None => {
                    return err_at(
                        &name_pair,
                        format!(
                            "operand '{n}' is not defined in computation '{}'",
                            comp.name
                        ),
                    )
                }
            }
        }
        if let Some((at, written)) = without_shape {
            unshaped.push((id, ids.clone(), at, written));
        }
        edges.push((id, ids));
    }
    for (id, ops) in edges {
        comp.connect_operands(id, &ops);
    }
    for (id, (names, at)) in control {
        for n in names {
            match by_name.get(n.as_str()) {
                Some(&pred) => comp.add_control_dependency(pred, id),
                None => {
                    return err_at(
                        &at,
                        format!(
                            "control predecessor '{n}' is not defined in computation '{}'",
                            comp.name
                        ),
                    )
                }
            }
        }
    }
    name_nested(&mut comp, &anonymous, &by_name);
    // Computations written inline come first: a wrapped op may call one.
    let before = |n: &str| {
        hoisted
            .iter()
            .find(|c: &&Computation| c.name == n)
            .and_then(Computation::signature)
            .or_else(|| callees(n))
    };
    let mut wrapped = wrap_async_starts(&mut comp, wrapped_ops, &before)?;
    if async_without_callee {
        crate::ir::async_ops::find_async_callees(&mut comp).or_else(|m| err_at(&name_pair, m))?;
    }
    hoisted.append(&mut wrapped);
    let wrapped = hoisted;
    let callees = |n: &str| {
        wrapped
            .iter()
            .find(|c| c.name == n)
            .and_then(Computation::signature)
            .or_else(|| callees(n))
    };
    infer_unwritten_shapes(&mut comp, unshaped, &callees, notes)?;
    match root.or(last) {
        Some(r) => comp.set_root(r),
        None => {
            return err_at(
                &name_pair,
                format!("computation '{}' has no instructions", comp.name),
            )
        }
    }
    Ok((comp, is_entry, wrapped))
}

/// For each short-form async start (`call-start(a, b), to_apply=f`), the
/// computation XLA's reader builds around the op it wraps: one parameter
/// per operand, of the shapes the start's bundle lists, and the op as the
/// root, of the bundle's result shape. The computation is named
/// `async_wrapped` (made unique against `taken`), as XLA names it.
pub(super) fn wrap_async_starts(
    comp: &mut Computation,
    starts: Vec<(InstrId, Op, Pair<'_>)>,
    taken: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
) -> Result<Vec<Computation>, ParseError> {
    let mut made: Vec<Computation> = Vec::new();
    for (id, op, at) in starts {
        let start = comp.instr(id);
        let (params, result) = match &start.shape {
            Shape::Tuple(parts) if parts.len() >= 2 => match &parts[0] {
                Shape::Tuple(params) => (params.clone(), parts[1].clone()),
                other => (vec![other.clone()], parts[1].clone()),
            },
            other => {
                return err_at(
                    &at,
                    format!(
                        "{}-start needs its bundle shape ((operands), result, context...) written, got {other}",
                        op.opcode()
                    ),
                )
            }
        };
        let mut name = "async_wrapped".to_string();
        let mut k = 0;
        while taken(&name).is_some() || made.iter().any(|c| c.name == name) {
            k += 1;
            name = format!("async_wrapped.{k}");
        }
        let mut wrapped = Computation::new(name.clone());
        wrapped.execution_thread = match &start.op {
            Op::Async { thread, .. } => thread.clone(),
            _ => None,
        };
        let args: Vec<InstrId> = params
            .into_iter()
            .enumerate()
            .map(|(i, shape)| {
                let param =
                    Instruction::new(format!("{name}.param.{i}"), shape, Op::Parameter(i as i64));
                wrapped.add(param, &[])
            })
            .collect();
        let root_name = format!("{name}.{}", op.opcode());
        let root = wrapped.add(Instruction::new(root_name, result, op), &args);
        wrapped.set_root(root);
        if let Op::Async { calls, .. } = &mut comp.instr_mut(id).op {
            *calls = name;
        }
        made.push(wrapped);
    }
    Ok(made)
}

/// The ops whose result shape XLA's parser derives from their operands,
/// whatever shape is written: XLA builds them with constructors that take
/// no shape, so a written one that differs (an older tuple form of a send,
/// say) is replaced, not refused.
pub(super) fn xla_derives_shape(op: &Op) -> bool {
    match op {
        Op::AfterAll | Op::AddDependency | Op::Outfeed { .. } => true,
        Op::Transfer(t) => t.step != TransferStep::Recv,
        _ => false,
    }
}

/// An instruction whose shape is inferred: its operands, where it is, and
/// the shape written for it, if any (which XLA's parser would replace).
pub(super) type Unshaped<'i> = (InstrId, Vec<InstrId>, Pair<'i>, Option<Shape>);

/// Gives each instruction written without a result shape, or whose shape
/// XLA's parser derives, the one its op infers from its operands, operands
/// first (they may be unwritten too). A written shape that differs is
/// replaced, with a note.
pub(super) fn infer_unwritten_shapes(
    comp: &mut Computation,
    mut todo: Vec<Unshaped<'_>>,
    callees: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
    notes: &mut Vec<String>,
) -> Result<(), ParseError> {
    let mut unknown: std::collections::HashSet<InstrId> = todo.iter().map(|t| t.0).collect();
    while !todo.is_empty() {
        let before = todo.len();
        let mut waiting = Vec::new();
        for (id, operands, at, written) in todo {
            if operands.iter().any(|o| unknown.contains(o)) {
                waiting.push((id, operands, at, written));
                continue;
            }
            let shapes: Vec<&Shape> = operands.iter().map(|&o| &comp.instr(o).shape).collect();
            let instr = comp.instr(id);
            let shape = match crate::analysis::shape_inference::infer_shape(
                &instr.op, &shapes, None, callees,
            ) {
                Ok(s) => s,
                // A shape XLA would derive from operands that give none:
                // the written one stays, for the verifier to refuse.
                Err(_) if written.is_some() => {
                    unknown.remove(&id);
                    continue;
                }
                Err(e) => {
                    return err_at(
                        &at,
                        format!(
                            "'{}' has no result shape and {} cannot infer one: {e}",
                            instr.name,
                            instr.op.opcode()
                        ),
                    )
                }
            };
            let shape = with_inferred_layout(shape, &instr.op, &shapes);
            if let Some(w) = written.filter(|w| *w != shape) {
                let (line, col) = at.line_col();
                notes.push(format!(
                    "{line}:{col}: '{}' is written as {w}; XLA's parser gives a {} the shape {shape} \
                     its operands make, and so does hlatc",
                    instr.name,
                    instr.op.opcode()
                ));
            }
            comp.instr_mut(id).shape = shape;
            unknown.remove(&id);
        }
        if waiting.len() == before {
            let at = &waiting[0].2;
            return err_at(
                at,
                format!(
                    "'{}' has no result shape and its operands' shapes depend on it",
                    comp.instr(waiting[0].0).name
                ),
            );
        }
        todo = waiting;
    }
    Ok(())
}

/// The layout XLA's parser gives an inferred shape: an elementwise op's
/// is its first operand's, a transpose's is its operand's permuted (so the
/// transpose moves no bytes), any other op's the default.
pub(super) fn with_inferred_layout(mut shape: Shape, op: &Op, operands: &[&Shape]) -> Shape {
    let Shape::Array(out) = &mut shape else {
        return shape;
    };
    // XLA's inference copies one operand's shape: a select's `on_true`, a
    // clamp's operand, otherwise the first. Its whole layout comes along
    // (tiles, element size) where the element type stays.
    let copied = match op {
        Op::Select | Op::Clamp => operands.get(1),
        _ => operands.first(),
    };
    let first = copied.and_then(|s| s.as_array());
    let elementwise = matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Compare { .. } | Op::Select | Op::Clamp
    );
    match (op, first) {
        (_, Some(a)) if elementwise && a.dims == out.dims => {
            out.minor_to_major = a.minor_to_major.clone();
            if a.ty == out.ty {
                out.physical = a.physical.clone();
            }
        }
        (Op::Transpose { permutation }, Some(a)) if permutation.len() == a.rank() => {
            let mut inverse = vec![0; permutation.len()];
            for (i, &p) in permutation.iter().enumerate() {
                if let Some(slot) = usize::try_from(p).ok().and_then(|p| inverse.get_mut(p)) {
                    *slot = i as i64;
                }
            }
            out.minor_to_major = a
                .minor_to_major
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .ok()
                        .and_then(|d| inverse.get(d))
                        .copied()
                        .unwrap_or(d)
                })
                .collect();
        }
        _ => {}
    }
    shape
}
