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

use hlatc::compiler::Literal;
use hlatc::data::SyntheticData;
use hlatc::models::init::init_params;
use hlatc::models::parallel::Fault;
use hlatc::models::{ModelConfig, Parallelism};
use hlatc::precision::Precision;
use hlatc::runtime::Runtime;
use hlatc::train_step::{Role, StepConfig};
use hlatc::trainer::{StepStats, Trainer};

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
pub(crate) fn input_shape(step: &hlatc::train_step::TrainStep, name: &str) -> Vec<i64> {
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
    start: impl FnOnce(&Runtime, &StepConfig, Vec<Literal>) -> Result<Trainer, hlatc::train::Error>,
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

pub(crate) fn check_in(precision: Precision, rtol: f64, model: ModelConfig, par: Parallelism) {
    let single = run(&step_config(model.clone(), Parallelism::SINGLE, precision));
    let sharded = run(&step_config(model, par, precision));
    let diffs = differences(&single, &sharded, rtol);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    replicas_agree(&sharded, par);
    // A step that did nothing would agree too: the state moved.
    assert!(single.stats[2].loss < single.stats[0].loss);
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

/// `hlatc train` with these extra flags: every step's loss and grad norm
/// from its `--metrics`.
fn train_metrics(extra: &[&str]) -> Vec<(f64, f64)> {
    let dir = tempfile_dir();
    let metrics = dir.join(format!("metrics{}.csv", extra.join("")));
    let mut args = vec![
        "train",
        "--model",
        "tiny",
        "--steps",
        "50",
        "--precision",
        EQUAL_IN.name(),
    ];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args(&args)
        .arg("--metrics")
        .arg(&metrics)
        .arg("--save")
        .arg(saved(extra))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    let text = std::fs::read_to_string(&metrics).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

/// Where the run with these flags saves its weights.
fn saved(extra: &[&str]) -> std::path::PathBuf {
    tempfile_dir().join(format!("weights{}.safetensors", extra.join("")))
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hlatc-sharded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `train` with `extra` flags gives the single-device run's loss and grad
/// norm at every one of its 50 steps, in f64 to 1e-10; returns the single-device
/// run's.
pub(crate) fn train_follows_the_single_device_run(extra: &[&str]) -> Vec<(f64, f64)> {
    let single = train_metrics(&[]);
    let other = train_metrics(extra);
    assert_eq!(single.len(), 50);
    assert_eq!(other.len(), 50);
    for (k, (s, p)) in single.iter().zip(&other).enumerate() {
        assert!(
            rel(p.0, s.0) <= F64_RTOL,
            "{extra:?}: step {k} loss {} vs {}",
            p.0,
            s.0
        );
        assert!(
            rel(p.1, s.1) <= F64_RTOL,
            "{extra:?}: step {k} grad norm {} vs {}",
            p.1,
            s.1
        );
    }
    single
}

#[test]
fn train_on_four_devices_follows_the_single_device_run() {
    let single = train_follows_the_single_device_run(&["--tp", "2", "--dp", "2"]);
    // It trained: the last loss is a fraction of the first.
    assert!(single[49].0 < 0.5 * single[0].0);
    // And saved the same Hugging Face tensors, gathered from the ranks.
    let read = |p: std::path::PathBuf| hlatc::runtime::read_safetensors(&p).unwrap();
    let (one, four) = (read(saved(&[])), read(saved(&["--tp", "2", "--dp", "2"])));
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        four.keys().collect::<Vec<_>>()
    );
    for (name, t) in &one {
        let r = norm_relative(t, &four[name]);
        assert!(r <= F64_RTOL, "{name}: {r:e}");
    }
}

/// `hlatc compile` with `args`: its exit status and stderr.
pub(crate) fn compile_error(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .arg("compile")
        .args(args)
        .arg("--out")
        .arg(tempfile_dir().join("never"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "{args:?} compiled");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn divisions_that_do_not_divide_are_refused_with_their_numbers() {
    let e = compile_error(&["--model", "tiny", "--tp", "3"]);
    assert!(
        e.contains("--tp 3 does not divide the query heads (4)"),
        "{e}"
    );
    // Without --batch-size each DP replica takes one sequence.
    let e = compile_error(&[
        "--model",
        "hlat-7b",
        "--tp",
        "8",
        "--dp",
        "2",
        "--batch-size",
        "1",
    ]);
    assert!(
        e.contains("--dp 2 does not divide the global batch of 1 sequences"),
        "{e}"
    );
    let e = compile_error(&["--model", "tiny", "--tp", "0"]);
    crate::support::assert_code(&e, "option.tp");
    let e = compile_error(&["--model", "tiny", "--sequence-parallel"]);
    crate::support::assert_code(&e, "artifact.step.parallel");
    let e = compile_error(&[
        "--model",
        "tiny",
        "--tp",
        "4",
        "--batch-size",
        "1",
        "--seq-len",
        "2",
        "--sequence-parallel",
    ]);
    assert!(e.contains("splits each rank's 2 tokens"), "{e}");
    // Qwen2-0.5B: 14 query heads over 2 KV heads; TP 7 divides the
    // heads, but 2 KV heads cannot be spread over 7 ranks.
    let e = compile_error(&["--model", "qwen2-0.5b", "--tp", "7"]);
    assert!(e.contains("--tp 7 and the 2 key/value heads"), "{e}");
    let e = compile_error(&["--model", "qwen2-0.5b", "--tp", "2", "--dp", "0"]);
    crate::support::assert_code(&e, "option.dp");
}

#[test]
fn run_of_a_sharded_bundle_runs_every_rank() {
    let dir = tempfile_dir().join("bundle-tp2");
    let hlatc = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"))
            .args(args)
            .output()
            .unwrap()
    };
    let bundle = dir.to_str().unwrap();
    let out = hlatc(&[
        "compile", "--model", "tiny", "--tp", "2", "--target", "cpu", "--out", bundle,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The proto has no replica count: the manifest's world size says 2.
    let out = hlatc(&["run", bundle]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("on 2 devices") && text.contains("rank 1"),
        "{text}"
    );
    // Each rank starts from its share of the model's initialization, so
    // both compute the loss of an untrained model.
    let losses: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with("loss "))
        .map(|l| l.rsplit('=').next().unwrap().trim().parse().unwrap())
        .collect();
    assert_eq!(losses.len(), 2, "{text}");
    assert_eq!(losses[0], losses[1]);
    assert!(
        (losses[0] - 64f64.ln()).abs() < 0.1 * 64f64.ln(),
        "{losses:?}"
    );
    let out = hlatc(&["run", bundle, "--devices", "4"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains('4') && text.contains('2'),
        "{text}"
    );
}
