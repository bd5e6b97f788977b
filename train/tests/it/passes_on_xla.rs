//! Every pass keeps the program's meaning, on XLA CPU:
//! - the JAX Llama training step gives the same outputs with each pass
//!   alone and with each target's default pipeline;
//! - hlatc's own tiny training step (MHA, GQA, tied) gives the same loss,
//!   gradients and updated weights with each pass alone and each target's
//!   default pipeline as the unoptimized program, within 1e-5 relative.
//!
//! The `neuron` pipeline's custom calls are mapped back to plain HLO
//! (`lower-neuron-calls`) to run here.

use crate::support::{assert_close, fed_as};
use hlatc_compiler::ElementType;
use hlatc_compiler::{Literal, Module};
use hlatc_models::{init::init_params, BatchShape, ModelConfig};
use hlatc_passes::{
    default_pipeline, pipeline_from_names, registry, PassContext, Pipeline, PipelineReport,
    RematPolicy, Target,
};
use hlatc_runtime::{read_safetensors, Runtime};
use hlatc_step::data::SyntheticData;
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::train_step::{build_loss_and_grads, build_train_step, optimize, StepConfig};
use hlatc_train::trainer::Trainer;
use std::collections::HashMap;
use std::path::Path;

/// What the programs already run in a test gave, by the module's proto
/// bytes and text (the text keeps the module config the proto has no
/// field for). A pass that leaves a module as it found it, or as another
/// pipeline left it, would have XLA CPU compile and run the same program
/// on the same inputs again, for the same bits: each distinct program runs
/// once, and every pipeline is still compared with the reference.
struct RunOnce<T> {
    by_module: HashMap<(Vec<u8>, String), T>,
}

impl<T: Clone> RunOnce<T> {
    fn new() -> Self {
        RunOnce {
            by_module: HashMap::new(),
        }
    }

    /// `m`'s outputs: from `run` the first time this program is seen.
    fn outputs(&mut self, m: &Module, run: impl FnOnce() -> T) -> T {
        self.by_module
            .entry((
                hlatc_compiler::formats::proto::encode_module(m),
                hlatc_compiler::formats::text::print_module(m),
            ))
            .or_insert_with(run)
            .clone()
    }
}

fn jax_fixture() -> (Module, Vec<Literal>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/jax");
    let m = crate::support::read_module(&dir.join("llama_tiny_step.hlo"));
    let ins = read_safetensors(&dir.join("llama_tiny_step.inputs.safetensors")).unwrap();
    let inputs = (0..ins.len())
        .map(|i| ins[&format!("arg{i}")].clone())
        .collect();
    (m, inputs)
}

/// Every pass alone (remat with core-attention), then each target's
/// default pipeline without remat and with each remat policy, as (label,
/// target, pipeline, remat policy).
fn pipelines() -> Vec<(String, Target, Pipeline, RematPolicy)> {
    let mut out: Vec<(String, Target, Pipeline, RematPolicy)> = registry()
        .iter()
        .map(|p| {
            (
                p.name.to_string(),
                Target::Cpu,
                pipeline_from_names(p.name, &[p.name]).unwrap(),
                RematPolicy::CoreAttention,
            )
        })
        .collect();
    for (t, remat) in [
        (Target::Neuron, RematPolicy::None),
        (Target::Cpu, RematPolicy::None),
        (Target::Neuron, RematPolicy::CoreAttention),
        (Target::Cpu, RematPolicy::FullLayer),
    ] {
        out.push((
            format!("default pipeline for {t}, remat {remat}"),
            t,
            default_pipeline::<&str>(t, &[]).unwrap(),
            remat,
        ));
    }
    out
}

/// Runs `p` for `target`, then maps Neuron custom calls back for XLA CPU.
fn optimized(
    m: &Module,
    target: Target,
    p: &Pipeline,
    remat: RematPolicy,
) -> (Module, PipelineReport) {
    let mut m = m.clone();
    let mut ctx = PassContext::new(target);
    ctx.remat = remat;
    let report = p.run_module(&mut m, &mut ctx).unwrap();
    pipeline_from_names("lower", &["lower-neuron-calls"])
        .unwrap()
        .run_module(&mut m, &mut PassContext::new(Target::Cpu))
        .unwrap();
    (m, report)
}

