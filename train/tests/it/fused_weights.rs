//! Weights stored fused (`qkv_proj`, `gate_up_proj`) are the same model as
//! the Hugging Face layout: the same loss, gradients and updated weights on
//! XLA CPU once split back, checkpoints convert both ways without changing
//! a byte, and each layer's forward reads its input with 4 dots instead of 7.

use hlatc_compiler::{ElementType, Literal, Module, Op};
use hlatc_models::layout::{join, split};
use hlatc_models::{init::init_params, param_specs, BatchShape, ModelConfig};
use hlatc_passes::{default_pipeline, RematPolicy, Target};
use hlatc_runtime::Runtime;
use hlatc_step::data::SyntheticData;
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::train_step::{build_loss_and_grads, build_train_step, optimize, StepConfig};
use hlatc_train::trainer::Trainer;
use std::collections::BTreeMap;

fn variants() -> Vec<(&'static str, ModelConfig)> {
    let mha = ModelConfig {
        num_key_value_heads: 4,
        ..ModelConfig::tiny()
    };
    let gqa = ModelConfig::tiny();
    let biased = ModelConfig {
        qkv_bias: true,
        mlp_bias: true,
        ..ModelConfig::tiny()
    };
    vec![("mha", mha), ("gqa", gqa), ("biases", biased)]
}

fn fused(cfg: &ModelConfig) -> ModelConfig {
    ModelConfig {
        fused_projections: true,
        ..cfg.clone()
    }
}

fn assert_close(what: &str, got: &Literal, want: &Literal, rtol: f64) {
    assert_close_abs(what, got, want, rtol, 0.0);
}

fn assert_close_abs(what: &str, got: &Literal, want: &Literal, rtol: f64, atol: f64) {
    assert_eq!(got.dims(), want.dims(), "{what}: dims");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = w.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= rtol * scale + atol,
            "{what}[{i}]: {a} vs {b} (largest magnitude {scale})"
        );
    }
}

#[test]
fn checkpoints_convert_both_ways_byte_for_byte() {
    for (name, hf_cfg) in variants() {
        let cfg = fused(&hf_cfg);
        let hf = init_params(&hf_cfg, ElementType::F32, 3);
        let mut by_name: BTreeMap<String, Literal> = hf.iter().cloned().collect();
        let stored = join(&cfg, &mut by_name).unwrap();
        assert!(by_name.is_empty(), "{name}: every tensor is used");
        // A seed gives the same model in either layout.
        assert_eq!(stored, init_params(&cfg, ElementType::F32, 3), "{name}");
        let back = split(&cfg, &stored.into_iter().collect()).unwrap();
        assert_eq!(
            back, hf,
            "{name}: split(join(x)) == x, in Hugging Face order"
        );
    }
}

#[test]
fn a_missing_or_misshapen_part_is_named() {
    let hf_cfg = ModelConfig::tiny();
    let cfg = fused(&hf_cfg);
    let mut hf: BTreeMap<String, Literal> = init_params(&hf_cfg, ElementType::F32, 0)
        .into_iter()
        .collect();
    let k = "model.layers.1.self_attn.k_proj.weight";
    let removed = hf.remove(k).unwrap();
    let e = join(&cfg, &mut hf.clone()).unwrap_err().to_string();
    assert_eq!(e, format!("no tensor '{k}' (shape [16, 32])"));
    hf.insert(k.to_string(), removed.reshaped(vec![32, 16]).unwrap());
    let e = join(&cfg, &mut hf).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("tensor '{k}' has shape [32, 16], the model needs [16, 32]")
    );
}

