//! Result shapes left unwritten, or written where XLA's parser derives
//! its own: inferred from the operands, with the layout XLA gives them.

use super::*;

/// Where an instruction's shape comes from: the operands (written without
/// one, or one XLA's parser replaces, kept for the note) or as written.
pub(super) fn shape_source<'i>(
    op: &Op,
    declared: &Shape,
    unshaped: bool,
    at: Span<'i>,
) -> Option<(Span<'i>, Option<Shape>)> {
    if xla_derives_shape(op) {
        Some((at, (!unshaped).then(|| declared.clone())))
    } else {
        unshaped.then_some((at, None))
    }
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
pub(super) type Unshaped<'i> = (InstrId, Vec<InstrId>, Span<'i>, Option<Shape>);

/// Gives each instruction written without a result shape, or whose shape
/// XLA's parser derives, the one its op infers from its operands, operands
/// first (they may be unwritten too). A written shape that differs is
/// replaced, with a note.
pub(super) fn infer_unwritten_shapes<'c>(
    comp: &mut Computation,
    mut todo: Vec<Unshaped<'_>>,
    callees: &dyn Fn(
        ComputationId,
    ) -> Option<(&'c str, crate::analysis::shape_inference::CalleeSignature)>,
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
            if let Some((id, _, at, _)) = waiting.first() {
                return err_at(
                    at,
                    format!(
                        "'{}' has no result shape and its operands' shapes depend on it",
                        comp.instr(*id).name
                    ),
                );
            }
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
