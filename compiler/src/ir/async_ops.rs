//! What the async ops share between readers: an `async-update` or
//! `async-done` need not name its computation (XLA's text may leave
//! `calls=` out, and XLA's proto lists it on the start only), so it is
//! found from the start the op continues.

use crate::ir::computation::{Computation, InstrId};
use crate::ir::op::Op;

/// An `async-update` or `async-done` that names no computation and
/// whose first operands lead to no start that names one: nothing says
/// what it runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{name}' ({opcode}) names no computation and does not continue an async-start to take it from; write calls="
)]
pub struct AsyncCalleeError {
    /// The instruction's name.
    pub name: String,
    pub opcode: &'static str,
}

/// Gives each `async-update` and `async-done` without a computation its
/// start's computation, and its start's thread when it names none, by
/// following first operands back to the start.
pub fn find_async_callees(comp: &mut Computation) -> Result<(), AsyncCalleeError> {
    let unnamed: Vec<InstrId> = comp
        .ids()
        .filter(|&id| matches!(&comp.instr(id).op, Op::Async { calls, .. } if calls.is_pending()))
        .collect();
    for id in unnamed {
        let mut from = id;
        // A chain longer than the computation is a cycle, which the
        // verifier reports; here it only must not loop forever.
        let found = (0..comp.len()).find_map(|_| {
            let &operand = comp.operands(from).first()?;
            match &comp.instr(operand).op {
                Op::Async { calls, thread, .. } if !calls.is_pending() => {
                    Some(Some((*calls, thread.clone())))
                }
                Op::Async { .. } => {
                    from = operand;
                    None
                }
                _ => Some(None),
            }
        });
        let Some(Some((callee, start_thread))) = found else {
            let i = comp.instr(id);
            return Err(AsyncCalleeError {
                name: i.name.clone(),
                opcode: i.op.opcode(),
            });
        };
        if let Op::Async { calls, thread, .. } = &mut comp.instr_mut(id).op {
            *calls = callee;
            if thread.is_none() {
                *thread = start_thread;
            }
        }
    }
    Ok(())
}
