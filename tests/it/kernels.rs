//! Kernel points (issue 70): blocked attention computes the step the
//! plain graph computes. Three steps of each, on XLA CPU in f64, agree to
//! the sharded tests' 1e-10 norm-relative tolerance (`train/tests/it/sharded.rs` says why
//! by norm, and why f64): loss, grad norm, every parameter and Adam
//! moment. An imported kernel (an f32 module) compares in f32, within the
//! bound f32's rounding gives. Causal,
//! sliding-window, packed rows and GQA; single device, DP, TP with SP,
//! and pipeline stages. The blocked step builds no value with two
//! sequence-long dimensions.

use crate::sharded::{
    differences, gqa_odd_vocab, mha_tied, run, run_packed, run_with, step_config, tolerance, Run,
    EQUAL_IN,
};
use crate::support::stderr;
use hlatc::compiler::Shape;
use hlatc::models::{AttentionKernel, BatchShape, Kernels, ModelConfig, Parallelism};
use hlatc::passes::RematPolicy;
use hlatc::pipeline::{build_pipeline_steps, PipelineForm, StageSend};
use hlatc::precision::Precision;
use hlatc::runtime::Runtime;
use hlatc::train_step::{build_train_step, StepConfig};

/// Sequences of 24 in tiles of 8: three query tiles, six tile pairs.
const SEQ: i64 = 24;
const TILE: i64 = 8;

fn long(model: ModelConfig) -> ModelConfig {
    ModelConfig {
        max_position_embeddings: SEQ,
        ..model
    }
}

/// A window of 10: the third query tile sees the second key tile in part
/// and the first not at all.
fn windowed() -> ModelConfig {
    ModelConfig {
        sliding_window: Some(10),
        ..long(gqa_odd_vocab())
    }
}

fn config(model: ModelConfig, par: Parallelism, kernels: Kernels) -> StepConfig {
    let mut cfg = step_config(long(model), par, EQUAL_IN);
    cfg.batch = BatchShape {
        batch_size: 4,
        seq_len: SEQ,
    };
    cfg.kernels = kernels;
    cfg
}

fn blocked() -> Kernels {
    Kernels {
        attention: AttentionKernel::Blocked { tile: TILE },
        ..Kernels::default()
    }
}

/// `tiled` computes `plain`'s step, both built in `precision`, within
/// its [`tolerance`].
fn assert_same_in(precision: Precision, what: &str, plain: &Run, tiled: &Run) {
    let diffs = differences(plain, tiled, tolerance(precision));
    assert!(diffs.is_empty(), "{what}: {}", diffs.join("; "));
    // A step that did nothing would agree too: the state moved.
    assert!(plain.stats[2].loss < plain.stats[0].loss, "{what}");
}

fn check(model: ModelConfig, par: Parallelism) {
    check_kernels(model, par, blocked());
}

/// Three steps of `model` over `par` with `kernels` compute one device's
/// plain graph.
fn check_kernels(model: ModelConfig, par: Parallelism, kernels: Kernels) {
    let plain = run(&config(
        model.clone(),
        Parallelism::SINGLE,
        Kernels::default(),
    ));
    let tiled = run(&config(model, par, kernels));
    assert_same_in(EQUAL_IN, &par.to_string(), &plain, &tiled);
}

/// Attention tile by tile in a loop, tiles of [`TILE`].
fn looped() -> Kernels {
    Kernels {
        attention: AttentionKernel::Looped { tile: TILE },
        ..Kernels::default()
    }
}

#[test]
fn looped_equals_the_plain_graph_and_the_unrolled_form() {
    for model in [gqa_odd_vocab(), mha_tied(), windowed()] {
        check_kernels(model.clone(), Parallelism::SINGLE, looped());
        let unrolled = run(&config(model.clone(), Parallelism::SINGLE, blocked()));
        let tiled = run(&config(model, Parallelism::SINGLE, looped()));
        assert_same_in(EQUAL_IN, "looped against unrolled", &unrolled, &tiled);
    }
    check_kernels(windowed(), layout(2, 2, true), looped());
}

