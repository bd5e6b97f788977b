//! hlatc's training step for the `small` model against JAX's own step for
//! the same model and precision (`benches/data/jax_small_step_*.hlo`,
//! written by `tools/jax_step_bench.py`), compiled by the same runtime for
//! the same PJRT plugin and run the same way: every input handed over as a
//! host literal, every output read back, and each output a module aliases
//! to an input (parameters, Adam moments, the step count) fed back as that
//! input for the next step. Shared by the `step_vs_jax` bench group and the
//! `step_vs_jax` example, which also prints both steps' XLA CPU
//! temporaries.

use hlatc::compiler::{formats::text, ElementType, Literal};
use hlatc::data::SyntheticData;
use hlatc::models::{init::init_params, BatchShape, ModelConfig};
use hlatc::passes::{default_pipeline, RematPolicy, Target};
use hlatc::precision::Precision;
use hlatc::runtime::{CompiledMemoryStats, Program, Runtime};
use hlatc::train_step::{build_train_step, optimize, Role, StepConfig};
use std::collections::HashMap;
use std::path::PathBuf;

/// The batch JAX's dump was lowered for (`tools/jax_step_bench.py`).
pub const BATCH: BatchShape = BatchShape {
    batch_size: 1,
    seq_len: 512,
};

/// The precisions both sides are compared in, with the fixture's suffix.
pub const PRECISIONS: [(Precision, &str); 2] = [
    (Precision::Fp32, "fp32"),
    (Precision::Bf16Mixed, "bf16_mixed"),
];

/// The small model as `hlatc compile` stores it: q/k/v and gate/up fused.
pub fn model() -> ModelConfig {
    ModelConfig {
        fused_projections: true,
        ..ModelConfig::small()
    }
}

/// A compiled step and the inputs of its next run.
pub struct Side {
    pub program: Program,
    inputs: Vec<Literal>,
    /// (output, input): the output that becomes the input for the next step.
    feedback: Vec<(usize, usize)>,
}

impl Side {
    fn new(program: Program, module: &hlatc::Module, inputs: Vec<Literal>) -> Side {
        let feedback = module
            .input_output_alias
            .iter()
            .map(|a| {
                assert!(
                    a.output_index.len() == 1 && a.parameter_index.is_empty(),
                    "{}: a nested alias {a:?}",
                    module.name
                );
                (a.output_index[0] as usize, a.parameter as usize)
            })
            .collect::<Vec<_>>();
        assert!(!feedback.is_empty(), "{}: no state is aliased", module.name);
        Side {
            program,
            inputs,
            feedback,
        }
    }

    /// One training step; the loss (output 0 on both sides).
    pub fn step(&mut self) -> f64 {
        let mut out = self.program.run(&self.inputs).unwrap();
        for &(o, i) in &self.feedback {
            self.inputs[i] = std::mem::replace(&mut out[o], Literal::scalar_f32(0.0));
        }
        out[0].to_f64_vec()[0]
    }

    pub fn temp_bytes(&self) -> i64 {
        self.memory().temp
    }

    pub fn memory(&self) -> CompiledMemoryStats {
        self.program.memory_stats().unwrap()
    }
}

/// hlatc's step for `precision` through the `cpu` default pipeline with
/// `remat`, without the passes named in `disabled` (for what one pass
/// buys), from `init_params` seed 0, on the batch [`jax`] takes too.
pub fn hlatc(rt: &Runtime, precision: Precision, remat: RematPolicy, disabled: &[&str]) -> Side {
    let cfg = StepConfig::new(model(), BATCH).with_precision(precision);
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline(Target::Cpu, disabled).unwrap();
    optimize(&mut step, &pipeline, Target::Cpu, remat).unwrap();
    let program = rt.compile(&step.module).unwrap();
    let batch = batch();
    let mut params = init_params(&cfg.model, precision.storage(), 0).into_iter();
    let inputs = step
        .inputs
        .iter()
        .map(|s| match s.role {
            Role::Parameter => params.next().expect("one value per parameter").1,
            Role::Tokens => batch.tokens.clone(),
            Role::Targets => batch.targets.clone(),
            _ => Literal::zeros(s.dtype, s.shape.clone()),
        })
        .collect();
    Side::new(program, &step.module, inputs)
}

/// The dump of JAX's step for the fixture's `suffix` (`fp32`,
/// `bf16_mixed`).
pub fn jax_module(suffix: &str) -> hlatc::Module {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("benches/data/jax_small_step_{suffix}.hlo"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (tools/jax_step_bench.py)", path.display()));
    text::parse_module(&text).unwrap()
}

/// JAX's step, starting from the same weights as [`hlatc`] (the same
/// seed, unfused), zero moments and count, and the same batch.
pub fn jax(rt: &Runtime, suffix: &str) -> Side {
    let module = jax_module(suffix);
    let program = rt.compile(&module).unwrap();
    let cfg = ModelConfig::small();
    let by_name: HashMap<String, Literal> =
        init_params(&cfg, ElementType::F32, 0).into_iter().collect();
    let names = jax_parameter_names(&cfg);
    let n = names.len();
    let batch = batch();
    let params = program.parameters();
    assert_eq!(params.len(), 3 * n + 3, "{}", module.name);
    let inputs = (0..params.len())
        .map(|i| match i {
            i if i < n => by_name[&names[i]].clone(),
            i if i == 3 * n + 1 => batch.tokens.clone(),
            i if i == 3 * n + 2 => batch.targets.clone(),
            _ => {
                let s = params[i].1.as_array().expect("array parameters");
                Literal::zeros(s.ty, s.dims.clone())
            }
        })
        .collect();
    Side::new(program, &module, inputs)
}

/// JAX's parameter order (`tools/jax_reference.py`'s `names_and_shapes`).
fn jax_parameter_names(cfg: &ModelConfig) -> Vec<String> {
    let mut names = vec!["model.embed_tokens.weight".to_string()];
    for i in 0..cfg.num_hidden_layers {
        for k in [
            "input_layernorm",
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "post_attention_layernorm",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ] {
            names.push(format!("model.layers.{i}.{k}.weight"));
        }
    }
    names.push("model.norm.weight".into());
    names.push("lm_head.weight".into());
    names
}

fn batch() -> hlatc::data::Batch {
    let data = SyntheticData::permutation(ModelConfig::small().vocab_size, 0);
    data.batch(0, BATCH.batch_size, BATCH.seq_len)
}