#[test]
fn each_pass_and_default_pipeline_keep_the_jax_steps_numbers() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let (module, inputs) = jax_fixture();
    let reference = rt.compile(&module).unwrap().run(&inputs).unwrap();
    let mut runs = RunOnce::new();
    for (label, target, p, remat) in pipelines() {
        let (m, report) = optimized(&module, target, &p, remat);
        let got = runs.outputs(&m, || rt.compile(&m).unwrap().run(&inputs).unwrap());
        assert_eq!(got.len(), reference.len());
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            assert_close(&format!("{label}: output {i}"), g, r, 1e-5);
        }
        if label == "cse" {
            assert!(report.changed(), "JAX's dump has duplicates for cse");
        }
        if label.starts_with("default") {
            assert!(
                report.fired("coalesce-linear"),
                "{label}: q/k/v and gate/up share their input in JAX's step too"
            );
            // JAX differentiated this softmax op by op, so its backward
            // reads the exponentials: fusing would leave them without a
            // value. The pass must see the softmax and refuse, saying why.
            assert!(!report.fired("fuse-softmax"), "{label}");
            assert!(
                report
                    .notes
                    .iter()
                    .any(|n| n.starts_with("fuse-softmax: left") && n.contains("read outside")),
                "{label}: {:?}",
                report.notes
            );
        }
    }
}

fn tiny_variants() -> Vec<(&'static str, ModelConfig)> {
    let mha = ModelConfig::tiny();
    let mut gqa = ModelConfig::tiny();
    gqa.num_key_value_heads = gqa.num_attention_heads / 2;
    let mut tied = ModelConfig::tiny();
    tied.tie_word_embeddings = true;
    vec![("mha", mha), ("gqa", gqa), ("tied", tied)]
}

fn step_config(model: ModelConfig) -> StepConfig {
    StepConfig {
        model,
        batch: BatchShape {
            batch_size: 2,
            seq_len: 16,
        },
        optimizer: AdamWConfig::default(),
        precision: hlatc_step::precision::Precision::Fp32,
        packed: false,
        parallel: hlatc_models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    }
}

#[test]
fn each_pass_and_default_pipeline_keep_hlatcs_step_numbers() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    for (variant, model) in tiny_variants() {
        let cfg = step_config(model);
        let params: Vec<Literal> = init_params(&cfg.model, ElementType::F32, 7)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        let batch = SyntheticData::permutation(cfg.model.vocab_size, 3).batch(0, 2, 16);
        let mut grad_inputs = params.clone();
        grad_inputs.extend(batch.inputs());

        let grads = build_loss_and_grads(&cfg.model, cfg.batch, ElementType::F32).unwrap();
        let grads_ref = rt.compile(&grads).unwrap().run(&grad_inputs).unwrap();
        let plain = build_train_step(&cfg).unwrap();
        let mut trainer = Trainer::with_program(
            rt.compile(&plain.module).unwrap(),
            &cfg,
            &plain,
            params.clone(),
        )
        .unwrap();
        let stats_ref = trainer.step(&batch).unwrap();
        let updated_ref = trainer.params();

        let mut grad_runs = RunOnce::new();
        let mut step_runs = RunOnce::new();
        for (label, target, p, remat) in pipelines() {
            let what = format!("{variant}, {label}");
            // Loss and gradients.
            let (m, report) = optimized(&grads, target, &p, remat);
            if label.contains("remat core") || label.contains("remat full") || label == "remat" {
                assert!(report.fired("remat"), "{what}: {:?}", report.notes);
            }
            let got = grad_runs.outputs(&m, || rt.compile(&m).unwrap().run(&grad_inputs).unwrap());
            for (i, (g, r)) in got.iter().zip(&grads_ref).enumerate() {
                assert_close(&format!("{what}: loss/grad output {i}"), g, r, 1e-5);
            }
            // The whole step: loss, grad norm, updated weights.
            let mut step = build_train_step(&cfg).unwrap();
            optimize(&mut step, &p, target, remat).unwrap();
            let (m, _) = optimized(&step.module, Target::Cpu, &Pipeline::new("none"), remat);
            let (stats, updated) = step_runs.outputs(&m, || {
                let mut trainer =
                    Trainer::with_program(rt.compile(&m).unwrap(), &cfg, &step, params.clone())
                        .unwrap();
                let stats = trainer.step(&batch).unwrap();
                (stats, trainer.params())
            });
            let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-30);
            assert!(rel(stats.loss, stats_ref.loss) < 1e-5, "{what}: loss");
            assert!(
                rel(stats.grad_norm, stats_ref.grad_norm) < 1e-5,
                "{what}: grad norm"
            );
            for ((name, g), (_, r)) in updated.iter().zip(&updated_ref) {
                assert_close(&format!("{what}: updated {name}"), g, r, 1e-5);
            }
        }
    }
}

