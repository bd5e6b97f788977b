//! Where a loader is, between two batches: enough to go on from there with
//! the same batches a loader that never stopped would give. Documents are
//! named by their place in their file ([`DocRef`]) and read again on
//! resume, so a position is small whatever the shuffle buffer holds.

use super::doc_stream::{Cursor, Shard};
use super::pack::Packing;
use super::read_digest::ReadRecord;
use super::sources::{DocRef, SourceFormat};
use super::LoaderError;
use serde::{Deserialize, Serialize};

/// What a position is only valid for: the same files (by path and size)
/// read the same way into the same rows, tokenized by the same tokenizer
/// (by its content hash, `sha256:...`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub files: Vec<(String, u64)>,
    pub format: Option<SourceFormat>,
    pub text_field: String,
    pub tokenizer: Option<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub seq_len: usize,
    pub rows: usize,
    pub packing: Packing,
    pub shuffle_buffer: usize,
    pub seed: u64,
    pub shard: Shard,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderPosition {
    pub fingerprint: Fingerprint,
    pub cursor: Cursor,
    /// Documents drawn this pass over the corpus (an empty pass is an
    /// empty corpus).
    pub epoch_docs: u64,
    /// The shuffle's random state.
    pub rng: u64,
    /// The shuffle buffer, in its order.
    pub buffer: Vec<DocRef>,
    /// Drawn from the buffer, not yet packed, in order.
    pub pending: Vec<DocRef>,
    /// The document a row stopped in, and its first id not yet packed.
    pub carry: Option<(DocRef, usize)>,
    /// Batches given out.
    pub batches: u64,
    /// The loader's counts up to here.
    pub totals: Totals,
    /// What the loader has read of each file, as digests of its blocks:
    /// read again and compared when a loader opens at this position. A
    /// position an older hlatc saved has none, and its files' bytes are
    /// not checked.
    #[serde(default)]
    pub read: ReadRecord,
}

/// What the loader has packed: the slots of its rows and how many held a
/// token, and how many documents (or parts of one) they held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub rows: u64,
    pub slots: u64,
    pub filled: u64,
    pub documents: u64,
}

impl Totals {
    /// The fraction of slots that hold a token (1 when nothing is packed).
    pub fn efficiency(&self) -> f64 {
        if self.slots == 0 {
            1.0
        } else {
            self.filled as f64 / self.slots as f64
        }
    }

    pub fn documents_per_row(&self) -> f64 {
        self.documents as f64 / self.rows.max(1) as f64
    }

    pub fn add(&mut self, other: &Totals) {
        self.rows += other.rows;
        self.slots += other.slots;
        self.filled += other.filled;
        self.documents += other.documents;
    }
}

/// Several replicas' positions as one JSON array (a checkpoint's
/// `loader.json`).
pub fn positions_to_json(positions: &[LoaderPosition]) -> String {
    serde_json::to_string(positions).expect("positions serialize")
}

/// The positions of [`positions_to_json`]'s text.
pub fn positions_from_json(text: &str) -> Result<Vec<LoaderPosition>, LoaderError> {
    serde_json::from_str(text).map_err(|e| LoaderError::Position {
        reason: format!("it is not a JSON array of loader positions: {e}"),
    })
}

impl LoaderPosition {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a position serializes")
    }

    pub fn from_json(text: &str) -> Result<LoaderPosition, LoaderError> {
        serde_json::from_str(text).map_err(|e| LoaderError::Position {
            reason: format!("it is not a loader position: {e}"),
        })
    }

    /// Fails unless this position was saved by a loader set up as
    /// `expected` describes, naming the first setting that differs.
    pub fn check_fits(&self, expected: &Fingerprint) -> Result<(), LoaderError> {
        let (saved, now) = (
            serde_json::to_value(&self.fingerprint).expect("serializes"),
            serde_json::to_value(expected).expect("serializes"),
        );
        let (Some(saved), Some(now)) = (saved.as_object(), now.as_object()) else {
            return Ok(());
        };
        for (key, value) in now {
            // Positions saved before tokenizers were known by content name
            // one by its path: nothing to compare the content with.
            let by_path = key == "tokenizer"
                && saved
                    .get(key)
                    .and_then(|v| v.as_str())
                    .is_some_and(|v| !v.starts_with("sha256:"));
            if by_path {
                continue;
            }
            if saved.get(key) != Some(value) {
                return Err(LoaderError::Position {
                    reason: format!(
                        "it was saved with {key} = {}, this loader has {value}",
                        saved.get(key).unwrap_or(&serde_json::Value::Null)
                    ),
                });
            }
        }
        Ok(())
    }
}
