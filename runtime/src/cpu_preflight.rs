//! Checks only XLA CPU needs. The verifier accepts any custom-call target
//! (neuronx-cc has its own), but XLA CPU implements a few targets itself and
//! trusts their operands blindly: a wrong operand count or shape there
//! aborts the process instead of returning an error. Those are checked, or
//! refused, here before the module reaches the plugin. So are the ops the
//! fuzzer found XLA CPU aborting on for valid modules of sub-byte integers,
//! and dynamic dimensions at the entry's boundary.

use hlatc_compiler::ir::op::{AsyncStep, CustomCall};
use hlatc_compiler::ir::shape::minifloat::Format;
use hlatc_compiler::{Computation, ElementType, InstrId, Module, Op, Shape};

/// Where a module breaks an XLA CPU contract.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("computation '{computation}', instruction '{instruction}': {message}")]
pub struct PreflightError {
    pub computation: String,
    pub instruction: String,
    pub message: String,
}

/// Checks every custom call in `module` against XLA CPU's own targets,
/// and refuses what XLA CPU would abort or hang on.
pub fn check(module: &Module) -> Result<(), PreflightError> {
    static_at_the_boundary(module)?;
    async_start_in_a_loop(module)?;
    for c in &module.computations {
        for id in c.ids() {
            let instr = c.instr(id);
            if let Some(message) = aborts_xla_cpu(&instr.op, &instr.shape)
                .or_else(|| waits_forever(&instr.op))
                .or_else(|| mishandled_contraction_types(c, id))
                .or_else(|| leaves_unwritten(c, id))
            {
                return Err(PreflightError {
                    computation: c.name.clone(),
                    instruction: instr.name.clone(),
                    message,
                });
            }
            let Op::CustomCall(call) = &instr.op else {
                continue;
            };
            let operands: Vec<&Shape> = c
                .operands(id)
                .into_iter()
                .map(|o| &c.instr(o).shape)
                .collect();
            check_target(call, &operands, &instr.shape).map_err(|message| PreflightError {
                computation: c.name.clone(),
                instruction: instr.name.clone(),
                message,
            })?;
        }
    }
    Ok(())
}

/// XLA CPU passes a dynamic array with its run-time sizes after the data,
/// so a buffer of the bound's size aborts it ("Size mismatch on param 0");
/// hlatc's runtime passes and reads plain arrays only. Dynamic dimensions
/// inside the module run (XLA pads them to their bounds).
pub(crate) fn static_at_the_boundary(module: &Module) -> Result<(), PreflightError> {
    let e = module.entry();
    let root = e.root().map(|r| (r, "the result"));
    let params = e.parameters().into_iter().map(|p| (p, "a parameter"));
    for (id, what) in params.chain(root) {
        let instr = e.instr(id);
        if !instr.shape.is_static() {
            return Err(PreflightError {
                computation: e.name.clone(),
                instruction: instr.name.clone(),
                message: format!(
                    "{what} has dynamic dimensions ({}); hlatc passes and reads back static arrays only",
                    instr.shape
                ),
            });
        }
    }
    Ok(())
}

/// An `async-start` in a loop's body or condition, or in anything they
/// call: XLA CPU's loop-invariant code motion hoists one whose operands the
/// loop does not change and aborts ("Check failed: prev->opcode() ==
/// HloOpcode::kAsyncUpdate", XLA's test 00542). XLA CPU compiles no async
/// op anyway; the runtime makes each chain a call first (`async-to-sync`),
/// so what is left here is a start whose bundle something else reads.
fn async_start_in_a_loop(module: &Module) -> Result<(), PreflightError> {
    let mut in_loops: Vec<&str> = module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
        .filter(|op| matches!(op, Op::While { .. }))
        .flat_map(Op::called_computations)
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    while let Some(name) = in_loops.pop() {
        let Some(c) = module.computation(name).filter(|_| seen.insert(name)) else {
            continue;
        };
        for id in c.ids() {
            let op = &c.instr(id).op;
            if let Op::Async {
                step: AsyncStep::Start,
                ..
            } = op
            {
                return Err(PreflightError {
                    computation: c.name.clone(),
                    instruction: c.instr(id).name.clone(),
                    message: "XLA CPU aborts hoisting an async-start out of a while loop, and compiles no async op; this one cannot run as a call (async-to-sync), as its bundle is read by more than its done".into(),
                });
            }
            in_loops.extend(op.called_computations());
        }
    }
    Ok(())
}

