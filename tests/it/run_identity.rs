//! Nothing resumes into the wrong run (issue 59): a checkpoint records the
//! run's identity and a resume that differs is refused naming each field,
//! unless allowed by name; tokenizers are known by content and checked by
//! their highest id; one run holds a checkpoint directory; rank files say
//! whose they are; and the unclear errors of the issue read plainly.
//!
//! Every process these tests start is waited for with a timeout.

use crate::corpus::word_corpus;
use crate::support::{assert_code, hlatc_within, scratch, WORD_TOKENIZER};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The longest any one `hlatc` here may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// `hlatc ARGS...` in `dir`, failed if it runs past [`TIMEOUT`].
fn run_in(dir: &Path, args: &[&str]) -> Output {
    hlatc_within(Some(dir), args, TIMEOUT)
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// Must succeed; its stderr (the notes and warnings).
fn ok(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    text(&o.stderr)
}

/// Must fail with status 1 and one `error:` line; that line.
fn refused(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    let e = text(&o.stderr);
    assert!(!o.status.success(), "{args:?} was accepted: {e}");
    assert!(!e.contains("panicked"), "{e}");
    e
}

/// `unshard` of the rank files in `dir/ranks` with `layout` gives back
/// `dir/whole`, byte for byte: the state divided, metadata and all.
fn unshards_back(dir: &Path, ranks: &str, layout: &[&str], whole: &str) {
    ok(
        dir,
        &[&["unshard", ranks, "--out", "back.st"][..], layout].concat(),
    );
    assert_eq!(
        std::fs::read(dir.join("back.st")).unwrap(),
        std::fs::read(dir.join(whole)).unwrap()
    );
}

/// A copy of the tiny parity config with `rope_theta`, in `dir`.
fn config(dir: &Path, name: &str, rope_theta: f64) -> String {
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/parity/tiny/config.json"
    );
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    v["rope_theta"] = serde_json::json!(rope_theta);
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path.display().to_string()
}

const SHORT: [&str; 6] = ["train", "--steps", "6", "--stop-after", "3", "--seed"];