#[test]
fn looped_packed_documents_equal_the_plain_graph() {
    for model in [gqa_odd_vocab(), windowed()] {
        let packed = |kernels| StepConfig {
            packed: true,
            ..config(model.clone(), Parallelism::SINGLE, kernels)
        };
        let plain = run_packed(&packed(Kernels::default()));
        let tiled = run_packed(&packed(looped()));
        assert_same_in(EQUAL_IN, "packed", &plain, &tiled);
    }
}

/// The instructions of every computation of `step`'s module.
fn instructions(step: &hlatc::train_step::TrainStep) -> usize {
    step.module
        .computations
        .iter()
        .map(|c| c.ids().count())
        .sum()
}

#[test]
fn the_looped_step_does_not_grow_with_the_sequence_and_keeps_no_square() {
    let count = |seq: i64, kernels: Kernels| {
        let mut cfg = config(gqa_odd_vocab(), Parallelism::SINGLE, kernels);
        cfg.model.max_position_embeddings = seq;
        cfg.batch.seq_len = seq;
        let step = build_train_step(&cfg).unwrap();
        assert_eq!(has_square(&step), None, "seq {seq}");
        instructions(&step)
    };
    let (short, long) = (count(64, looped()), count(512, looped()));
    assert_eq!(
        short, long,
        "the loop's instructions do not depend on the sequence"
    );
    // The unrolled form's pairs grow as the square of the tiles.
    assert!(count(512, blocked()) > 10 * long);
}

fn layout(tp: i64, dp: i64, sequence_parallel: bool) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1: false,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

#[test]
fn blocked_gqa_equals_the_plain_graph() {
    check(gqa_odd_vocab(), Parallelism::SINGLE);
}

#[test]
fn blocked_mha_equals_the_plain_graph() {
    check(mha_tied(), Parallelism::SINGLE);
}

#[test]
fn blocked_sliding_window_equals_the_plain_graph() {
    check(windowed(), Parallelism::SINGLE);
}

#[test]
fn blocked_under_dp_and_tp_with_sp_equals_the_plain_graph() {
    check(gqa_odd_vocab(), layout(1, 2, false));
    check(windowed(), layout(2, 2, true));
}

#[test]
fn blocked_pipeline_stages_equal_the_plain_graph() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let model = ModelConfig {
        num_hidden_layers: 4,
        ..gqa_odd_vocab()
    };
    let plain = run(&config(
        model.clone(),
        Parallelism::SINGLE,
        Kernels::default(),
    ));
    let par = Parallelism {
        pp: 2,
        ..layout(2, 1, false)
    };
    for remat in [RematPolicy::None, RematPolicy::CoreAttention] {
        let form = PipelineForm {
            remat,
            send: StageSend::Permute,
        };
        let staged = run_with(&config(model.clone(), par, blocked()), |rt, cfg, params| {
            let steps = build_pipeline_steps(cfg, 2, form)?;
            crate::cpu_trainers::pipelined_steps(rt, cfg, steps, form.remat, params)
        });
        assert_same_in(EQUAL_IN, &format!("{par}, {remat}"), &plain, &staged);
    }
}

#[test]
fn blocked_packed_documents_equal_the_plain_graph() {
    for model in [gqa_odd_vocab(), windowed()] {
        let packed = |kernels| StepConfig {
            packed: true,
            ..config(model.clone(), Parallelism::SINGLE, kernels)
        };
        let plain = run_packed(&packed(Kernels::default()));
        let tiled = run_packed(&packed(blocked()));
        assert_same_in(EQUAL_IN, "packed", &plain, &tiled);
    }
}

