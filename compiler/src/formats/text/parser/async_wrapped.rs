//! The computations XLA's reader builds around the ops that short-form
//! async starts wrap (`call-start(a, b), to_apply=f`).

use super::*;

/// For each short-form async start (`call-start(a, b), to_apply=f`), the
/// computation XLA's reader builds around the op it wraps: one parameter
/// per operand, of the shapes the start's bundle lists, and the op as the
/// root, of the bundle's result shape. The computation is named
/// `async_wrapped` (made unique against the names in `scope`), as XLA
/// names it; the computations made take the ids after `scope`'s.
pub(super) fn wrap_async_starts(
    comp: &mut Computation,
    starts: Vec<(InstrId, Op, Span<'_>)>,
    scope: &Scope<'_>,
) -> Result<Vec<Computation>, ParseError> {
    let mut made: Vec<Computation> = Vec::new();
    for (id, op, at) in starts {
        let start = comp.instr(id);
        let parts = match &start.shape {
            Shape::Tuple(parts) => parts.as_slice(),
            _ => &[],
        };
        let (params, result) = match parts {
            [Shape::Tuple(params), result, ..] => (params.clone(), result.clone()),
            [param, result, ..] => (vec![param.clone()], result.clone()),
            _ => {
                let other = &start.shape;
                return err_at(
                    &at,
                    format!(
                        "{}-start needs its bundle shape ((operands), result, context...) written, got {other}",
                        op.opcode()
                    ),
                );
            }
        };
        let mut name = "async_wrapped".to_string();
        let mut k = 0;
        while scope.taken(&name) || made.iter().any(|c| c.name == name) {
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
            *calls = ComputationId::new(scope.next_id().index() + made.len());
        }
        made.push(wrapped);
    }
    Ok(made)
}
