//! Common-subexpression elimination.

use crate::context::PassContext;
use crate::pass::{Pass, PassError};
use hlatc_compiler::{InstrId, Module, Op, Shape};
use std::collections::{BTreeMap, HashMap};

/// Merges instructions that compute the same value: same op and attributes,
/// same shape, same operands in the same order, same frontend attributes
/// (they carry policies such as rounding). Metadata is provenance, not
/// meaning, so the first instruction's is kept. RNG and side-effecting custom
/// calls are never merged.
pub struct Cse;

impl Pass for Cse {
    fn name(&self) -> &str {
        "cse"
    }

    fn run(&self, module: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for c in &mut module.computations {
            type Key = (Op, Shape, Vec<InstrId>, BTreeMap<String, String>);
            let mut seen: HashMap<Key, InstrId> = HashMap::new();
            // Post-order: operands are canonical before their users are keyed.
            for id in c.post_order() {
                let instr = c.instr(id);
                if !instr.op.is_pure() {
                    continue;
                }
                let key = (
                    instr.op.clone(),
                    instr.shape.clone(),
                    c.operands(id),
                    instr.frontend_attributes.clone(),
                );
                match seen.get(&key) {
                    Some(&first) => {
                        c.replace_all_uses(id, first);
                        c.remove(id);
                        changed = true;
                    }
                    None => {
                        seen.insert(key, id);
                    }
                }
            }
        }
        Ok(changed)
    }
}
