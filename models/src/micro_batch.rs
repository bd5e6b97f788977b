//! A program over one micro-batch of an optimizer step: what its loss is
//! a share of.

use hlatc_compiler::InstrId;

/// One of `of` micro-batches of an optimizer step (gradient accumulation's
/// micro step, a pipeline's tick), so that the micro-batches' losses and
/// gradients, summed, are the step's.
///
/// - The cross-entropy is a share of the mean over `token_count` (`s32[]`,
///   the counted targets of the whole step, over every DP replica), not of
///   this micro-batch's mean: a micro-batch with fewer counted targets
///   weighs less, as in one pass over the whole batch.
/// - The load-balancing loss is this micro-batch's (its routing counts
///   pooled over the DP replicas), over `of`: the step's is the mean of its
///   micro-batches', as Hugging Face's Trainer, Megatron and NxD accumulate
///   it. It cannot be the whole batch's: its gradient reads every token's
///   choice of expert, which later micro-batches have not made yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MicroBatch {
    pub token_count: InstrId,
    pub of: i64,
}
