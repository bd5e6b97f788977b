//! `train --save-state` and `--resume`: a run stopped and resumed is the
//! run that never stopped, bit for bit, sharded and under ZeRO-1 too; the
//! state is whole tensors, so it resumes into another layout; a state of
//! another precision or projection layout is refused by name.

use crate::support::{assert_code, error_code, hlatc, scratch, stderr, stdout};
use hlatc::compiler::Literal;
use hlatc::runtime::read_safetensors;
use std::collections::BTreeMap;
use std::path::Path;

/// `hlatc ARGS...` run in `dir`.
fn hlatc_at(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// `hlatc ARGS...` run in `dir`, which must succeed; its stdout.
fn hlatc_in(dir: &Path, args: &[&str]) -> String {
    let out = hlatc_at(dir, args);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// `hlatc ARGS...` run in `dir`, which must fail; its stderr.
fn refused_in(dir: &Path, args: &[&str]) -> String {
    let out = hlatc_at(dir, args);
    assert!(!out.status.success(), "{args:?} was accepted");
    stderr(&out)
}

/// `hlatc train --steps 6 ARGS...`, which must succeed; its stdout.
fn train(dir: &Path, args: &[&str]) -> String {
    hlatc_in(dir, &[&["train", "--steps", "6"][..], args].concat())
}

/// The rows of a metrics file from step `from` on.
fn rows_from(path: &Path, from: usize) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(from)
        .map(str::to_string)
        .collect()
}

/// Stops at step 3, resumes to 6, and checks both the metrics of steps 4
/// to 6 and the final state file against a run that never stopped.
fn stopped_and_resumed_is_uninterrupted(name: &str, layout: &[&str]) {
    let d = scratch(name);
    let with = |extra: &[&str]| -> Vec<String> {
        layout.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |extra: &[&str]| {
        let args = with(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        train(&d, &args)
    };
    run(&["--metrics", "full.csv", "--save-state", "full.st"]);
    run(&["--stop-after", "3", "--save-state", "half.st"]);
    let resumed = run(&[
        "--resume",
        "half.st",
        "--metrics",
        "resumed.csv",
        "--save-state",
        "resumed.st",
    ]);
    assert!(resumed.contains("step 4/6"), "{resumed}");
    assert!(!resumed.contains("step 3/6"), "{resumed}");
    assert_eq!(
        rows_from(&d.join("resumed.csv"), 1),
        rows_from(&d.join("full.csv"), 4)
    );
    assert_eq!(
        std::fs::read(d.join("resumed.st")).unwrap(),
        std::fs::read(d.join("full.st")).unwrap(),
        "{name}: the resumed run's state differs from the uninterrupted run's"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_resumed_run_is_the_run_that_never_stopped() {
    if crate::support::skip_slow_tests() {
        return;
    }
    // Stochastic rounding: the RNG state is part of the checkpoint.
    stopped_and_resumed_is_uninterrupted("single", &["--precision", "bf16-pure"]);
}

/// The gradient accumulators are zero between optimizer steps and not
/// saved: an accumulating run resumes bit for bit too.
#[test]
fn a_resumed_accumulating_run_is_the_run_that_never_stopped() {
    if crate::support::skip_slow_tests() {
        return;
    }
    stopped_and_resumed_is_uninterrupted(
        "accumulating",
        &["--precision", "bf16-pure", "--dp", "2", "--grad-accum", "2"],
    );
}

#[test]
fn a_resumed_zero1_run_is_the_run_that_never_stopped() {
    stopped_and_resumed_is_uninterrupted(
        "zero1",
        &[
            "--precision",
            "bf16-master",
            "--tp",
            "2",
            "--dp",
            "2",
            "--zero1",
        ],
    );
}

fn norm_relative(expected: &Literal, actual: &Literal) -> f64 {
    let (e, a) = (expected.to_f64_vec(), actual.to_f64_vec());
    let diff: f64 = e
        .iter()
        .zip(&a)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = e.iter().map(|x| x * x).sum::<f64>().sqrt();
    diff / norm.max(f64::MIN_POSITIVE)
}

/// The state is whole tensors: a ZeRO-1 run's saved state is the
/// single-device run's state to 2e-5 (by each tensor's norm, as the
/// sharded checks compare), and a single device resumes it.
#[test]
fn a_sharded_state_is_whole_and_resumes_on_one_device() {
    let d = scratch("layouts");
    let fp32 = ["--precision", "fp32", "--stop-after", "3", "--save-state"];
    train(&d, &[&fp32[..], &["single.st"]].concat());
    train(
        &d,
        &[
            &fp32[..],
            &["sharded.st", "--tp", "2", "--dp", "2", "--zero1"],
        ]
        .concat(),
    );
    let single: BTreeMap<String, Literal> = read_safetensors(&d.join("single.st")).unwrap();
    let sharded: BTreeMap<String, Literal> = read_safetensors(&d.join("sharded.st")).unwrap();
    assert_eq!(
        single.keys().collect::<Vec<_>>(),
        sharded.keys().collect::<Vec<_>>()
    );
    for (name, e) in &single {
        let a = &sharded[name];
        assert_eq!(e.dims(), a.dims(), "{name}");
        let r = norm_relative(e, a);
        // The ranks sum the gradients' partial products in another order,
        // and that order follows the vector width XLA CPU compiles for:
        // the worst tensor (an Adam moment) is 1.05e-5 on an AMD EPYC host
        // without AVX-512, where the hosts before measured under 1e-5 (the
        // binary of the commit before was checked to write the same bytes
        // there).
        assert!(r <= 2e-5, "{name}: {r:e}");
    }
    let resumed = train(&d, &["--precision", "fp32", "--resume", "sharded.st"]);
    assert!(resumed.contains("step 6/6"), "{resumed}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_state_of_another_precision_or_layout_is_refused_by_name() {
    let d = scratch("refused");
    train(
        &d,
        &[
            "--precision",
            "bf16-master",
            "--stop-after",
            "3",
            "--save-state",
            "master.st",
        ],
    );
    let refuse = |args: &[&str]| refused_in(&d, &[&["train"][..], args].concat());
    let e = refuse(&[
        "--steps",
        "6",
        "--precision",
        "bf16-mixed",
        "--resume",
        "master.st",
    ]);
    // The state records its run: the precision is named with both values.
    assert!(
        e.contains("master.st was written by another run: precision is bf16-master in the checkpoint, bf16-mixed now"),
        "{e}"
    );
    let e = refuse(&[
        "--steps",
        "6",
        "--precision",
        "bf16-master",
        "--separate-projections",
        "--resume",
        "master.st",
    ]);
    assert_code(&e, "artifact.identity.changed");
    let e = refuse(&[
        "--precision",
        "bf16-master",
        "--steps",
        "3",
        "--resume",
        "master.st",
    ]);
    assert_code(&e, "usage.conflict");
    let e = refuse(&["--steps", "6", "--stop-after", "7"]);
    assert_code(&e, "usage.out_of_range");
    let e = refuse(&[
        "--steps",
        "6",
        "--resume",
        "master.st",
        "--init",
        "master.st",
    ]);
    assert_code(&e, "cli.argument_conflict");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_state_file_is_refused_when_missing() {
    let o = hlatc(&["train", "--steps", "2", "--resume", "/nonexistent/state.st"]);
    assert_eq!(error_code(&o), "artifact.tensors.io");
}

/// A ZeRO-1 run's state divided into rank files and joined back is the
/// same file byte for byte, through its own layout and through another;
/// rank files read as another layout are refused naming the tensor.
#[test]
fn shard_and_unshard_give_back_the_state() {
    let d = scratch("shards");
    let zero1 = [
        "--precision",
        "bf16-master",
        "--target",
        "cpu",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
    ];
    train(
        &d,
        &[
            "--precision",
            "bf16-master",
            "--tp",
            "2",
            "--dp",
            "2",
            "--zero1",
            "--stop-after",
            "3",
            "--save-state",
            "s.st",
        ],
    );
    hlatc_in(
        &d,
        &[&["shard", "s.st", "--out", "ranks"][..], &zero1].concat(),
    );
    let rank0: BTreeMap<String, Literal> =
        read_safetensors(&d.join("ranks/rank-00000.safetensors")).unwrap();
    // A rank holds a quarter-ish shard of each moment, its share of each weight.
    let m = &rank0["adam_m.model.layers.0.mlp.down_proj.weight"];
    let w = &rank0["model.layers.0.mlp.down_proj.weight"];
    assert_eq!(m.dims().len(), 1);
    assert_eq!(m.dims()[0] * 2, w.dims().iter().product::<i64>());
    assert!(!d.join("ranks/rank-00004.safetensors").exists());
    hlatc_in(
        &d,
        &[&["unshard", "ranks", "--out", "back.st"][..], &zero1].concat(),
    );
    assert_eq!(
        std::fs::read(d.join("back.st")).unwrap(),
        std::fs::read(d.join("s.st")).unwrap()
    );
    // Through another layout: TP 1 x DP 4.
    let other = [
        "--precision",
        "bf16-master",
        "--target",
        "cpu",
        "--dp",
        "4",
        "--zero1",
    ];
    hlatc_in(
        &d,
        &[&["shard", "s.st", "--out", "dp4"][..], &other].concat(),
    );
    hlatc_in(
        &d,
        &[&["unshard", "dp4", "--out", "back4.st"][..], &other].concat(),
    );
    assert_eq!(
        std::fs::read(d.join("back4.st")).unwrap(),
        std::fs::read(d.join("s.st")).unwrap()
    );
    // Rank files of one layout read as another: refused by name.
    let e = refused_in(
        &d,
        &[&["unshard", "dp4", "--out", "x.st"][..], &zero1].concat(),
    );
    assert_code(&e, "artifact.state_metadata.wrong_layout");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Hugging Face weights shard as the start of a run: each rank's share of
/// the weights, master weights the weights widened, zero moments.
#[test]
fn hugging_face_weights_shard_as_a_fresh_start() {
    let d = scratch("weights");
    train(
        &d,
        &["--precision", "fp32", "--stop-after", "2", "--save", "w.st"],
    );
    let tp2 = ["--precision", "bf16-master", "--tp", "2"];
    hlatc_in(
        &d,
        &[&["shard", "w.st", "--out", "ranks"][..], &tp2].concat(),
    );
    let rank1: BTreeMap<String, Literal> =
        read_safetensors(&d.join("ranks/rank-00001.safetensors")).unwrap();
    assert_eq!(rank1["step"].to_i64_vec(), vec![0]);
    let m = &rank1["adam_m.model.norm.weight"];
    assert!(m.to_f64_vec().iter().all(|&x| x == 0.0));
    let master = &rank1["master.model.norm.weight"];
    let weight = &rank1["model.norm.weight"];
    assert_eq!(master.clone().converted(weight.ty()).unwrap(), *weight);
    std::fs::remove_dir_all(&d).unwrap();
}
