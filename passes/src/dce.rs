//! Dead-code elimination.

use crate::context::PassContext;
use crate::pass::{Pass, PassError};
use hlatc_compiler::{Module, Op};
use std::collections::BTreeSet;

/// Removes instructions that neither the root nor a side-effecting
/// instruction depends on (parameters stay: they are the signature), and
/// computations that nothing reachable calls.
pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &str {
        "dce"
    }

    fn run(&self, module: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for c in &mut module.computations {
            let Some(root) = c.root() else { continue };
            let mut live = vec![false; c.ids().map(|i| i.index() + 1).max().unwrap_or(0)];
            // A side-effecting instruction is live even when nothing reads
            // it, and so is everything it reads.
            let mut stack: Vec<_> = c
                .ids()
                .filter(|&id| c.instr(id).op.has_side_effect())
                .collect();
            stack.push(root);
            while let Some(id) = stack.pop() {
                if std::mem::replace(&mut live[id.index()], true) {
                    continue;
                }
                stack.extend(c.operands(id));
            }
            let dead: Vec<_> = c
                .ids()
                .filter(|&id| !live[id.index()] && !matches!(c.instr(id).op, Op::Parameter(_)))
                .collect();
            changed |= !dead.is_empty();
            for id in dead {
                c.remove(id);
            }
        }
        // Computations reachable from the entry through calls.
        let order = module.computation_order();
        let mut called: BTreeSet<String> = BTreeSet::new();
        called.insert(module.entry().name.clone());
        for &i in order.iter().rev() {
            let c = &module.computations[i];
            if !called.contains(&c.name) {
                continue;
            }
            for id in c.ids() {
                called.extend(c.instr(id).op.called_computations().map(str::to_string));
            }
        }
        let entry_name = module.entry().name.clone();
        let before = module.computations.len();
        module.computations.retain(|c| called.contains(&c.name));
        module.entry = module
            .computations
            .iter()
            .position(|c| c.name == entry_name)
            .expect("the entry is kept");
        Ok(changed || module.computations.len() != before)
    }
}