/// Whether some value has two dimensions as long as the sequence.
fn has_square(step: &hlatc::train_step::TrainStep) -> Option<String> {
    let m = &step.module;
    m.computations.iter().find_map(|c| {
        c.ids().find_map(|id| {
            let i = c.instr(id);
            let Shape::Array(a) = &i.shape else {
                return None;
            };
            (a.dims.iter().filter(|&&d| d == SEQ).count() >= 2)
                .then(|| format!("{} {}", i.name, i.shape))
        })
    })
}

#[test]
fn blocked_attention_builds_no_sequence_square() {
    for packed in [false, true] {
        let cfg = |kernels| StepConfig {
            packed,
            ..config(windowed(), Parallelism::SINGLE, kernels)
        };
        let plain = build_train_step(&cfg(Kernels::default())).unwrap();
        let tiled = build_train_step(&cfg(blocked())).unwrap();
        // The plain graph has them, so the search can find them.
        assert!(has_square(&plain).is_some());
        assert_eq!(has_square(&tiled), None, "packed: {packed}");
    }
}

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

fn imported() -> Kernels {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(IMPORTED);
    let kernel = hlatc::models::imported_kernel::ImportedKernel::load(&path).unwrap();
    Kernels {
        attention: AttentionKernel::Imported(std::sync::Arc::new(kernel)),
        ..Kernels::default()
    }
}

/// `model`'s single-device f32 step over `batch_size` sequences of
/// `seq_len`, with `kernels`: an imported kernel's shapes.
pub(crate) fn f32_step(
    model: ModelConfig,
    [batch_size, seq_len]: [i64; 2],
    kernels: Kernels,
) -> StepConfig {
    let mut cfg = step_config(model, Parallelism::SINGLE, Precision::Fp32);
    cfg.batch = BatchShape {
        batch_size,
        seq_len,
    };
    cfg.kernels = kernels;
    cfg
}

/// Tiny's step over the fixture's shapes: 4 sequences of 16.
fn tiny_at_16(model: ModelConfig, kernels: Kernels) -> StepConfig {
    f32_step(model, [4, 16], kernels)
}

#[test]
fn an_imported_jax_kernel_computes_the_plain_graphs_step() {
    for model in [gqa_odd_vocab(), mha_tied()] {
        let plain = run(&tiny_at_16(model.clone(), Kernels::default()));
        let kernel = run(&tiny_at_16(model, imported()));
        assert_same_in(Precision::Fp32, "imported", &plain, &kernel);
    }
}

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

/// Under `bf16-mixed`, `amp` reaches into the loop's bodies: every dot of
/// looped attention takes bf16 operands on neuron, as the unrolled form's
/// do, and accumulates in f32 (a loop left in f32 would run its matmuls at
/// a quarter of TensorE's bf16 rate).
#[test]
fn amp_casts_the_dots_in_the_loops_bodies() {
    use hlatc::compiler::{ElementType, Op};
    use hlatc::passes::{default_pipeline, Target};
    let mut cfg = config(gqa_odd_vocab(), Parallelism::SINGLE, looped());
    cfg = cfg.with_precision(Precision::Bf16Mixed);
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    hlatc::train_step::optimize(&mut step, &pipeline, Target::Neuron, RematPolicy::None).unwrap();
    let m = &step.module;
    let mut dots = 0;
    for c in m.computations.iter().filter(|c| c.name.ends_with(".body")) {
        for id in c
            .ids()
            .filter(|&id| matches!(c.instr(id).op, Op::Dot { .. }))
        {
            dots += 1;
            for &o in c.operand_ids(id) {
                let ty = c.instr(o).shape.as_array().map(|a| a.ty);
                assert_eq!(
                    ty,
                    Some(ElementType::Bf16),
                    "{}: {}",
                    c.name,
                    c.instr(id).name
                );
            }
            let out = c.instr(id).shape.as_array().map(|a| a.ty);
            assert_eq!(out, Some(ElementType::F32), "{}", c.instr(id).name);
        }
    }
    // Two layers, a forward loop of 2 dots and a backward loop of 4 each.
    assert_eq!(dots, 2 * (2 + 4));
}
