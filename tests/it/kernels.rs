//! Kernel points (issue 70) through `hlatc compile`: `--kernel` recorded
//! in the manifest and verified on XLA CPU, a request that does not apply
//! falling back with the reason, bad requests refused naming the choices,
//! an imported kernel recorded by an absolute path or refused where it does
//! not fit, and softmax chosen by the `fuse-softmax` pass; a kernel lowered
//! by JAX, read as the facade reads a file, runs and differentiates as its
//! own backward says. NKI's flash attention as an imported kernel: the
//! fixture of `tools/nki_flash_fixture.py` holds `AwsNeuronCustomNativeKernel`
//! calls to `flash_fwd` and `flash_attn_bwd` in their own layouts; a
//! neuron bundle holds those two calls, passes the pre-flight and `hlatc
//! check`, and `--verify` runs it by hlatc's references; a kernel hlatc has
//! no reference for, or a config NKI did not write, is refused by name.
//! That the kernels compute the plain graph's step on XLA CPU is the train
//! crate's (`train/tests/it/kernels.rs`), the steps as built the step
//! crate's (`step/tests/it/kernels.rs`), an imported kernel's convention
//! the models crate's (`models/tests/it/imported_kernel.rs`).

use crate::configs::kernel_config as config;
use crate::runs::native_kernels;
use crate::sharded::{assert_same_in, gqa_odd_vocab, run, EQUAL_IN};
use crate::support::{hlatc, scratch, stderr, stdout};
use hlatc::compiler::Shape;
use hlatc::models::{AttentionKernel, Kernels, Parallelism};
use hlatc::runtime::Runtime;
use std::path::{Path, PathBuf};

/// `hlatc compile --model tiny ARGS... --out DIR` for `target`.
fn compile_tiny(
    name: &str,
    target: &str,
    args: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let out = crate::support::scratch(name);
    let _ = std::fs::remove_dir_all(&out);
    let mut all = vec!["compile", "--model", "tiny", "--target", target];
    all.extend_from_slice(args);
    all.extend(["--out", out.to_str().unwrap()]);
    (crate::support::hlatc(&all), out)
}

