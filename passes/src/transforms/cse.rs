//! Common-subexpression elimination.

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::util::fx::{BuildFxHasher, FxHashMap};
use hlatc_compiler::Module;
use hlatc_compiler::{Computation, InstrId};
use std::hash::BuildHasher;

/// Merges instructions that compute the same value: same op and attributes,
/// same shape, same operands in the same order, same frontend attributes
/// (they carry policies such as rounding). Metadata is provenance, not
/// meaning, so the first instruction's is kept. RNG and side-effecting custom
/// calls are never merged, nor are autodiff's recomputations
/// ([`hlatc_compiler::Instruction::recomputed`]).
pub struct Cse;

impl Cse {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "cse";
}

impl Pass for Cse {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, module: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for c in &mut module.computations {
            let merged = duplicates(c);
            changed |= !merged.is_empty();
            for (dup, first) in merged {
                c.replace_all_uses(dup, first);
                c.remove(dup);
            }
        }
        Ok(changed)
    }
}

/// Every instruction that repeats an earlier one, with the one it repeats.
/// Keys are hashed in place (operands through the merges found so far)
/// rather than cloned, since a constant's op holds its whole literal.
fn duplicates(c: &Computation) -> Vec<(InstrId, InstrId)> {
    let hasher = BuildFxHasher::default();
    let bound = c.ids().map(|i| i.index() + 1).max().unwrap_or(0);
    let mut canon: Vec<Option<InstrId>> = vec![None; bound];
    let resolve = |canon: &[Option<InstrId>], id: InstrId| canon[id.index()].unwrap_or(id);
    // The first instruction with each hash; the rare others that share a
    // hash without being equal wait in `more`. Nothing per instruction is
    // allocated: a candidate's operands are read again when compared.
    let mut first: FxHashMap<u64, InstrId> = FxHashMap::default();
    first.reserve(bound);
    let mut more: FxHashMap<u64, Vec<InstrId>> = FxHashMap::default();
    let mut merged = Vec::new();
    let mut operands = Vec::new();
    let ordered = c.has_control_dependencies();
    // Post-order: operands are canonical before their users are keyed.
    for id in c.post_order() {
        let instr = c.instr(id);
        // An instruction ordered by control dependencies is kept as itself,
        // and so is autodiff's copy of a forward value: merged, the forward
        // value would stay alive to the backward pass, which is what the
        // copy is there to avoid (`remat` then puts what it reads behind a
        // barrier, which XLA's own CSE cannot see through).
        if !instr.op.is_pure()
            || instr.recomputed
            || ordered
                && (!c.control_predecessors(id).is_empty() || !c.control_successors(id).is_empty())
        {
            continue;
        }
        c.operands_into(id, &mut operands);
        for o in operands.iter_mut() {
            *o = resolve(&canon, *o);
        }
        let key = hasher.hash_one((&instr.op, &instr.shape, &operands, instr.annotations()));
        let Some(&head) = first.get(&key) else {
            first.insert(key, id);
            continue;
        };
        let same = |other: InstrId| {
            let f = c.instr(other);
            let theirs = c.operand_ids(other);
            f.op == instr.op
                && f.shape == instr.shape
                && f.annotations() == instr.annotations()
                && theirs.len() == operands.len()
                && theirs
                    .iter()
                    .zip(&operands)
                    .all(|(&t, &o)| resolve(&canon, t) == o)
        };
        let found = std::iter::once(head)
            .chain(more.get(&key).into_iter().flatten().copied())
            .find(|&other| same(other));
        match found {
            Some(original) => {
                canon[id.index()] = Some(original);
                merged.push((id, original));
            }
            None => more.entry(key).or_default().push(id),
        }
    }
    merged
}
