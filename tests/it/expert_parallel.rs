//! A mixture of experts divided over data-parallel replicas and its
//! experts over EP ranks, by either exchange, with and without a capacity
//! factor, computes what one device computes on the same global batch:
//! loss (the load-balancing loss included, its counts pooled over every
//! replica), grad norm and, after three steps, every parameter and Adam
//! moment gathered from the ranks, within 1e-5 in f32 (`sharded.rs`'s
//! measure). Each rank's experts are its EP rank's run; the replicas that
//! hold the same experts hold the same values.

use crate::sharded::{differences, run, step_config, Run, F32_RTOL};
use hlatc::models::{EpExchange, ModelConfig, Parallelism};
use hlatc::precision::Precision;
use hlatc::train_step::Role;

/// tiny-moe: 4 experts, 2 per token, the load-balancing loss at 0.02.
fn tiny_moe(capacity_factor: Option<f64>) -> ModelConfig {
    let mut m = ModelConfig::preset("tiny-moe").unwrap();
    m.moe.as_mut().unwrap().capacity_factor = capacity_factor;
    m
}

fn layout(dp: i64, ep: i64, ep_exchange: EpExchange) -> Parallelism {
    Parallelism {
        dp,
        ep,
        ep_exchange,
        ..Parallelism::SINGLE
    }
}

/// `layout` with each expert's columns split over `tp` ranks too.
fn split(tp: i64, sequence_parallel: bool, zero1: bool, base: Parallelism) -> Parallelism {
    Parallelism {
        tp,
        sequence_parallel,
        zero1,
        ..base
    }
}

/// Every rank holds what the rank of its TP rank and (for the experts)
/// its EP rank in the first expert-data-parallel replica holds.
fn holders_agree(run: &Run, par: Parallelism) {
    for (name, ranks) in run.trainer.rank_state(Role::Parameter) {
        let experts = name.contains(".experts");
        for r in 0..par.world() {
            let twin = match experts {
                true => par.ep_rank(r) * par.tp + par.tp_rank(r),
                false => par.tp_rank(r),
            };
            assert_eq!(
                ranks[twin as usize].bytes(),
                ranks[r as usize].bytes(),
                "{name}: rank {r} differs from rank {twin}, which holds the same"
            );
        }
    }
}

fn check(model: ModelConfig, par: Parallelism) {
    let single = equals_one_device(model, par);
    // tiny-moe learns the synthetic permutation from the first steps.
    assert!(single.stats[2].loss < single.stats[0].loss);
}

/// The sharded run of `model` over `par` against one device's; the
/// single device's run.
fn equals_one_device(model: ModelConfig, par: Parallelism) -> Run {
    let single = run(&step_config(
        model.clone(),
        Parallelism::SINGLE,
        Precision::Fp32,
    ));
    let sharded = run(&step_config(model, par, Precision::Fp32));
    let diffs = differences(&single, &sharded, F32_RTOL);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    holders_agree(&sharded, par);
    // The routing counts are whole numbers, pooled over the replicas: the
    // same as one device's, exactly.
    for (a, b) in single.stats.iter().zip(&sharded.stats) {
        assert!(
            a.experts.is_some(),
            "a mixture of experts reports its routing"
        );
        assert_eq!(a.experts, b.experts, "{par}");
    }
    single
}

macro_rules! expert_parallel_equals_one_device {
    ($($name:ident: $dp:expr, $ep:expr, $exchange:ident, $cf:expr;)*) => {$(
        #[test]
        fn $name() {
            check(tiny_moe($cf), layout($dp, $ep, EpExchange::$exchange));
        }
    )*};
}

expert_parallel_equals_one_device! {
    dp2: 2, 1, AllToAll, None;
    dp4_capacity: 4, 1, AllToAll, Some(1.0);
    ep2_dp2_all_to_all: 2, 2, AllToAll, None;
    ep2_dp4_all_to_all: 4, 2, AllToAll, None;
    ep4_dp4_all_to_all: 4, 4, AllToAll, None;
    ep2_dp4_all_to_all_capacity: 4, 2, AllToAll, Some(1.0);
    ep4_dp4_all_to_all_capacity: 4, 4, AllToAll, Some(0.5);
    ep2_dp4_all_gather: 4, 2, AllGather, None;
    ep4_dp4_all_gather: 4, 4, AllGather, None;
    ep2_dp2_all_gather_capacity: 2, 2, AllGather, Some(1.0);
}

/// Tensor parallelism splits each expert's columns as the dense MLP's
/// (gate and up rows, down columns; the router whole on every rank), the
/// experts' partial sums reduced over the TP group (reduce-scattered under
/// sequence parallelism), with and without EP and ZeRO-1.
macro_rules! tensor_parallel_experts_equal_one_device {
    ($($name:ident: tp $tp:expr, sp $sp:expr, zero1 $zero1:expr, $dp:expr, $ep:expr, $exchange:ident, $cf:expr;)*) => {$(
        #[test]
        fn $name() {
            let base = layout($dp, $ep, EpExchange::$exchange);
            check(tiny_moe($cf), split($tp, $sp, $zero1, base));
        }
    )*};
}