fn recorded_kernels(out: &std::path::Path) -> serde_json::Value {
    let manifest = std::fs::read_to_string(out.join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    manifest["config"]["kernels"].clone()
}

#[test]
fn compile_records_the_choice_and_verifies_it_on_xla_cpu() {
    let (o, out) = compile_tiny(
        "kernel_blocked",
        "cpu",
        &["--kernel", "attention=blocked", "--verify"],
    );
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    let k = recorded_kernels(&out);
    // tiny's 16 positions in the largest tile that cuts them twice.
    assert_eq!(k["attention"], "blocked:8");
    assert_eq!(k["rmsnorm"], "hlo");
    assert!(crate::support::stdout(&o).contains("the bundle's own module, step 2"));
    assert!(crate::support::stdout(&o).contains(
        "  kernels       attention=blocked:8, softmax=fused, rmsnorm=hlo, swiglu=hlo, cross-entropy=hlo"
    ));
    // Without a request, every point is recorded as the plain graph but
    // softmax, fused as before it was a point.
    let (o, out) = compile_tiny("kernel_default", "cpu", &["--pass-report"]);
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    let printed = crate::support::stdout(&o);
    assert!(!printed.contains("  kernels "), "{printed}");
    assert!(printed.contains(
        "kernel points: attention=hlo, softmax=fused, rmsnorm=hlo, swiglu=hlo, cross-entropy=hlo"
    ));
    assert_eq!(recorded_kernels(&out)["attention"], "hlo");
}

#[test]
fn a_request_that_does_not_apply_falls_back_and_says_why() {
    let (o, out) = compile_tiny(
        "kernel_fallback",
        "neuron",
        &["--kernel", "attention=blocked:5"],
    );
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    assert!(
        crate::support::stderr(&o).contains(
            "note: kernel attention=blocked:5 does not apply (a tile of 5 does not cut a sequence of 16 into whole tiles); attention takes hlo"
        ),
        "{}",
        crate::support::stderr(&o)
    );
    assert_eq!(recorded_kernels(&out)["attention"], "hlo");
}

#[test]
fn blocked_attention_passes_the_neuron_preflight() {
    let (o, _) = compile_tiny(
        "kernel_neuron",
        "neuron",
        &["--kernel", "attention=blocked:4"],
    );
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    assert!(
        crate::support::stdout(&o)
            .contains("pre-flight    trn1, --implicit-integer-downcast=none: no findings"),
        "{}",
        crate::support::stdout(&o)
    );
}

#[test]
fn bad_kernel_requests_are_refused_naming_the_choices() {
    for (args, says) in [
        (&["--kernel", "attn=blocked"][..], "unknown kernel point 'attn'; the points are: attention, softmax, rmsnorm, swiglu, cross-entropy"),
        (&["--kernel", "attention=flash"], "kernel point attention has no implementation 'flash'; it has: hlo, blocked, looped, imported"),
        (&["--kernel", "attention=blocked", "--kernel", "attention=hlo"], "kernel point attention is chosen twice"),
    ] {
        let (o, out) = compile_tiny("kernel_refused", "cpu", args);
        assert!(!o.status.success(), "{args:?}");
        assert!(crate::support::stderr(&o).contains(says), "{args:?}: {}", crate::support::stderr(&o));
        assert!(!out.exists(), "{args:?} wrote a bundle");
    }
    let o = crate::support::hlatc(&["passes"]);
    assert!(crate::support::stdout(&o).contains(
        "kernel point attention     implementations: hlo, blocked, looped, imported; default: neuron hlo, cpu hlo"
    ));
    assert!(crate::support::stdout(&o).contains(
        "kernel point softmax       implementations: hlo, fused; default: neuron fused, cpu fused"
    ), "{}", crate::support::stdout(&o));
}

/// Attention's core as a function of q, k and v (`[4, 4, 16, 8]`, tiny's
/// shapes) and its gradients, by `attend`: `sum(attention * w)` and the
/// adjoints of q, k and v, run on XLA CPU over fixed inputs.
fn loss_and_gradients(
    name: &str,
    attend: impl FnOnce(
        &mut hlatc::compiler::graph::builder::Builder,
        [hlatc::compiler::InstrId; 3],
        &mut hlatc::compiler::graph::autodiff::GradHints,
    ) -> hlatc::compiler::InstrId,
) -> Vec<hlatc::Literal> {
    use hlatc::compiler::graph::autodiff::{grad, GradHints};
    use hlatc::compiler::graph::builder::Builder;
    use hlatc::compiler::{ElementType, Op};
    let dims = vec![4, 4, 16, 8];
    let mut b = Builder::new(name);
    let shape = Shape::array(ElementType::F32, dims.clone());
    let [q, k, v, w] = ["q", "k", "v", "w"].map(|n| b.parameter(n, shape.clone()));
    let mut hints = GradHints::default();
    let out = attend(&mut b, [q, k, v], &mut hints);
    let weighted = b.mul(out, w).unwrap();
    let loss = b.reduce_sum(weighted, &[0, 1, 2, 3]).unwrap();
    let grads = grad(&mut b, loss, &[q, k, v], &hints).unwrap();
    let mut results = vec![loss];
    results.extend(grads);
    let root = b.add(Op::Tuple, &results, None).unwrap();
    let module = b.into_module(name, root);
    hlatc::verify(&module).unwrap();
    let n: usize = dims.iter().product::<i64>() as usize;
    let inputs: Vec<hlatc::Literal> = (0..4u64)
        .map(|seed| {
            let mut rng = hlatc::runtime::inputs::SplitMix64::new(seed + 11);
            let values: Vec<f32> = (0..n)
                .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            hlatc::Literal::from_f32(dims.clone(), &values).unwrap()
        })
        .collect();
    let rt = Runtime::shared().unwrap();
    rt.compile(&module).unwrap().run(&inputs).unwrap()
}

/// A kernel brought from JAX (`tools/jax_blocked_attention.py`: the flash
/// algorithm written in JAX, lowered, and its `jax.vjp` lowered as the
/// backward) called from a built graph, with autodiff taking the JAX
/// backward for it: the loss and the gradients of q, k and v equal
/// hlatc's own blocked attention's within f32's rounding bound (both are
/// f32: the JAX module is). The machinery the
/// `imported` implementation builds on (issue 70).
#[test]
fn a_kernel_lowered_by_jax_runs_and_differentiates_as_its_own_backward_says() {
    use hlatc::compiler::graph::autodiff::{
        BackwardCall, BackwardOperand, Composite, CompositeRule,
    };
    use hlatc::compiler::graph::blocked_attention::{AttentionOperands, BlockedAttention};
    use hlatc::compiler::Op;
    let fixture = |f: &str| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kernels")
            .join(f);
        hlatc::load_module(&path).unwrap()
    };
    let imported = loss_and_gradients("imported", |b, [q, k, v], hints| {
        let forward = b.import(fixture("blocked_attention_fwd.hlo")).unwrap();
        let backward = b.import(fixture("blocked_attention_bwd.hlo")).unwrap();
        let call = Op::Call {
            to_apply: forward,
            is_composite: false,
        };
        let out = b.add(call, &[q, k, v], None).unwrap();
        hints.composites.push(Composite {
            inputs: vec![q, k, v],
            output: out,
            rule: CompositeRule::Imported,
            residuals: Vec::new(),
            backward_call: Some(BackwardCall {
                computation: backward,
                operands: vec![
                    BackwardOperand::Input(0),
                    BackwardOperand::Input(1),
                    BackwardOperand::Input(2),
                    BackwardOperand::Adjoint,
                ],
                results: vec![0, 1, 2],
            }),
        });
        out
    });
    let own = loss_and_gradients("blocked", |b, [q, k, v], hints| {
        let blocked = BlockedAttention {
            tile: 8,
            head_dim: 8,
            window: None,
        };
        let fwd = blocked
            .forward(
                b,
                AttentionOperands {
                    q,
                    k,
                    v,
                    segments: None,
                },
            )
            .unwrap();
        hints.composites.push(Composite {
            inputs: vec![q, k, v],
            output: fwd.output,
            rule: CompositeRule::BlockedAttention(blocked),
            residuals: vec![fwd.lse],
            backward_call: None,
        });
        fwd.output
    });
    assert_eq!(imported.len(), 4);
    for (what, (a, e)) in ["loss", "dq", "dk", "dv"]
        .iter()
        .zip(imported.iter().zip(&own))
    {
        let r = crate::sharded::norm_relative(e, a);
        let bound = crate::sharded::f32_rounding_bound();
        assert!(r <= bound, "{what}: |diff|/|value| {r:e}");
        assert!(
            e.to_f64_vec().iter().any(|&x| x != 0.0),
            "{what} is all zeros"
        );
    }
}

