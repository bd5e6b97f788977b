//! `async-to-sync`: runs each async computation where its `async-done`
//! stands, as a `call` of the wrapped computation on the start's operands.
//! XLA CPU compiles no async op ("not supported by XLA:CPU ThunkEmitter");
//! waiting for the result at the done for work begun at the start computes
//! the same values, so the synchronous program is the same program there.
//! The split forms of single ops (`all-reduce-start`/`-done`, the
//! all-gather's and collective-permute's, `copy-start`/`copy-done`) become
//! those ops, for the same reason.

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::ir::op::{AsyncStep, UnaryOp};
use hlatc_compiler::{Computation, ComputationId, InstrId, Module, Op};
use std::collections::BTreeSet;

pub struct AsyncToSync;

impl AsyncToSync {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "async-to-sync";
}

impl Pass for AsyncToSync {
    fn name(&self) -> &str {
        Self::NAME
    }

    /// Each op it adds is a copy of the done it replaces, shape and all.
    fn keeps_dynamic_dimensions(&self) -> bool {
        true
    }

    fn run(&self, m: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut now_called = BTreeSet::new();
        let mut paired = false;
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
            let pair_dones: Vec<InstrId> = c
                .ids()
                .filter(|&id| matches!(c.instr(id).op, Op::CollectiveDone(_) | Op::CopyDone))
                .collect();
            for done in pair_dones {
                paired |= pair_as_one_op(c, done);
            }
        }
        // A computation no async op runs any more is called on the main
        // thread, as every `call` is.
        let still_async: BTreeSet<ComputationId> = m
            .computations
            .iter()
            .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
            .filter_map(|op| match op {
                Op::Async { calls, .. } => Some(*calls),
                _ => None,
            })
            .collect();
        for id in now_called.difference(&still_async) {
            m.computation_mut(*id).execution_thread = None;
        }
        Ok(paired || !now_called.is_empty())
    }
}

/// Replaces `done`, with the start and updates before it, by a `call` of
/// their computation on the start's operands; the computation's id.
/// Left alone (`None`) when the chain's bundles have other readers or
/// control dependencies, which a call could not keep.
fn make_synchronous(c: &mut Computation, done: InstrId) -> Option<ComputationId> {
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
    if bundles.iter().any(|&b| c.users(b).len() != 1) || has_control_edges(c, &chain) {
        return None;
    }
    let Op::Async { calls, .. } = &c.instr(done).op else {
        return None;
    };
    let calls = *calls;
    let call = Op::Call {
        to_apply: calls,
        is_composite: false,
    };
    in_place_of(c, &chain, call);
    Some(calls)
}

/// Whether any of `ids` has control dependencies, which one op in their
/// place could not keep.
fn has_control_edges(c: &Computation, ids: &[InstrId]) -> bool {
    ids.iter()
        .any(|&i| !c.control_predecessors(i).is_empty() || !c.control_successors(i).is_empty())
}

/// `op` over the operands of the chain's start (its last), where its done
/// (its first) stands, with the done's name, shape and metadata; the chain
/// is removed.
fn in_place_of(c: &mut Computation, chain: &[InstrId], op: Op) {
    let (&done, &start) = (
        chain.first().expect("a done"),
        chain.last().expect("a start"),
    );
    let operands = c.operands(start);
    let mut one = c.instr(done).clone();
    one.op = op;
    let one = c.add(one, &operands);
    c.replace_all_uses(done, one);
    for &id in chain {
        c.remove(id);
    }
}

/// A collective's or a copy's start and done as the one op they split,
/// where the done stands: `all-reduce-start`/`-done` as `all-reduce`,
/// likewise `all-gather` and `collective-permute`, and `copy-start`/
/// `copy-done` as `copy`. Left alone (false) when the start has another
/// reader or either has control dependencies.
fn pair_as_one_op(c: &mut Computation, done: InstrId) -> bool {
    let Some(&start) = c.operand_ids(done).first() else {
        return false;
    };
    if c.users(start).len() != 1 || has_control_edges(c, &[done, start]) {
        return false;
    }
    let op = match (&c.instr(done).op, &c.instr(start).op) {
        (
            Op::CollectiveDone(_),
            Op::AllReduceStart {
                collective,
                to_apply,
            },
        ) => Op::AllReduce {
            collective: collective.clone(),
            to_apply: *to_apply,
        },
        (
            Op::CollectiveDone(_),
            Op::AllGatherStart {
                collective,
                dimension,
            },
        ) => Op::AllGather {
            collective: collective.clone(),
            dimension: *dimension,
        },
        (
            Op::CollectiveDone(_),
            Op::CollectivePermuteStart {
                channel_id,
                pairs,
                slice_sizes,
            },
        ) => Op::CollectivePermute {
            channel_id: *channel_id,
            pairs: pairs.clone(),
            slice_sizes: slice_sizes.clone(),
        },
        (Op::CopyDone, Op::CopyStart { .. }) => Op::Unary(UnaryOp::Copy),
        _ => return false,
    };
    in_place_of(c, &[done, start], op);
    true
}
