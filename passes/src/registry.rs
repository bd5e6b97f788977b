//! Every pass by name, and each target's default pipeline.

use crate::infra::context::Target;
use crate::infra::pass::{Pass, PassError};
use crate::infra::pipeline::{Fixpoint, Pipeline};

/// A registered pass: its name, what it does, and how to make one.
pub struct PassInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub make: fn() -> Box<dyn Pass>,
    /// Whether pipelines run it to a fixpoint: one round of its rewrites
    /// can enable another.
    pub to_fixpoint: bool,
}

/// Every pass `--passes` can name, in a stable order.
pub fn registry() -> Vec<PassInfo> {
    vec![
        PassInfo {
            name: crate::Simplify::NAME,
            description: "algebraic simplification and constant folding: identity reshapes, transposes, broadcasts and converts, x*1, x+0, double negation, nested concatenates, slices that tile their operand, scalar arithmetic on constants",
            make: || Box::new(crate::Simplify),
            to_fixpoint: true,
        },
        PassInfo {
            name: crate::FoldCausalMask::NAME,
            description: "replaces a constant lower-triangular attention mask (pred, 0/-inf or 0/-large bias, 1/0) by the same pattern generated from iota and compare; a mask that is not causal is left alone",
            make: || Box::new(crate::FoldCausalMask),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::CoalesceLinear::NAME,
            description: "merges dots that read the same input into one dot on concatenated operands followed by slices (q/k/v -> qkv, gate/up -> gate_up), and sums of dots into one dot, so the backward shrinks too",
            make: || Box::new(crate::CoalesceLinear),
            to_fixpoint: true,
        },
        PassInfo {
            name: crate::FuseSoftmax::NAME,
            description: "recognizes softmax and its backward; neuron: AwsNeuronSoftmax / AwsNeuronSoftmaxBackward custom calls, cpu: a call of the same math",
            make: || Box::new(crate::FuseSoftmax),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::Amp::NAME,
            description: "automatic mixed precision by the context's cast policy (bf16-mixed and bf16-pure): dots take bf16 operands and accumulate in f32, layout and elementwise ops follow their operands, exp, log, reductions, norms, loss and optimizer stay f32; outputs keep their types; fp32 leaves the module alone; under mxfp8 the linear layers' dots then read each operand from MX blocks of 32 along its contracting dimension (E4M3 values, a power-of-two scale): in plain HLO on cpu, as neuronx-cc's QuantizeMX and __op$block_scaled_dot on neuron (trn3)",
            make: || Box::new(crate::Amp),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::AnnotateRounding::NAME,
            description: "marks converts to bf16 that round stochastically by the rounding policy (rne, sr, state-updates); neuron: a frontend attribute; cpu: lowered to rng-bit-generator bits added below the bf16 mantissa, the RNG state an input aliased to a new last output",
            make: || Box::new(crate::AnnotateRounding),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::NarrowGathers::NAME,
            description: "an all-gather whose every reader converts it to one narrower float type (sequence parallelism's gathered norm outputs, converted to bf16 for the projections) gathers the converted values instead: half the bytes moved and held, bit for bit the same values; a gather with another reader, or read by a convert that rounds stochastically, is left alone",
            make: || Box::new(crate::NarrowGathers),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::Remat::NAME,
            description: "selective activation checkpointing by the context's policy (none, core-attention, full-layer): forward values the backward reads inside each chosen region are recomputed there, behind an opt-barrier, instead of being kept",
            make: || Box::new(crate::Remat),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::LowerNeuronCalls::NAME,
            description: "maps the Neuron custom calls back to plain HLO (softmax and its backward to calls of the same math, AwsNeuronTopK to XLA's topk, module markers to what they mark, NKI's flash_fwd and flash_attn_bwd to hlatc's references; another NKI kernel is an error naming it), so a neuron module can be checked on XLA CPU",
            make: || Box::new(crate::LowerNeuronCalls),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::AsyncToSync::NAME,
            description: "runs each async op's computation where its async-done stands, as a call on the start's operands, and each split collective or copy (all-reduce-start/-done, all-gather's, collective-permute's, copy-start/-done) as the one op it splits (XLA CPU compiles none of them; `run` applies it); a chain whose bundles have other readers is left alone",
            make: || Box::new(crate::AsyncToSync),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::BitcastToReshape::NAME,
            description: "replaces each bitcast (which reads its operand's buffer by the layouts) by a transpose into the operand's physical order, a reshape and a transpose into the result's layout, ops XLA CPU compiles before layout assignment (`run` applies it); a bitcast that changes the element type is left alone",
            make: || Box::new(crate::BitcastToReshape),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::WidenMixedDots::NAME,
            description: "converts the operands of a dot over narrower floats than its result (bf16 into f32, as `amp` writes them for Neuron) to the result's type first, each once: the same values (the conversions are exact), in a form XLA CPU runs for every shape (`run` and `--verify` apply it); a dot over integers, or into a type no wider than its operands', is left alone",
            make: || Box::new(crate::WidenMixedDots),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::Narrow64BitIntegers::NAME,
            description: "computes s64 and u64 values that provably fit in 32 bits (constants, iota, converts from narrower integers, and what data movement and interval arithmetic make of them) in s32 and u32, converting back where a 64-bit reader stays: the values neuronx-cc would narrow anyway, bit for bit; parameters and values of unknown range stay 64-bit",
            make: || Box::new(crate::Narrow64BitIntegers),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::IntegerDotToF32::NAME,
            description: "computes an integer dot whose every sum provably stays within f32's exact integers (2^24: from its contracted extent and its operands' ranges, found as narrow-64-bit-integers finds them) as an f32 dot of its operands converted, converted back: bit for bit the integer dot, which neuronx-cc otherwise warns about or refuses (NCC_EVRF035); exact on Neuron where the f32 matmul stays f32 (--auto-cast=none, as hlatc's bundles pass); a dot of an operand of unknown range is left alone",
            make: || Box::new(crate::IntegerDotToF32),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::NarrowF64::NAME,
            description: "computes every f64 value in f32 (no Trainium chip has f64): constants rounded to nearest even (a note names those that lost precision; a finite constant beyond f32's range is refused by name), the entry's f64 parameters and outputs become f32 (a note says so) unless the caller keeps its signature (a step hlatc builds: left alone); bitcasts, custom calls and transfers of f64 are refused",
            make: || Box::new(crate::NarrowF64),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::ConditionalToSelect::NAME,
            description: "a conditional whose branches each have one parameter and at most 16 pure instructions (Neuron supports no conditional) becomes every branch inlined and `select`: by the pred, or a chain of compares for an s32 index ending in the last branch (XLA's out-of-range choice); bit for bit the same; a bigger or effectful branch is left alone with a note",
            make: || Box::new(crate::ConditionalToSelect),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::SortToTopK::NAME,
            description: "a sort along the last dimension of f32, bf16 or f16 keys (with an iota of indices or not), compared by GT on the keys alone, whose every result is read only as slices of its first k, becomes the top k: neuron: an AwsNeuronTopK custom call (k in backend_config, u32 indices), cpu: XLA's topk; indices converted to the iota's type; tied values' indices may come in another order",
            make: || Box::new(crate::SortToTopK),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::OrientDots::NAME,
            description: "cpu: a dot whose large operand XLA CPU would read transposed while something else reads it as it lies (attention's key gradient, dK = dS^T Q, whose score gradient dQ = dS K reads too) becomes the dot with its operands swapped, its smaller result transposed back (dK^T = Q^T dS): XLA CPU no longer writes that operand twice; the same products and sums, in another order within f32 rounding",
            make: || Box::new(crate::OrientDots),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::Cse::NAME,
            description: "common-subexpression elimination: merges instructions with the same op, attributes and operands",
            make: || Box::new(crate::Cse),
            to_fixpoint: false,
        },
        PassInfo {
            name: crate::Dce::NAME,
            description: "dead-code elimination: removes instructions the root does not need and computations nothing calls",
            make: || Box::new(crate::Dce),
            to_fixpoint: false,
        },
    ]
}

