//! NKI's flash attention as an imported kernel (issue 70): the fixture of
//! `tools/nki_flash_fixture.py` holds `AwsNeuronCustomNativeKernel` calls
//! to `flash_fwd` and `flash_attn_bwd` in their own layouts. Built for
//! `neuron`, the step's attention is those two calls and the pre-flight
//! finds nothing; on XLA CPU, with hlatc's references of the two kernels
//! in their place, the step is the plain graph's within f32's rounding
//! bound (`sharded::f32_rounding_bound`; the fixture's kernels are f32). A kernel hlatc has no reference for, or a config NKI did not
//! write, is refused by name.

use crate::sharded::{differences, f32_rounding_bound, gqa_odd_vocab, run, Run};
use crate::support::{hlatc, scratch, stderr, stdout};
use hlatc::bundle::lower_for_cpu;
use hlatc::compiler::Op;
use hlatc::models::imported_kernel::ImportedKernel;
use hlatc::models::{AttentionKernel, Kernels, ModelConfig, Parallelism};
use hlatc::passes::native_kernel::NativeKernelConfig;
use hlatc::passes::neuron_check::{check_module, Chip, Sdk};
use hlatc::passes::{default_pipeline, Target};
use hlatc::runtime::Runtime;
use hlatc::train_step::{build_train_step, optimize, StepConfig};
use hlatc::trainer::Trainer;
use std::path::{Path, PathBuf};

/// The fixture's convention, as `--kernel` names it.
const NKI: &str = "tests/fixtures/kernels/nki_flash_attention.json";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

fn nki() -> Kernels {
    let kernel = ImportedKernel::load(&fixture(NKI)).unwrap();
    Kernels {
        attention: AttentionKernel::Imported(std::sync::Arc::new(kernel)),
        ..Kernels::default()
    }
}

/// Tiny GQA over the fixture's shapes: one sequence of 512, the shortest
/// `flash_fwd` tiles.
fn at_512(kernels: Kernels) -> StepConfig {
    let model = ModelConfig {
        max_position_embeddings: 512,
        ..gqa_odd_vocab()
    };
    crate::kernels::f32_step(model, [1, 512], kernels)
}

/// The `func_name` of every NKI kernel call in `m`, in order.
fn native_kernels(m: &hlatc::Module) -> Vec<String> {
    m.computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| c.instr(id)))
        .filter_map(NativeKernelConfig::of)
        .map(|config| config.unwrap().func_name)
        .collect()
}

#[test]
fn nki_flash_attention_is_the_neuron_steps_attention_and_runs_on_xla_cpu_by_reference() {
    let cfg = at_512(nki());
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    optimize(
        &mut step,
        &pipeline,
        Target::Neuron,
        hlatc::passes::RematPolicy::None,
    )
    .unwrap();
    // One kernel of each, called by every layer.
    let mut calls = native_kernels(&step.module);
    calls.sort();
    assert_eq!(calls, ["flash_attn_bwd", "flash_fwd"]);
    for chip in [Chip::Trn1, Chip::Trn2] {
        let report = check_module(&step.module, chip, Sdk::V2_32);
        let found: Vec<String> = report.findings.iter().map(|f| f.rule.id.into()).collect();
        assert!(found.is_empty(), "{chip:?}: {found:?}");
    }
    // XLA CPU runs hlatc's references in the kernels' place.
    let mut module = step.module.clone();
    assert!(lower_for_cpu(&mut module).unwrap());
    assert!(native_kernels(&module).is_empty());
    let no_custom_calls = module.computations.iter().all(|c| {
        c.ids()
            .all(|id| !matches!(c.instr(id).op, Op::CustomCall(_)))
    });
    assert!(no_custom_calls);
    let rt = Runtime::shared().unwrap();
    let program = rt.compile(&module).unwrap();
    let kernel = crate::sharded::run_with(&cfg, |_, cfg, params| {
        Trainer::with_program(program, cfg, &step, params)
    });
    let plain = run(&at_512(Kernels::default()));
    assert_same(&plain, &kernel);
}

fn assert_same(plain: &Run, kernel: &Run) {
    let diffs = differences(plain, kernel, f32_rounding_bound());
    assert!(diffs.is_empty(), "{}", diffs.join("; "));
    assert!(plain.stats[2].loss < plain.stats[0].loss);
}

/// On `cpu` the kernels are replaced by their references when the step is
/// built: the same numbers as the plain graph.
#[test]
fn on_cpu_an_nki_kernel_computes_by_its_reference() {
    let choice = hlatc::kernel_choice::KernelChoice::choose(
        &[hlatc::models::kernels::KernelRequest::parse(&format!(
            "attention=imported:{}",
            fixture(NKI).display()
        ))
        .unwrap()],
        Target::Cpu,
        &hlatc::kernel_choice::step_shape(
            &at_512(Kernels::default()).model,
            at_512(Kernels::default()).batch,
            false,
            Parallelism::SINGLE,
            1,
            hlatc::compiler::ElementType::F32,
        ),
    )
    .unwrap();
    let AttentionKernel::Imported(kernel) = &choice.kernels.attention else {
        panic!("{:?}", choice.kernels.chosen());
    };
    assert!(native_kernels(&kernel.forward.callable).is_empty());
    assert!(native_kernels(&kernel.backward.callable).is_empty());
    let plain = run(&at_512(Kernels::default()));
    let referenced = run(&at_512(choice.kernels.clone()));
    assert_same(&plain, &referenced);
}

