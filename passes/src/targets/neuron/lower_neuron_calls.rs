//! `lower-neuron-calls`: maps the Neuron custom calls hlatc emits back to
//! plain HLO (calls of the same math), so a module compiled for `neuron`
//! can be checked on XLA CPU, which knows no `AwsNeuron*` target; module
//! markers become the tensor they mark, and `AwsNeuronTopK` XLA's own
//! `topk` (its indices converted to the call's `u32`), and an NKI kernel
//! (`AwsNeuronCustomNativeKernel`) the reference hlatc has for it, or an
//! error naming the kernel when it has none. The MX calls (`QuantizeMX`,
//! `__op$block_scaled_dot`) become calls of their references
//! (`mx_calls`), which compute what the blocks hold.

use crate::infra::context::{PassContext, Target};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::mx_blocks::MxFormat;
use crate::infra::pass::MxCallProblem;
use crate::infra::pass::{NativeKernelProblem, Pass, PassError};
use crate::infra::pipeline::Pipeline;
use crate::infra::rewriter::ModuleRewriter;
use crate::infra::rewriter::RewriteError;
use crate::targets::neuron::mx_calls::{
    format_named, quantize_reference, quantized_shape, scaled_dot_reference, QuantizeConfig,
    ScaledDotConfig, ScaledDotShapes, BLOCK_SCALED_DOT, QUANTIZE_MX,
};
use crate::targets::neuron::native_kernel::NativeKernelConfig;
use crate::targets::neuron::neuron_topk::{neuron_topk_k, write_top_k, TOPK_INDEX_TYPE};
use crate::targets::neuron::nki_flash_reference::{reference, REFERENCED};
use crate::targets::neuron::softmax_math::{neuron_call_axis, SoftmaxWriter};
use hlatc_compiler::graph::builder::BuildError;
use hlatc_compiler::graph::module_markers::ModuleMarker;
use hlatc_compiler::ir::op::DotDims;
use hlatc_compiler::{ArrayShape, Computation, ComputationId, InstrId, Module, Op};
use std::collections::HashMap;

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
        changed |= lower_mx_calls(self.name(), m, ctx)?;
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
            call_in_place(pass, m, rw, (ci, id), callee, &config.func_name)?;
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

/// Instruction `id` of computation `ci` replaced by a call of `callee` (a
/// reference of what it computes) over its operands, named `stem`; the
/// instruction is left for the caller's sweep.
fn call_in_place(
    pass: &str,
    m: &mut Module,
    rw: &mut ModuleRewriter,
    (ci, id): (usize, InstrId),
    callee: ComputationId,
    stem: &str,
) -> Result<(), PassError> {
    let operands = m.computations[ci].operands(id);
    let shape = m.computations[ci].instr(id).shape.clone();
    let mut r = rw.on(&mut m.computations[ci]);
    r.provenance_of(id);
    let call = Op::Call {
        to_apply: callee,
        is_composite: false,
    };
    let new = r
        .add_named(stem, call, &operands, Some(shape))
        .map_err(PassError::rewrite(pass))?;
    r.replace(id, new).map_err(PassError::rewrite(pass))
}

/// What an MX call is replaced by: a call of the reference for its key.
#[derive(Clone, PartialEq, Eq, Hash)]
enum MxReference {
    Quantize(ArrayShape, QuantizeConfig),
    ScaledDot(Box<ScaledDotShapes>, DotDims),
}

impl MxReference {
    fn module(&self) -> Result<Module, BuildError> {
        match self {
            MxReference::Quantize(input, config) => quantize_reference(input, *config),
            MxReference::ScaledDot(shapes, dims) => scaled_dot_reference(shapes, dims),
        }
    }

    fn target(&self) -> &'static str {
        match self {
            MxReference::Quantize(..) => QUANTIZE_MX,
            MxReference::ScaledDot(..) => BLOCK_SCALED_DOT,
        }
    }
}

/// Each MX custom call becomes a call of its reference (one per shape and
/// configuration); one hlatc cannot compute is an error naming it.
fn lower_mx_calls(pass: &str, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
    let mut rw: Option<ModuleRewriter> = None;
    let mut made: HashMap<MxReference, ComputationId> = HashMap::new();
    for ci in 0..m.computations.len() {
        // Every call read before any is replaced: a scaled dot reads its
        // formats from the QuantizeMX calls that feed it.
        let c = &m.computations[ci];
        let mut calls = Vec::new();
        for id in c.ids() {
            if let Some(reference) =
                mx_reference(c, id).map_err(|p| mx_call_failed(pass, c, id, p))?
            {
                calls.push((id, reference));
            }
        }
        let any = !calls.is_empty();
        for (id, reference) in calls {
            let callee = match made.get(&reference) {
                Some(&callee) => callee,
                None => {
                    // Built once a key, and held to its call's shape: a
                    // call whose shapes are not the reference's has none.
                    let c = &m.computations[ci];
                    let shape = &c.instr(id).shape;
                    let module = reference.module().ok().filter(|module| {
                        let entry = module.entry();
                        entry.root().map(|r| &entry.instr(r).shape) == Some(shape)
                    });
                    let Some(module) = module else {
                        let problem = shapes_problem(c, id, reference.target());
                        return Err(mx_call_failed(pass, c, id, problem));
                    };
                    let rw = rw.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx));
                    let callee = rw.graft(m, module);
                    made.insert(reference, callee);
                    callee
                }
            };
            let rw = rw.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx));
            call_in_place(pass, m, rw, (ci, id), callee, "mx_reference")?;
        }
        if let Some(rw) = rw.as_mut().filter(|_| any) {
            rw.on(&mut m.computations[ci]).remove_dead();
        }
    }
    let changed = rw.is_some();
    ModuleRewriter::finish_on_demand(rw, ctx);
    Ok(changed)
}