/// The JAX-lowered kernel's convention, as `--kernel` names it.
const IMPORTED: &str = "tests/fixtures/kernels/blocked_attention.json";

/// A bundle names its imported kernel by an absolute path, so it is read
/// from any directory: `--kernel attention=imported:RELATIVE` given from
/// the repository's root is recorded whole.
#[test]
fn a_bundle_records_its_imported_kernel_by_an_absolute_path() {
    let (o, out) = compile_tiny(
        "kernel_imported_path",
        "cpu",
        &[
            "--batch-size",
            "4",
            "--kernel",
            &format!("attention=imported:{IMPORTED}"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let recorded = recorded_kernels(&out);
    let attention = recorded["attention"].as_str().unwrap();
    let path = attention.strip_prefix("imported:").unwrap();
    assert!(std::path::Path::new(path).is_absolute(), "{attention}");
    assert!(path.ends_with(IMPORTED), "{attention}");
    let read: Kernels = serde_json::from_value(recorded).unwrap();
    assert!(matches!(read.attention, AttentionKernel::Imported(_)));
}

#[test]
fn an_imported_kernel_that_does_not_fit_is_refused_or_falls_back() {
    // Shapes: tiny's default batch of 1 is not the fixture's 4.
    let (o, out) = compile_tiny(
        "kernel_imported_shape",
        "cpu",
        &["--kernel", &format!("attention=imported:{IMPORTED}")],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "blocked_attention_fwd.hlo: parameter 0 (q of the forward) is f32[4,4,16,8]{3,2,1,0}, where the step passes f32[1,4,16,8]{3,2,1,0}"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    // Packed rows: the kernel masks by position alone.
    let (o, out) = compile_tiny(
        "kernel_imported_packed",
        "cpu",
        &[
            "--batch-size",
            "4",
            "--packed",
            "--kernel",
            &format!("attention=imported:{IMPORTED}"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("(the kernel applies the causal mask alone, and the step has packed documents); attention takes hlo"), "{}", stderr(&o));
    assert_eq!(recorded_kernels(&out)["attention"], "hlo");
    // A convention that names what the module does not hold.
    let dir = crate::support::scratch("kernel_imported_bad");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels");
    for f in ["blocked_attention_fwd.hlo", "blocked_attention_bwd.hlo"] {
        std::fs::copy(fixtures.join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(fixtures.join("blocked_attention.json")).unwrap();
    let convention: serde_json::Value = serde_json::from_str(&text).unwrap();
    let changed = |pointer: &str, to: serde_json::Value| {
        let mut c = convention.clone();
        match pointer {
            "/extra" => {
                c["extra"] = to;
            }
            p => *c.pointer_mut(p).unwrap() = to,
        }
        c
    };
    for (bad, says) in [
        (
            changed("/backward/results/2", "dv".into()),
            "backward.results: unknown role 'dv'",
        ),
        (
            changed("/forward/parameters", serde_json::json!(["q", "k"])),
            "forward.parameters: 2 named, where",
        ),
        (
            changed("/masks", serde_json::json!(["causal", "window"])),
            "masks: [\"causal\", \"window\"]",
        ),
        (changed("/extra", 1.into()), "unknown field `extra`"),
        (
            changed("/forward/module", "missing.hlo".into()),
            "missing.hlo: No such file",
        ),
    ] {
        let to = bad.to_string();
        let path = dir.join("kernel.json");
        std::fs::write(&path, &to).unwrap();
        let o = crate::support::hlatc(&[
            "compile",
            "--model",
            "tiny",
            "--target",
            "cpu",
            "--batch-size",
            "4",
            "--kernel",
            &format!("attention=imported:{}", path.display()),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "{to}");
        assert!(stderr(&o).contains(says), "{to}: {}", stderr(&o));
        // The file at fault: the convention, or the module it names.
        assert!(
            stderr(&o).contains("kernel.json") || stderr(&o).contains("missing.hlo"),
            "{to}: names the file: {}",
            stderr(&o)
        );
    }
}

/// Softmax is a point chosen late, by the `fuse-softmax` pass: `fused`
/// (its Neuron custom calls, or on cpu a call of the same math) where the
/// pass runs, the plain graph where it does not. Both compute the same
/// step; the manifest says which ran, and a request the passes contradict
/// is refused.
#[test]
fn the_softmax_point_is_the_fuse_softmax_pass() {
    use hlatc::models::SoftmaxKernel;
    let fused = run(&config(
        gqa_odd_vocab(),
        Parallelism::SINGLE,
        Kernels::default(),
    ));
    let plain_softmax = Kernels {
        softmax: SoftmaxKernel::Hlo,
        ..Kernels::default()
    };
    let plain = run(&config(gqa_odd_vocab(), Parallelism::SINGLE, plain_softmax));
    assert_same_in(EQUAL_IN, "softmax=hlo", &fused, &plain);
    let custom_calls = |out: &std::path::Path| {
        std::fs::read_to_string(out.join("model.hlo.txt"))
            .unwrap()
            .matches("custom_call_target=\"AwsNeuronSoftmax")
            .count()
    };
    let (o, out) = compile_tiny("softmax_fused", "neuron", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(recorded_kernels(&out)["softmax"], "fused");
    // Each of two layers: attention's softmax, its recomputation (remat's
    // core-attention) and its backward.
    assert_eq!(custom_calls(&out), 6);
    let (o, out) = compile_tiny("softmax_hlo", "neuron", &["--kernel", "softmax=hlo"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(recorded_kernels(&out)["softmax"], "hlo");
    assert_eq!(custom_calls(&out), 0);
    // Passes left out are recorded as what ran.
    let (o, out) = compile_tiny(
        "softmax_disabled",
        "neuron",
        &["--disable-pass", "fuse-softmax"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(recorded_kernels(&out)["softmax"], "hlo");
    let (o, out) = compile_tiny(
        "softmax_conflict",
        "neuron",
        &[
            "--kernel",
            "softmax=fused",
            "--disable-pass",
            "fuse-softmax",
        ],
    );
    assert_eq!(crate::support::error_code(&o), "kernel.softmax_pass");
    assert!(!out.exists());
}

/// The fixture's convention, as `--kernel` names it.
const NKI: &str = "tests/fixtures/kernels/nki_flash_attention.json";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
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