/// The default pipeline's passes for a target, in order. The same list
/// for both targets but Neuron's rewrites of what it refuses: the passes
/// read the target from the context. Neuron's first computes f64 in f32
/// and turns small conditionals into selects, so every later pass sees
/// the values and branches the module will keep; it replaces top-k sorts
/// once `simplify` and `cse` have tidied the slices that read them.
/// `simplify` and `cse` come before `coalesce-linear`: torch-xla gives each
/// projection its own copy of the reshaped input, and dots only share an
/// operand once those copies are one. Neuron's narrows the 64-bit integers
/// that fit before `dce` removes what that leaves unread.
pub fn default_pass_names(target: Target) -> Vec<&'static str> {
    let mut names = Vec::new();
    if target == Target::Neuron {
        names.extend([crate::NarrowF64::NAME, crate::ConditionalToSelect::NAME]);
    }
    names.extend([
        crate::FoldCausalMask::NAME,
        crate::Simplify::NAME,
        crate::Cse::NAME,
    ]);
    if target == Target::Neuron {
        names.push(crate::SortToTopK::NAME);
    }
    names.extend([
        crate::CoalesceLinear::NAME,
        crate::FuseSoftmax::NAME,
        crate::Amp::NAME,
        crate::AnnotateRounding::NAME,
        crate::NarrowGathers::NAME,
        crate::Remat::NAME,
    ]);
    if target == Target::Neuron {
        names.extend([
            crate::Narrow64BitIntegers::NAME,
            crate::IntegerDotToF32::NAME,
        ]);
    }
    if target == Target::Cpu {
        names.push(crate::OrientDots::NAME);
    }
    names.push(crate::Dce::NAME);
    names
}