/// A dot or convolution whose written type XLA's verifier takes but XLA CPU
/// mishandles (both found by the fuzzer once dots took any result type):
/// - two 8-bit float formats of the same exponent and mantissa widths
///   among its types (`f8e5m2` and `f8e5m2fnuz`, say): XLA CPU cannot tell
///   which is the more precise and aborts ("Check failed: a == b (19 vs.
///   24)" in primitive_util.h);
/// - complex operands into a real or integer type, which XLA CPU writes
///   as garbage (a `pred` byte of 254); `convert` refuses that narrowing.
fn mishandled_contraction_types(c: &Computation, id: InstrId) -> Option<String> {
    let instr = c.instr(id);
    if !matches!(instr.op, Op::Dot { .. } | Op::Convolution { .. }) {
        return None;
    }
    let mut types: Vec<ElementType> = c
        .operands(id)
        .into_iter()
        .filter_map(|o| c.instr(o).shape.as_array().map(|a| a.ty))
        .collect();
    let result = instr.shape.as_array().map(|a| a.ty);
    if let Some(r) = result.filter(|r| !r.is_complex()) {
        if let Some(z) = types.iter().find(|t| t.is_complex()) {
            return Some(format!(
                "XLA CPU writes garbage for a {} of {z} values into {r}; convert its result instead",
                instr.op.opcode()
            ));
        }
    }
    types.extend(result);
    let widths = |t: ElementType| Format::of(t).map(|f| (f.exponent, f.mantissa));
    for (i, &a) in types.iter().enumerate() {
        for &b in &types[i + 1..] {
            if a != b && widths(a).is_some() && widths(a) == widths(b) {
                return Some(format!(
                    "XLA CPU aborts on a {} that mixes {a} and {b}, two 8-bit float formats of the same widths whose precision it cannot order",
                    instr.op.opcode()
                ));
            }
        }
    }
    None
}

/// An all-gather that grows its dimension on a one-device run: XLA CPU
/// gathers the one shard there is and leaves the rest of the result
/// unwritten, whatever memory held (XLA's tests 01605 and 06592 gave other
/// values run to run).
fn leaves_unwritten(c: &Computation, id: InstrId) -> Option<String> {
    let (Op::AllGather { dimension, .. } | Op::AllGatherStart { dimension, .. }) = &c.instr(id).op
    else {
        return None;
    };
    let gathered = c
        .operands(id)
        .first()
        .map(|&o| &c.instr(o).shape)?
        .as_array()?;
    let result = match &c.instr(id).shape {
        Shape::Tuple(t) => t.last()?.as_array()?,
        s => s.as_array()?,
    };
    let d = usize::try_from(*dimension).ok()?;
    let (from, to) = (*gathered.dims.get(d)?, *result.dims.get(d)?);
    (from != to).then(|| {
        format!(
            "on the one device hlatc runs it on, XLA CPU gathers the one shard there is ({from} along dimension {d}) and leaves the rest of the {to} unwritten"
        )
    })
}

/// What XLA CPU would wait on forever: hlatc's runtime is no host side for
/// `infeed` and `outfeed`, so nothing would ever fill or drain them.
fn waits_forever(op: &Op) -> Option<String> {
    matches!(op, Op::Infeed { .. } | Op::Outfeed { .. }).then(|| {
        format!(
            "hlatc runs modules without a host side for {}, so XLA CPU would wait on it forever",
            op.opcode()
        )
    })
}

/// Valid HLO that XLA CPU aborts on (found by `runtime/tests/fuzz_xla`,
/// with the plugin `scripts/fetch-xla-cpu-plugin.sh` installs):
/// - its fast concatenate cannot address 2-bit elements (`ir_array.cc`:
///   "Check failed: bit_offset != nullptr"); 4-bit ones work;
/// - a transpose of 2- or 4-bit elements that a tuple reads throws a C++
///   exception out of the plugin. Read by an elementwise op it works, but
///   which readers are safe is not known, so every such transpose is
///   refused;
/// - so does a scatter into 2- or 4-bit elements that a tuple reads (an
///   `s4[2,4]` scatter returned beside its operand), and a gather of them
///   whose slices land before its batch dimensions (XLA CPU transposes
///   them there); both are refused the same way. A gather whose slices
///   trail, as an embedding lookup's do, runs;
/// - an in-place collective-permute (`slice_sizes`) crashes it with a
///   segfault, even on one device;
/// - a collective-permute in which device 0, the one it runs, receives
///   from another device throws a C++ exception out of the plugin (XLA's
///   test 04808; sending to a missing device gives zeros and runs).
fn aborts_xla_cpu(op: &Op, result: &Shape) -> Option<String> {
    if let Op::CollectivePermute {
        slice_sizes, pairs, ..
    }
    | Op::CollectivePermuteStart {
        slice_sizes, pairs, ..
    } = op
    {
        if !slice_sizes.is_empty() {
            return Some(
                "XLA CPU crashes (SIGSEGV) running an in-place collective-permute (slice_sizes); \
                 one that sends its operands whole runs"
                    .into(),
            );
        }
        if let Some((source, _)) = pairs.iter().find(|&&(s, t)| t == 0 && s != 0) {
            return Some(format!(
                "XLA CPU throws out of the plugin when device 0, the one it runs on, receives from device {source}, which a one-device run does not have (source_target_pairs)"
            ));
        }
    }
    let Shape::Array(a) = result else {
        return None;
    };
    let (what, width) = match op {
        Op::Concatenate { .. } if a.ty.bit_width() == 2 => ("concatenating", "2-bit"),
        Op::Transpose { .. } if a.ty.bit_width() < 8 => ("transposing", "sub-byte"),
        Op::Scatter { .. } if a.ty.bit_width() < 8 => ("scattering into", "sub-byte"),
        // Slices gathered to other than the last dimensions are moved
        // there by a transpose inside XLA CPU, which aborts as above.
        Op::Gather { dims, .. }
            if a.ty.bit_width() < 8 && !offsets_trail(&dims.offset_dims, a.rank()) =>
        {
            ("gathering (through a transpose)", "sub-byte")
        }
        _ => return None,
    };
    Some(format!(
        "XLA CPU aborts when {what} {} arrays ({width} elements); convert them to s8 or u8 first",
        a.ty
    ))
}

