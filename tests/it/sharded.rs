//! Sharded training through the CLI: `hlatc train` on four devices follows
//! the single-device run (with ZeRO-1 too), divisions that do not divide,
//! ZeRO-1 without data parallelism and layouts context parallelism cannot
//! take are refused, `hlatc run` of a sharded bundle runs every rank, and
//! the planner searches and prices context parallelism. FSDP through the
//! compile step, the planner and the CLI: `--reshard unless-pp` is
//! torchtitan's default, its Qwen3 layout is written, priced and compiled,
//! and an FSDP state resumes in another layout. Gradient accumulation
//! through the CLI: trained with ZeRO-1 on four devices, its two programs
//! compiled, verified and checked. The
//! library's sharded-equals-unsharded checks are the train crate's
//! (`train/tests/it/sharded.rs`); their helpers (`train/tests/it/runs.rs`)
//! are re-exported here for the root's tests of sharded steps.

#[allow(unused_imports)]
pub(crate) use crate::runs::*;
use crate::support::{assert_code, hlatc, scratch, stderr, stdout};
use hlatc::models::{Parallelism, Reshard};
use hlatc::precision::Precision;

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

/// FSDP over `n` replicas, each a TP group of `tp` (as the train crate's
/// `tests/it/fsdp.rs` divides them).
fn fsdp(tp: i64, n: i64, sequence_parallel: bool) -> Parallelism {
    Parallelism {
        tp,
        dp: n,
        fsdp: n,
        sequence_parallel,
        ..Parallelism::SINGLE
    }
}

/// `--reshard unless-pp`, torchtitan's `default` policy, builds the
/// programs `always` builds without PP and `never`'s with it, byte for
/// byte; `always` and `never` differ.
#[test]
fn unless_pp_reshards_as_torchtitans_default_does() {
    use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
    let programs = |pp: i64, reshard: Reshard| -> Vec<Vec<u8>> {
        let o = CompileOptions {
            model: ModelSource::Preset("tiny".into()),
            target: hlatc::passes::Target::Cpu,
            parallel: Parallelism {
                pp,
                reshard,
                ..fsdp(1, 2, false)
            },
            grad_accum: pp,
            batch_size: Some(4),
            ..CompileOptions::default()
        };
        let c = compile_step(&o).unwrap_or_else(|e| panic!("pp {pp}, {reshard}: {e}"));
        let programs = c.programs();
        assert_eq!(programs.len(), if pp > 1 { 4 } else { 1 });
        (programs.iter())
            .map(|(_, s)| hlatc::proto::encode_module(&s.module))
            .collect()
    };
    let always = programs(1, Reshard::Always);
    assert_eq!(programs(1, Reshard::UnlessPp), always);
    assert_ne!(programs(1, Reshard::Never), always);
    assert_eq!(programs(2, Reshard::UnlessPp), programs(2, Reshard::Never));
}

/// TorchTitan Neuron's `qwen3_8b_tp4_fsdp16_sac`: Qwen3-8B (its published
/// `config.json`) at TP 4 x FSDP 16 on one trn2.48xlarge, written as a
/// layout spec, priced by `hlatc plan`, and its printed command compiles.
#[test]
fn torchtitans_qwen3_layout_is_written_priced_and_compiled() {
    let spec = "tp=4,pp=1,dp=16,sp,fsdp=16,remat=full-layer,micro_batch=1,precision=bf16-master";
    let plain = hlatc::models::KernelRequest::plain(hlatc::models::KernelPoint::Attention);
    let l = hlatc::plan::Layout::parse(
        spec,
        16,
        hlatc::passes::neuron_check::Chip::Trn1,
        Precision::Bf16Master,
        plain,
    )
    .unwrap();
    assert_eq!(l.to_string(), spec);
    assert_eq!(l.parallel.fsdp, 16);
    let kept = priced_and_compiled("qwen3-fsdp", spec, " --fsdp 16");
    // Resharded after the forward: the same layout in less memory.
    let resharded = spec.replace("fsdp=16,", "fsdp=16,reshard=always,");
    let less = priced_and_compiled("qwen3-fsdp-reshard", &resharded, " --reshard always");
    assert!(less < kept, "{less} against {kept}");
}