#[test]
fn unknown_pass_names_are_errors_that_list_the_known_ones() {
    let e = pipeline_from_names("p", &["dce", "fuse-everything"])
        .err()
        .unwrap();
    let known: Vec<&str> = registry().iter().map(|p| p.name).collect();
    assert_eq!(
        e.to_string(),
        format!(
            "unknown pass 'fuse-everything' (known passes: {})",
            known.join(", ")
        )
    );
    let e = default_pipeline(Target::Cpu, &["no-such-pass"])
        .err()
        .unwrap();
    assert!(
        e.to_string().starts_with("unknown pass 'no-such-pass'"),
        "{e}"
    );
}

/// The torch-xla dump of a Hugging Face `LlamaForCausalLM` training step
/// (`tools/torch_xla_llama_step.py`), the name of its attention-mask
/// parameter, and inputs for every parameter: small positive floats (Adam's
/// second moments must not be negative), token ids below the vocabulary,
/// a step count of 3, and the causal mask it was traced with.
fn torch_xla_fixture() -> (Module, String, Vec<Literal>) {
    use hlatc_compiler::Scalar;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torch_xla");
    let m = crate::support::read_module(&dir.join("torch_xla_llama_step.hlo"));
    let mask = read_safetensors(&dir.join("causal_mask.safetensors")).unwrap();
    let (mask_name, mask) = mask.into_iter().next().unwrap();
    let e = m.entry();
    let inputs = e
        .parameters()
        .into_iter()
        .enumerate()
        .map(|(k, p)| {
            let i = e.instr(p);
            if i.name == mask_name {
                return mask.clone();
            }
            let a = i.shape.as_array().unwrap();
            let n = a.element_count() as usize;
            let values: Vec<Scalar> = (0..n)
                .map(|j| match (a.ty.is_float(), a.rank()) {
                    (true, _) => {
                        let golden = ((k * 7919 + j) as f64 * 0.618_033_988_7).fract();
                        Scalar::Float(0.01 + 0.09 * golden)
                    }
                    (false, 0) => Scalar::Int(3),
                    (false, _) => Scalar::Int(((k + j * 5) % 8) as i64),
                })
                .collect();
            Literal::from_scalars(a.ty, a.dims.clone(), &values).unwrap()
        })
        .collect();
    (m, mask_name, inputs)
}

/// Each output within 3e-5 of its largest magnitude, or within 1e-12
/// where that magnitude is itself rounding: measured on a 2-core Xeon with
/// AVX-512, the order XLA CPU reduces in moves the torch-xla step's f32
/// outputs by up to 1.2e-5 of their largest magnitude (the causal step's
/// 15th against torch-xla's own values), and its 21st output, a gradient
/// whose elements are about 1e-10 (what cancellation leaves of terms far
/// larger), by 1.5e-14 (4.6e-5 of its own largest), where a machine
/// without AVX-512 stayed within 1e-5. A mask that leaks, or a pass that
/// changes the math, moves the outputs by far more.
fn assert_all_close(what: &str, got: &[Literal], want: &[Literal]) {
    assert_eq!(got.len(), want.len(), "{what}: outputs");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (g.to_f64_vec(), w.to_f64_vec());
        assert!(
            w.iter().all(|v| v.is_finite()),
            "{what}: reference output {i} is not finite"
        );
        assert_eq!(g.len(), w.len(), "{what}: output {i}'s size");
        let scale = w.iter().fold(0f64, |a, v| a.max(v.abs()));
        for (k, (a, b)) in g.iter().zip(&w).enumerate() {
            assert!(
                (a - b).abs() <= 3e-5 * scale + 1e-12,
                "{what}: output {i}[{k}]: {a} vs {b} (largest magnitude {scale})"
            );
        }
    }
}

