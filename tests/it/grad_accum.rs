//! Gradient accumulation: K micro-batches per optimizer step, two
//! programs. The accumulated step computes what the single-device step
//! computes on the whole batch, in f64 to the sharded checks' 1e-10 (by each
//! tensor's norm, `train/tests/it/sharded.rs` says why), also when the micro-batches
//! count different numbers of targets; averaging the micro-batches again
//! is caught.

use crate::sharded::{
    assert_caught, differences, gqa_odd_vocab, mha_tied, step_config,
    train_follows_the_single_device_run, Run, EQUAL_IN, F64_RTOL,
};
use crate::support::{assert_code, hlatc, scratch, stderr, stdout};
use hlatc::compiler::Literal;
use hlatc::data::{Batch, SyntheticData};
use hlatc::grad_accum::build_accumulation_steps;
use hlatc::models::init::init_params;
use hlatc::models::parallel::Fault;
use hlatc::models::{ModelConfig, Parallelism, IGNORE_INDEX};
use hlatc::passes::RematPolicy;
use hlatc::precision::Precision;
use hlatc::runtime::Runtime;
use hlatc::train_step::{StepConfig, StepError};
use hlatc::trainer::Trainer;

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
#[test]
fn train_with_zero1_and_accumulation_follows_the_single_device_run() {
    train_follows_the_single_device_run(&[
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
        "--grad-accum",
        "2",
    ]);
}

fn compile_in(dir: &std::path::Path, extra: &[&str]) -> String {
    let mut args = vec!["compile", "--out", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = hlatc(&args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `compile --grad-accum` writes both programs, each a complete bundle,
/// and a manifest over them; `--verify` reads both back and runs them as
/// optimizer steps on XLA CPU.
#[test]
fn compile_writes_the_two_programs_and_verifies_them() {
    let d = scratch("grad-accum-tiny");
    let printed = compile_in(
        &d,
        &[
            "--model",
            "tiny",
            "--target",
            "cpu",
            "--tp",
            "2",
            "--dp",
            "2",
            "--batch-size",
            "4",
            "--zero1",
            "--grad-accum",
            "2",
            "--verify",
        ],
    );
    assert!(
        printed.contains("  accumulation  2 micro-batches per step: micro_step/ runs 2 times"),
        "{printed}"
    );
    assert!(printed.contains("gradient accumulators"), "{printed}");
    assert!(
        printed.contains("micro_step/model.hlo_module.pb decodes"),
        "{printed}"
    );
    assert!(
        printed.contains("apply_step/model.hlo_module.pb decodes"),
        "{printed}"
    );
    assert!(
        printed.contains("XLA CPU, the bundle's own module, step 2"),
        "{printed}"
    );
    let top = json(&d.join("manifest.json"));
    assert_eq!(top["format"], "hlatc-bundle/2+accumulation");
    assert_eq!(top["micro_batches"], 2);
    for (k, sub) in ["micro_step", "apply_step"].iter().enumerate() {
        let m = json(&d.join(sub).join("manifest.json"));
        assert_eq!(top["programs"][k]["sha256"], m["module"]["sha256"], "{sub}");
        // One spelling: each program is named as its folder.
        assert_eq!(top["programs"][k]["name"], *sub);
        assert_eq!(top["programs"][k]["dir"], *sub);
    }
    // The micro step reads the step's token count and a K-th of the batch.
    let micro = json(&d.join("micro_step/manifest.json"));
    let inputs = micro["inputs"].as_array().unwrap();
    assert!(inputs.iter().any(|i| i["role"] == "token_count"));
    let tokens = inputs.iter().find(|i| i["role"] == "tokens").unwrap();
    assert_eq!(tokens["shape"], serde_json::json!([1, 16]));
    // Each program runs alone from its roles' start values.
    for sub in ["micro_step", "apply_step"] {
        let out = hlatc(&["run", d.join(sub).to_str().unwrap()]);
        assert!(out.status.success(), "{sub}: {}", stderr(&out));
        assert!(stdout(&out).contains("grad.model.norm.weight"), "{sub}");
    }
    // A one-program reader refuses the pair by name.
    let e = stderr(&hlatc(&["run", d.to_str().unwrap()]));
    assert_code(&e, "artifact.file");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A model whose state does not fit host memory is verified through its
/// miniature, accumulated the same way; on neuron both programs pass the
/// pre-flight, and `check` of the bundle checks both.
#[test]
fn a_large_accumulating_bundle_verifies_through_its_miniature() {
    let d = scratch("grad-accum-1b");
    let printed = compile_in(
        &d,
        &[
            "--model",
            "llama3.2-1b",
            "--seq-len",
            "256",
            "--tp",
            "2",
            "--dp",
            "2",
            "--batch-size",
            "4",
            "--zero1",
            "--grad-accum",
            "2",
            "--device-memory",
            "none",
            "--verify",
        ],
    );
    assert!(
        printed.contains("XLA CPU, its miniature (same structure, toy widths), step 2"),
        "{printed}"
    );
    assert!(printed.contains("  pre-flight    trn1"), "{printed}");
    assert_eq!(
        printed.matches("  next          cd ").count(),
        2,
        "{printed}"
    );
    // `check` of the whole checks both programs, each under its name.
    let whole = hlatc(&["check", d.to_str().unwrap()]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let checked = stdout(&whole);
    assert!(
        checked.contains("micro_step:\n") && checked.contains("apply_step:\n"),
        "{checked}"
    );
    assert!(
        checked.contains(": 2 programs, no program refused"),
        "{checked}"
    );
    let ok = hlatc(&["check", d.join("apply_step").to_str().unwrap()]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    std::fs::remove_dir_all(&d).unwrap();
}

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
            hlatc::train::Error::Runtime(hlatc::runtime::RuntimeError::ArgumentRuntime { .. })
        ),
        "{e}"
    );
    assert_eq!(trainer.training_state(), before);
    assert_eq!(trainer.steps_done(), 0);
}
