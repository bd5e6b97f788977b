//! `async-to-sync`: runs each async computation where its `async-done`
//! stands, as a `call` of the wrapped computation on the start's operands.
//! XLA CPU compiles no async op ("not supported by XLA:CPU ThunkEmitter");
//! waiting for the result at the done for work begun at the start computes
//! the same values, so the synchronous program is the same program there.

use crate::context::PassContext;
use crate::pass::{Pass, PassError};
use hlatc_compiler::op::AsyncStep;
use hlatc_compiler::{Computation, InstrId, Module, Op};
use std::collections::BTreeSet;

pub struct AsyncToSync;

impl Pass for AsyncToSync {
    fn name(&self) -> &str {
        "async-to-sync"
    }

    fn run(&self, m: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut now_called = BTreeSet::new();
        for c in &mut m.computations {
            let dones: Vec<InstrId> = c
                .ids()
                .filter(|&id| {
                    matches!(
                        c.instr(id).op,
                        Op::Async {
                            step: AsyncStep::Done,
                            ..
                        }
                    )
                })
                .collect();
            for done in dones {
                if let Some(callee) = make_synchronous(c, done) {
                    now_called.insert(callee);
                }
            }
        }
        // A computation no async op runs any more is called on the main
        // thread, as every `call` is.
        let still_async: BTreeSet<String> = m
            .computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
            .filter_map(|op| match op {
                Op::Async { calls, .. } => Some(calls.clone()),
                _ => None,
            })
            .collect();
        for c in &mut m.computations {
            if now_called.contains(&c.name) && !still_async.contains(&c.name) {
                c.execution_thread = None;
            }
        }
        Ok(!now_called.is_empty())
    }
}

/// Replaces `done`, with the start and updates before it, by a `call` of
/// their computation on the start's operands; the computation's name.
/// Left alone (`None`) when the chain's bundles have other readers or
/// control dependencies, which a call could not keep.
fn make_synchronous(c: &mut Computation, done: InstrId) -> Option<String> {
    let mut chain = vec![done];
    let start = loop {
        let &previous = c.operand_ids(*chain.last()?).first()?;
        match c.instr(previous).op {
            Op::Async {
                step: AsyncStep::Start,
                ..
            } => break previous,
            Op::Async {
                step: AsyncStep::Update,
                ..
            } => chain.push(previous),
            _ => return None,
        }
    };
    chain.push(start);
    let bundles = &chain[1..];
    if bundles.iter().any(|&b| c.users(b).len() != 1)
        || chain
            .iter()
            .any(|&i| !c.control_predecessors(i).is_empty() || !c.control_successors(i).is_empty())
    {
        return None;
    }
    let Op::Async { calls, .. } = &c.instr(done).op else {
        return None;
    };
    let calls = calls.clone();
    let operands = c.operands(start);
    let mut call = c.instr(done).clone();
    call.op = Op::Call {
        to_apply: calls.clone(),
        is_composite: false,
    };
    let call = c.add(call, &operands);
    c.replace_all_uses(done, call);
    for id in chain {
        c.remove(id);
    }
    Some(calls)
}