#[test]
fn each_pass_and_default_pipeline_keep_the_torch_xla_steps_numbers() {
    if crate::support::skip_slow_tests() {
        return;
    }
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let (module, _, inputs) = torch_xla_fixture();
    let reference = rt.compile(&module).unwrap().run(&inputs).unwrap();
    let mut runs = RunOnce::new();
    for (label, target, p, remat) in pipelines() {
        let (m, report) = optimized(&module, target, &p, remat);
        // `narrow-f64` takes torch-xla's f64 scalars as f32.
        let got = runs.outputs(&m, || {
            rt.compile(&m).unwrap().run(&fed_as(&m, &inputs)).unwrap()
        });
        assert_all_close(&label, &got, &reference);
        if label.starts_with("default") {
            // The projections share their input once simplify and cse have
            // merged torch-xla's per-projection copies of it.
            for pass in ["simplify", "cse", "coalesce-linear", "fuse-softmax"] {
                assert!(report.fired(pass), "{label}: {pass} fired");
            }
        }
    }
}

/// NxD builds the causal mask on the host and torch-xla makes it an entry
/// parameter: from the HLO alone a causal and a non-causal mask look the
/// same. Bound to the causal mask, it folds into iota/compare and no mask
/// tensor is read any more; bound to one that hides the past instead, the
/// mask stays, as a constant. Either way the bound parameter is unread and
/// can leave the signature.
#[test]
fn a_host_built_causal_mask_folds_once_bound_and_only_then() {
    use hlatc_passes::bind::{bind_parameter, drop_unused_parameters};
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let (module, mask_name, inputs) = torch_xla_fixture();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torch_xla");
    let mask_at = module
        .entry()
        .parameters()
        .iter()
        .position(|&p| module.entry().instr(p).name == mask_name)
        .unwrap();
    let mask_shape = module.entry_parameter_shapes()[mask_at].clone();
    let holds_a_mask = |m: &Module| {
        m.entry().ids().any(|id| {
            let i = m.entry().instr(id);
            i.shape == mask_shape
                && matches!(
                    i.op,
                    hlatc_compiler::Op::Parameter(_) | hlatc_compiler::Op::Constant(_)
                )
        })
    };
    for (file, causal) in [("causal_mask", true), ("noncausal_mask", false)] {
        let mask = read_safetensors(&dir.join(format!("{file}.safetensors")))
            .unwrap()
            .remove(&mask_name)
            .unwrap();
        let mut with_mask = inputs.clone();
        with_mask[mask_at] = mask.clone();
        let reference = rt.compile(&module).unwrap().run(&with_mask).unwrap();

        let mut m = module.clone();
        bind_parameter(&mut m, &mask_name, mask).unwrap();
        let p = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
        let report = p
            .run_module(&mut m, &mut PassContext::new(Target::Cpu))
            .unwrap();
        assert_eq!(report.fired("fold-causal-mask"), causal, "{file}");
        assert_eq!(drop_unused_parameters(&mut m), vec![mask_name.clone()]);
        assert_eq!(
            holds_a_mask(&m),
            !causal,
            "{file}: an [S, S] mask tensor is read"
        );
        let mut rest = with_mask.clone();
        rest.remove(mask_at);
        let got = rt.compile(&m).unwrap().run(&rest).unwrap();
        assert_all_close(file, &got, &reference);
    }
}

