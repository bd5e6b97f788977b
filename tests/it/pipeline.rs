//! Pipeline parallelism through the CLI: `hlatc train` with stages follows
//! the single-device run, `compile --pp` writes and verifies the four
//! programs, a pipelined state shards and unshards over stages, HLAT's 70B
//! bundle sends by all-gather and checks whole, and pipeline choices
//! without stages are refused. The stages' runs on XLA CPU are the train
//! crate's (`train/tests/it/pipeline.rs`).

/// `hlatc train --pp 2 --tp 2 --grad-accum 2` gives the single-device
/// run's losses and grad norms at each of its 50 steps.
#[test]
fn train_with_stages_follows_the_single_device_run() {
    if crate::support::skip_slow_tests() {
        return;
    }
    crate::sharded::train_follows_the_single_device_run(&[
        "--pp",
        "2",
        "--tp",
        "2",
        "--grad-accum",
        "2",
    ]);
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `compile --pp` writes the four programs, each a complete bundle, and a
/// manifest over them that names each stage's layers and ranks and the
/// schedule; `--verify` reads all four back and runs them as optimizer
/// steps on XLA CPU.
#[test]
fn compile_writes_the_four_programs_and_verifies_them() {
    use crate::support::{hlatc, scratch, stderr, stdout};
    let d = scratch("pipeline-tiny");
    let args = [
        "compile",
        "--out",
        d.to_str().unwrap(),
        "--model",
        "tiny",
        "--target",
        "cpu",
        "--pp",
        "2",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
        "--batch-size",
        "4",
        "--grad-accum",
        "2",
        "--verify",
    ];
    let out = hlatc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    assert!(
        printed.contains("  pipeline      2 stages of 1 layer (0-0, 1-1); 2 micro-batches on a 1F1B-ordered schedule of 5 ticks, bubble 33.3%"),
        "{printed}"
    );
    assert!(
        printed.contains("per rank, each of the 2 stages,"),
        "{printed}"
    );
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(
            printed.contains(&format!("{program}/model.hlo_module.pb decodes")),
            "{printed}"
        );
        assert!(d.join(program).join("model.hlo_module.pb").is_file());
    }
    assert!(
        printed.contains("XLA CPU, the bundle's own module, step 2"),
        "{printed}"
    );
    let m = json(&d.join("manifest.json"));
    assert_eq!(m["format"], "hlatc-bundle/2+pipeline");
    assert_eq!(m["schedule"]["ticks"], 5);
    assert_eq!(m["stages"][1]["layers"], serde_json::json!([1, 2]));
    assert_eq!(m["stages"][1]["ranks"], serde_json::json!([4, 8]));
    assert_eq!(m["config"]["parallel"]["pp"], 2);
    // `check` of the whole checks every program, each under its name.
    let out = hlatc(&["check", d.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checked = stdout(&out);
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(checked.contains(&format!("{program}:\n")), "{checked}");
        let text = d.join(program).join("model.hlo.txt");
        assert!(
            checked.contains(&format!("{}: trn1", text.display())),
            "{checked}"
        );
    }
    assert!(
        checked.contains(": 4 programs, no program refused"),
        "{checked}"
    );
    // A program missing is an incomplete bundle, said of its directory.
    let copy = scratch("pipeline-check-incomplete");
    for program in ["warm_up", "steady", "apply_step"] {
        std::fs::create_dir_all(copy.join(program)).unwrap();
        for f in ["model.hlo_module.pb", "model.hlo.txt"] {
            std::fs::copy(d.join(program).join(f), copy.join(program).join(f)).unwrap();
        }
    }
    let out = hlatc(&["check", copy.to_str().unwrap()]);
    assert_eq!(crate::support::error_code(&out), "artifact.file");
    let _ = std::fs::remove_dir_all(copy);
}

/// `hlatc shard --pp` divides a whole state, or Hugging Face weights,
/// over the stages' ranks, and `unshard` joins them back to the same bytes
/// (from weights, the single-device layout's); a layout that is not the
/// files' is refused.
#[test]
fn shard_and_unshard_round_trip_over_stages() {
    use crate::support::{hlatc, scratch, stderr};
    let d = scratch("pipeline-shard");
    let p = |n: &str| d.join(n).to_str().unwrap().to_string();
    let run = |args: &[&str]| {
        let out = hlatc(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    };
    let whole = p("state.safetensors");
    run(&[
        "train",
        "--model",
        "tiny",
        "--steps",
        "2",
        "--precision",
        "fp32",
        "--pp",
        "2",
        "--save-state",
        &whole,
    ]);
    let layout = [
        "--model",
        "tiny",
        "--precision",
        "fp32",
        "--target",
        "cpu",
        "--pp",
        "2",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
    ];
    let ranks = p("ranks");
    let mut shard = vec!["shard"];
    shard.extend_from_slice(&layout);
    shard.extend_from_slice(&[&whole, "--out", &ranks]);
    run(&shard);
    assert!(d.join("ranks/rank-00007.safetensors").is_file());
    let back = p("back.safetensors");
    let mut unshard = vec!["unshard"];
    unshard.extend_from_slice(&layout);
    unshard.extend_from_slice(&[&ranks, "--out", &back]);
    run(&unshard);
    assert_eq!(
        std::fs::read(&whole).unwrap(),
        std::fs::read(&back).unwrap()
    );
    // Hugging Face weights start a run: over the stages as on one device.
    let weights = p("weights.safetensors");
    run(&[
        "train",
        "--model",
        "tiny",
        "--steps",
        "1",
        "--precision",
        "fp32",
        "--save",
        &weights,
    ]);
    let start = |layout: &[&str], name: &str| {
        let (dir, file) = (p(name), p(&format!("{name}.safetensors")));
        let mut shard = vec!["shard"];
        shard.extend_from_slice(layout);
        shard.extend_from_slice(&[&weights, "--out", &dir]);
        run(&shard);
        let mut unshard = vec!["unshard"];
        unshard.extend_from_slice(layout);
        unshard.extend_from_slice(&[&dir, "--out", &file]);
        run(&unshard);
        std::fs::read(&file).unwrap()
    };
    let single = ["--model", "tiny", "--precision", "fp32", "--target", "cpu"];
    assert_eq!(start(&layout, "staged"), start(&single, "one"));
    let out = hlatc(&[
        "unshard",
        "--model",
        "tiny",
        "--precision",
        "fp32",
        "--target",
        "cpu",
        "--tp",
        "2",
        "--dp",
        "2",
        "--zero1",
        &ranks,
        "--out",
        &back,
    ]);
    assert_eq!(crate::support::error_code(&out), "usage.conflict");
}

/// HLAT's 70B layout compiled for neuron in its default form: the
/// manifest records the form, no program holds a `collective-permute`,
/// and `check` of the directory passes every program, naming all four.
#[test]
fn hlats_70b_bundle_sends_by_all_gather_and_checks_whole() {
    use crate::support::{hlatc, scratch, stderr, stdout};
    let d = scratch("pipeline-70b-neuron");
    let out = hlatc(&[
        "compile",
        "--model",
        "hlat-70b",
        "--tp",
        "32",
        "--pp",
        "8",
        "--dp",
        "8",
        "--sequence-parallel",
        "--zero1",
        "--precision",
        "bf16-master",
        "--batch-size",
        "1024",
        "--grad-accum",
        "128",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let m = json(&d.join("manifest.json"));
    assert_eq!(
        m["form"],
        serde_json::json!({"remat": "core-attention", "send": "all-gather"})
    );
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        let text = std::fs::read_to_string(d.join(program).join("model.hlo.txt")).unwrap();
        assert!(!text.contains("collective-permute"), "{program}");
    }
    let steady = std::fs::read_to_string(d.join("steady").join("model.hlo.txt")).unwrap();
    assert!(steady.contains("all-gather("), "the sends");
    assert!(steady.contains("pipeline.kept.0"), "the kept activations");
    let out = hlatc(&["check", d.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let checked = stdout(&out);
    for program in ["warm_up", "steady", "cool_down", "apply_step"] {
        assert!(checked.contains(&format!("{program}:\n")), "{checked}");
    }
    assert!(
        checked.contains(": 4 programs, no program refused"),
        "{checked}"
    );
    let _ = std::fs::remove_dir_all(d);
}

/// A choice only a pipeline has is refused without stages, by every
/// command that takes it.
#[test]
fn pipeline_choices_without_stages_are_refused() {
    use crate::support::{hlatc, stderr};
    let cases: [(&[&str], &str); 4] = [
        (
            &["compile", "--model", "tiny", "--pp-send", "permute", "--out", "x"],
            "--pp-send permute chooses how pipeline stages send to each other; it needs --pp 2 or more",
        ),
        (
            &["train", "--model", "tiny", "--pp-send", "all-gather"],
            "--pp-send all-gather chooses how pipeline stages send to each other; it needs --pp 2 or more",
        ),
        (
            &["compile", "--model", "tiny", "--remat", "stage", "--out", "x"],
            "--remat stage keeps only each pipeline stage's input; it needs --pp 2 or more (without stages, --remat full-layer keeps the least)",
        ),
        (
            &["opt", "--remat", "stage", "x.hlo"],
            "--remat stage keeps a pipeline stage's input, which only hlatc's own tick programs have",
        ),
    ];
    for (args, said) in cases {
        let out = hlatc(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(said), "{args:?}: {}", stderr(&out));
    }
    let out = hlatc(&[
        "compile",
        "--model",
        "tiny",
        "--pp",
        "2",
        "--pp-send",
        "ring",
        "--out",
        "x",
    ]);
    assert_eq!(crate::support::error_code(&out), "option.pp_send");
}