/// Qwen3-8B (its published `config.json`) at `spec` on one trn2.48xlarge
/// at 4K, priced by `hlatc plan`: it fits, its printed command carries
/// `flag` and compiles with no refusal. Its memory per rank.
fn priced_and_compiled(name: &str, spec: &str, flag: &str) -> u64 {
    use crate::support::{hlatc, scratch, stderr, stdout};
    let config =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/planner/configs/qwen3-8b.json");
    let config = config.to_str().unwrap();
    let dir = scratch(name);
    let json = dir.join("plan.json");
    let out = hlatc(&[
        "plan",
        "--config",
        config,
        "--instance",
        "trn2.48xlarge",
        "--nodes",
        "1",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--layout",
        spec,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let pick = &plan["candidates"][0];
    assert_eq!(pick["layout"], spec, "{pick}");
    assert_eq!(pick["fits"], true, "{pick}");
    let command = pick["command"].as_str().unwrap();
    assert!(command.contains(flag), "{command}");
    // The command it prints compiles, for trn2, with no refusal.
    let mut args: Vec<String> = command
        .split_whitespace()
        .skip(1)
        .map(String::from)
        .collect();
    if let Some(i) = args.iter().position(|a| a == "--out") {
        args.truncate(i);
    }
    args.extend(["--out".into(), dir.join("bundle").to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let compiled = hlatc(&args);
    assert!(compiled.status.success(), "{args:?}: {}", stderr(&compiled));
    assert!(
        stdout(&compiled).contains("FSDP 16"),
        "{}",
        stdout(&compiled)
    );
    pick["memory_per_rank"].as_u64().unwrap()
}

/// An FSDP 4 run's training state, saved at step 4 of 8, resumes as TP 2 x
/// DP 2 and ends where the one-device run of 8 steps ends (in f64).
#[test]
fn an_fsdp_state_resumes_in_another_layout() {
    resumes_as_tp2_dp2("fsdp-resume", &["--fsdp", "4"]);
}

/// The same from PP 2 x FSDP 2 over two micro-batches; its state divided
/// into that layout's rank files and joined again is the same file.
#[test]
fn a_staged_fsdp_state_is_sharded_exactly_and_resumes_in_another_layout() {
    use crate::support::{hlatc, stderr};
    let layout = ["--pp", "2", "--dp", "2", "--fsdp", "2", "--grad-accum", "2"];
    let state = resumes_as_tp2_dp2("fsdp-pp-resume", &layout);
    let ranks = format!("{state}.ranks");
    let joined = format!("{state}.joined");
    let with_layout = |verb: &str, from: &str, to: &str| {
        let mut args = vec![verb, from, "--out", to, "--model", "tiny"];
        args.extend_from_slice(&["--precision", "fp64"]);
        args.extend_from_slice(&layout[..6]);
        let out = hlatc(&args);
        assert!(out.status.success(), "{verb}: {}", stderr(&out));
    };
    with_layout("shard", &state, &ranks);
    assert_eq!(std::fs::read_dir(&ranks).unwrap().count(), 4);
    with_layout("unshard", &ranks, &joined);
    assert!(std::fs::read(&state).unwrap() == std::fs::read(&joined).unwrap());
}

/// Trains 4 of 8 steps in `layout`, resumes the saved state as TP 2 x DP 2
/// and checks its last step against one device's; the state's path.
fn resumes_as_tp2_dp2(name: &str, layout: &[&str]) -> String {
    use crate::support::{hlatc, scratch, stderr};
    let dir = scratch(name);
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let train = |extra: &[&str]| {
        let mut args = vec![
            "train",
            "--model",
            "tiny",
            "--steps",
            "8",
            "--batch-size",
            "8",
            "--precision",
            "fp64",
        ];
        args.extend_from_slice(extra);
        let out = hlatc(&args);
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
    };
    let (state, resumed, whole) = (path("s.safetensors"), path("r.csv"), path("w.csv"));
    let mut first = layout.to_vec();
    first.extend_from_slice(&["--stop-after", "4", "--save-state", &state]);
    train(&first);
    train(&[
        "--tp",
        "2",
        "--dp",
        "2",
        "--resume",
        &state,
        "--metrics",
        &resumed,
    ]);
    train(&["--metrics", &whole]);
    let last = |f: &str| {
        let text = std::fs::read_to_string(f).unwrap();
        let row: Vec<f64> = text
            .lines()
            .last()
            .unwrap()
            .split(',')
            .take(3)
            .map(|v| v.parse().unwrap())
            .collect();
        row
    };
    let (a, b) = (last(&resumed), last(&whole));
    assert_eq!(a[0], 8.0);
    for (x, y) in a[1..].iter().zip(&b[1..]) {
        assert!(rel(*x, *y) <= F64_RTOL, "{layout:?}: {a:?} vs {b:?}");
    }
    state
}

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
