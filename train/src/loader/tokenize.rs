//! Text to ids with a Hugging Face `tokenizer.json`, through the
//! `tokenizers` crate (the Rust core Hugging Face's Python package wraps,
//! so the ids are the same).
//!
//! The BOS/EOS policy is the loader's, not the tokenizer's post-processor:
//! a document is `[BOS] + encode(text, add_special_tokens=False) + [EOS]`,
//! each special token only where there is one. Llama 2 and Llama 3's
//! post-processors add BOS alone and GPT-2's adds nothing; a packed row
//! needs EOS to end each document whatever the tokenizer.

use super::LoaderError;
use hlatc_compiler::util::input_file;
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

/// Which special token to add, by its text or not at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecialToken {
    /// The tokenizer's own, found among [`BOS_NAMES`] or [`EOS_NAMES`]
    /// (none if it has none of them).
    Detect,
    Named(String),
    None,
}

/// Begin-of-text tokens, as Llama 2, Llama 3 and others spell them.
pub const BOS_NAMES: [&str; 3] = ["<s>", "<|begin_of_text|>", "<|startoftext|>"];
/// End-of-text tokens, as Llama 2, Llama 3 and GPT-2 spell them.
pub const EOS_NAMES: [&str; 4] = ["</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"];

pub struct TextTokenizer {
    path: PathBuf,
    tokenizer: Tokenizer,
    /// What the tokenizer is known by (`sha256:...` of its file): the same
    /// file copied elsewhere is the same tokenizer, and one retrained at
    /// the same path is not.
    pub content_hash: String,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
}

impl TextTokenizer {
    /// Loads `path` and refuses it if its ids would pass `vocab`: the
    /// highest id it can produce, its special and added tokens included
    /// (ids need not be dense, so the count of its entries is not enough).
    pub fn open(
        path: &Path,
        bos: &SpecialToken,
        eos: &SpecialToken,
        vocab: i64,
    ) -> Result<TextTokenizer, LoaderError> {
        let bytes = input_file::read(path, |source| LoaderError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let tokenizer = Tokenizer::from_bytes(&bytes).map_err(|e| LoaderError::Tokenizer {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if let Some((token, highest)) = highest_id(&tokenizer) {
            if i64::from(highest) >= vocab {
                return Err(LoaderError::TokenizerPastVocabulary {
                    path: path.to_path_buf(),
                    tokenizer_vocab: highest as usize + 1,
                    highest_token: token,
                    model_vocab: vocab,
                });
            }
        }
        let find = |choice: &SpecialToken, names: &[&str], role| match choice {
            SpecialToken::None => Ok(None),
            SpecialToken::Detect => Ok(names.iter().find_map(|n| tokenizer.token_to_id(n))),
            SpecialToken::Named(token) => {
                tokenizer
                    .token_to_id(token)
                    .map(Some)
                    .ok_or_else(|| LoaderError::NoSuchToken {
                        path: path.to_path_buf(),
                        token: token.clone(),
                        role,
                    })
            }
        };
        Ok(TextTokenizer {
            bos: find(bos, &BOS_NAMES, "BOS")?,
            eos: find(eos, &EOS_NAMES, "EOS")?,
            path: path.to_path_buf(),
            tokenizer,
            content_hash: hlatc_artifacts::run_identity::content_hash(&bytes),
        })
    }

    /// The ids of `texts` (documents starting at `lines`, for errors), each
    /// with BOS and EOS where there are. Runs on every core.
    pub fn encode(&self, texts: Vec<String>, lines: &[u64]) -> Result<Vec<Vec<u32>>, LoaderError> {
        let encodings =
            self.tokenizer
                .encode_batch(texts, false)
                .map_err(|e| LoaderError::Encode {
                    path: self.path.clone(),
                    line: lines.first().copied().unwrap_or(0),
                    message: e.to_string(),
                })?;
        Ok(encodings
            .into_iter()
            .map(|e| {
                let ids = e.get_ids();
                let mut doc = Vec::with_capacity(ids.len() + 2);
                doc.extend(self.bos);
                doc.extend_from_slice(ids);
                doc.extend(self.eos);
                doc
            })
            .collect())
    }

    /// How many ids the tokenizer has, its added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }
}

/// The highest id `tokenizer` can produce and its token, added tokens
/// included; `None` for an empty tokenizer.
fn highest_id(tokenizer: &Tokenizer) -> Option<(String, u32)> {
    tokenizer
        .get_vocab(true)
        .into_iter()
        .max_by_key(|(token, id)| (*id, token.clone()))
}
