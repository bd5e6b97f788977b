//! `lower-neuron-calls`: maps the Neuron custom calls hlatc emits back to
//! plain HLO (calls of the same math), so a module compiled for `neuron`
//! can be checked on XLA CPU, which knows no `AwsNeuron*` target; module
//! markers become the tensor they mark, and `AwsNeuronTopK` XLA's own
//! `topk` (its indices converted to the call's `u32`).

use crate::infra::context::{PassContext, Target};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use crate::infra::rewriter::RewriteError;
use crate::targets::neuron::neuron_topk::{neuron_topk_k, write_top_k, TOPK_INDEX_TYPE};
use crate::targets::neuron::softmax_math::{neuron_call_axis, SoftmaxWriter};
use hlatc_compiler::graph::module_markers::ModuleMarker;
use hlatc_compiler::{InstrId, Module, Op};

pub struct LowerNeuronCalls;

impl LowerNeuronCalls {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "lower-neuron-calls";
}

impl Pass for LowerNeuronCalls {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = drop_module_markers(m, ctx).map_err(PassError::rewrite(self.name()))?;
        changed |= lower_top_k(m, ctx).map_err(PassError::rewrite(self.name()))?;
        let mut writer = SoftmaxWriter::new(m, Target::Cpu, ctx);
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

/// Module markers pass their tensor through: each becomes its operand.
fn drop_module_markers(m: &mut Module, ctx: &mut PassContext) -> Result<bool, RewriteError> {
    rewrite_matches(
        m,
        ctx,
        Sweep::Dead,
        |_, c| -> Vec<InstrId> {
            c.ids()
                .filter(|&id| ModuleMarker::of(&c.instr(id).op).is_some())
                .collect()
        },
        |r, _, marker| {
            // Read now: a marker may mark another marker, replaced before it.
            let operand = r.comp().operands(marker)[0];
            r.replace(marker, operand)?;
            Ok(true)
        },
    )
}

/// Each `AwsNeuronTopK` call becomes XLA's `topk` of its operand, its
/// indices converted to the call's type and tupled as the call's result.
fn lower_top_k(m: &mut Module, ctx: &mut PassContext) -> Result<bool, RewriteError> {
    rewrite_matches(
        m,
        ctx,
        Sweep::Orphans,
        |_, c| -> Vec<(InstrId, InstrId, i64)> {
            c.ids()
                .filter_map(|id| {
                    let x = *c.operand_ids(id).first()?;
                    let last = *c.instr(x).shape.as_array()?.dims.last()?;
                    Some((id, x, neuron_topk_k(c.instr(id), last)?))
                })
                .collect()
        },
        |r, _, (call, x, k)| {
            let shape = r.shape(call).clone();
            r.provenance_of(call);
            let (values, indices) = write_top_k(r, Target::Cpu, x, k, TOPK_INDEX_TYPE)?;
            let result = r.add(Op::Tuple, &[values, indices], Some(shape))?;
            r.replace(call, result)?;
            Ok(true)
        },
    )
}
