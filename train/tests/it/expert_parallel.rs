//! A mixture of experts divided over data-parallel replicas and its
//! experts over EP ranks, by either exchange, with and without a capacity
//! factor, computes what one device computes on the same global batch:
//! loss (the load-balancing loss included, its counts pooled over every
//! replica), grad norm and, after three steps, every parameter and Adam
//! moment gathered from the ranks, within 1e-10 in f64 (`sharded.rs`'s
//! measure, and why f64). Each rank's experts are its EP rank's run; the replicas that
//! hold the same experts hold the same values.

use crate::runs::{differences, f32_rounding_bound, run, step_config, Run, EQUAL_IN, F64_RTOL};
use hlatc_models::{EpExchange, ModelConfig, Parallelism};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::Role;

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
    let single = run(&step_config(model.clone(), Parallelism::SINGLE, EQUAL_IN));
    let sharded = run(&step_config(model, par, EQUAL_IN));
    let diffs = differences(&single, &sharded, F64_RTOL);
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
        .join("../tests/fixtures/hf/qwen2_moe/config.json");
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
    let whole = run(&step_config(model.clone(), Parallelism::SINGLE, EQUAL_IN));
    let cfg = step_config(model, Parallelism::SINGLE, EQUAL_IN);
    let accumulated = crate::runs::run_with(&cfg, |rt, cfg, params| {
        let steps = hlatc_step::grad_accum::build_accumulation_steps(cfg, 2)?;
        let remat = hlatc_passes::RematPolicy::CoreAttention;
        crate::cpu_trainers::accumulating(rt, cfg, steps, remat, params)
    });
    for (a, b) in whole.stats.iter().zip(&accumulated.stats) {
        assert_eq!(a.experts, b.experts);
        assert!(
            (a.loss - b.loss).abs() <= F64_RTOL * a.loss.abs(),
            "{} {}",
            a.loss,
            b.loss
        );
    }
}

/// Rows `rows` of a `[B, S]` s32 literal.
fn rows(x: &hlatc_compiler::Literal, rows: std::ops::Range<i64>) -> hlatc_compiler::Literal {
    let s = x.dims()[1];
    let v: Vec<i32> = x.to_i64_vec()[(rows.start * s) as usize..(rows.end * s) as usize]
        .iter()
        .map(|&t| t as i32)
        .collect();
    hlatc_compiler::Literal::from_s32(vec![rows.end - rows.start, s], &v).unwrap()
}

