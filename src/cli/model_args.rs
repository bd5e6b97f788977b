//! Options shared by `compile` and `train`: which model, which batch shape,
//! which optimizer settings.

use hlatc::compile_step::{batch_shape, ModelSource, OptimizerOverrides};
use hlatc::models::{BatchShape, ModelConfig, PRESETS};
use hlatc::optimizer::AdamWConfig;
use hlatc::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct ModelArgs {
    /// Built-in model: tiny (2 layers, GQA; runs on XLA CPU), hlat-7b
    /// (Llama-2-7B shapes), hlat-70b (Llama-2-70B shapes, 8 KV heads),
    /// llama3-8b, llama3.1-8b (llama3 RoPE scaling), llama3.2-1b (tied),
    /// mistral-7b (sliding window 4096), qwen2-0.5b (q/k/v biases),
    /// tinyllama, smollm-135m, tiny-moe (tiny with 4 experts; runs on XLA
    /// CPU), mixtral-8x7b, qwen3-30b-a3b [default: compile hlat-7b, train
    /// tiny]
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(PRESETS), conflicts_with = "config")]
    pub model: Option<String>,
    /// Hugging Face `config.json` (model_type llama, mistral, qwen2, qwen3,
    /// mixtral, qwen2_moe or qwen3_moe;
    /// transformers 4 or 5 layout) instead of a preset. Every key is read,
    /// checked or known not to matter; anything else is refused by name
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Sequences per step [default: compile 1, train 8]
    #[arg(long)]
    pub batch_size: Option<i64>,
    /// Tokens per sequence [default: compile min(4096, max_position_embeddings), train min(16, ...)]
    #[arg(long)]
    pub seq_len: Option<i64>,
    /// Pack several documents per row: the step takes a `segment_ids`
    /// input (s32[batch, seq], one id per document, documents contiguous);
    /// attention stays within a document and positions restart at its start
    #[arg(long)]
    pub packed: bool,
    /// Store q/k/v and gate/up as separate tensors, as Hugging Face does.
    /// By default they are stored fused (`self_attn.qkv_proj`,
    /// `mlp.gate_up_proj`, rows stacked in that order), so each layer reads
    /// its input with 4 dots instead of 7; checkpoints (`train --init`,
    /// `--save`) are Hugging Face tensors either way, and the manifest says
    /// which rows of a fused tensor are which
    #[arg(long)]
    pub separate_projections: bool,
    /// For a mixture-of-experts model: each expert takes at most C =
    /// min(S, ceil(S x k x F / E)) tokens of each sequence of S (k experts
    /// per token, E experts), the earliest first, and a token routed to a
    /// full expert is dropped from it, as NxD's capacity factor does (it
    /// counts a rank's tokens; hlatc counts a sequence's, so dividing the
    /// batch never changes what is dropped). The static buffers of
    /// --ep-exchange all-to-all are C slots per expert per sequence.
    /// Default: dropless (C = S)
    #[arg(long, value_name = "F")]
    pub capacity_factor: Option<f64>,
}

impl ModelArgs {
    /// Where the model comes from: `--config`, else `--model`, else the
    /// preset `default`.
    pub fn source(&self, default: &str) -> ModelSource {
        match (&self.model, &self.config) {
            (_, Some(path)) => ModelSource::ConfigFile(path.clone()),
            (m, None) => ModelSource::Preset(m.as_deref().unwrap_or(default).to_string()),
        }
    }

    /// The model and its name for messages; `default` when neither flag is given.
    /// The stored layout follows `--separate-projections`.
    pub fn resolve(&self, default: &str) -> Result<(ModelConfig, String), Error> {
        let (mut cfg, name) = self.source(default).resolve(self.separate_projections)?;
        cfg.set_capacity_factor(self.capacity_factor)
            .map_err(hlatc::train_step::StepError::from)?;
        Ok((cfg, name))
    }

    /// The batch the flags ask for, with the command's defaults; see
    /// [`batch_shape`].
    pub fn batch(
        &self,
        cfg: &ModelConfig,
        name: &str,
        default_batch: i64,
        default_seq: i64,
    ) -> Result<BatchShape, Error> {
        batch_shape(
            cfg,
            name,
            self.batch_size,
            self.seq_len,
            (default_batch, default_seq),
        )
    }
}

/// AdamW and schedule settings; unset ones keep the command's defaults.
#[derive(clap::Args)]
pub struct OptimizerArgs {
    /// Peak learning rate after warmup [default: compile 3e-4, train 1e-2]
    #[arg(long)]
    pub lr_max: Option<f64>,
    /// Final learning rate, end of the cosine decay [default: compile 3e-5, train 1e-3]
    #[arg(long)]
    pub lr_min: Option<f64>,
    /// Linear warmup steps [default: compile 2000, train steps/10]
    #[arg(long)]
    pub warmup_steps: Option<i64>,
    /// Step at which the cosine decay reaches --lr-min [default: compile 100000, train --steps]
    #[arg(long)]
    pub total_steps: Option<i64>,
    /// AdamW first-moment decay [default: 0.9]
    #[arg(long)]
    pub beta1: Option<f64>,
    /// AdamW second-moment decay [default: 0.95; HLAT found 0.99 unstable in bf16]
    #[arg(long)]
    pub beta2: Option<f64>,
    /// AdamW epsilon [default: 1e-8]
    #[arg(long)]
    pub adam_eps: Option<f64>,
    /// Decoupled weight decay on every parameter, norms included [default: 0.1]
    #[arg(long)]
    pub weight_decay: Option<f64>,
    /// Global gradient-norm clip; 0 disables clipping [default: 1.0]
    #[arg(long)]
    pub clip_norm: Option<f64>,
}

impl OptimizerArgs {
    /// The flags given, as overrides of a command's defaults.
    pub fn overrides(&self) -> OptimizerOverrides {
        OptimizerOverrides {
            lr_max: self.lr_max,
            lr_min: self.lr_min,
            warmup_steps: self.warmup_steps,
            total_steps: self.total_steps,
            beta1: self.beta1,
            beta2: self.beta2,
            adam_eps: self.adam_eps,
            weight_decay: self.weight_decay,
            clip_norm: self.clip_norm,
        }
    }

    pub fn apply(&self, defaults: AdamWConfig) -> Result<AdamWConfig, Error> {
        self.overrides().apply(defaults)
    }
}