fn find(name: &str) -> Result<PassInfo, PassError> {
    let reg = registry();
    let known = reg.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    reg.into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| PassError::UnknownPass {
            name: name.to_string(),
            known,
        })
}

/// A pipeline of registered passes, in the given order. Passes marked
/// `to_fixpoint` repeat until they change nothing (at most
/// [`Fixpoint::DEFAULT_ITERATIONS`] rounds).
pub fn pipeline_from_names<S: AsRef<str>>(name: &str, names: &[S]) -> Result<Pipeline, PassError> {
    let mut p = Pipeline::new(name);
    for n in names {
        let info = find(n.as_ref().trim())?;
        let pass = (info.make)();
        p.add(if info.to_fixpoint {
            Box::new(Fixpoint::new(pass, Fixpoint::DEFAULT_ITERATIONS))
        } else {
            pass
        });
    }
    Ok(p)
}

/// The target's default pipeline without the passes in `disabled` (each
/// must name a registered pass).
pub fn default_pipeline<S: AsRef<str>>(
    target: Target,
    disabled: &[S],
) -> Result<Pipeline, PassError> {
    for d in disabled {
        find(d.as_ref().trim())?;
    }
    let names: Vec<&str> = default_pass_names(target)
        .into_iter()
        .filter(|n| !disabled.iter().any(|d| d.as_ref().trim() == *n))
        .collect();
    pipeline_from_names(target.name(), &names)
}

/// The pass reference as a markdown table (name, what it does, its place
/// in each target's default pipeline), for `docs/src/passes.md`: generated
/// here so the docs cannot drift from the registry (a test compares them).
pub fn markdown_table() -> String {
    let mut out = String::from("| pass | what it does | default pipeline |\n| --- | --- | --- |\n");
    for p in registry() {
        let places: Vec<String> = Target::ALL
            .iter()
            .filter_map(|&t| {
                let names = default_pass_names(t);
                let at = names.iter().position(|n| *n == p.name)?;
                Some(format!("{t}: {} of {}", at + 1, names.len()))
            })
            .collect();
        let fixpoint = if p.to_fixpoint {
            " (to a fixpoint)"
        } else {
            ""
        };
        let place = if places.is_empty() {
            "not in it".to_string()
        } else {
            places.join(", ")
        };
        out += &format!("| `{}` | {}{fixpoint} | {place} |\n", p.name, p.description);
    }
    out
}
