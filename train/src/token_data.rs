//! `train --data`: a pre-tokenized stream, held in memory, sampled at
//! random windows, its last part held out for evaluation. The file is read
//! through the loader's [`IdReader`], so `--data` and `--corpus` take the
//! same token-id files. Documents are separated by an end-of-text token;
//! windows of the stream become packed rows whose segment ids follow the
//! documents, and whose target at each document's last token (the next
//! document's unpredictable first token) is ignored.

use crate::loader::token_ids::{check_eos, IdReader};
use crate::Error;
use hlatc_compiler::util::split_mix::SplitMix64;
use hlatc_compiler::Literal;
use hlatc_step::data::Batch;
use std::path::Path;

/// `--data-dtype`'s type, kept here for the callers of [`TokenData::read`].
pub use crate::loader::token_ids::RawDtype;

pub struct TokenData {
    tokens: Vec<u32>,
    /// Ids from here on are held out for evaluation.
    split: usize,
    eos: Option<u32>,
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    hlatc_artifacts::Error::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
    .into()
}

impl TokenData {
    /// Reads `path` (`.npy` by its magic, else raw `raw` ids), checks every
    /// id against `vocab`, and holds out the last `eval_fraction` of it.
    pub fn read(
        path: &Path,
        raw: RawDtype,
        vocab: i64,
        eos: Option<u32>,
        eval_fraction: f64,
    ) -> Result<TokenData, Error> {
        check_eos(eos, vocab)?;
        let mut ids = IdReader::open(path, raw, vocab, 0)?;
        let mut tokens = Vec::with_capacity(ids.id_count() as usize);
        while let Some(id) = ids.next_id()? {
            tokens.push(id);
        }
        let split = tokens.len() - ((tokens.len() as f64) * eval_fraction).round() as usize;
        Ok(TokenData { tokens, split, eos })
    }

    /// Fails unless training holds a window of `seq_len + 1` ids and the
    /// held-out part (when there is one) a whole batch of them.
    pub fn check_fits(&self, batch: i64, seq_len: i64, what: &Path) -> Result<(), Error> {
        let need = seq_len as usize + 1;
        let eval_need = batch as usize * seq_len as usize + 1;
        let (train, eval) = (self.split, self.tokens.len() - self.split);
        if train < need || (eval > 0 && eval < eval_need) {
            return Err(bad(
                what,
                format!(
                    "{} ids ({train} for training, {eval} held out) are too few: training needs {need} \
                     (--seq-len + 1) and evaluation {eval_need} (a batch of windows)",
                    self.tokens.len()
                ),
            ));
        }
        Ok(())
    }

    pub fn has_eval(&self) -> bool {
        self.split < self.tokens.len()
    }

    /// One packed row from the window starting at `start`.
    fn row(
        &self,
        start: usize,
        seq: usize,
        tokens: &mut Vec<i32>,
        targets: &mut Vec<i32>,
        segments: &mut Vec<i32>,
    ) {
        let mut doc = 1;
        for i in 0..seq {
            let t = self.tokens[start + i];
            tokens.push(t as i32);
            segments.push(doc);
            if Some(t) == self.eos {
                // The next token starts another document.
                targets.push(hlatc_models::IGNORE_INDEX as i32);
                doc += 1;
            } else {
                targets.push(self.tokens[start + i + 1] as i32);
            }
        }
    }

    fn batch_from(&self, starts: &[usize], seq: i64) -> Batch {
        let (mut tokens, mut targets, mut segments) = (Vec::new(), Vec::new(), Vec::new());
        for &s in starts {
            self.row(s, seq as usize, &mut tokens, &mut targets, &mut segments);
        }
        let dims = vec![starts.len() as i64, seq];
        Batch {
            tokens: Literal::from_s32(dims.clone(), &tokens).expect("sizes match"),
            targets: Literal::from_s32(dims.clone(), &targets).expect("sizes match"),
            segment_ids: Some(Literal::from_s32(dims, &segments).expect("sizes match")),
        }
    }

    /// Training batch `index`: windows at random offsets of the training
    /// part, the same for the same seed and index.
    pub fn train_batch(&self, index: u64, seed: u64, batch: i64, seq: i64) -> Batch {
        let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(index) ^ 0x70C3);
        let span = (self.split - seq as usize) as u64;
        let starts: Vec<usize> = (0..batch)
            .map(|_| (rng.next_u64() % span) as usize)
            .collect();
        self.batch_from(&starts, seq)
    }

    /// The held-out part, cut into consecutive batches (the last partial one
    /// dropped, at least one kept).
    pub fn eval_batches(&self, batch: i64, seq: i64) -> Vec<Batch> {
        let step = seq as usize;
        let starts: Vec<usize> = (self.split..self.tokens.len() - step)
            .step_by(step)
            .collect();
        starts
            .chunks(batch as usize)
            .filter(|c| c.len() == batch as usize)
            .map(|c| self.batch_from(c, seq))
            .collect()
    }
}
