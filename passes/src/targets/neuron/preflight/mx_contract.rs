//! The contracts neuronx-cc holds its MX custom calls to: `QuantizeMX`,
//! which quantizes one bf16 or f16 operand into packed 8-bit values and
//! per-block scales, and `__op$block_scaled_dot`, which multiplies two such
//! operands with their scales (the SDK's error pages NCC_EVRF036 to
//! EVRF058). Each [`MxCheck`] is one page's condition; the rule table
//! gives each its code and wording.

use crate::targets::neuron::mx_calls::{config_object, MxConfigError, ScaledDotConfig};
use hlatc_compiler::ir::op::DotDims;
use hlatc_compiler::{ArrayShape, Computation, ElementType, InstrId, Op, Shape};
use serde_json::Value;

pub use crate::targets::neuron::mx_calls::{BLOCK_SCALED_DOT, MX_CUSTOM_CALLS, QUANTIZE_MX};

/// One condition of an MX call's contract, by the page that states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MxCheck {
    /// EVRF036: `QuantizeMX`'s `backend_config` is a JSON object.
    QuantizeConfig,
    /// EVRF037: one operand.
    QuantizeOperands,
    /// EVRF038: `dim` is the last dimension, or (rank 2 and above) the one
    /// before it.
    QuantizeDim,
    /// EVRF039: `block_size` 32.
    QuantizeBlockSize,
    /// EVRF040: `scale_method` `EMAX`.
    QuantizeScaleMethod,
    /// EVRF041: a bf16 or f16 input.
    QuantizeInput,
    /// EVRF042: `dtype` float8_e5m2 or float8_e4m3fn, and the data a u32
    /// array of the input's shape with the quantized dimension divided by
    /// four.
    QuantizeMalformed,
    /// EVRF057: a tuple of two results.
    QuantizeTuple,
    /// EVRF058: the quantized dimension divisible by four.
    QuantizeDivisible,
    /// EVRF043: four operands.
    DotOperands,
    /// EVRF044: a u32 (packed) lhs.
    DotLhsType,
    /// EVRF045: an f32 or bf16 result.
    DotOutput,
    /// EVRF046: lhs of rank 2 or more.
    DotLhsRank,
    /// EVRF047: rhs of rank 2 or more.
    DotRhsRank,
    /// EVRF048: equal products of the batch sizes, where both sides list
    /// as many batch dimensions.
    DotBatchSizes,
    /// EVRF049: `backend_config` empty, `None` or JSON, its dimension lists
    /// of integers.
    DotConfig,
    /// EVRF050: the first contracting dimensions (else the last ones) of
    /// equal size.
    DotContractingSizes,
    /// EVRF053: the first contracting dimension not a batch dimension.
    DotContractingIsBatch,
    /// EVRF054: batch dimensions within the operand's rank.
    DotBatchBounds,
    /// EVRF055: the first contracting dimension within the rank.
    DotContractingBounds,
}

/// The MX call a check reads: instruction `id` of `c`.
struct Site<'a> {
    c: &'a Computation,
    id: InstrId,
}

/// What `check` finds wrong with the MX call `id` of `c`, if it is one of
/// its target; `None` where the contract holds (or the call is another).
pub fn violation(check: MxCheck, c: &Computation, id: InstrId) -> Option<String> {
    let s = &Site { c, id };
    let Op::CustomCall(cc) = &c.instr(id).op else {
        return None;
    };
    match cc.target.as_str() {
        QUANTIZE_MX => quantize(check, s),
        BLOCK_SCALED_DOT => scaled_dot(check, s),
        _ => None,
    }
}

fn operand_array<'a>(s: &'a Site<'_>, i: usize) -> Option<&'a ArrayShape> {
    let id = *s.c.operand_ids(s.id).get(i)?;
    s.c.instr(id).shape.as_array()
}

/// A finding's words for a `backend_config` neuronx-cc cannot read.
fn config_problem(e: MxConfigError) -> String {
    match e {
        MxConfigError::Empty => "no backend_config".to_string(),
        MxConfigError::NotJson(_) | MxConfigError::NotObject => format!("backend_config: {e}"),
        e => e.to_string(),
    }
}

