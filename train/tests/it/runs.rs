//! Running a step on XLA CPU and comparing two runs of it, what the tests
//! of sharded, accumulated, staged and tiled steps share (the train
//! crate's tests' own; the root crate's tests include this file): the
//! trainer over a few steps of synthetic data, and the bounds two forms of
//! one step agree within (`sharded.rs` says why f64, [`F64_RTOL`] and
//! [`f32_rounding_bound`]), and the NKI kernels a step calls.
#![allow(dead_code)]

use hlatc_compiler::Literal;
use hlatc_models::init::init_params;
use hlatc_models::parallel::Fault;
use hlatc_models::{ModelConfig, Parallelism};
use hlatc_runtime::Runtime;
use hlatc_step::data::SyntheticData;
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{Role, StepConfig};
use hlatc_train::trainer::{StepStats, Trainer};

const STEPS: u64 = 3;
/// Their norm-relative agreement in it: rounding (measured: 5e-14) with
/// four orders of magnitude to spare, and seven below a structural error.
pub(crate) const F64_RTOL: f64 = 1e-10;

/// The norm-relative bound for two f32 runs of one step whose arithmetic
/// differs only in the order of its sums, where the step cannot be built
/// in f64 (bf16 master weights, an f32-only kernel reference).
///
/// Derived from f32 rounding, not from what a machine gave: a sum of `n`
/// terms in any order is within `(n - 1) u` of the exact sum, relative to
/// the sum of the terms' magnitudes, with `u = 2^-24` the unit roundoff
/// (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
/// section 4.2). The tests' steps sum at most [`LONGEST_SUM`] terms (a
/// 512-token softmax, a weight's gradient over a batch's tokens); two
/// orders differ by at most twice that, and Adam's second moment squares
/// a gradient (twice its relative error again): `4 (n - 1) u`, 1.2e-4. A
/// structural error is off by 1e-3 or more.
pub(crate) fn f32_rounding_bound() -> f64 {
    let unit_roundoff = f64::from(f32::EPSILON) / 2.0;
    4.0 * (LONGEST_SUM - 1.0) * unit_roundoff
}

/// The bound two runs of one step in `precision` are compared within:
/// [`F64_RTOL`] in f64, [`f32_rounding_bound`] otherwise.
pub(crate) fn tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::Fp64 => F64_RTOL,
        _ => f32_rounding_bound(),
    }
}

/// The shape of `step`'s input `name`.
pub(crate) fn input_shape(step: &hlatc_step::train_step::TrainStep, name: &str) -> Vec<i64> {
    step.inputs
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no input {name}"))
        .shape
        .clone()
}

/// The most terms any one sum of the tests' steps adds (module docs).
const LONGEST_SUM: f64 = 512.0;

pub(crate) use crate::configs::{gqa_odd_vocab, step_config, EQUAL_IN};

/// Tiny MHA (4 heads, 4 KV heads) with tied embeddings, separate q/k/v.
pub(crate) fn mha_tied() -> ModelConfig {
    ModelConfig {
        num_key_value_heads: 4,
        tie_word_embeddings: true,
        ..ModelConfig::tiny()
    }
}

pub(crate) struct Run {
    pub(crate) stats: Vec<StepStats>,
    pub(crate) trainer: Trainer,
}

pub(crate) fn run(cfg: &StepConfig) -> Run {
    run_with(cfg, crate::cpu_trainers::unoptimized)
}

/// [`run`] with the trainer `start` makes from the runtime, the step's
/// config and its initial parameters.
pub(crate) fn run_with(
    cfg: &StepConfig,
    start: impl FnOnce(&Runtime, &StepConfig, Vec<Literal>) -> Result<Trainer, hlatc_train::Error>,
) -> Run {
    let rt = Runtime::shared().unwrap();
    let params = init_params(&cfg.model, cfg.precision.storage(), 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = start(&rt, cfg, params).unwrap();
    let data = SyntheticData::permutation(cfg.model.vocab_size, 3);
    let stats = (0..STEPS)
        .map(|k| {
            let b = data.batch(k, cfg.batch.batch_size, cfg.batch.seq_len);
            trainer.step(&b).unwrap()
        })
        .collect();
    Run { stats, trainer }
}

/// Three packed steps of `cfg`.
pub(crate) fn run_packed(cfg: &StepConfig) -> Run {
    let rt = Runtime::shared().unwrap();
    let params = init_params(&cfg.model, cfg.precision.storage(), 7)
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut trainer = crate::cpu_trainers::unoptimized(&rt, cfg, params).unwrap();
    let data = SyntheticData::permutation(cfg.model.vocab_size, 3);
    let stats = (0..3)
        .map(|k| {
            let b = data.packed_batch(k, cfg.batch.batch_size, cfg.batch.seq_len);
            trainer.step(&b).unwrap()
        })
        .collect();
    Run { stats, trainer }
}

pub(crate) fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-30)
}