/// Tiny's shapes, with the 512 positions the fixture's kernel takes.
fn tiny_512_config(dir: &Path) -> PathBuf {
    let path = dir.join("config.json");
    std::fs::write(
        &path,
        r#"{"model_type": "llama", "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": false}"#,
    )
    .unwrap();
    path
}

/// `hlatc compile` of tiny at one sequence of 512 in f32, attention by
/// `kernel`.
fn compile(dir: &Path, target: &str, kernel: &Path, extra: &[&str]) -> std::process::Output {
    let config = tiny_512_config(dir);
    let model = ["--config", config.to_str().unwrap()];
    compile_model(&model, target, kernel, extra)
}

/// `hlatc compile` of `model` at one sequence of 512 in f32, attention by
/// `kernel`.
fn compile_model(
    model: &[&str],
    target: &str,
    kernel: &Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["compile"];
    args.extend_from_slice(model);
    args.extend([
        "--batch-size",
        "1",
        "--seq-len",
        "512",
        "--precision",
        "fp32",
        "--target",
        target,
    ]);
    let kernel = format!("attention=imported:{}", kernel.display());
    args.extend(["--kernel", &kernel]);
    args.extend_from_slice(extra);
    hlatc(&args)
}

#[test]
fn compile_writes_the_nki_calls_into_a_neuron_bundle_and_verifies_it_by_reference() {
    let dir = scratch("nki_bundle");
    let out = dir.join("bundle");
    let o = compile(
        &dir,
        "neuron",
        &fixture(NKI),
        &["--verify", "--out", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stdout(&o);
    assert!(said.contains("no findings"), "{said}");
    assert!(
        said.contains("with its Neuron custom calls mapped to plain HLO"),
        "{said}"
    );
    let bytes = std::fs::read(out.join("model.hlo_module.pb")).unwrap();
    let module = hlatc::proto::decode_module(&bytes).unwrap();
    let mut calls = native_kernels(&module);
    calls.sort();
    assert_eq!(calls, ["flash_attn_bwd", "flash_fwd"]);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    let attention = manifest["config"]["kernels"]["attention"].as_str().unwrap();
    assert!(attention.starts_with("imported:"), "{attention}");
    // `hlatc check` of the bundle agrees with compile's pre-flight.
    let o = hlatc(&["check", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("no findings"), "{}", stdout(&o));
}

/// Standard base64 of `bytes`, as NKI writes a config.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for k in 0..4 {
            out.push(match k <= chunk.len() {
                true => ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char,
                false => '=',
            });
        }
    }
    out
}