/// The MX call `id` of `c` that hlatc cannot compute, as the pass's
/// error.
fn mx_call_failed(pass: &str, c: &Computation, id: InstrId, problem: MxCallProblem) -> PassError {
    PassError::MxCall {
        pass: pass.to_string(),
        computation: c.name.clone(),
        instruction: c.instr(id).name.clone(),
        problem: Box::new(problem),
    }
}

/// The MX call `id` of `c` (of `target`) has operands or a result its
/// contract does not give.
fn shapes_problem(c: &Computation, id: InstrId, target: &'static str) -> MxCallProblem {
    let operands: Vec<String> = c
        .operand_ids(id)
        .iter()
        .map(|&o| c.instr(o).shape.to_string())
        .collect();
    MxCallProblem::Shapes {
        target,
        problem: format!(
            "operands ({}) and result {} are not the call's",
            operands.join(", "),
            c.instr(id).shape
        ),
    }
}

/// The reference for instruction `id` of `c`, if it is an MX call; its
/// shapes against the reference's are checked where it is built.
fn mx_reference(c: &Computation, id: InstrId) -> Result<Option<MxReference>, MxCallProblem> {
    let instr = c.instr(id);
    let operand = |i: usize| -> Option<ArrayShape> {
        let o = *c.operand_ids(id).get(i)?;
        c.instr(o).shape.as_array().cloned()
    };
    let shapes = |target| shapes_problem(c, id, target);
    let input = operand(0);
    let rank = input.as_ref().map_or(0, ArrayShape::rank);
    if let Some(config) = QuantizeConfig::of(instr, rank) {
        let config = config?;
        let input = input.ok_or_else(|| shapes(QUANTIZE_MX))?;
        let want = quantized_shape(&input, config);
        if c.operand_ids(id).len() != 1 || want.as_ref() != Some(&instr.shape) {
            return Err(shapes(QUANTIZE_MX));
        }
        return Ok(Some(MxReference::Quantize(input, config)));
    }
    let Op::CustomCall(cc) = &instr.op else {
        return Ok(None);
    };
    if cc.target != BLOCK_SCALED_DOT {
        return Ok(None);
    }
    let config =
        ScaledDotConfig::read(&instr.backend_config).map_err(|problem| MxCallProblem::Config {
            target: BLOCK_SCALED_DOT,
            problem,
        })?;
    let operands: Vec<ArrayShape> = (0..4).filter_map(operand).collect();
    let (Ok(operands), Some(result)) = (
        <[ArrayShape; 4]>::try_from(operands),
        instr.shape.as_array().cloned(),
    ) else {
        return Err(shapes(BLOCK_SCALED_DOT));
    };
    let dims = config.dims_as_read([operands[0].rank(), operands[1].rank()]);
    for listed in [&dims.lhs_contracting, &dims.rhs_contracting] {
        if listed.len() > 1 {
            return Err(MxCallProblem::Shapes {
                target: BLOCK_SCALED_DOT,
                problem: format!(
                    "{} contracting dimensions a side; the reference takes one",
                    listed.len()
                ),
            });
        }
    }
    let side_format = |side: usize, name: &'static str| {
        quantized_format(c, c.operand_ids(id)[side])
            .or_else(|| config.element.as_deref().and_then(format_named))
            .ok_or(MxCallProblem::NoElementType { side: name })
    };
    let formats = [side_format(0, "lhs")?, side_format(1, "rhs")?];
    let shapes_of = ScaledDotShapes {
        operands,
        formats,
        result,
    };
    Ok(Some(MxReference::ScaledDot(Box::new(shapes_of), dims)))
}

/// The format of `data` when it is the data a `QuantizeMX` call of `c`
/// returns.
fn quantized_format(c: &Computation, data: InstrId) -> Option<MxFormat> {
    let Op::GetTupleElement { index: 0 } = c.instr(data).op else {
        return None;
    };
    let call = *c.operand_ids(data).first()?;
    let rank = c.operand_ids(call).first().map_or(0, |&x| {
        c.instr(x).shape.as_array().map_or(0, ArrayShape::rank)
    });
    Some(QuantizeConfig::of(c.instr(call), rank)?.ok()?.format)
}