/// Where the sharded run differs from the single-device one by more than
/// `rtol`; empty when they agree.
pub(crate) fn differences(single: &Run, sharded: &Run, rtol: f64) -> Vec<String> {
    let mut out = Vec::new();
    for (k, (s, p)) in single.stats.iter().zip(&sharded.stats).enumerate() {
        for (what, a, b) in [
            ("loss", p.loss, s.loss),
            ("grad norm", p.grad_norm, s.grad_norm),
        ] {
            if rel(a, b) > rtol {
                out.push(format!("step {k} {what}: {a} vs {b}"));
            }
        }
    }
    for role in [
        Role::Parameter,
        Role::MasterWeight,
        Role::AdamM,
        Role::AdamV,
    ] {
        let expected = single.trainer.state(role);
        let actual: std::collections::BTreeMap<String, Literal> =
            sharded.trainer.state(role).into_iter().collect();
        assert_eq!(expected.len(), actual.len(), "{role:?} state");
        for (name, e) in &expected {
            let Some(a) = actual.get(name) else {
                out.push(format!("{name}: missing"));
                continue;
            };
            let r = norm_relative(e, a);
            if r > rtol {
                out.push(format!("{name}: |diff|/|value| {r:e}"));
            }
        }
    }
    out
}

/// `tiled` computes `plain`'s step, both built in `precision`, within
/// its [`tolerance`] (a kernel point's tiles against the plain graph).
pub(crate) fn assert_same_in(precision: Precision, what: &str, plain: &Run, tiled: &Run) {
    let diffs = differences(plain, tiled, tolerance(precision));
    assert!(diffs.is_empty(), "{what}: {}", diffs.join("; "));
    // A step that did nothing would agree too: the state moved.
    assert!(plain.stats[2].loss < plain.stats[0].loss, "{what}");
}

/// `|a - e| / |e|` in the Euclidean norm over the whole tensor.
pub(crate) fn norm_relative(e: &Literal, a: &Literal) -> f64 {
    let (e, a) = (e.to_f64_vec(), a.to_f64_vec());
    let diff: f64 = e.iter().zip(&a).map(|(x, y)| (x - y).powi(2)).sum();
    let norm: f64 = e.iter().map(|x| x * x).sum();
    (diff / norm.max(1e-300)).sqrt()
}

fn max_diff(a: &Literal, b: &Literal) -> f64 {
    assert_eq!(a.dims(), b.dims());
    a.to_f64_vec()
        .iter()
        .zip(b.to_f64_vec())
        .fold(0f64, |m, (x, y)| m.max((x - y).abs()))
}

/// The ranks that hold the same range of a parameter hold the same value.
pub(crate) fn replicas_agree(run: &Run, par: Parallelism) {
    for (name, ranks) in run.trainer.rank_state(Role::Parameter) {
        for r in par.tp..par.world() {
            let twin = &ranks[par.tp_rank(r) as usize];
            assert_eq!(
                max_diff(twin, &ranks[r as usize]),
                0.0,
                "{name}: rank {r} differs from its DP twin"
            );
        }
    }
}

pub(crate) fn check_in(precision: Precision, rtol: f64, model: ModelConfig, par: Parallelism) {
    let single = run(&step_config(model.clone(), Parallelism::SINGLE, precision));
    let sharded = run(&step_config(model, par, precision));
    let diffs = differences(&single, &sharded, rtol);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    replicas_agree(&sharded, par);
    // A step that did nothing would agree too: the state moved.
    assert!(single.stats[2].loss < single.stats[0].loss);
}

/// `fault` built into the step `par` divides: what differs from the
/// single-device run.
pub(crate) fn broken_in(fault: Fault, model: ModelConfig, par: Parallelism) -> Vec<String> {
    let single = run(&step_config(model.clone(), Parallelism::SINGLE, EQUAL_IN));
    let cfg = StepConfig {
        fault: Some(fault),
        ..step_config(model, par, EQUAL_IN)
    };
    differences(&single, &run(&cfg), F64_RTOL)
}

pub(crate) fn assert_caught(diffs: &[String], expect: &str) {
    assert!(
        diffs.iter().any(|d| d.contains(expect)),
        "expected a difference in {expect}, got: {diffs:?}"
    );
}

/// The `func_name` of every NKI kernel call in `m`, in order.
pub(crate) fn native_kernels(m: &hlatc_compiler::Module) -> Vec<String> {
    use hlatc_passes::native_kernel::NativeKernelConfig;
    m.computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| c.instr(id)))
        .filter_map(NativeKernelConfig::of)
        .map(|config| config.unwrap().func_name)
        .collect()
}