/// Whether a gather's offset dimensions are the result's last ones, in
/// order.
fn offsets_trail(offset_dims: &[i64], rank: usize) -> bool {
    let first = rank as i64 - offset_dims.len() as i64;
    offset_dims
        .iter()
        .enumerate()
        .all(|(i, &d)| d == first + i as i64)
}

fn check_target(call: &CustomCall, operands: &[&Shape], result: &Shape) -> Result<(), String> {
    let target = call.target.as_str();
    match target {
        "Sharding" | "SPMDFullToShardShape" | "SPMDShardToFullShape" => {
            let [x] = operands else {
                return Err(format!(
                    "custom call '{target}' takes exactly one operand, got {}",
                    operands.len()
                ));
            };
            let same = match (x, result) {
                (Shape::Array(a), Shape::Array(r)) => {
                    a.ty == r.ty && (target != "Sharding" || a.dims == r.dims)
                }
                _ => false,
            };
            if !same {
                return Err(format!(
                    "custom call '{target}' must return its operand's {} ({x}), not {result}",
                    if target == "Sharding" {
                        "shape"
                    } else {
                        "element type"
                    }
                ));
            }
            Ok(())
        }
        "TopK" => check_top_k(operands, result),
        "SliceToDynamic" | "PadToStatic" => Err(format!(
            "custom call '{target}' works on dynamic shapes, which hlatc does not support"
        )),
        t if t.starts_with("__onednn$") || t.starts_with("__cpu$") || t.starts_with("__xnn") => {
            Err(format!(
                "custom call '{target}' is internal to XLA CPU (its own rewrites create it with a \
             backend config it trusts); it cannot be run from a module"
            ))
        }
        _ => Ok(()),
    }
}

/// `TopK(x)`: `x` is `f32[n]` or `f32[b, n]`; the result is
/// `(f32[.., k], s32[.., k])` with `k <= n`.
fn check_top_k(operands: &[&Shape], result: &Shape) -> Result<(), String> {
    let [Shape::Array(x)] = operands else {
        return Err("custom call 'TopK' takes exactly one array operand".into());
    };
    if x.ty != ElementType::F32 || !(1..=2).contains(&x.rank()) {
        return Err(format!(
            "custom call 'TopK' needs an f32 operand of rank 1 or 2, got {x}"
        ));
    }
    let Shape::Tuple(elems) = result else {
        return Err(format!(
            "custom call 'TopK' returns (values, indices), not {result}"
        ));
    };
    let (Some(Shape::Array(v)), Some(Shape::Array(i)), 2) =
        (elems.first(), elems.get(1), elems.len())
    else {
        return Err(format!(
            "custom call 'TopK' returns (values, indices), not {result}"
        ));
    };
    let batch = &x.dims[..x.rank() - 1];
    let n = x.dims[x.rank() - 1];
    let ok = |s: &hlatc_compiler::ArrayShape, ty| {
        s.ty == ty
            && s.rank() == x.rank()
            && &s.dims[..s.rank() - 1] == batch
            && s.dims[s.rank() - 1] <= n
    };
    if !ok(v, ElementType::F32) || !ok(i, ElementType::S32) || v.dims != i.dims {
        return Err(format!(
            "custom call 'TopK' on {x} must return (f32[..,k], s32[..,k]) with k <= {n}, not {result}"
        ));
    }
    Ok(())
}
