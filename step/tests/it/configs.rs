//! The tiny models and step settings the step's tests build on, shared
//! with the root crate's integration tests (`tests/it/main.rs` includes
//! this file), so both build the same steps.

use hlatc_models::{AttentionKernel, BatchShape, Kernels, ModelConfig, Parallelism};
use hlatc_passes::RematPolicy;
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::pipeline::{PipelineForm, StageSend};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::StepConfig;

/// Tiny GQA (4 query heads over 2 KV heads, so TP 4 replicates each KV
/// head on two ranks), untied, with a vocabulary of 63 that neither TP 2
/// nor TP 4 divides.
pub(crate) fn gqa_odd_vocab() -> ModelConfig {
    ModelConfig {
        vocab_size: 63,
        fused_projections: true,
        ..ModelConfig::tiny()
    }
}

pub(crate) fn step_config(
    model: ModelConfig,
    parallel: Parallelism,
    precision: Precision,
) -> StepConfig {
    StepConfig {
        optimizer: AdamWConfig {
            max_lr: 1e-3,
            min_lr: 1e-4,
            warmup_steps: 1,
            total_steps: 10,
            // Small enough that the clip acts: the norm is in the update.
            clip_norm: Some(0.5),
            ..AdamWConfig::default()
        },
        parallel,
        ..StepConfig::new(
            model,
            BatchShape {
                batch_size: 4,
                seq_len: 8,
            },
        )
        .with_precision(precision)
    }
}

/// Four layers, so PP 4 has one a stage and PP 2 two.
pub(crate) fn deep(model: ModelConfig) -> ModelConfig {
    ModelConfig {
        num_hidden_layers: 4,
        ..model
    }
}

pub(crate) fn layout(
    pp: i64,
    tp: i64,
    dp: i64,
    sequence_parallel: bool,
    zero1: bool,
) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1,
        pp,
        ..Parallelism::SINGLE
    }
}

/// The precision two forms of one step (sharded, staged, accumulated,
/// tiled) are built in to be compared: f64, where their sums' orders agree
/// to rounding on any machine (`train/tests/it/sharded.rs` says why).
pub(crate) const EQUAL_IN: Precision = Precision::Fp64;

/// Eight sequences a step, so each of two DP replicas has four to divide
/// into micro-batches, in [`EQUAL_IN`].
pub(crate) fn pipeline_config(model: ModelConfig, par: Parallelism) -> StepConfig {
    let mut cfg = step_config(model, par, EQUAL_IN);
    cfg.batch.batch_size = 8;
    cfg
}

/// The two forms a layout is proven in: `permute` keeping every
/// activation, and neuron's default, `all-gather` under `core-attention`.
pub(crate) const FORMS: [PipelineForm; 2] = [
    PipelineForm {
        remat: RematPolicy::None,
        send: StageSend::Permute,
    },
    PipelineForm {
        remat: RematPolicy::CoreAttention,
        send: StageSend::AllGather,
    },
];

/// Sequences of 24 in tiles of 8: three query tiles, six tile pairs.
pub(crate) const SEQ: i64 = 24;
const TILE: i64 = 8;

fn long(model: ModelConfig) -> ModelConfig {
    ModelConfig {
        max_position_embeddings: SEQ,
        ..model
    }
}

/// A window of 10: the third query tile sees the second key tile in part
/// and the first not at all.
pub(crate) fn windowed() -> ModelConfig {
    ModelConfig {
        sliding_window: Some(10),
        ..long(gqa_odd_vocab())
    }
}

/// `model`'s step over `par` in [`EQUAL_IN`], four sequences of [`SEQ`],
/// with `kernels`: a kernel point's tiles and the plain graph compared.
pub(crate) fn kernel_config(model: ModelConfig, par: Parallelism, kernels: Kernels) -> StepConfig {
    let mut cfg = step_config(long(model), par, EQUAL_IN);
    cfg.batch = BatchShape {
        batch_size: 4,
        seq_len: SEQ,
    };
    cfg.kernels = kernels;
    cfg
}

/// Attention tile by tile, unrolled, tiles of [`TILE`].
pub(crate) fn blocked() -> Kernels {
    Kernels {
        attention: AttentionKernel::Blocked { tile: TILE },
        ..Kernels::default()
    }
}

/// Attention tile by tile in a loop, tiles of [`TILE`].
pub(crate) fn looped() -> Kernels {
    Kernels {
        attention: AttentionKernel::Looped { tile: TILE },
        ..Kernels::default()
    }
}
