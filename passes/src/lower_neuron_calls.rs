//! `lower-neuron-calls`: maps the Neuron custom calls hlatc emits back to
//! plain HLO (calls of the same math), so a module compiled for `neuron`
//! can be checked on XLA CPU, which knows no `AwsNeuron*` target.

use crate::context::{PassContext, Target};
use crate::pass::{Pass, PassError};
use crate::softmax_math::{neuron_call_axis, SoftmaxWriter};
use hlatc_compiler::{InstrId, Module};

pub struct LowerNeuronCalls;

impl Pass for LowerNeuronCalls {
    fn name(&self) -> &str {
        "lower-neuron-calls"
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut writer = SoftmaxWriter::new(m, Target::Cpu, ctx);
        let mut changed = false;
        for ci in 0..m.computations.len() {
            let c = &m.computations[ci];
            let calls: Vec<(InstrId, _, i64)> = c
                .ids()
                .filter_map(|id| {
                    let shape = c.instr(id).shape.as_array()?;
                    let (d, axis) = neuron_call_axis(c.instr(id), shape.rank())?;
                    Some((id, d, axis))
                })
                .collect();
            if calls.is_empty() {
                continue;
            }
            for (id, d, axis) in calls {
                let operands = m.computations[ci].operands(id);
                writer.replace(self.name(), m, ci, (d, axis), &operands, id)?;
            }
            writer.remove_dead(m, ci);
            changed = true;
        }
        writer.finish(ctx);
        Ok(changed)
    }
}
