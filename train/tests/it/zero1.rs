//! ZeRO-1, master weights and replicated weights that stay replicated.
//!
//! ZeRO-1 divides the optimizer state over the DP replicas; the step it
//! builds computes what the single-device step computes on the same
//! global batch, in f64 to the same 1e-10 norm-relative tolerance as the
//! other sharded steps (`sharded.rs`, which says why not element by element),
//! with the Adam state gathered back from its shards. A shard updated
//! with another shard's gradient, and replicated weights rounded with
//! different random bits, are each caught. Training and refusing ZeRO-1
//! through the CLI is the root crate's (`tests/it/sharded.rs`).

use crate::runs::{
    assert_caught, broken_in, check_in, differences, f32_rounding_bound, gqa_odd_vocab, mha_tied,
    norm_relative, run, step_config, Run, EQUAL_IN, F64_RTOL,
};
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, ModelConfig, Parallelism, TpSplit};
use hlatc_passes::RematPolicy;
use hlatc_runtime::Runtime;
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, Role, StepConfig};
use hlatc_train::trainer::Trainer;

fn zero1(tp: i64, dp: i64, sequence_parallel: bool) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1: true,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

macro_rules! zero1_equals_unsharded {
    ($($name:ident: $model:expr, $tp:expr, $dp:expr, $sp:expr;)*) => {$(
        #[test]
        fn $name() {
            check_in(EQUAL_IN, F64_RTOL, $model, zero1($tp, $dp, $sp));
        }
    )*};
}

zero1_equals_unsharded! {
    gqa_zero1_dp2: gqa_odd_vocab(), 1, 2, false;
    gqa_zero1_tp2_dp2: gqa_odd_vocab(), 2, 2, false;
    gqa_zero1_tp4_dp2: gqa_odd_vocab(), 4, 2, false;
    gqa_zero1_tp4_dp2_sp: gqa_odd_vocab(), 4, 2, true;
    mha_zero1_dp2: mha_tied(), 1, 2, false;
    mha_zero1_tp2_dp2: mha_tied(), 2, 2, false;
    mha_zero1_tp4_dp2: mha_tied(), 4, 2, false;
}

#[test]
fn the_optimizer_state_is_divided_over_the_replicas() {
    let model = gqa_odd_vocab();
    let step = build_train_step(&step_config(
        model.clone(),
        zero1(2, 2, false),
        Precision::Fp32,
    ))
    .unwrap();
    let shape = |name: &str| crate::runs::input_shape(&step, name);
    // The embedding's TP share is 32 of the 63 rows padded to 64, each of
    // hidden_size 32: 1024 elements, 512 on each replica.
    assert_eq!(model.hidden_size, 32);
    assert_eq!(shape("model.embed_tokens.weight"), vec![32, 32]);
    assert_eq!(shape("adam_m.model.embed_tokens.weight"), vec![512]);
    assert_eq!(shape("adam_v.model.embed_tokens.weight"), vec![512]);
    // A norm weight of 32, replicated over TP, is halved by DP.
    assert_eq!(shape("adam_m.model.norm.weight"), vec![16]);
    // One reduce-scatter per bucket replaces the all-reduce of the
    // gradients over the replicas, and one all-gather brings the
    // parameters back.
    let count = |opcode: &str| {
        step.module
            .entry()
            .ids()
            .filter(|&id| step.module.entry().instr(id).op.opcode() == opcode)
            .count()
    };
    assert_eq!(count("reduce-scatter"), 1);
    assert_eq!(count("all-gather"), 1);
    assert_eq!(model.vocab_size, 63);
}

#[test]
fn a_shard_updated_with_another_shards_gradient_is_caught() {
    let diffs = broken_in(
        Fault::ShardUpdatedWithAnothersGradient,
        gqa_odd_vocab(),
        zero1(2, 2, false),
    );
    assert_caught(&diffs, "adam_m.model.embed_tokens.weight");
    assert_caught(&diffs, "model.norm.weight");
}

