//! Sharded equals unsharded: a step divided by tensor, sequence and data
//! parallelism, run on as many XLA CPU devices as it has ranks, computes
//! what the single-device step computes on the same global batch. Loss and
//! grad norm every step, and after three steps every parameter and Adam
//! moment gathered from the ranks, agree in f64 to 1e-10 relative: a
//! tensor's by its Euclidean norm (`|a - e| / |e|`). Each deliberately
//! broken variant (the bugs sharded training has shipped with) fails the
//! same checks.
//!
//! Why f64 ([`EQUAL_IN`]). Two forms of one step (sharded, staged,
//! accumulated, tiled) sum the same products in other orders, and AdamW
//! turns a rounding difference in a gradient element near zero into one
//! of up to lr in its update (`m / (sqrt(v) + eps)` with eps 1e-8). In f32
//! that difference depends on the machine: the same comparison measured
//! 3.4e-6 on an AVX-512 Intel Xeon and 1.06e-5 on an AVX2 AMD EPYC (Adam's
//! second moment, pipeline stages of a mixture of experts), so a bare f32
//! bound passed or failed by the CPU. In f64 the rounding is 2^29 times
//! finer: the forms agree to 5e-14 on both, and a structural error (a
//! missing reduction, a wrong group, a shard updated with another's
//! gradient) is off by 1e-3 or more, so 1e-10 separates the two on any
//! x86-64 machine. What needs f32 (bf16 master weights, a kernel whose CPU
//! reference is f32) compares within [`f32_rounding_bound`].

use crate::runs::{
    assert_caught, broken_in, check_in, gqa_odd_vocab, mha_tied, EQUAL_IN, F64_RTOL,
};
use hlatc_models::parallel::Fault;
use hlatc_models::{ModelConfig, Parallelism};

fn check(model: ModelConfig, tp: i64, dp: i64, sequence_parallel: bool) {
    let par = Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1: false,
        pp: 1,
        ..Parallelism::SINGLE
    };
    check_in(EQUAL_IN, F64_RTOL, model, par);
}

macro_rules! sharded_equals_unsharded {
    ($($name:ident: $model:expr, $tp:expr, $dp:expr, $sp:expr;)*) => {$(
        #[test]
        fn $name() {
            check($model, $tp, $dp, $sp);
        }
    )*};
}

sharded_equals_unsharded! {
    gqa_tp2: gqa_odd_vocab(), 2, 1, false;
    gqa_tp2_sp: gqa_odd_vocab(), 2, 1, true;
    gqa_dp2: gqa_odd_vocab(), 1, 2, false;
    gqa_tp2_dp2: gqa_odd_vocab(), 2, 2, false;
    gqa_tp2_dp2_sp: gqa_odd_vocab(), 2, 2, true;
    gqa_tp4_dp2: gqa_odd_vocab(), 4, 2, false;
    gqa_tp4_dp2_sp: gqa_odd_vocab(), 4, 2, true;
    mha_tied_tp2: mha_tied(), 2, 1, false;
    mha_tied_tp2_sp: mha_tied(), 2, 1, true;
    mha_tied_dp2: mha_tied(), 1, 2, false;
    mha_tied_tp2_dp2: mha_tied(), 2, 2, false;
    mha_tied_tp2_dp2_sp: mha_tied(), 2, 2, true;
    mha_tied_tp4_dp2: mha_tied(), 4, 2, false;
    mha_tied_tp4_dp2_sp: mha_tied(), 4, 2, true;
}

/// `fault` built into the step TP `tp` x DP `dp` divides: what differs
/// from the single-device run.
fn broken(fault: Fault, model: ModelConfig, tp: i64, dp: i64) -> Vec<String> {
    let par = Parallelism {
        tp,
        dp,
        sequence_parallel: false,
        zero1: false,
        pp: 1,
        ..Parallelism::SINGLE
    };
    broken_in(fault, model, par)
}

#[test]
fn a_missing_gradient_all_reduce_is_caught() {
    let diffs = broken(Fault::MissingGradientAllReduce, gqa_odd_vocab(), 2, 2);
    assert_caught(&diffs, "grad norm");
    assert_caught(&diffs, "adam_m.model.embed_tokens.weight");
}

#[test]
fn gradients_summed_instead_of_averaged_are_caught() {
    let diffs = broken(Fault::GradientSummedNotAveraged, gqa_odd_vocab(), 2, 2);
    assert_caught(&diffs, "step 0 grad norm");
}

#[test]
fn a_replicated_parameter_counted_per_rank_in_the_norm_is_caught() {
    let diffs = broken(Fault::ReplicatedCountedPerRank, gqa_odd_vocab(), 2, 1);
    assert_caught(&diffs, "step 0 grad norm");
}

#[test]
fn vocabulary_padding_in_the_softmax_is_caught() {
    let diffs = broken(Fault::PaddingInSoftmax, gqa_odd_vocab(), 4, 1);
    assert_caught(&diffs, "step 0 loss");
}