/// `QuantizeMX`'s `backend_config`: `Err` where it is not a JSON object.
fn quantize_config(s: &Site<'_>) -> Result<serde_json::Map<String, Value>, MxConfigError> {
    config_object(&s.c.instr(s.id).backend_config)
}

/// The quantized dimension, as `dim` gives it (default 0), normalized to
/// `0..rank`: `None` where neuronx-cc would not take it.
fn quantized_dim(dim: i64, rank: usize) -> Option<usize> {
    let rank = rank as i64;
    let d = if dim < 0 { dim + rank } else { dim };
    let last = d == rank - 1 && rank >= 1;
    let before_last = d == rank - 2 && rank >= 2;
    (last || before_last).then_some(d as usize)
}

fn quantize(check: MxCheck, s: &Site<'_>) -> Option<String> {
    let operands = s.c.operand_ids(s.id).len();
    let config = quantize_config(s);
    let input = operand_array(s, 0);
    let field = |name: &str| config.as_ref().ok().and_then(|c| c.get(name).cloned());
    let dim = match field("dim") {
        None => Some(0),
        Some(v) => v.as_i64(),
    };
    let quantized = || quantized_dim(dim?, input?.rank());
    match check {
        MxCheck::QuantizeConfig => config.err().map(config_problem),
        MxCheck::QuantizeOperands => (operands != 1).then(|| format!("{operands} operands")),
        MxCheck::QuantizeDim => {
            let rank = input?.rank();
            config.as_ref().ok()?;
            match dim {
                Some(d) if quantized_dim(d, rank).is_some() => None,
                Some(d) => Some(format!("dim {d} of a rank-{rank} input")),
                None => Some("dim is not an integer".to_string()),
            }
        }
        MxCheck::QuantizeBlockSize => match field("block_size") {
            None => None,
            Some(v) if v.as_i64() == Some(32) => None,
            Some(v) => Some(format!("block_size {v}")),
        },
        MxCheck::QuantizeScaleMethod => match field("scale_method") {
            None => None,
            Some(Value::String(m)) if m == "EMAX" => None,
            Some(v) => Some(format!("scale_method {v}")),
        },
        MxCheck::QuantizeInput => {
            let ty = input?.ty;
            (!matches!(ty, ElementType::Bf16 | ElementType::F16))
                .then(|| format!("{} input", ty.name()))
        }
        MxCheck::QuantizeMalformed => {
            config.as_ref().ok()?;
            match field("dtype") {
                Some(Value::String(t)) if t == "float8_e5m2" || t == "float8_e4m3fn" => {}
                Some(v) => return Some(format!("dtype {v}")),
                None => return Some("no dtype".to_string()),
            }
            let data = match &s.c.instr(s.id).shape {
                Shape::Tuple(parts) => parts.first()?.as_array()?,
                _ => return None,
            };
            if data.ty != ElementType::U32 {
                return Some(format!("quantized data of {}", data.ty.name()));
            }
            let (input, q) = (input?, quantized()?);
            let mut want = input.dims.clone();
            want[q] /= 4;
            (data.rank() == input.rank() && data.dims != want).then(|| {
                format!(
                    "quantized data {:?}, where the input {:?} quantized along {q} packs into {:?}",
                    data.dims, input.dims, want
                )
            })
        }
        MxCheck::QuantizeTuple => match &s.c.instr(s.id).shape {
            Shape::Tuple(parts) if parts.len() == 2 => None,
            Shape::Tuple(parts) => Some(format!("a tuple of {}", parts.len())),
            _ => Some("not a tuple".to_string()),
        },
        MxCheck::QuantizeDivisible => {
            let (input, q) = (input?, quantized()?);
            let n = input.dims[q];
            (n % 4 != 0).then(|| format!("dimension {q} of {n}"))
        }
        _ => None,
    }
}

/// `__op$block_scaled_dot`'s dimension lists, as neuronx-cc reads them.
fn scaled_dims(s: &Site<'_>) -> Result<DotDims, MxConfigError> {
    ScaledDotConfig::read(&s.c.instr(s.id).backend_config).map(|c| c.dims)
}

