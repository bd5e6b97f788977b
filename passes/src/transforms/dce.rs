//! Dead-code elimination.

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{Module, Op};

/// Removes instructions that neither the root nor a side-effecting
/// instruction depends on (parameters stay: they are the signature), and
/// computations that nothing reachable calls.
pub struct Dce;

impl Dce {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "dce";
}

impl Pass for Dce {
    fn name(&self) -> &str {
        Self::NAME
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
        let mut called = vec![false; module.computations.len()];
        called[module.entry.index()] = true;
        for &k in order.iter().rev() {
            if !called[k.index()] {
                continue;
            }
            let c = module.computation(k);
            for id in c.ids() {
                for callee in c.instr(id).op.called_computations() {
                    if let Some(slot) = called.get_mut(callee.index()) {
                        *slot = true;
                    }
                }
            }
        }
        let before = module.computations.len();
        module.retain_computations(|id, _| called[id.index()]);
        Ok(changed || module.computations.len() != before)
    }
}
