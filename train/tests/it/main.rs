//! Integration tests of running the step's inputs: the streaming loader
//! over text and token-id files. One binary, one module per topic; the
//! tests that train on XLA CPU are the root crate's.

mod corpus;
mod loader;
#[path = "../../../step/tests/it/scratch.rs"]
mod scratch;
use scratch::scratch;

/// The tokenizer of [`corpus::word_corpus`]: a Hugging Face
/// `tokenizer.json` (WordLevel, whitespace, lowercase) of 59 ids, `<s>`
/// and `</s>` among them, that fits the tiny model's vocabulary of 64.
const WORD_TOKENIZER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/tokenizer-words.json"
);
