//! Sharded training through the CLI: `hlatc train` on four devices follows
//! the single-device run (with ZeRO-1 too), divisions that do not divide,
//! ZeRO-1 without data parallelism and layouts context parallelism cannot
//! take are refused, `hlatc run` of a sharded bundle runs every rank, and
//! the planner searches and prices context parallelism. The
//! library's sharded-equals-unsharded checks are the train crate's
//! (`train/tests/it/sharded.rs`); their helpers (`train/tests/it/runs.rs`)
//! are re-exported here for the root's tests of sharded steps.

#[allow(unused_imports)]
pub(crate) use crate::runs::*;

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

#[test]
fn train_with_zero1_on_four_devices_follows_the_single_device_run() {
    train_follows_the_single_device_run(&["--tp", "2", "--dp", "2", "--zero1"]);
}

#[test]
fn zero1_without_data_parallelism_is_refused() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args([
            "compile", "--model", "tiny", "--tp", "2", "--zero1", "--out",
        ])
        .arg(std::env::temp_dir().join("hlatc-zero1-never"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    crate::support::assert_code(&stderr, "artifact.step.parallel");
}

#[test]
fn layouts_context_parallelism_cannot_take_are_refused_by_name() {
    let e = compile_error(&["--model", "tiny", "--seq-len", "12", "--cp", "4"]);
    assert!(
        e.contains("--cp 4 with --cp-balance head-tail cuts each sequence into 8 equal chunks, and --seq-len 12 does not divide into 8"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp-balance",
        "contiguous",
    ]);
    assert!(
        e.contains("--cp-balance contiguous needs --cp above 1"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp",
        "2",
        "--kernel",
        "attention=blocked:4",
    ]);
    assert!(
        e.contains("--cp 2 with --kernel attention=blocked:4"),
        "{e}"
    );
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp-exchange",
        "ring",
    ]);
    assert!(e.contains("--cp-exchange ring needs --cp above 1"), "{e}");
    let e = compile_error(&[
        "--model",
        "tiny",
        "--seq-len",
        "16",
        "--cp",
        "2",
        "--cp-exchange",
        "ring",
    ]);
    assert!(
        e.contains("--cp-exchange ring merges each step's block") && e.contains("attention=hlo"),
        "{e}"
    );
}

/// The planner: above 8,192 tokens its search tries CP (looped attention,
/// head-tail chunks of at least 4,096 tokens), never below; a CP layout
/// spelled in a SPEC is priced with its exchange on the links it crosses,
/// fits a trn1 core at Llama 3.1's 128K, and prints a command that
/// compiles.
#[test]
fn the_planner_searches_and_prices_context_parallelism() {
    use hlatc::compile_step::ModelSource;
    use hlatc::models::{CpExchange, ModelConfig};
    use hlatc::plan::search::search_space;
    use hlatc::plan::{plan, PlanOptions};
    let cfg = ModelConfig::preset("llama3.1-8b").unwrap();
    let o = PlanOptions {
        model: ModelSource::Preset("llama3.1-8b".into()),
        nodes: 16,
        ..PlanOptions::default()
    };
    let degrees = |seq: i64| -> Vec<i64> {
        let mut cps: Vec<i64> = search_space(&cfg, seq, &o, 512)
            .unwrap()
            .iter()
            .map(|l| l.parallel.cp)
            .collect();
        cps.sort();
        cps.dedup();
        cps
    };
    assert_eq!(degrees(8192), vec![1]);
    assert_eq!(degrees(131072), vec![1, 2, 4, 8, 16]);
    let long = search_space(&cfg, 131072, &o, 512).unwrap();
    assert!(long
        .iter()
        .filter(|l| l.parallel.cp > 1)
        .all(|l| l.attention.to_string() == "attention=looped:512" && l.micro_batch == 1));
    // Both exchanges, for every CP layout.
    let by = |e: CpExchange| {
        long.iter()
            .filter(|l| l.parallel.cp > 1 && l.parallel.cp_exchange == e)
            .count()
    };
    assert!(by(CpExchange::Ring) > 0 && by(CpExchange::Ring) == by(CpExchange::AllGather));

    for (spec, exchange) in [
        (
            "tp=32,cp=16,dp=1,sp,zero1,remat=none,attention=looped:512",
            "",
        ),
        (
            "tp=32,cp=16,cp_exchange=ring,dp=1,sp,zero1,remat=none,attention=looped:512",
            "--cp-exchange ring",
        ),
    ] {
        let p = plan(&PlanOptions {
            seq_len: Some(131072),
            global_batch: 16,
            layout: Some(spec.into()),
            top: 1,
            ..o.clone()
        })
        .unwrap();
        let best = p.best().expect("the layout is priced");
        assert!(best.fits, "{}", best.layout);
        assert!(best.memory_per_rank < 16 << 30);
        // A CP group's ranks are a TP group (a node) apart: the keys and
        // values cross the network.
        assert!(best.breakdown.network > 0.0, "{:?}", best.breakdown);
        assert!(best.command.contains("--cp 16") && best.command.contains("attention=looped:512"));
        assert!(best.command.contains(exchange), "{}", best.command);
    }
}