/// torch-xla's dump of the usual training call (no mask passed: Hugging
/// Face builds it, and its cumsum is a `reduce-window`), through each
/// default pipeline, still gives the outputs torch-xla computed for the
/// values its parameters had (`tools/torch_xla_llama_step.py --variant
/// causal`).
#[test]
fn default_pipelines_keep_torch_xlas_own_outputs_for_its_causal_step() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/torch_xla");
    let module = crate::support::read_module(&dir.join("torch_xla_llama_step.causal.hlo"));
    let ins =
        read_safetensors(&dir.join("torch_xla_llama_step.causal.inputs.safetensors")).unwrap();
    let outs =
        read_safetensors(&dir.join("torch_xla_llama_step.causal.outputs.safetensors")).unwrap();
    let inputs: Vec<Literal> = (0..ins.len())
        .map(|i| ins[&format!("arg{i}")].clone())
        .collect();
    let want: Vec<Literal> = (0..outs.len())
        .map(|i| outs[&format!("out{i}")].clone())
        .collect();
    for (label, target, p, remat) in pipelines()
        .into_iter()
        .filter(|(label, ..)| label.starts_with("default"))
    {
        let (m, report) = optimized(&module, target, &p, remat);
        assert!(report.fired("cse"), "{label}: cse fired");
        let got = rt.compile(&m).unwrap().run(&fed_as(&m, &inputs)).unwrap();
        assert_all_close(&label, &got, &want);
    }
}

/// XLA CPU compiles no async op; `async-to-sync` makes each a call where
/// its done stands, and the values are the computation's: with a = (1, 2,
/// 3) and b = (4, 4, 4), -(a - b) * -a = (-3, -4, -3). A start whose bundle
/// another instruction reads is left alone.
#[test]
fn async_ops_run_synchronously_with_their_computations_values() {
    let src = "HloModule m\n\nneg_diff {\n  p = f32[3] parameter(0)\n  q = f32[3] parameter(1)\n  s = f32[3] subtract(p, q)\n  ROOT n = f32[3] negate(s)\n}, execution_thread=\"side\"\n\nENTRY e {\n  a = f32[3] parameter(0)\n  b = f32[3] parameter(1)\n  st = ((f32[3], f32[3]), f32[3], u32[]) async-start(a, b), async_execution_thread=\"side\", calls=neg_diff\n  up = ((f32[3], f32[3]), f32[3], u32[]) async-update(st)\n  d = f32[3] async-done(up)\n  ns = ((f32[3]), f32[3], s32[]) negate-start(a)\n  nd = f32[3] negate-done(ns)\n  ROOT r = f32[3] multiply(d, nd)\n}\n";
    let mut m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    let p = pipeline_from_names("sync", &["async-to-sync"]).unwrap();
    assert!(p.run_module(&mut m, &mut ctx).unwrap().changed());
    let printed = hlatc_compiler::formats::text::print_module(&m);
    assert!(!printed.contains("async-"), "{printed}");
    assert!(!printed.contains("execution_thread"), "{printed}");
    assert!(
        printed.contains("d = f32[3]{0} call(a, b), to_apply=neg_diff"),
        "{printed}"
    );
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let a = Literal::from_f32(vec![3], &[1.0, 2.0, 3.0]).unwrap();
    let b = Literal::from_f32(vec![3], &[4.0, 4.0, 4.0]).unwrap();
    let got = rt.compile(&m).unwrap().run(&[a, b]).unwrap();
    assert_eq!(got[0].to_f64_vec(), [-3.0, -4.0, -3.0]);

    let read_elsewhere = src.replace(
        "  ROOT r = f32[3] multiply(d, nd)",
        "  g = f32[3] get-tuple-element(st), index=1\n  ROOT r = f32[3] multiply(d, g)",
    );
    let mut m = hlatc_compiler::formats::text::parse_module(&read_elsewhere).unwrap();
    let report = p.run_module(&mut m, &mut ctx).unwrap();
    let printed = hlatc_compiler::formats::text::print_module(&m);
    assert!(printed.contains("async-start(a, b)"), "{printed}");
    assert!(
        printed.contains("negate-start") || printed.contains("call(a), to_apply=async_wrapped"),
        "{printed}"
    );
    assert!(report.changed(), "the negate chain has no other reader");
}

