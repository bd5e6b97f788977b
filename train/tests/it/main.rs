//! Integration tests of running steps: the streaming loader over text and
//! token-id files, pre-tokenized streams, and the trainer on XLA CPU (steps sharded, accumulated,
//! staged, fused, tiled by a kernel point or rewritten by passes computing
//! what the plain step computes; gradients against PyTorch's; the memory
//! plan against what XLA CPU reserves). One binary, one module per
//! topic; the tests that train through the CLI are the root crate's.

// The tiny models and step settings, the step crate's tests' own.
#[path = "../../../step/tests/it/configs.rs"]
#[allow(dead_code)]
mod configs;
mod context_parallel;
mod corpus;
mod cpu_trainers;
mod expert_parallel;
mod fsdp;
mod fused_weights;
mod grad_accum;
mod hf_parity;
mod kernels;
mod loader;
mod memory_plan;
mod mixed_precision;
mod model_gradients;
mod passes_on_xla;
mod pipeline;
mod remat_memory;
mod runs;
#[path = "../../../step/tests/it/scratch.rs"]
mod scratch;
mod sharded;
mod spmd_forms;
// The fast tier's switch, a fixture's module read, outputs compared: the
// runtime crate's tests' own.
#[path = "../../../runtime/tests/it/support.rs"]
mod support;
mod token_data;
mod training;
mod zero1;
use scratch::scratch;

/// The tokenizer of [`corpus::word_corpus`]: a Hugging Face
/// `tokenizer.json` (WordLevel, whitespace, lowercase) of 59 ids, `<s>`
/// and `</s>` among them, that fits the tiny model's vocabulary of 64.
const WORD_TOKENIZER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/tokenizer-words.json"
);