/// With the load-balancing loss, each micro-batch adds its own (its
/// routing counts the micro-batch's) over K, as Hugging Face's Trainer,
/// Megatron and NxD accumulate it: the micro steps' summed loss and
/// gradient are the mean of what each micro-batch's own one-device pass
/// computes (`build_loss_and_grads`, another program), and differ from one
/// pass over the whole batch, whose router loss reads every token's
/// choice at once.
#[test]
fn accumulated_load_balancing_loss_is_the_micro_batches_mean() {
    use hlatc_compiler::{ElementType, Literal};
    use hlatc_models::{param_specs, BatchShape};
    let model = tiny_moe(Some(1.0));
    assert!(model.moe.as_ref().unwrap().aux_loss());
    let cfg = step_config(model.clone(), Parallelism::SINGLE, Precision::Fp32);
    let rt = hlatc_runtime::Runtime::shared().unwrap();
    let params: Vec<Literal> = hlatc_models::init::init_params(&model, ElementType::F32, 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let data = hlatc_step::data::SyntheticData::permutation(model.vocab_size, 3);
    let batch = data.batch(0, cfg.batch.batch_size, cfg.batch.seq_len);
    let half = cfg.batch.batch_size / 2;
    let halves = [0..half, half..2 * half];
    let grads_of = |batch: BatchShape, tokens: Literal, targets: Literal| {
        let module = hlatc_step::train_step::build_loss_and_grads(&model, batch, ElementType::F32);
        let mut inputs = params.clone();
        inputs.extend([tokens, targets]);
        rt.compile(&module.unwrap()).unwrap().run(&inputs).unwrap()
    };
    let own: Vec<Vec<Literal>> = halves
        .iter()
        .map(|r| {
            let shape = BatchShape {
                batch_size: half,
                ..cfg.batch
            };
            grads_of(
                shape,
                rows(&batch.tokens, r.clone()),
                rows(&batch.targets, r.clone()),
            )
        })
        .collect();
    let whole = grads_of(cfg.batch, batch.tokens.clone(), batch.targets.clone());

    let steps = hlatc_step::grad_accum::build_accumulation_steps(&cfg, 2).unwrap();
    let micro = rt.compile(&steps.micro.module).unwrap();
    let n = param_specs(&model).len();
    let mut accumulators: Vec<Literal> = params
        .iter()
        .map(|p| Literal::zeros(ElementType::F32, p.dims().to_vec()))
        .collect();
    let mut loss = 0.0;
    for r in &halves {
        let mut inputs = params.clone();
        inputs.extend(accumulators);
        inputs.push(batch.token_count());
        inputs.extend([
            rows(&batch.tokens, r.clone()),
            rows(&batch.targets, r.clone()),
        ]);
        let out = micro.run(&inputs).unwrap();
        loss += out[0].to_f64_vec()[0];
        accumulators = out[1..=n].to_vec();
    }

    let mean_loss = (own[0][0].to_f64_vec()[0] + own[1][0].to_f64_vec()[0]) / 2.0;
    assert!(
        crate::runs::rel(loss, mean_loss) < 1e-6,
        "{loss} {mean_loss}"
    );
    let mut apart_from_whole = 0.0f64;
    for (i, acc) in accumulators.iter().enumerate() {
        let (a, b) = (own[0][1 + i].to_f64_vec(), own[1][1 + i].to_f64_vec());
        let mean: Vec<f32> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| ((x + y) / 2.0) as f32)
            .collect();
        let mean = Literal::from_f32(acc.dims().to_vec(), &mean).unwrap();
        let d = crate::runs::norm_relative(&mean, acc);
        assert!(d < f32_rounding_bound(), "gradient {i}: {d}");
        apart_from_whole = apart_from_whole.max(crate::runs::norm_relative(&whole[1 + i], acc));
    }
    // The router's gradient shows which counts the loss read.
    assert!(apart_from_whole > 1e-3, "{apart_from_whole}");
}

/// Accumulation with the load-balancing loss composes with expert
/// parallelism: EP 2 over DP 2, two micro-batches, equals one device's
/// accumulated step over the same micro-batches. Micro-batch j is each
/// replica's j-th row (rows 0 and 2, then 1 and 3), so one device is fed
/// the rows in that order; each micro-batch's routing is pooled over the
/// replicas.
#[test]
fn ep2_dp2_accumulated_with_the_load_balancing_loss_equals_one_device() {
    use hlatc_compiler::Literal;
    let model = tiny_moe(Some(1.0));
    let run = |par: Parallelism, order: &[i64]| {
        let cfg = step_config(model.clone(), par, EQUAL_IN);
        let rt = hlatc_runtime::Runtime::shared().unwrap();
        let params = hlatc_models::init::init_params(&model, cfg.precision.storage(), 7)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        let steps = hlatc_step::grad_accum::build_accumulation_steps(&cfg, 2).unwrap();
        let remat = hlatc_passes::RematPolicy::CoreAttention;
        let mut trainer =
            crate::cpu_trainers::accumulating(&rt, &cfg, steps, remat, params).unwrap();
        let data = hlatc_step::data::SyntheticData::permutation(model.vocab_size, 3);
        let reorder = |x: &Literal| {
            let parts: Vec<Literal> = order.iter().map(|&r| rows(x, r..r + 1)).collect();
            let v: Vec<i32> = parts
                .iter()
                .flat_map(|p| p.to_i64_vec())
                .map(|t| t as i32)
                .collect();
            Literal::from_s32(x.dims().to_vec(), &v).unwrap()
        };
        let stats = (0..3)
            .map(|k| {
                let mut b = data.batch(k, cfg.batch.batch_size, cfg.batch.seq_len);
                (b.tokens, b.targets) = (reorder(&b.tokens), reorder(&b.targets));
                trainer.step(&b).unwrap()
            })
            .collect();
        crate::runs::Run { stats, trainer }
    };
    let single = run(Parallelism::SINGLE, &[0, 2, 1, 3]);
    let par = layout(2, 2, EpExchange::AllToAll);
    let sharded = run(par, &[0, 1, 2, 3]);
    let diffs = differences(&single, &sharded, F64_RTOL);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    for (a, b) in single.stats.iter().zip(&sharded.stats) {
        assert_eq!(a.experts, b.experts);
    }
    assert!(single.stats[2].loss < single.stats[0].loss);
}

