//! Parity with Hugging Face `transformers` in PyTorch: small random models
//! of each supported family, built and stepped by `transformers` itself and
//! `torch.optim.AdamW` (`tools/hf_reference.py`, fixtures in
//! `tests/fixtures/hf/`). hlatc reads the same `config.json` (as
//! `transformers` 5 writes it) and weights, and must give the same loss,
//! gradients, grad norm and updated weights.
//!
//! The reference step runs in f64 (the weights are f32), and hlatc's step
//! is compared to it twice, in f64 and in f32, each within 1e-5 of every
//! tensor's largest magnitude; the measured worst is printed per case.
//! transformers' own floor is about 1e-6: it computes RMSNorm and the rotary
//! tables in f32 even in a float64 model. The updated weights are held to
//! that bound plus what the gradients' tolerance becomes through Adam's
//! first step (see `close_after_adam`).

use hlatc_artifacts::rank_checkpoint::params_from_tensors;
use hlatc_compiler::{ElementType, Literal};
use hlatc_models::{param_specs, BatchShape, ModelConfig, ModelType, RopeScaling};
use hlatc_runtime::{assert_close, max_abs, read_safetensors, Runtime};
use hlatc_step::data::Batch;
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::train_step::{build_loss_and_grads, build_packed_loss_and_grads, StepConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;

const CASES: [&str; 13] = [
    "llama31",
    "llama_dynamic_long",
    "llama_packed",
    "llama32_tied",
    "llama_bias_linear",
    "head_dim",
    "mistral_window",
    "qwen2",
    "qwen3",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe_norm",
    "qwen3_moe",
];

/// The f64 bound, relative to each tensor's largest magnitude.
const TOLERANCE: f64 = 1e-5;

fn dir(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/hf")
        .join(case)
}

fn rt() -> Runtime {
    Runtime::shared().unwrap_or_else(|e| panic!("{e}"))
}

/// `tools/hf_reference.py`'s optimizer: torch's AdamW, lr 1e-2 at the first
/// step, eps 1e-8.
fn torch_adamw() -> AdamWConfig {
    AdamWConfig {
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.1,
        clip_norm: Some(1.0),
        max_lr: 1e-2,
        min_lr: 0.0,
        warmup_steps: 1,
        total_steps: 10,
    }
}

#[track_caller]
fn close(what: &str, want: &Literal, got: &Literal) -> f64 {
    let scale = max_abs(want);
    let stats = assert_close(want, got, 0.0, TOLERANCE * scale.max(1e-30))
        .unwrap_or_else(|m| panic!("{what}: {m}"));
    stats.max_abs / scale.max(1e-30)
}

struct Case {
    cfg: ModelConfig,
    params: Vec<Literal>,
    batch: Batch,
    shape: BatchShape,
    reference: BTreeMap<String, Literal>,
}

fn load(case: &str) -> Case {
    let d = dir(case);
    let cfg = ModelConfig::from_hf_file(&d.join("config.json")).unwrap_or_else(|e| panic!("{e}"));
    let (params, unused) = params_from_tensors(
        &cfg,
        ElementType::F64,
        read_safetensors(&d.join("weights.safetensors")).unwrap(),
        case,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(unused.is_empty(), "{case}: unused tensors {unused:?}");
    let b = read_safetensors(&d.join("batch.safetensors")).unwrap();
    let batch = Batch {
        tokens: b["tokens"].clone(),
        targets: b["targets"].clone(),
        segment_ids: b.get("segment_ids").cloned(),
    };
    let shape = BatchShape {
        batch_size: batch.tokens.dims()[0],
        seq_len: batch.tokens.dims()[1],
    };
    let reference = read_safetensors(&d.join("reference.safetensors")).unwrap();
    Case {
        cfg,
        params,
        batch,
        shape,
        reference,
    }
}

#[test]
fn configs_read_as_transformers_wrote_them() {
    let c = load("llama31").cfg;
    assert_eq!(c.rope_theta, 500000.0);
    assert_eq!(
        c.rope_scaling,
        Some(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8
        })
    );
    assert!(load("llama32_tied").cfg.tie_word_embeddings);
    let bias = load("llama_bias_linear").cfg;
    assert!(bias.qkv_bias && bias.o_proj_bias && bias.mlp_bias);
    assert_eq!(bias.rope_scaling, Some(RopeScaling::Linear { factor: 2.0 }));
    let hd = load("head_dim").cfg;
    assert_eq!(
        (hd.hidden_size, hd.num_attention_heads, hd.head_dim),
        (16, 4, 8)
    );
    let m = load("mistral_window").cfg;
    assert_eq!(
        (m.model_type, m.sliding_window),
        (ModelType::Mistral, Some(3))
    );
    let q = load("qwen2").cfg;
    assert!(q.model_type == ModelType::Qwen2 && q.qkv_bias && !q.o_proj_bias);
    assert!(param_specs(&q)
        .iter()
        .any(|p| p.name == "model.layers.1.self_attn.v_proj.bias"));
    let q3 = load("qwen3").cfg;
    assert!(q3.model_type == ModelType::Qwen3 && q3.qk_norm && !q3.qkv_bias);
    let m = load("mixtral").cfg;
    let moe = m.moe.as_ref().unwrap();
    assert_eq!(
        (
            moe.num_experts,
            moe.num_experts_per_tok,
            moe.expert_intermediate_size
        ),
        (4, 2, 24)
    );
    assert!(moe.norm_topk_prob && moe.aux_loss() && moe.router_aux_loss_coef == 0.1);
    let q2 = load("qwen2_moe").cfg;
    let moe = q2.moe.as_ref().unwrap();
    assert!(q2.qkv_bias && !q2.o_proj_bias && !moe.norm_topk_prob);
    assert_eq!(moe.shared_expert_intermediate_size, Some(20));
    assert!(moe.is_sparse(0) && !moe.is_sparse(1), "mlp_only_layers [1]");
    // Qwen3-MoE's config class writes num_experts as num_local_experts.
    let q3m = load("qwen3_moe_norm").cfg;
    assert_eq!(
        q3m.moe.as_ref().map(|m| (m.num_experts, m.norm_topk_prob)),
        Some((4, true))
    );
    assert!(q3m.qk_norm);
}

#[test]
fn loss_gradients_and_adamw_step_match_pytorch() {
    if crate::support::skip_slow_tests() {
        return;
    }
    for case in CASES {
        let c = load(case);
        // Loss and every gradient.
        let out = loss_and_grads(&c, &c.params, ElementType::F64);
        let mut worst: f64 = close(&format!("{case}: loss"), &c.reference["loss"], &out[0]);
        for (name, got) in hugging_face(&c.cfg, &out[1..]) {
            let want = &c.reference[&format!("grad.{name}")];
            worst = worst.max(close(&format!("{case}: grad of {name}"), want, &got));
        }
        // One whole training step: clipping and AdamW as torch does them.
        let cfg = StepConfig {
            model: c.cfg.clone(),
            batch: c.shape,
            optimizer: torch_adamw(),
            precision: hlatc_step::precision::Precision::Fp64,
            packed: c.batch.segment_ids.is_some(),
            parallel: hlatc_models::Parallelism::SINGLE,
            spmd: Default::default(),
            fault: None,
            module_markers: false,
            kernels: Default::default(),
        };
        let mut trainer = crate::cpu_trainers::unoptimized(&rt(), &cfg, c.params.clone()).unwrap();
        let stats = trainer.step(&c.batch).unwrap();
        let norm = Literal::from_f64(vec![], &[stats.grad_norm]).unwrap();
        let clip = (1.0 / (stats.grad_norm + 1e-6)).min(1.0);
        worst = worst.max(close(
            &format!("{case}: grad norm"),
            &c.reference["grad_norm"],
            &norm,
        ));
        for (name, got) in hugging_face_named(&c.cfg, trainer.params()) {
            let want = &c.reference[&format!("updated.{name}")];
            let grad = &c.reference[&format!("grad.{name}")];
            worst = worst.max(close_after_adam(
                &format!("{case}: updated {name}"),
                want,
                &got,
                grad,
                clip,
            ));
        }
        // The f32 step, against the same f64 reference.
        let f32_cfg = StepConfig {
            precision: hlatc_step::precision::Precision::Fp32,
            ..cfg
        };
        let params32: Vec<Literal> = c.params.iter().map(to_f32).collect();
        let out32 = loss_and_grads(&c, &params32, ElementType::F32);
        let mut worst32: f64 = 0.0;
        for (name, got) in hugging_face(&c.cfg, &out32[1..]) {
            let want = &c.reference[&format!("grad.{name}")];
            worst32 = worst32.max(close(
                &format!("{case}: f32 grad of {name}"),
                &to_f32(want),
                &got,
            ));
        }
        let mut t32 = crate::cpu_trainers::unoptimized(&rt(), &f32_cfg, params32).unwrap();
        let s32 = t32.step(&c.batch).unwrap();
        let rel = |got: f64, want: &Literal| {
            (got - want.to_f64_vec()[0]).abs() / want.to_f64_vec()[0].abs()
        };
        let clip32 = (1.0 / (s32.grad_norm + 1e-6)).min(1.0);
        for (name, got) in hugging_face_named(&c.cfg, t32.params()) {
            let (want, grad) = (
                &c.reference[&format!("updated.{name}")],
                &c.reference[&format!("grad.{name}")],
            );
            worst32 = worst32.max(close_after_adam(
                &format!("{case}: f32 updated {name}"),
                want,
                &got,
                grad,
                clip32,
            ));
        }
        let (loss32, norm32) = (
            rel(s32.loss, &c.reference["loss"]),
            rel(s32.grad_norm, &c.reference["grad_norm"]),
        );
        assert!(
            loss32 < 1e-5 && norm32 < 1e-5,
            "{case}: f32 loss off by {loss32:.1e}, grad norm by {norm32:.1e}"
        );
        eprintln!(
            "{case}: f64 worst {worst:.1e} of the tensor's largest magnitude; \
             f32 loss {loss32:.1e}, grad norm {norm32:.1e}, gradients and updated weights {worst32:.1e}"
        );
    }
}

/// Updated weights after one AdamW step, within the bound the gradient
/// tolerance implies. The step moves each weight by lr * g / (|g| + eps)
/// (g clipped), whose slope in g is lr * eps / (|g| + eps)^2: an element
/// whose gradient is small (1e-4 of its tensor's largest, say) turns the
/// gradients' tolerance into a larger difference in the weight. Each element may
/// differ by the tolerance times the tensor's largest weight plus that propagated error.
fn close_after_adam(what: &str, want: &Literal, got: &Literal, grad: &Literal, clip: f64) -> f64 {
    let cfg = torch_adamw();
    let (lr, eps) = (cfg.max_lr, cfg.eps);
    let (w, g, x) = (want.to_f64_vec(), grad.to_f64_vec(), got.to_f64_vec());
    let (w_scale, g_scale) = (max_abs(want).max(1e-30), max_abs(grad) * clip);
    let mut worst: f64 = 0.0;
    for i in 0..w.len() {
        let gi = (g[i] * clip).abs();
        let slope = lr * eps / (gi + eps).powi(2);
        let tol = TOLERANCE * w_scale + slope * TOLERANCE * g_scale;
        let err = (w[i] - x[i]).abs();
        assert!(
            err <= tol,
            "{what}: element {i}: torch {}, hlatc {} (error {err:.3e}, bound {tol:.3e})",
            w[i],
            x[i]
        );
        worst = worst.max(err / w_scale);
    }
    worst
}

/// `stored` (one per parameter, in `param_specs` order) as Hugging Face
/// tensors: experts one by one, under their checkpoint names.
fn hugging_face(cfg: &ModelConfig, stored: &[Literal]) -> Vec<(String, Literal)> {
    let named = param_specs(cfg)
        .into_iter()
        .map(|p| p.name)
        .zip(stored.iter().cloned());
    hugging_face_named(cfg, named)
}

fn hugging_face_named(
    cfg: &ModelConfig,
    stored: impl IntoIterator<Item = (String, Literal)>,
) -> Vec<(String, Literal)> {
    let stored: BTreeMap<String, Literal> = stored.into_iter().collect();
    hlatc_models::layout::split(cfg, &stored).unwrap_or_else(|e| panic!("{e}"))
}

/// `(loss, grad...)` of `params` on the case's batch, packed when it has
/// segment ids.
fn loss_and_grads(c: &Case, params: &[Literal], ty: ElementType) -> Vec<Literal> {
    let module = match c.batch.segment_ids {
        Some(_) => build_packed_loss_and_grads(&c.cfg, c.shape, ty),
        None => build_loss_and_grads(&c.cfg, c.shape, ty),
    }
    .unwrap();
    let mut inputs = params.to_vec();
    inputs.extend(c.batch.inputs());
    rt().compile(&module).unwrap().run(&inputs).unwrap()
}

fn to_f32(l: &Literal) -> Literal {
    let v: Vec<f32> = l.to_f64_vec().into_iter().map(|x| x as f32).collect();
    Literal::from_f32(l.dims().to_vec(), &v).unwrap()
}

#[test]
fn ignored_targets_leave_the_loss() {
    // mistral_window ignores 4 of its 16 targets: the loss is their mean
    // over the other 12 (checked against torch above); with every target
    // ignored it is 0, not NaN.
    let c = load("mistral_window");
    let ignored = c
        .batch
        .targets
        .to_i64_vec()
        .iter()
        .filter(|&&t| t == -100)
        .count();
    assert_eq!(ignored, 4);
    let module = build_loss_and_grads(&c.cfg, c.shape, ElementType::F64).unwrap();
    let mut inputs = c.params.clone();
    inputs.push(c.batch.tokens.clone());
    inputs.push(Literal::from_s32(c.batch.targets.dims().to_vec(), &[-100; 16]).unwrap());
    let out = rt().compile(&module).unwrap().run(&inputs).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0.0]);
    assert!(out[1..]
        .iter()
        .all(|g| g.to_f64_vec().iter().all(|&x| x == 0.0)));
}
