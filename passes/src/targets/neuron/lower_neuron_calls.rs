//! `lower-neuron-calls`: maps the Neuron custom calls hlatc emits back to
//! plain HLO (calls of the same math), so a module compiled for `neuron`
//! can be checked on XLA CPU, which knows no `AwsNeuron*` target; module
//! markers become the tensor they mark, and `AwsNeuronTopK` XLA's own
//! `topk` (its indices converted to the call's `u32`), and an NKI kernel
//! (`AwsNeuronCustomNativeKernel`) the reference hlatc has for it, or an
//! error naming the kernel when it has none.

use crate::infra::context::{PassContext, Target};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{NativeKernelProblem, Pass, PassError};
use crate::infra::pipeline::Pipeline;
use crate::infra::rewriter::ModuleRewriter;
use crate::infra::rewriter::RewriteError;
use crate::targets::neuron::native_kernel::NativeKernelConfig;
use crate::targets::neuron::neuron_topk::{neuron_topk_k, write_top_k, TOPK_INDEX_TYPE};
use crate::targets::neuron::nki_flash_reference::{reference, REFERENCED};
use crate::targets::neuron::softmax_math::{neuron_call_axis, SoftmaxWriter};
use hlatc_compiler::graph::module_markers::ModuleMarker;
use hlatc_compiler::{InstrId, Module, Op};

pub struct LowerNeuronCalls;

impl LowerNeuronCalls {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "lower-neuron-calls";

    /// `m` as XLA CPU can run it: the pass alone, for cpu, with the
    /// verifier before and after. Whether it changed anything.
    pub fn lower(m: &mut Module) -> Result<bool, PassError> {
        // The registry's `pipeline_from_names` would be an import circle.
        Ok(Pipeline::new(Target::Cpu.name())
            .with(Box::new(LowerNeuronCalls))
            .run_module(m, &mut PassContext::new(Target::Cpu))?
            .changed())
    }
}

impl Pass for LowerNeuronCalls {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = drop_module_markers(m, ctx).map_err(PassError::rewrite(self.name()))?;
        changed |= lower_top_k(m, ctx).map_err(PassError::rewrite(self.name()))?;
        changed |= lower_native_kernels(self.name(), m, ctx)?;
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

/// Each NKI kernel's custom call becomes a call of its reference (one per
/// kernel and shape); a kernel without one is an error naming it.
fn lower_native_kernels(
    pass: &str,
    m: &mut Module,
    ctx: &mut PassContext,
) -> Result<bool, PassError> {
    let mut rw: Option<ModuleRewriter> = None;
    let mut made = std::collections::HashMap::new();
    for ci in 0..m.computations.len() {
        let c = &m.computations[ci];
        // Each call's config, decoded once.
        let calls: Vec<(InstrId, _)> = c
            .ids()
            .filter_map(|id| Some((id, NativeKernelConfig::of(c.instr(id))?)))
            .collect();
        let any = !calls.is_empty();
        for (id, config) in calls {
            let c = &m.computations[ci];
            let instr = c.instr(id);
            let fail = |problem| PassError::NativeKernel {
                pass: pass.to_string(),
                computation: c.name.clone(),
                instruction: instr.name.clone(),
                problem: Box::new(problem),
            };
            let config = config.map_err(|e| fail(e.into()))?;
            let operands: Vec<_> = c
                .operand_ids(id)
                .iter()
                .filter_map(|&o| c.instr(o).shape.as_array().cloned())
                .collect();
            let shape = instr.shape.clone();
            let key = (config.func_name.clone(), operands.clone(), shape.clone());
            let callee = match made.get(&key) {
                Some(&callee) => callee,
                None => {
                    let module = match reference(&config.func_name, &operands, &shape) {
                        None => {
                            return Err(fail(NativeKernelProblem::NoReference {
                                func_name: config.func_name,
                                known: REFERENCED.join(", "),
                            }))
                        }
                        Some(Err(problem)) => {
                            return Err(fail(NativeKernelProblem::Shapes {
                                func_name: config.func_name,
                                problem,
                            }))
                        }
                        Some(Ok(module)) => module,
                    };
                    let rw = rw.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx));
                    let callee = rw.graft(m, module);
                    made.insert(key, callee);
                    callee
                }
            };
            let rw = rw.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx));
            let operands = m.computations[ci].operands(id);
            let mut r = rw.on(&mut m.computations[ci]);
            r.provenance_of(id);
            let call = Op::Call {
                to_apply: callee,
                is_composite: false,
            };
            let new = r
                .add_named(&config.func_name, call, &operands, Some(shape))
                .map_err(PassError::rewrite(pass))?;
            r.replace(id, new).map_err(PassError::rewrite(pass))?;
        }
        if any {
            if let Some(rw) = rw.as_mut() {
                rw.on(&mut m.computations[ci]).remove_dead();
            }
        }
    }
    let changed = rw.is_some();
    ModuleRewriter::finish_on_demand(rw, ctx);
    Ok(changed)
}