/// tiny-moe four layers deep without the load-balancing loss (what
/// pipeline stages take), eight sequences a step.
fn staged_moe(
    capacity_factor: Option<f64>,
    par: Parallelism,
    precision: Precision,
) -> hlatc_step::train_step::StepConfig {
    let mut model = tiny_moe(capacity_factor);
    model.moe.as_mut().unwrap().output_router_logits = false;
    model.num_hidden_layers = 4;
    let mut cfg = step_config(model, par, precision);
    cfg.batch.batch_size = 8;
    cfg
}

/// Pipeline stages of a mixture of experts, with EP and TP inside each
/// stage's ranks, compute one device's step on the whole batch, and report
/// its routing counts: each stage's layers counted on its own ranks,
/// summed over the stages and micro-batches.
fn staged_equals_one_device(cf: Option<f64>, par: Parallelism, micro_batches: i64) {
    let precision = EQUAL_IN;
    let single = run(&staged_moe(cf, Parallelism::SINGLE, precision));
    let staged = crate::runs::run_with(&staged_moe(cf, par, precision), |rt, cfg, params| {
        let remat = hlatc_passes::RematPolicy::None;
        crate::cpu_trainers::pipelined(rt, cfg, micro_batches, remat, params)
    });
    let diffs = differences(&single, &staged, F64_RTOL);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    for (a, b) in single.stats.iter().zip(&staged.stats) {
        assert!(a.experts.is_some());
        assert_eq!(a.experts, b.experts, "{par}");
    }
    assert!(single.stats[2].loss < single.stats[0].loss);
}

macro_rules! staged_experts_equal_one_device {
    ($($name:ident: pp $pp:expr, tp $tp:expr, sp $sp:expr, zero1 $zero1:expr, dp $dp:expr, ep $ep:expr, $exchange:ident, $cf:expr, m $m:expr;)*) => {$(
        #[test]
        fn $name() {
            let par = Parallelism {
                pp: $pp,
                ..split($tp, $sp, $zero1, layout($dp, $ep, EpExchange::$exchange))
            };
            staged_equals_one_device($cf, par, $m);
        }
    )*};
}

staged_experts_equal_one_device! {
    pp2: pp 2, tp 1, sp false, zero1 false, dp 1, ep 1, AllToAll, None, m 2;
    pp2_capacity: pp 2, tp 1, sp false, zero1 false, dp 1, ep 1, AllToAll, Some(1.0), m 4;
    pp2_ep2_dp2_all_to_all_capacity: pp 2, tp 1, sp false, zero1 false, dp 2, ep 2, AllToAll, Some(1.0), m 2;
    pp2_ep2_dp4_all_to_all_capacity_zero1: pp 2, tp 1, sp false, zero1 true, dp 4, ep 2, AllToAll, Some(1.25), m 2;
    pp2_tp2_sp_ep2_dp2_all_gather_capacity: pp 2, tp 2, sp true, zero1 false, dp 2, ep 2, AllGather, Some(1.0), m 2;
    pp4_ep2_dp2_capacity: pp 4, tp 1, sp false, zero1 false, dp 2, ep 2, AllToAll, Some(1.0), m 4;
    pp2_ep2_dp2_dropless: pp 2, tp 1, sp false, zero1 false, dp 2, ep 2, AllToAll, None, m 2;
}