/// A copy of the fixture whose backward's `backend_config` is `config`.
fn with_backward_config(dir: &Path, config: &str) -> PathBuf {
    let kernels = fixture("tests/fixtures/kernels");
    for f in ["nki_flash_attention.json", "nki_flash_fwd.hlo"] {
        std::fs::copy(kernels.join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(kernels.join("nki_flash_bwd.hlo")).unwrap();
    let start = text.find("backend_config=\"").unwrap() + "backend_config=\"".len();
    let end = start + text[start..].find('"').unwrap();
    let changed = format!("{}{config}{}", &text[..start], &text[end..]);
    std::fs::write(dir.join("nki_flash_bwd.hlo"), changed).unwrap();
    dir.join("nki_flash_attention.json")
}

#[test]
fn a_kernel_without_a_reference_or_with_a_config_nki_did_not_write_is_refused() {
    let dir = scratch("nki_refused");
    // Another NKI kernel: neuron takes it; cpu has nothing to run for it.
    let other = base64(br#"{"func_name": "my_attention_bwd", "grid": [1, 4]}"#);
    let kernel = with_backward_config(&dir, &other);
    let o = compile(
        &dir,
        "cpu",
        &kernel,
        &["--out", dir.join("cpu").to_str().unwrap()],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("nki_flash_bwd.hlo: on cpu, pass 'lower-neuron-calls': computation 'main', custom call 'flash_attn_bwd': NKI kernel 'my_attention_bwd' has no reference for XLA CPU to run in its place (hlatc has references for: flash_fwd, flash_attn_bwd)"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("cpu").exists());
    let neuron = dir.join("neuron");
    let o = compile(
        &dir,
        "neuron",
        &kernel,
        &["--out", neuron.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // --verify of that bundle cannot run it, and says which kernel.
    let o = compile(
        &dir,
        "neuron",
        &kernel,
        &["--verify", "--out", neuron.to_str().unwrap()],
    );
    assert_eq!(
        crate::support::error_code(&o),
        "not_written.artifact.pass.native_kernel"
    );
    // A config that is not NKI's: the pre-flight refuses the bundle.
    for (config, says) in [
        (
            "not base64!",
            "its backend_config is not base64 (byte 3: ' ')",
        ),
        (
            &base64(b"[1, 2]")[..],
            "its backend_config is base64, but not of a JSON object",
        ),
        (
            &base64(br#"{"grid": [1, 4]}"#)[..],
            "its backend_config's JSON has no string 'func_name'",
        ),
    ] {
        let kernel = with_backward_config(&dir, config);
        let out = dir.join("bad");
        let o = compile(&dir, "neuron", &kernel, &["--out", out.to_str().unwrap()]);
        assert_eq!(crate::support::error_code(&o), "artifact.neuron_refused");
        assert!(stderr(&o).contains(says), "{config}: {}", stderr(&o));
        assert!(!out.exists());
    }
}

#[test]
fn layouts_in_a_convention_are_checked_by_name() {
    let dir = scratch("nki_layouts");
    let kernels = fixture("tests/fixtures/kernels");
    for f in ["nki_flash_fwd.hlo", "nki_flash_bwd.hlo"] {
        std::fs::copy(kernels.join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(kernels.join("nki_flash_attention.json")).unwrap();
    let convention: serde_json::Value = serde_json::from_str(&text).unwrap();
    for (pointer, to, says) in [
        (
            "/layout",
            "batch,heads,seq",
            "layout: 'batch,heads,seq': each of batch, heads, seq, head_dim once",
        ),
        (
            "/layout",
            "batch,heads,seq,width",
            "layout: 'batch,heads,seq,width': 'width' is not a dimension",
        ),
        (
            "/forward/layouts/v",
            "batch,heads,heads,seq",
            "forward.layouts: v: 'batch,heads,heads,seq': each of",
        ),
    ] {
        let mut c = convention.clone();
        *c.pointer_mut(pointer).unwrap() = to.into();
        let path = dir.join("kernel.json");
        std::fs::write(&path, c.to_string()).unwrap();
        let err = ImportedKernel::load(&path).unwrap_err().to_string();
        assert!(err.contains(says), "{pointer}={to}: {err}");
        assert!(err.contains("kernel.json"), "{err}");
    }
    let mut c = convention.clone();
    c["forward"]["layouts"]["residual:lse"] = "batch,heads,seq,head_dim".into();
    let path = dir.join("kernel.json");
    std::fs::write(&path, c.to_string()).unwrap();
    let err = ImportedKernel::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("forward.layouts: 'residual:lse' is not a role a layout applies to"),
        "{err}"
    );
    // A layout that does not match the module's shapes names both.
    let mut c = convention;
    c["forward"]["layouts"]["v"] = "batch,heads,head_dim,seq".into();
    std::fs::write(&path, c.to_string()).unwrap();
    let kernel = ImportedKernel::load(&path).unwrap();
    let want = hlatc::models::imported_kernel::attention_operand(
        hlatc::compiler::ElementType::F32,
        [1, 4, 512, 8],
    );
    let err = kernel.check_operands(&want).unwrap_err().to_string();
    assert!(
        err.contains("nki_flash_fwd.hlo: parameter 2 (v of the forward) is f32[1,4,512,8]{3,2,1,0}, where the step passes f32[1,4,8,512]"),
        "{err}"
    );
}

/// A model too large for host memory is verified through its miniature,
/// whose shapes no imported kernel takes: the miniature computes
/// attention by `hlo`, and the check says so.
#[test]
fn verify_of_a_large_model_runs_its_miniature_with_plain_attention_and_says_so() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let dir = scratch("nki_miniature");
    let kernels = fixture("tests/fixtures/kernels");
    std::fs::copy(
        kernels.join("nki_flash_attention.json"),
        dir.join("nki_flash_attention.json"),
    )
    .unwrap();
    // SmolLM-135M's rank: 9 heads of 64 over one sequence of 512.
    for f in ["nki_flash_fwd.hlo", "nki_flash_bwd.hlo"] {
        let text = std::fs::read_to_string(kernels.join(f)).unwrap();
        let text = text
            .replace("[1,4,8,512]", "[1,9,64,512]")
            .replace("[1,4,512,8]", "[1,9,512,64]")
            .replace("[1,4,128,4]", "[1,9,128,4]");
        std::fs::write(dir.join(f), text).unwrap();
    }
    let out = dir.join("bundle");
    let o = compile_model(
        &["--model", "smollm-135m"],
        "neuron",
        &dir.join("nki_flash_attention.json"),
        &["--verify", "--out", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("its miniature (same structure, toy widths; attention by hlo, since the imported kernel takes the full model's shapes alone), step 2"),
        "{}",
        stdout(&o)
    );
}
