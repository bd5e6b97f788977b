//! Gradient accumulation: K micro-batches per optimizer step, two
//! programs. The accumulated step computes what the single-device step
//! computes on the whole batch, in f64 to the sharded checks' 1e-10 (by each
//! tensor's norm, `sharded.rs` says why), also when the micro-batches
//! count different numbers of targets; averaging the micro-batches again
//! is caught. Accumulation through the CLI (trained on four devices, the
//! two programs compiled and verified) is the root crate's
//! (`tests/it/sharded.rs`).

use crate::runs::{
    assert_caught, differences, gqa_odd_vocab, mha_tied, step_config, Run, EQUAL_IN, F64_RTOL,
};
use hlatc_compiler::Literal;
use hlatc_models::init::init_params;
use hlatc_models::parallel::Fault;
use hlatc_models::{ModelConfig, Parallelism, IGNORE_INDEX};
use hlatc_passes::RematPolicy;
use hlatc_runtime::Runtime;
use hlatc_step::data::{Batch, SyntheticData};
use hlatc_step::grad_accum::build_accumulation_steps;
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{StepConfig, StepError};
use hlatc_train::trainer::Trainer;

const STEPS: u64 = 3;

fn layout(tp: i64, dp: i64, zero1: bool) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel: false,
        zero1,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

/// The synthetic batch of step `k`, with `ignored` of its targets (from the
/// first row on) set to the ignore index, so micro-batches count
/// different numbers of targets.
fn batch(cfg: &StepConfig, k: u64, ignored: usize) -> Batch {
    let data = SyntheticData::permutation(cfg.model.vocab_size, 3);
    let mut b = data.batch(k, cfg.batch.batch_size, cfg.batch.seq_len);
    let mut t: Vec<i32> = b.targets.to_i64_vec().iter().map(|&x| x as i32).collect();
    for x in t.iter_mut().take(ignored) {
        *x = IGNORE_INDEX as i32;
    }
    b.targets = Literal::from_s32(b.targets.dims().to_vec(), &t).unwrap();
    b
}

/// Three steps of `cfg` accumulated over `k` micro-batches.
fn accumulated(cfg: &StepConfig, k: i64, ignored: usize) -> Run {
    let rt = Runtime::shared().unwrap();
    let params = init_params(&cfg.model, cfg.precision.storage(), 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let steps = build_accumulation_steps(cfg, k).unwrap();
    let mut trainer =
        crate::cpu_trainers::accumulating(&rt, cfg, steps, RematPolicy::None, params).unwrap();
    let stats = (0..STEPS)
        .map(|s| trainer.step(&batch(cfg, s, ignored)).unwrap())
        .collect();
    Run { stats, trainer }
}

/// The single-device step on the whole batches `accumulated` splits.
fn whole(model: ModelConfig, ignored: usize) -> Run {
    let cfg = step_config(model, Parallelism::SINGLE, EQUAL_IN);
    let rt = Runtime::shared().unwrap();
    let params = init_params(&cfg.model, cfg.precision.storage(), 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = crate::cpu_trainers::unoptimized(&rt, &cfg, params).unwrap();
    let stats = (0..STEPS)
        .map(|s| trainer.step(&batch(&cfg, s, ignored)).unwrap())
        .collect();
    Run { stats, trainer }
}

fn check(model: ModelConfig, par: Parallelism, k: i64, ignored: usize) {
    let single = whole(model.clone(), ignored);
    let acc = accumulated(&step_config(model, par, EQUAL_IN), k, ignored);
    let diffs = differences(&single, &acc, F64_RTOL);
    assert!(diffs.is_empty(), "{par}, K {k}: {}", diffs.join("; "));
    assert!(single.stats[2].loss < single.stats[0].loss);
}

macro_rules! accumulated_equals_whole {
    ($($name:ident: $model:expr, $tp:expr, $dp:expr, $zero1:expr, $k:expr;)*) => {$(
        #[test]
        fn $name() {
            check($model, layout($tp, $dp, $zero1), $k, 0);
        }
    )*};
}

accumulated_equals_whole! {
    gqa_single_k2: gqa_odd_vocab(), 1, 1, false, 2;
    gqa_single_k4: gqa_odd_vocab(), 1, 1, false, 4;
    gqa_tp2_dp2_k2: gqa_odd_vocab(), 2, 2, false, 2;
    gqa_tp4_dp2_k2: gqa_odd_vocab(), 4, 2, false, 2;
    gqa_tp2_dp2_zero1_k2: gqa_odd_vocab(), 2, 2, true, 2;
    mha_dp2_k2: mha_tied(), 1, 2, false, 2;
    mha_tp2_dp2_zero1_k2: mha_tied(), 2, 2, true, 2;
}

/// Micro-batches that count different numbers of targets (the first row
/// mostly ignored) still give the whole batch's mean: each is a share of
/// the step's count, not its own mean.
#[test]
fn micro_batches_with_different_target_counts_give_the_whole_batchs_mean() {
    check(gqa_odd_vocab(), Parallelism::SINGLE, 2, 6);
    check(gqa_odd_vocab(), layout(2, 2, true), 2, 6);
}

#[test]
fn accumulation_averaged_twice_is_caught() {
    let single = whole(gqa_odd_vocab(), 0);
    let cfg = StepConfig {
        fault: Some(Fault::AccumulationAveragedTwice),
        ..step_config(gqa_odd_vocab(), layout(2, 2, false), EQUAL_IN)
    };
    let diffs = differences(&single, &accumulated(&cfg, 2, 0), F64_RTOL);
    assert_caught(&diffs, "step 0 grad norm");
}

#[test]
fn a_k_that_does_not_divide_the_replicas_batch_is_refused() {
    let cfg = step_config(gqa_odd_vocab(), layout(1, 2, false), Precision::Fp32);
    for k in [3, 1, 0] {
        let e = build_accumulation_steps(&cfg, k).err().unwrap();
        assert!(
            matches!(
                e,
                StepError::Accumulation {
                    micro_batches,
                    per_replica: 2,
                    ..
                } if micro_batches == k
            ),
            "{e}"
        );
    }
}

/// `hlatc train --tp 2 --dp 2 --zero1 --grad-accum 2` gives the
/// single-device run's losses.
/// A step refused on the devices leaves the state as it was, readable:
/// here the micro step compiled by another runtime than the one holding
/// the state, whose buffers it cannot take.
#[test]
fn a_step_refused_on_the_devices_leaves_the_state_readable() {
    let cfg = step_config(ModelConfig::tiny(), Parallelism::SINGLE, Precision::Fp32);
    let steps = build_accumulation_steps(&cfg, 2).unwrap();
    let other = Runtime::with_devices(1).unwrap();
    let programs = [
        other.compile(&steps.micro.module).unwrap(),
        Runtime::shared()
            .unwrap()
            .compile(&steps.apply.module)
            .unwrap(),
    ];
    let params = init_params(&cfg.model, cfg.precision.storage(), 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer =
        Trainer::accumulating_programs(programs, &cfg, [&steps.micro, &steps.apply], 2, params)
            .unwrap();
    let before = trainer.training_state();
    let e = trainer.step(&batch(&cfg, 0, 0)).unwrap_err();
    assert!(
        matches!(
            e,
            hlatc_train::Error::Runtime(hlatc_runtime::RuntimeError::ArgumentRuntime { .. })
        ),
        "{e}"
    );
    assert_eq!(trainer.training_state(), before);
    assert_eq!(trainer.steps_done(), 0);
}