tensor_parallel_experts_equal_one_device! {
    tp2: tp 2, sp false, zero1 false, 1, 1, AllToAll, None;
    tp4_sp_capacity: tp 4, sp true, zero1 false, 1, 1, AllToAll, Some(1.0);
    tp2_dp2_zero1: tp 2, sp false, zero1 true, 2, 1, AllToAll, None;
    tp2_sp_ep2_dp2_all_to_all: tp 2, sp true, zero1 false, 2, 2, AllToAll, Some(1.0);
    tp2_ep2_dp4_all_gather: tp 2, sp false, zero1 false, 4, 2, AllGather, None;
    // ZeRO-1 divides the experts' state over the replicas holding them:
    // two, or one (EP over every replica), and every replica otherwise.
    ep2_dp4_zero1: tp 1, sp false, zero1 true, 4, 2, AllToAll, None;
    ep2_dp2_zero1_capacity: tp 1, sp false, zero1 true, 2, 2, AllToAll, Some(1.0);
    tp2_sp_ep2_dp4_zero1_all_gather: tp 2, sp true, zero1 true, 4, 2, AllGather, None;
}

/// Qwen2-MoE's form (the Hugging Face parity fixture's config): a shared
/// expert beside the routed ones (split over TP as a dense MLP), its gate
/// replicated, a dense layer, biased q/k/v.
#[test]
fn qwen2_moe_shared_expert_tp2_sp_ep2_dp2() {
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/hf/qwen2_moe/config.json");
    let model = ModelConfig::from_hf_file(&config).unwrap_or_else(|e| panic!("{e}"));
    assert!(model
        .moe
        .as_ref()
        .unwrap()
        .shared_expert_intermediate_size
        .is_some());
    equals_one_device(
        model,
        split(2, true, false, layout(2, 2, EpExchange::AllToAll)),
    );
}

/// A capacity factor drops tokens: the step differs from the dropless
/// one (else the tests above could not tell a capacity that is ignored).
#[test]
fn a_capacity_factor_changes_the_step() {
    let dropless = run(&step_config(
        tiny_moe(None),
        Parallelism::SINGLE,
        Precision::Fp32,
    ));
    let capped = run(&step_config(
        tiny_moe(Some(0.5)),
        Parallelism::SINGLE,
        Precision::Fp32,
    ));
    // At initialization the experts' outputs are small, so the loss moves
    // little (7e-5 relative); their gradients and updates do not.
    let moved = differences(&dropless, &capped, 1e-2);
    assert!(moved.iter().any(|d| d.contains("experts")), "{moved:?}");
    // Every token chose 2 of the 4 experts in each of the 2 layers: 4 x 8
    // tokens, 128 slots. At factor 0.5 an expert keeps C = ceil(8 x 2 x
    // 0.5 / 4) = 2 slots per sequence: at most 4 x 2 x 4 x 2 = 64 of them.
    for (free, capped) in dropless.stats.iter().zip(&capped.stats) {
        let (free, capped) = (
            free.experts.clone().unwrap(),
            capped.experts.clone().unwrap(),
        );
        assert_eq!(free.routed.len(), 4);
        assert_eq!(free.routed.iter().sum::<f64>(), 128.0);
        assert_eq!(capped.routed.iter().sum::<f64>(), 128.0);
        assert_eq!(free.dropped, 0.0);
        assert!(capped.dropped >= 64.0, "{capped:?}");
        // An expert drops at most what it was routed past its capacity.
        let over: f64 = capped.routed.iter().map(|r| (r - 16.0).max(0.0)).sum();
        assert!(capped.dropped >= over, "{capped:?}");
    }
}

/// Without the load-balancing loss a mixture of experts accumulates
/// micro-batches exactly, and its routing counts are the micro-batches'
/// summed: those of the whole batch at once.
#[test]
fn accumulated_micro_batches_count_the_whole_batch() {
    let mut model = tiny_moe(Some(1.0));
    model.moe.as_mut().unwrap().output_router_logits = false;
    let whole = run(&step_config(
        model.clone(),
        Parallelism::SINGLE,
        Precision::Fp32,
    ));
    let cfg = step_config(model, Parallelism::SINGLE, Precision::Fp32);
    let accumulated = crate::sharded::run_with(&cfg, |rt, cfg, params| {
        let steps = hlatc::grad_accum::build_accumulation_steps(cfg, 2)?;
        let remat = hlatc::passes::RematPolicy::CoreAttention;
        hlatc::trainer::Trainer::accumulating(rt, cfg, steps, remat, params)
    });
    for (a, b) in whole.stats.iter().zip(&accumulated.stats) {
        assert_eq!(a.experts, b.experts);
        assert!(
            (a.loss - b.loss).abs() <= 1e-5 * a.loss.abs(),
            "{} {}",
            a.loss,
            b.loss
        );
    }
}