#[test]
fn a_checkpoint_of_another_rope_theta_is_refused_unless_allowed_by_name() {
    let d = scratch("identity-rope");
    let (c10k, c500k) = (
        config(&d, "c10k.json", 10000.0),
        config(&d, "c500k.json", 500000.0),
    );
    ok(
        &d,
        &[
            &SHORT[..],
            &["1", "--config", &c10k, "--checkpoint-dir", "ck"],
        ]
        .concat(),
    );
    // The resume, under rope_theta 500000, with what follows.
    let resume = |more: &[&'static str]| -> Vec<String> {
        let run = ["train", "--steps", "6", "--seed", "1", "--config", &c500k];
        let run = run.iter().chain(&["--checkpoint-dir", "ck"]).chain(more);
        run.map(|a| a.to_string()).collect()
    };
    let e = refused(&d, &args(&resume(&[])));
    assert!(
        e.contains("was written by another run: model.rope_theta is 10000.0 in the checkpoint, 500000.0 now"),
        "{e}"
    );
    assert_code(&e, "run_checkpoint.identity.changed");
    // A misspelt override is not silently useless.
    let e = refused(
        &d,
        &args(&resume(&["--allow-resume-change", "model.rope_theat"])),
    );
    assert_code(&e, "run_checkpoint.identity.unknown_field");
    let notes = ok(
        &d,
        &args(&resume(&["--allow-resume-change", "model.rope_theta"])),
    );
    assert!(notes.contains("resuming at step 3"), "{notes}");
    assert!(
        notes.contains(
            "with a change it allows: model.rope_theta is 10000.0 in the checkpoint, 500000.0 now"
        ),
        "{notes}"
    );
    // Later checkpoints keep the change in their record.
    let run: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("ck/step-00000006/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(run["fields"]["model.rope_theta"], "500000.0");
    assert_eq!(run["allowed_changes"][0]["field"], "model.rope_theta");
    assert_eq!(run["allowed_changes"][0]["was"], "10000.0");
    assert_eq!(run["allowed_changes"][0]["step"], 3);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_bf16_mixed_checkpoint_or_state_is_refused_under_fp32() {
    let d = scratch("identity-precision");
    ok(
        &d,
        &[
            &SHORT[..],
            &["0", "--checkpoint-dir", "ck", "--save-state", "s.st"],
        ]
        .concat(),
    );
    let e = refused(
        &d,
        &[
            "train",
            "--steps",
            "6",
            "--precision",
            "fp32",
            "--checkpoint-dir",
            "ck",
        ],
    );
    assert_code(&e, "run_checkpoint.identity.changed");
    let e = refused(
        &d,
        &[
            "train",
            "--steps",
            "6",
            "--precision",
            "fp32",
            "--resume",
            "s.st",
        ],
    );
    assert_code(&e, "artifact.identity.changed");
    // Another schedule is another run too.
    let e = refused(
        &d,
        &[
            "train", "--steps", "6", "--lr-max", "0.5", "--resume", "s.st",
        ],
    );
    assert_code(&e, "artifact.identity.changed");
    // Allowed by name, the change is kept in the state the run saves.
    let notes = ok(
        &d,
        &[
            "train",
            "--steps",
            "6",
            "--precision",
            "fp32",
            "--resume",
            "s.st",
            "--allow-resume-change",
            "precision",
            "--save-state",
            "s2.st",
        ],
    );
    assert!(
        notes.contains("with a change it allows: precision"),
        "{notes}"
    );
    let meta = hlatc::runtime::read_safetensors_metadata(&d.join("s2.st"))
        .unwrap()
        .unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["step"], 6);
    assert_eq!(meta["run_identity"]["fields"]["precision"], "fp32");
    assert_eq!(
        meta["run_identity"]["allowed_changes"][0]["was"],
        "bf16-mixed"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// `tokenizer-words.json` with its words' ids swapped (a tokenizer
/// retrained), or one id moved to `moved_id`, written to `path`.
fn edited_tokenizer(path: &Path, moved_id: Option<u64>) {
    let mut t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(WORD_TOKENIZER).unwrap()).unwrap();
    let vocab = t["model"]["vocab"].as_object_mut().unwrap();
    let (a, b) = (vocab["cat"].clone(), vocab["dog"].clone());
    match moved_id {
        None => {
            vocab.insert("cat".into(), b);
            vocab.insert("dog".into(), a);
        }
        Some(id) => {
            vocab.insert("cat".into(), serde_json::json!(id));
        }
    }
    std::fs::write(path, t.to_string()).unwrap();
}

#[test]
fn a_tokenizer_is_known_by_its_content_and_checked_by_its_highest_id() {
    let d = scratch("identity-tokenizer");
    word_corpus(&d.join("c.jsonl"), 60, 3, 5);
    std::fs::copy(WORD_TOKENIZER, d.join("tok.json")).unwrap();
    let corpus_run = |tok: &str, more: &[&str]| -> Vec<String> {
        [
            &[
                "train",
                "--steps",
                "6",
                "--corpus",
                "c.jsonl",
                "--tokenizer",
                tok,
            ][..],
            &["--shuffle-buffer", "8", "--checkpoint-dir", "ck"][..],
            more,
        ]
        .concat()
        .into_iter()
        .map(String::from)
        .collect()
    };
    ok(&d, &args(&corpus_run("tok.json", &["--stop-after", "3"])));
    // The same file elsewhere is the same tokenizer.
    std::fs::create_dir_all(d.join("elsewhere")).unwrap();
    std::fs::copy(WORD_TOKENIZER, d.join("elsewhere/tok.json")).unwrap();
    let notes = ok(
        &d,
        &args(&corpus_run("elsewhere/tok.json", &["--stop-after", "4"])),
    );
    assert!(notes.contains("resuming at step 3"), "{notes}");
    // Retrained at the same path: another tokenizer.
    edited_tokenizer(&d.join("tok.json"), None);
    let e = refused(&d, &args(&corpus_run("tok.json", &[])));
    assert_code(&e, "run_checkpoint.identity.changed");
    // An id past the vocabulary, with fewer entries than it.
    edited_tokenizer(&d.join("high.json"), Some(500));
    let e = refused(
        &d,
        &[
            "train",
            "--steps",
            "2",
            "--corpus",
            "c.jsonl",
            "--tokenizer",
            "high.json",
        ],
    );
    assert!(
        e.contains("high.json: the tokenizer's highest id is 500 ('cat'), so it needs 501 ids, more than the model's vocabulary of 64"),
        "{e}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_eos_id_outside_the_vocabulary_is_refused_naming_the_flag() {
    let d = scratch("identity-eos");
    let ids: Vec<u8> = (0..4000u16).flat_map(|i| (i % 60).to_le_bytes()).collect();
    std::fs::write(d.join("ids.bin"), ids).unwrap();
    let e = refused(
        &d,
        &[
            "train", "--steps", "2", "--corpus", "ids.bin", "--eos", "99999",
        ],
    );
    assert_code(&e, "loader.flag_outside_vocabulary");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_second_run_on_a_checkpoint_directory_is_refused_and_a_dead_ones_lock_taken_over() {
    let d = scratch("identity-lock");
    std::fs::create_dir_all(d.join("ck")).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    // This test process holds it: alive, on this host.
    let holder = serde_json::json!({
        "pid": std::process::id(), "host": host, "started": 1_700_000_000u64,
    });
    std::fs::write(d.join("ck/hlatc.lock"), holder.to_string()).unwrap();
    let t = Instant::now();
    let e = refused(&d, &["train", "--steps", "2", "--checkpoint-dir", "ck"]);
    assert!(
        e.contains(&format!(
            "ck: another run holds this checkpoint directory (pid {} on host {host}, since 2023-11-14 22:13:20 UTC)",
            std::process::id()
        )),
        "{e}"
    );
    // At once, before anything is compiled.
    assert!(t.elapsed() < Duration::from_secs(60));
    // A lock whose process is gone (a pid above the kernel's limit).
    let dead = serde_json::json!({ "pid": 4_194_311u32, "host": host, "started": 0u64 });
    std::fs::write(d.join("ck/hlatc.lock"), dead.to_string()).unwrap();
    let notes = ok(&d, &["train", "--steps", "2", "--checkpoint-dir", "ck"]);
    assert!(
        notes.contains("taking over the lock of a run that is gone (pid 4194311"),
        "{notes}"
    );
    // Released when the run ends.
    assert!(!d.join("ck/hlatc.lock").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn swapped_or_foreign_rank_files_are_refused_by_name() {
    let d = scratch("identity-ranks");
    ok(
        &d,
        &[
            "train",
            "--steps",
            "2",
            "--precision",
            "fp32",
            "--save-state",
            "s.st",
        ],
    );
    let pp2 = ["--precision", "fp32", "--target", "cpu", "--pp", "2"];
    ok(&d, &[&["shard", "s.st", "--out", "pp"][..], &pp2].concat());
    let meta = hlatc::runtime::read_safetensors_metadata(&d.join("pp/rank-00001.safetensors"))
        .unwrap()
        .unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["rank"], 1);
    assert_eq!(meta["ranks"], 2);
    assert_eq!(meta["step"], 2);
    assert_eq!(meta["run_identity"]["fields"]["precision"], "fp32");
    let (r0, r1) = (
        d.join("pp/rank-00000.safetensors"),
        d.join("pp/rank-00001.safetensors"),
    );
    let tmp = d.join("pp/tmp");
    std::fs::rename(&r0, &tmp).unwrap();
    std::fs::rename(&r1, &r0).unwrap();
    std::fs::rename(&tmp, &r1).unwrap();
    let e = refused(
        &d,
        &[&["unshard", "pp", "--out", "x.st"][..], &pp2].concat(),
    );
    assert!(
        e.contains("pp/rank-00000.safetensors: holds rank 1's state, not rank 0's"),
        "{e}"
    );
    assert!(!d.join("x.st").exists());
    // PP rank files read with --dp: the layout is named, not the precision.
    std::fs::rename(&r0, &tmp).unwrap();
    std::fs::rename(&r1, &r0).unwrap();
    std::fs::rename(&tmp, &r1).unwrap();
    let dp2 = ["--precision", "fp32", "--target", "cpu", "--dp", "2"];
    let e = refused(
        &d,
        &[&["unshard", "pp", "--out", "x.st"][..], &dp2].concat(),
    );
    assert_code(&e, "artifact.state_metadata.wrong_layout");
    // And the reverse.
    ok(&d, &[&["shard", "s.st", "--out", "dp"][..], &dp2].concat());
    let e = refused(
        &d,
        &[&["unshard", "dp", "--out", "x.st"][..], &pp2].concat(),
    );
    assert_code(&e, "artifact.state_metadata.wrong_layout");
    // Joined in order, the state is the one divided, metadata and all.
    unshards_back(&d, "pp", &pp2, "s.st");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn unclear_errors_read_plainly() {
    let d = scratch("identity-errors");
    for flag in ["--tp", "--dp", "--pp"] {
        let e = refused(&d, &["train", "--steps", "2", flag, "0"]);
        assert!(e.contains(&format!("{flag} 0: must be at least 1")), "{e}");
    }
    let e = refused(&d, &["train", "--steps", "-1"]);
    assert!(
        e.contains("'-1' for '--steps <STEPS>': a run takes at least 1 step"),
        "{e}"
    );
    std::fs::write(d.join("a-file"), b"x").unwrap();
    let e = refused(&d, &["train", "--steps", "2", "--checkpoint-dir", "a-file"]);
    assert!(e.contains("a-file: is a file, not a directory"), "{e}");
    assert!(!e.contains("os error 17"), "{e}");
    let e = refused(
        &d,
        &["shard", "a-file", "--out", "a-file", "--target", "cpu"],
    );
    assert!(
        e.contains("--out a-file: is a file, not a directory"),
        "{e}"
    );
    // A FIFO, as `--corpus /dev/stdin` of a pipe is.
    let fifo = d.join("fifo.jsonl");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = refused(
            &d,
            &[
                "train",
                "--steps",
                "2",
                "--corpus",
                "fifo.jsonl",
                "--tokenizer",
                WORD_TOKENIZER,
            ],
        );
        assert!(
            e.contains("fifo.jsonl: is a pipe (FIFO), not a regular file"),
            "{e}"
        );
    }
    // A JSONL corpus that starts with a UTF-8 byte-order mark trains.
    let corpus: PathBuf = d.join("bom.jsonl");
    word_corpus(&corpus, 40, 3, 1);
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend(std::fs::read(&corpus).unwrap());
    std::fs::write(&corpus, bytes).unwrap();
    ok(
        &d,
        &[
            "train",
            "--steps",
            "2",
            "--corpus",
            "bom.jsonl",
            "--tokenizer",
            WORD_TOKENIZER,
        ],
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// The checkpoint directory `from` copied to `to` (a run resumed on a copy
/// leaves the original for the next case).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn synthetic_data_of_another_seed_batch_or_seq_len_is_refused_by_field() {
    let d = scratch("identity-synthetic");
    let run = |dir: &str, more: &[&str]| -> Vec<String> {
        [
            &["train", "--model", "tiny", "--steps", "20"][..],
            &["--checkpoint-every", "5", "--checkpoint-dir", dir][..],
            more,
        ]
        .concat()
        .into_iter()
        .map(String::from)
        .collect()
    };
    ok(&d, &args(&run("syn", &["--stop-after", "10"])));
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("syn/step-00000010/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["fields"]["data.seed"], "0");
    assert_eq!(saved["fields"]["data.batch_size"], "8");
    assert_eq!(saved["fields"]["data.seq_len"], "16");
    for (i, (flag, value, field, was)) in [
        ("--seed", "7", "data.seed", "0"),
        ("--batch-size", "4", "data.batch_size", "8"),
        ("--seq-len", "8", "data.seq_len", "16"),
    ]
    .into_iter()
    .enumerate()
    {
        let copy = format!("syn-{i}");
        copy_dir(&d.join("syn"), &d.join(&copy));
        let e = refused(&d, &args(&run(&copy, &[flag, value, "--stop-after", "11"])));
        assert!(
            e.contains(&format!(
                "syn-{i}/step-00000010 was written by another run: {field} is {was} in the \
                 checkpoint, {value} now"
            )),
            "{flag}: {e}"
        );
        // Nothing is saved over the checkpoint refused.
        assert!(!d.join(&copy).join("step-00000011").exists());
    }
    // The same run goes on.
    let notes = ok(&d, &args(&run("syn", &["--stop-after", "11"])));
    assert!(notes.contains("resuming at step 10"), "{notes}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn rank_files_of_two_runs_or_another_precision_are_refused_naming_files_and_field() {
    let d = scratch("identity-mixed-ranks");
    let tp2 = ["--precision", "fp32", "--target", "cpu", "--tp", "2"];
    for seed in ["0", "3"] {
        let state = format!("s{seed}.st");
        ok(
            &d,
            &[
                "train",
                "--steps",
                "2",
                "--precision",
                "fp32",
                "--seed",
                seed,
                "--save-state",
                &state,
            ],
        );
        ok(
            &d,
            &[&["shard", &state, "--out", &format!("r{seed}")][..], &tp2].concat(),
        );
    }
    let meta = hlatc::runtime::read_safetensors_metadata(&d.join("r3/rank-00001.safetensors"))
        .unwrap()
        .unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["precision"], "fp32");
    assert_eq!(meta["run_identity"]["fields"]["data.seed"], "3");
    std::fs::create_dir_all(d.join("mix")).unwrap();
    std::fs::copy(
        d.join("r0/rank-00000.safetensors"),
        d.join("mix/rank-00000.safetensors"),
    )
    .unwrap();
    std::fs::copy(
        d.join("r3/rank-00001.safetensors"),
        d.join("mix/rank-00001.safetensors"),
    )
    .unwrap();
    let e = refused(
        &d,
        &[&["unshard", "mix", "--out", "mix.st"][..], &tp2].concat(),
    );
    assert!(
        e.contains(
            "mix/rank-00001.safetensors and mix/rank-00000.safetensors are the ranks of different \
             runs: data.seed is 0 in mix/rank-00000.safetensors, 3 in mix/rank-00001.safetensors"
        ),
        "{e}"
    );
    assert!(!d.join("mix.st").exists());
    // fp32 rank files joined as bf16-mixed: refused by the files' record.
    let bf16 = ["--precision", "bf16-mixed", "--target", "cpu", "--tp", "2"];
    let e = refused(
        &d,
        &[&["unshard", "r0", "--out", "x.st"][..], &bf16].concat(),
    );
    assert_code(&e, "artifact.state_metadata.other_precision");
    assert!(!d.join("x.st").exists());
    // And a whole fp32 state divided as bf16-mixed.
    let e = refused(&d, &[&["shard", "s0.st", "--out", "b"][..], &bf16].concat());
    assert_code(&e, "artifact.state_metadata.other_precision");
    // A run's own files still join.
    unshards_back(&d, "r3", &tp2, "s3.st");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_corpus_edited_where_the_loader_read_it_is_refused_naming_the_file_and_bytes() {
    let d = scratch("identity-corpus-edit");
    // Past 1 MiB, so the run identity's corpus fingerprint samples it
    // (its 16 blocks of 64 KiB) rather than hashing it whole: an edit
    // between its samples is the loader's to find.
    word_corpus(&d.join("c.jsonl"), 40_000, 3, 5);
    let run = |more: &[&str]| -> Vec<String> {
        [
            &[
                "train",
                "--steps",
                "6",
                "--corpus",
                "c.jsonl",
                "--tokenizer",
            ][..],
            &[WORD_TOKENIZER, "--checkpoint-dir", "ck"][..],
            more,
        ]
        .concat()
        .into_iter()
        .map(String::from)
        .collect()
    };
    ok(&d, &args(&run(&["--stop-after", "3"])));
    let original = std::fs::read(d.join("c.jsonl")).unwrap();
    assert!(original.len() > 2 << 20, "{}", original.len());
    // One word for another of the same length, past byte 100 K: between
    // the fingerprint's first two samples (at 0 and past 135 K).
    let mut bytes = original.clone();
    let at = 100_000
        + bytes[100_000..]
            .windows(3)
            .position(|w| w == b"cat")
            .unwrap();
    bytes[at..at + 3].copy_from_slice(b"dog");
    std::fs::write(d.join("c.jsonl"), &bytes).unwrap();
    let e = refused(&d, &args(&run(&[])));
    assert_code(&e, "loader.corpus_changed");
    // Put back, the run goes on.
    std::fs::write(d.join("c.jsonl"), &original).unwrap();
    let notes = ok(&d, &args(&run(&[])));
    assert!(notes.contains("resuming at step 3"), "{notes}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// Runs that differ only in the weights they start from (issue 74): two
/// `--init` files under one seed. A checkpoint of one is not resumed by
/// the other unless `--allow-resume-change init` says so, and their rank
/// files are not joined; a `--resume` of a whole state takes its record's.
#[test]
fn runs_of_other_starting_weights_are_refused_naming_init() {
    let d = scratch("identity-init");
    // Two sets of Hugging Face weights: tiny after one step from seeds 0 and 1.
    for seed in ["0", "1"] {
        let w = format!("w{seed}.st");
        ok(
            &d,
            &[
                "train",
                "--steps",
                "1",
                "--seed",
                seed,
                "--precision",
                "fp32",
                "--save",
                &w,
            ],
        );
    }
    let run = |init: &str, more: &[&str]| -> Vec<String> {
        [
            &[
                "train",
                "--steps",
                "6",
                "--precision",
                "fp32",
                "--init",
                init,
            ][..],
            &["--checkpoint-dir", "ck", "--checkpoint-every", "2"][..],
            more,
        ]
        .concat()
        .into_iter()
        .map(String::from)
        .collect()
    };
    ok(&d, &args(&run("w0.st", &["--stop-after", "2"])));
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(d.join("ck/step-00000002/run.json")).unwrap(),
    )
    .unwrap();
    let init = saved["fields"]["init"].as_str().unwrap().to_string();
    assert!(init.starts_with("the weights of a file, sha256:"), "{init}");
    let e = refused(&d, &args(&run("w1.st", &["--stop-after", "4"])));
    assert_code(&e, "run_checkpoint.identity.changed");
    assert!(!d.join("ck/step-00000004").exists());
    let notes = ok(
        &d,
        &args(&run(
            "w1.st",
            &["--stop-after", "4", "--allow-resume-change", "init"],
        )),
    );
    assert!(notes.contains("resuming at step 2"), "{notes}");
    // Rank files of two runs that differ only in their start are not joined.
    let tp2 = ["--precision", "fp32", "--target", "cpu", "--tp", "2"];
    for w in ["w0", "w1"] {
        ok(
            &d,
            &[
                "train",
                "--steps",
                "1",
                "--precision",
                "fp32",
                "--init",
                &format!("{w}.st"),
                "--save-state",
                &format!("s-{w}.st"),
            ],
        );
        ok(
            &d,
            &[
                &["shard", &format!("s-{w}.st"), "--out", &format!("r-{w}")][..],
                &tp2,
            ]
            .concat(),
        );
    }
    std::fs::create_dir_all(d.join("mix")).unwrap();
    for (from, rank) in [("r-w0", 0), ("r-w1", 1)] {
        let f = format!("rank-{rank:05}.safetensors");
        std::fs::copy(d.join(from).join(&f), d.join("mix").join(&f)).unwrap();
    }
    let e = refused(
        &d,
        &[&["unshard", "mix", "--out", "mix.st"][..], &tp2].concat(),
    );
    assert_code(&e, "artifact.state_metadata.mixed_runs");
    // A whole state resumed keeps its record's start: no --init to compare,
    // and the state it saves records the one it resumed.
    ok(
        &d,
        &[
            "train",
            "--steps",
            "2",
            "--total-steps",
            "1",
            "--precision",
            "fp32",
            "--resume",
            "s-w0.st",
            "--save-state",
            "s-w0-2.st",
        ],
    );
    let meta = hlatc::runtime::read_safetensors_metadata(&d.join("s-w0-2.st"))
        .unwrap()
        .unwrap();
    let meta: serde_json::Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(
        meta["run_identity"]["fields"]["init"].as_str(),
        Some(init.as_str())
    );
    std::fs::remove_dir_all(&d).unwrap();
}