#[test]
fn fused_and_separate_steps_agree_on_xla_cpu() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let batch = BatchShape {
        batch_size: 2,
        seq_len: 16,
    };
    for (name, hf_cfg) in variants() {
        let cfg = fused(&hf_cfg);
        let hf = init_params(&hf_cfg, ElementType::F32, 11);
        let data = SyntheticData::permutation(cfg.vocab_size, 2).batch(0, 2, 16);
        let stored = join(&cfg, &mut hf.iter().cloned().collect()).unwrap();

        // Loss and gradients, the fused gradients split back.
        let run = |m: &Module, params: Vec<Literal>| {
            let mut inputs = params;
            inputs.extend(data.inputs());
            rt.compile(m).unwrap().run(&inputs).unwrap()
        };
        let want = run(
            &build_loss_and_grads(&hf_cfg, batch, ElementType::F32).unwrap(),
            hf.iter().map(|(_, l)| l.clone()).collect(),
        );
        let got = run(
            &build_loss_and_grads(&cfg, batch, ElementType::F32).unwrap(),
            stored.iter().map(|(_, l)| l.clone()).collect(),
        );
        assert_close(&format!("{name}: loss"), &got[0], &want[0], 1e-6);
        let grads: BTreeMap<String, Literal> = param_specs(&cfg)
            .into_iter()
            .map(|p| p.name)
            .zip(got[1..].iter().cloned())
            .collect();
        for ((n, g), w) in split(&cfg, &grads).unwrap().iter().zip(&want[1..]) {
            assert_close(&format!("{name}: grad {n}"), g, w, 1e-5);
        }

        // One whole step through the default pipeline with remat: the
        // updated weights, as Hugging Face tensors.
        let step_of = |model: &ModelConfig, params: Vec<Literal>| {
            let cfg = StepConfig {
                model: model.clone(),
                batch,
                optimizer: AdamWConfig::default(),
                precision: hlatc_step::precision::Precision::Fp32,
                packed: false,
                parallel: hlatc_models::Parallelism::SINGLE,
                spmd: Default::default(),
                fault: None,
                module_markers: false,
                kernels: Default::default(),
            };
            let mut step = build_train_step(&cfg).unwrap();
            let p = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
            optimize(&mut step, &p, Target::Cpu, RematPolicy::CoreAttention).unwrap();
            let program = rt.compile(&step.module).unwrap();
            let mut t = Trainer::with_program(program, &cfg, &step, params).unwrap();
            let stats = t.step(&data).unwrap();
            (stats, t.hugging_face_params())
        };
        let (ref_stats, updated_ref) = step_of(&hf_cfg, hf.into_iter().map(|(_, l)| l).collect());
        let (stats, updated) = step_of(&cfg, stored.into_iter().map(|(_, l)| l).collect());
        let loss_ref = ref_stats.loss;
        assert!(
            (stats.loss - loss_ref).abs() <= 1e-6 * loss_ref.abs(),
            "{name}"
        );
        assert_eq!(updated.len(), updated_ref.len());
        // Adam's first step moves a weight by lr * g / (|g| + eps): where a
        // gradient is rounding noise (k's bias cannot change the softmax),
        // any two summation orders may move it differently, by up to lr.
        for ((n, g), (m, w)) in updated.iter().zip(&updated_ref) {
            assert_eq!(n, m);
            assert_close_abs(
                &format!("{name}: updated {n}"),
                g,
                w,
                1e-5,
                2.0 * ref_stats.learning_rate,
            );
        }
    }
}

/// Dots whose provenance scope says they are layer 0's projections, in
/// the forward pass.
fn forward_projection_dots(m: &Module) -> usize {
    let e = m.entry();
    e.ids()
        .filter(|&id| {
            let i = e.instr(id);
            matches!(i.op, Op::Dot { .. })
                && i.metadata.op_name.starts_with("layers.0/")
                && !i.metadata.op_name.contains("core_attention")
        })
        .count()
}

fn dots(m: &Module) -> usize {
    m.computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| &c.instr(id).op))
        .filter(|op| matches!(op, Op::Dot { .. }))
        .count()
}

#[test]
fn the_7b_step_reads_each_layers_input_with_4_dots_not_7() {
    let count = |fused_projections: bool| {
        let cfg = StepConfig {
            model: ModelConfig {
                fused_projections,
                ..ModelConfig::hlat_7b()
            },
            batch: BatchShape {
                batch_size: 1,
                seq_len: 4096,
            },
            optimizer: AdamWConfig::default(),
            precision: hlatc_step::precision::Precision::Fp32,
            packed: false,
            parallel: hlatc_models::Parallelism::SINGLE,
            spmd: Default::default(),
            fault: None,
            module_markers: false,
            kernels: Default::default(),
        };
        let mut step = build_train_step(&cfg).unwrap();
        let p = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
        optimize(&mut step, &p, Target::Neuron, RematPolicy::None).unwrap();
        (forward_projection_dots(&step.module), dots(&step.module))
    };
    // q, k, v, o, gate, up, down against qkv, o, gate_up, down; every
    // backward dot follows (2 per forward dot), so the step's total is
    // 6 + 12 per layer, the LM head's 3 and nothing else.
    assert_eq!(count(false), (7, 771));
    assert_eq!(count(true), (4, 579));
}