/// The dimensions neuronx-cc contracts of `lhs` and `rhs`.
fn contracted_pair(d: &DotDims, lhs: &ArrayShape, rhs: &ArrayShape) -> [i64; 2] {
    [
        ScaledDotConfig::contracted(&d.lhs_contracting, lhs.rank()),
        ScaledDotConfig::contracted(&d.rhs_contracting, rhs.rank()),
    ]
}

fn scaled_dot(check: MxCheck, s: &Site<'_>) -> Option<String> {
    let operands = s.c.operand_ids(s.id).len();
    let dims = scaled_dims(s);
    let (lhs, rhs) = (operand_array(s, 0), operand_array(s, 1));
    let in_rank = |d: i64, a: &ArrayShape| (0..a.rank() as i64).contains(&d);
    match check {
        MxCheck::DotOperands => (operands != 4).then(|| format!("{operands} operands")),
        MxCheck::DotLhsType => {
            let ty = lhs?.ty;
            (ty != ElementType::U32).then(|| format!("{} lhs", ty.name()))
        }
        MxCheck::DotOutput => {
            let ty = s.c.instr(s.id).shape.as_array()?.ty;
            (!matches!(ty, ElementType::F32 | ElementType::Bf16))
                .then(|| format!("{} result", ty.name()))
        }
        MxCheck::DotLhsRank => {
            let r = lhs?.rank();
            (r < 2).then(|| format!("rank-{r} lhs"))
        }
        MxCheck::DotRhsRank => {
            let r = rhs?.rank();
            (r < 2).then(|| format!("rank-{r} rhs"))
        }
        MxCheck::DotConfig => dims.err().map(config_problem),
        MxCheck::DotBatchBounds => {
            let d = dims.ok()?;
            let bad = |list: &[i64], a: &ArrayShape| list.iter().copied().find(|&b| !in_rank(b, a));
            bad(&d.lhs_batch, lhs?)
                .map(|b| format!("lhs batch dimension {b}"))
                .or_else(|| bad(&d.rhs_batch, rhs?).map(|b| format!("rhs batch dimension {b}")))
        }
        MxCheck::DotContractingBounds => {
            let (l, r, [lc, rc]) = (lhs?, rhs?, contracted_pair(&dims.ok()?, lhs?, rhs?));
            if !in_rank(lc, l) {
                return Some(format!("lhs contracting dimension {lc}"));
            }
            (!in_rank(rc, r)).then(|| format!("rhs contracting dimension {rc}"))
        }
        MxCheck::DotContractingSizes => {
            let (l, r, [lc, rc]) = (lhs?, rhs?, contracted_pair(&dims.ok()?, lhs?, rhs?));
            if !in_rank(lc, l) || !in_rank(rc, r) {
                return None;
            }
            let (a, b) = (l.dims[lc as usize], r.dims[rc as usize]);
            (a != b).then(|| format!("lhs contracts {a}, rhs {b}"))
        }
        MxCheck::DotContractingIsBatch => {
            let d = dims.ok()?;
            let [lc, rc] = contracted_pair(&d, lhs?, rhs?);
            if d.lhs_batch.contains(&lc) {
                return Some(format!(
                    "lhs dimension {lc} both contracted and a batch dimension"
                ));
            }
            d.rhs_batch
                .contains(&rc)
                .then(|| format!("rhs dimension {rc} both contracted and a batch dimension"))
        }
        MxCheck::DotBatchSizes => {
            let d = dims.ok()?;
            let (l, r) = (lhs?, rhs?);
            if d.lhs_batch.len() != d.rhs_batch.len() {
                return None;
            }
            let size = |list: &[i64], a: &ArrayShape| -> Option<i64> {
                list.iter()
                    .map(|&b| in_rank(b, a).then(|| a.dims[b as usize]))
                    .product()
            };
            let (a, b) = (size(&d.lhs_batch, l)?, size(&d.rhs_batch, r)?);
            (a != b).then(|| format!("lhs batch {a}, rhs batch {b}"))
        }
        _ => None,
    }
}