/// `bound_loops` (`hlatc run --max-trips`) stops a loop that never ends
/// after the bound, and leaves one that ends sooner computing what it did.
#[test]
fn bounded_loops_stop_at_the_bound_and_otherwise_compute_the_same() {
    let counting = "HloModule m\ncond {\n  s = (s32[], f32[2]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  limit = s32[] constant(LIMIT)\n  ROOT lt = pred[] compare(i, limit), direction=LT\n}\nbody {\n  s.1 = (s32[], f32[2]) parameter(0)\n  i.1 = s32[] get-tuple-element(s.1), index=0\n  one = s32[] constant(1)\n  next = s32[] add(i.1, one)\n  x = f32[2] get-tuple-element(s.1), index=1\n  y = f32[2] add(x, x)\n  ROOT t = (s32[], f32[2]) tuple(next, y)\n}\nENTRY e {\n  x.1 = f32[2] parameter(0)\n  zero = s32[] constant(0)\n  init = (s32[], f32[2]) tuple(zero, x.1)\n  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body\n}\n";
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let x = Literal::from_f32(vec![2], &[1.0, -0.5]).unwrap();
    let run = |src: &str, bound: Option<u32>| {
        let mut m = hlatc_compiler::formats::text::parse_module(src).unwrap();
        if let Some(n) = bound {
            assert_eq!(hlatc_passes::bound_loops(&mut m, n).unwrap(), 1);
            hlatc_compiler::verify(&m).unwrap();
        }
        let out = rt
            .compile(&m)
            .unwrap()
            .run(std::slice::from_ref(&x))
            .unwrap();
        (out[0].to_i64_vec()[0], out[1].to_f32_vec())
    };
    // Ten trips, well inside a bound of 1000: the same values.
    let ten = counting.replace("LIMIT", "10");
    assert_eq!(run(&ten, None), (10, vec![1024.0, -512.0]));
    assert_eq!(run(&ten, Some(1000)), (10, vec![1024.0, -512.0]));
    // A condition that never turns false stops after the bound.
    let forever = ten.replace(
        "  ROOT lt = pred[] compare(i, limit), direction=LT",
        "  ROOT lt = pred[] compare(i, i), direction=EQ",
    );
    assert_eq!(run(&forever, Some(5)), (5, vec![32.0, -16.0]));
    // A bound below the loop's own count stops it there too.
    assert_eq!(run(&ten, Some(3)), (3, vec![8.0, -4.0]));
}

/// `narrow-gathers` on a sequence-parallel `bf16-mixed` step (TP 2 x DP 2):
/// the gathers of the norms' outputs move bf16, and three steps on four
/// XLA CPU devices give bit for bit what the step gives without the pass.
#[test]
fn narrowed_gathers_compute_the_same_bits() {
    use crate::runs;
    use hlatc_models::Parallelism;
    use hlatc_step::precision::Precision;
    let par = Parallelism {
        tp: 2,
        dp: 2,
        sequence_parallel: true,
        zero1: false,
        pp: 1,
        ..Parallelism::SINGLE
    };
    let cfg = runs::step_config(runs::gqa_odd_vocab(), par, Precision::Bf16Mixed);
    let run = |disabled: &[&str], narrowed: bool| {
        runs::run_with(&cfg, |rt, cfg, params| {
            let mut step = build_train_step(cfg)?;
            let pipeline = default_pipeline(Target::Cpu, disabled)?;
            optimize(
                &mut step,
                &pipeline,
                Target::Cpu,
                RematPolicy::CoreAttention,
            )?;
            assert_eq!(step.pass_report.fired("narrow-gathers"), narrowed);
            let gathered_bf16 = hlatc_compiler::formats::text::print_module(&step.module)
                .lines()
                .filter(|l| l.contains("bf16[") && l.contains("} all-gather("))
                .count();
            assert_eq!(gathered_bf16 > 0, narrowed, "bf16 all-gathers");
            Trainer::with_program(rt.compile(&step.module)?, cfg, &step, params)
        })
    };
    let wide = run(&["narrow-gathers"], false);
    let narrow = run(&[], true);
    let diffs = runs::differences(&wide, &narrow, 0.0);
    assert!(diffs.is_empty(), "{}", diffs.join("; "));
}
