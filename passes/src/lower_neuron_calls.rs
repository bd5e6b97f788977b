//! `lower-neuron-calls`: maps the Neuron custom calls hlatc emits back to
//! plain HLO (calls of the same math), so a module compiled for `neuron`
//! can be checked on XLA CPU, which knows no `AwsNeuron*` target.

use crate::context::PassContext;
use crate::pass::{Pass, PassError};
use crate::rewriter::ModuleRewriter;
use crate::softmax_math::{neuron_call_axis, plain_callee, SoftmaxCallees};
use hlatc_compiler::{InstrId, Module, Op, Shape};

pub struct LowerNeuronCalls;

impl Pass for LowerNeuronCalls {
    fn name(&self) -> &str {
        "lower-neuron-calls"
    }

    fn run(&self, m: &mut Module, _ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut rw = ModuleRewriter::new(m);
        let mut callees = SoftmaxCallees::new();
        let mut changed = false;
        for ci in 0..m.computations.len() {
            let c = &m.computations[ci];
            let calls: Vec<(InstrId, _, i64)> = c
                .ids()
                .filter_map(|id| {
                    let shape = c.instr(id).shape.as_array()?;
                    let (d, axis) = neuron_call_axis(&c.instr(id).op, shape.rank())?;
                    Some((id, d, axis))
                })
                .collect();
            for (id, d, axis) in calls {
                let shape = m.computations[ci]
                    .instr(id)
                    .shape
                    .as_array()
                    .cloned()
                    .expect("filtered to arrays");
                let to_apply =
                    plain_callee(&mut rw, m, &mut callees, d, &shape, axis).map_err(|e| {
                        PassError::Failed {
                            pass: self.name().into(),
                            message: e.to_string(),
                        }
                    })?;
                let c = &mut m.computations[ci];
                let operands = c.operands(id);
                let mut r = rw.on(c);
                r.set_metadata(r.metadata_of(id));
                let call = r
                    .add(Op::Call { to_apply }, &operands, Some(Shape::Array(shape)))
                    .map_err(PassError::rewrite(self.name()))?;
                r.replace(id, call)
                    .map_err(PassError::rewrite(self.name()))?;
                r.remove_dead();
                changed = true;
            }
        }
        Ok(changed)
    }
}