/// A trainer of `cfg`'s step (bf16 weights) through the cpu pipeline, as
/// `hlatc compile --target cpu` builds it, from the initialization of seed 7.
fn bf16_trainer(cfg: &StepConfig) -> Trainer {
    let rt = Runtime::shared().unwrap();
    let params = hlatc_models::init::init_params(&cfg.model, ElementType::Bf16, 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    crate::cpu_trainers::optimized(&rt, cfg, RematPolicy::None, params).unwrap()
}

/// `run` of `cfg`'s step in `precision` with master weights.
fn master_config(model: ModelConfig, par: Parallelism) -> StepConfig {
    step_config(model, par, Precision::Bf16Master)
}

/// Where `sharded` differs from `single` once the bf16 parameters are set
/// aside: they are the master weights rounded to nearest, so a master
/// weight a rounding apart (1e-7) can round to the next bf16 value. The
/// master weights are f32 whatever the step, so they compare within f32's
/// rounding.
fn differences_beside_bf16_parameters(single: &Run, sharded: &Run) -> Vec<String> {
    let params: Vec<String> = single
        .trainer
        .state(Role::Parameter)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    differences(single, sharded, f32_rounding_bound())
        .into_iter()
        .filter(|d| !params.iter().any(|p| d.starts_with(&format!("{p}:"))))
        .collect()
}

#[test]
fn master_weights_under_zero1_equal_the_single_device_step() {
    for (model, par) in [
        (gqa_odd_vocab(), zero1(2, 2, false)),
        (mha_tied(), zero1(1, 2, false)),
    ] {
        let single = run(&master_config(model.clone(), Parallelism::SINGLE));
        let sharded = run(&master_config(model, par));
        let diffs = differences_beside_bf16_parameters(&single, &sharded);
        assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
        // The bf16 parameters are within a bf16 rounding of each other.
        for ((name, e), (_, a)) in single
            .trainer
            .state(Role::Parameter)
            .iter()
            .zip(sharded.trainer.state(Role::Parameter))
        {
            let r = norm_relative(e, &a);
            assert!(r <= 1.0 / 256.0, "{par} {name}: {r:e}");
        }
        assert!(single.stats[2].loss < single.stats[0].loss);
    }
}

#[test]
fn master_weights_are_f32_and_the_weights_are_them_rounded_to_nearest() {
    let cfg = master_config(gqa_odd_vocab(), zero1(2, 2, false));
    let mut trainer = bf16_trainer(&cfg);
    let data = hlatc_step::data::SyntheticData::permutation(cfg.model.vocab_size, 3);
    for k in 0..3 {
        trainer
            .step(&data.batch(k, cfg.batch.batch_size, cfg.batch.seq_len))
            .unwrap();
    }
    let masters = trainer.state(Role::MasterWeight);
    let weights = trainer.params();
    assert_eq!(masters.len(), weights.len());
    for ((name, master), (_, weight)) in masters.iter().zip(&weights) {
        assert_eq!(master.ty(), ElementType::F32, "{name}");
        assert_eq!(weight.ty(), ElementType::Bf16, "{name}");
        let rounded = master.clone().converted(ElementType::Bf16).unwrap();
        assert_eq!(
            &rounded, weight,
            "{name}: not its master rounded to nearest"
        );
    }
    // The updates are smaller than a bf16 step for some weights: the
    // masters hold what bf16 cannot.
    let lost = masters
        .iter()
        .zip(&weights)
        .any(|((_, m), (_, w))| m != &w.clone().converted(ElementType::F32).unwrap());
    assert!(lost);
}

/// The names of the parameters every TP rank holds whole.
fn replicated_names(model: &ModelConfig) -> Vec<String> {
    param_specs(model)
        .into_iter()
        .filter(|p| p.tp == TpSplit::Replicated)
        .map(|p| p.name)
        .collect()
}

/// 20 steps of `bf16-pure` (stochastic rounding on every weight and moment
/// update) at TP 2, through the cpu pipeline: where each replicated
/// parameter differs between the TP ranks.
fn drift(fault: Option<Fault>) -> Vec<String> {
    let par = Parallelism {
        tp: 2,
        ..Parallelism::SINGLE
    };
    let cfg = StepConfig {
        fault,
        ..step_config(mha_tied(), par, Precision::Bf16Pure)
    };
    let mut trainer = bf16_trainer(&cfg);
    let data = hlatc_step::data::SyntheticData::permutation(cfg.model.vocab_size, 3);
    let start = trainer.rank_state(Role::Parameter);
    for k in 0..20 {
        trainer
            .step(&data.batch(k, cfg.batch.batch_size, cfg.batch.seq_len))
            .unwrap();
    }
    let replicated = replicated_names(&cfg.model);
    assert!(replicated.len() >= 5, "{replicated:?}");
    let mut out = Vec::new();
    for ((name, ranks), (_, before)) in trainer.rank_state(Role::Parameter).iter().zip(&start) {
        if !replicated.contains(name) {
            continue;
        }
        assert_ne!(ranks[0], before[0], "{name} never moved");
        if !bit_identical(&ranks[0], &ranks[1]) {
            out.push(name.clone());
        }
    }
    out
}

fn bit_identical(a: &Literal, b: &Literal) -> bool {
    a.dims() == b.dims() && a.bytes() == b.bytes()
}

#[test]
fn replicated_weights_stay_identical_on_every_tp_rank_under_stochastic_rounding() {
    let drifted = drift(None);
    assert!(drifted.is_empty(), "drifted apart: {drifted:?}");
}

#[test]
fn replicated_weights_rounded_with_different_bits_are_caught() {
    let drifted = drift(Some(Fault::RoundingSeededPerRank));
    assert!(
        drifted.iter().any(|n| n.contains("norm")),
        "expected the norm weights to drift: {drifted:?}"
    );
}
