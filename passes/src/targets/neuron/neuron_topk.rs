//! The top k of an array along its last dimension, largest first, in the
//! form each target runs: Neuron's `AwsNeuronTopK` custom call, or XLA's
//! own `topk` op on `cpu`. `sort-to-topk` writes it; `lower-neuron-calls`
//! maps the custom call back to the `topk` op, so a Neuron module runs on
//! XLA CPU. The custom call's contract lives here and only here.
//!
//! The contract of `AwsNeuronTopK`, as AWS's own HLO writer emits it
//! (`aws-neuron/nkipy`, `nkipy/src/nkipy/core/backend/hlo.py`,
//! `_handle_topk`, and `nkipy/src/nkipy/core/ops/_hlo_impls.py`, `topk`,
//! at commit b91c9800bb096d1686befcd43fe9e92b408d4912):
//! - one operand, the input; the top k is taken along its last dimension
//!   (nkipy refuses any other axis: "the custom TopK op only supports last
//!   axis") and is always the largest (an ascending top k negates its
//!   input and result around the call);
//! - `backend_config` is k as a bare decimal string (`"5"`);
//! - the result is the tuple (values, indices): values of the input's type
//!   and indices `u32`, both the input's dimensions with the last cut to
//!   k; values come largest first (nkipy's CPU reference sorts them so);
//! - the input is a float: `NCC_EVRF013` refuses int32 and int64 ("TopK
//!   does not support int32 or int64 input tensors"), and nkipy's types
//!   are f32, f16 and bf16 ([`TOPK_INPUT_TYPES`]).
//!
//! Not established by any source found: the custom-call API version
//! (nkipy leaves the proto's field unset; hlatc writes 1, original, as for
//! its other Neuron calls and as XLA's text parser assumes), the order of
//! tied values' indices (nkipy's CPU reference uses an unstable
//! argpartition), and NaN's place. XLA's `topk` orders ties by lower
//! index first; a program whose top k has ties may see their indices
//! differ on Neuron, never their values.

use crate::infra::context::Target;
use crate::infra::rewriter::{RewriteError, Rewriter};
use hlatc_compiler::ir::op::{CustomCall, CustomCallApiVersion};
use hlatc_compiler::{ElementType, InstrId, Instruction, Op, Shape};

/// The custom-call target.
pub const TOPK_TARGET: &str = "AwsNeuronTopK";

/// The type of the custom call's indices.
pub const TOPK_INDEX_TYPE: ElementType = ElementType::U32;

/// The input types the custom call takes.
pub const TOPK_INPUT_TYPES: [ElementType; 3] =
    [ElementType::F32, ElementType::Bf16, ElementType::F16];

/// k, when `instr` is an `AwsNeuronTopK` call whose `backend_config` is a
/// valid k for its operand's last dimension `last`.
pub fn neuron_topk_k(instr: &Instruction, last: i64) -> Option<i64> {
    let Op::CustomCall(cc) = &instr.op else {
        return None;
    };
    if cc.target != TOPK_TARGET {
        return None;
    }
    let k: i64 = instr.backend_config.trim().parse().ok()?;
    (1..=last).contains(&k).then_some(k)
}

/// Adds the top `k` of `x` along its last dimension, largest first, in the
/// form `target` runs, and returns (values, indices), the indices
/// converted to `index_type` (exactly: they are below the dimension's
/// size). The rewriter's provenance applies to all it adds.
pub fn write_top_k(
    r: &mut Rewriter<'_>,
    target: Target,
    x: InstrId,
    k: i64,
    index_type: ElementType,
) -> Result<(InstrId, InstrId), RewriteError> {
    let (call, own_index_type) = match target {
        Target::Neuron => {
            let mut dims = r.shape(x).array_dims();
            if let Some(last) = dims.last_mut() {
                *last = k;
            }
            let ty = r.shape(x).as_array().map_or(ElementType::F32, |a| a.ty);
            let shape = Shape::Tuple(vec![
                Shape::array(ty, dims.clone()),
                Shape::array(TOPK_INDEX_TYPE, dims),
            ]);
            let op = Op::CustomCall(CustomCall {
                target: TOPK_TARGET.to_string(),
                api_version: CustomCallApiVersion::Original,
                ..Default::default()
            });
            r.set_backend_config(k.to_string());
            let call = r.add_named(TOPK_TARGET, op, &[x], Some(shape));
            // Only the call carries k.
            r.set_backend_config(String::new());
            (call?, TOPK_INDEX_TYPE)
        }
        Target::Cpu => {
            let op = Op::TopK { k, largest: true };
            (r.add_named("topk", op, &[x], None)?, ElementType::S32)
        }
    };
    let values = r.add(Op::GetTupleElement { index: 0 }, &[call], None)?;
    let mut indices = r.add(Op::GetTupleElement { index: 1 }, &[call], None)?;
    if index_type != own_index_type {
        let mut shape = r.shape(indices).clone();
        if let Shape::Array(a) = &mut shape {
            a.ty = index_type;
        }
        indices = r.add(Op::Convert, &[indices], Some(shape))?;
    }
    Ok((values, indices))
}
