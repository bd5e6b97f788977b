//! The loader's pipeline, run on its own thread: documents from the
//! stream into the shuffle buffer, drawn from it at random, tokenized a
//! chunk at a time on every core, packed into rows, and sent a batch at a
//! time with the position after it.
//!
//! The shuffle draws one document, then reads one into its place, so the
//! order of draws depends only on the seed and the corpus: drawing and
//! tokenizing a chunk ahead changes nothing a batch holds.

use super::doc_stream::DocStream;
use super::error::LoaderError;
use super::pack::{Packer, Packing, Row};
use super::position::{LoaderPosition, Totals};
use super::row_batch::RowBatch;
use super::sources::{read_doc, DocBody, DocRef};
use super::tokenize::TextTokenizer;
use hlatc_runtime::inputs::SplitMix64;
use std::collections::VecDeque;
use std::sync::Arc;

/// Documents drawn and tokenized together.
const CHUNK: usize = 256;

pub struct Producer {
    pub stream: DocStream,
    pub tokenizer: Option<Arc<TextTokenizer>>,
    pub buffer: Vec<(DocRef, DocBody)>,
    pub capacity: usize,
    pub rng: SplitMix64,
    pub pending: VecDeque<(DocRef, Vec<u32>)>,
    pub packer: Packer,
    pub packing: Packing,
    pub rows: usize,
    pub seq: usize,
    pub epochs: Option<u64>,
    pub epoch_docs: u64,
    /// Once the last pass is packed.
    pub finished: bool,
    pub position: LoaderPosition,
}

impl Producer {
    /// Takes up the pipeline at `position`: the documents it names read
    /// and tokenized again.
    pub fn resume(
        stream: DocStream,
        tokenizer: Option<Arc<TextTokenizer>>,
        capacity: usize,
        packing: Packing,
        rows: usize,
        epochs: Option<u64>,
        position: LoaderPosition,
    ) -> Result<Producer, LoaderError> {
        let read = |d: &DocRef| read_doc(stream.files(), stream.settings(), *d).map(|b| (*d, b));
        let buffer = position
            .buffer
            .iter()
            .map(read)
            .collect::<Result<Vec<_>, _>>()?;
        let mut again: Vec<(DocRef, DocBody)> = position
            .pending
            .iter()
            .map(read)
            .collect::<Result<_, _>>()?;
        let carry = match position.carry {
            Some((doc, next)) => {
                again.insert(0, read(&doc)?);
                Some(next)
            }
            None => None,
        };
        let seq = position.fingerprint.seq_len;
        let mut p = Producer {
            tokenizer,
            buffer,
            capacity,
            rng: SplitMix64::new(position.rng),
            pending: VecDeque::new(),
            packer: Packer::new(seq, packing),
            packing,
            rows,
            seq,
            epochs,
            epoch_docs: position.epoch_docs,
            finished: false,
            position: position.clone(),
            stream,
        };
        let mut docs = p.tokenize(again)?.into_iter();
        if let Some(next) = carry {
            let (doc, ids) = docs.next().expect("the carried document was read");
            p.packer.push(doc, ids, next);
        }
        p.pending.extend(docs);
        Ok(p)
    }

    /// The next batch and the position after it; `None` once the last
    /// pass (of `epochs`) is packed.
    pub fn next_batch(&mut self) -> Result<Option<RowBatch>, LoaderError> {
        if self.finished {
            return Ok(None);
        }
        let mut rows = Vec::with_capacity(self.rows);
        while rows.len() < self.rows {
            if let Some(row) = self.packer.fill() {
                rows.push(row);
                continue;
            }
            if self.pending.is_empty() && !self.draw_chunk()? {
                // The end of a pass: its last row padded, and the next pass
                // starts with a new row.
                rows.extend(self.packer.flush());
                if self.epoch_docs == 0 {
                    return Err(self.empty_corpus());
                }
                let cursor = self.stream.cursor();
                if self.epochs.is_some_and(|n| cursor.epoch + 1 >= n) {
                    self.finished = true;
                    if rows.is_empty() {
                        return Ok(None);
                    }
                    while rows.len() < self.rows {
                        rows.push(self.empty_row());
                    }
                    break;
                }
                self.stream.next_epoch();
                self.epoch_docs = 0;
                continue;
            }
            if let Some((doc, ids)) = self.pending.pop_front() {
                self.packer.push(doc, ids, 0);
            }
        }
        let batch = self.batch(rows);
        self.snapshot(&batch);
        Ok(Some(batch))
    }

    /// Draws up to a chunk of documents from the buffer into `pending`,
    /// tokenized; false when the pass has none left.
    fn draw_chunk(&mut self) -> Result<bool, LoaderError> {
        let mut drawn = Vec::with_capacity(CHUNK);
        while drawn.len() < CHUNK {
            while self.buffer.len() < self.capacity {
                match self.stream.next_doc()? {
                    Some(doc) => self.buffer.push(doc),
                    None => break,
                }
            }
            if self.buffer.is_empty() {
                break;
            }
            let i = (self.rng.next_u64() % self.buffer.len() as u64) as usize;
            drawn.push(self.buffer.swap_remove(i));
        }
        self.epoch_docs += drawn.len() as u64;
        let any = !drawn.is_empty();
        let docs = self.tokenize(drawn)?;
        self.pending.extend(docs);
        Ok(any)
    }

    /// `docs` as ids, their texts tokenized together.
    fn tokenize(
        &self,
        docs: Vec<(DocRef, DocBody)>,
    ) -> Result<Vec<(DocRef, Vec<u32>)>, LoaderError> {
        let mut texts = Vec::new();
        let mut lines = Vec::new();
        let mut out: Vec<(DocRef, Option<Vec<u32>>)> = Vec::with_capacity(docs.len());
        for (doc, body) in docs {
            match body {
                DocBody::Ids(ids) => out.push((doc, Some(ids))),
                DocBody::Text(text) => {
                    texts.push(text);
                    lines.push(doc.line);
                    out.push((doc, None));
                }
            }
        }
        if !texts.is_empty() {
            let tokenizer = self
                .tokenizer
                .as_ref()
                .ok_or_else(|| LoaderError::NeedsTokenizer {
                    path: self.stream.files()[out[0].0.file as usize].clone(),
                })?;
            let mut encoded = tokenizer.encode(texts, &lines)?.into_iter();
            for slot in out.iter_mut().filter(|(_, ids)| ids.is_none()) {
                slot.1 = encoded.next();
            }
        }
        Ok(out
            .into_iter()
            .map(|(doc, ids)| (doc, ids.unwrap_or_default()))
            .collect())
    }

    fn empty_row(&self) -> Row {
        Row {
            tokens: vec![0; self.seq],
            targets: vec![hlatc_models::IGNORE_INDEX as i32; self.seq],
            segments: vec![0; self.seq],
            filled: 0,
            documents: 0,
        }
    }

    fn empty_corpus(&self) -> LoaderError {
        let f = &self.position.fingerprint;
        LoaderError::EmptyCorpus {
            sources: f
                .files
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            shard_index: f.shard.index,
            shard_count: f.shard.count,
        }
    }

    fn batch(&self, rows: Vec<Row>) -> RowBatch {
        let mut b = RowBatch {
            rows: rows.len(),
            seq: self.seq,
            tokens: Vec::with_capacity(rows.len() * self.seq),
            targets: Vec::with_capacity(rows.len() * self.seq),
            segment_ids: (self.packing == Packing::Segments)
                .then(|| Vec::with_capacity(rows.len() * self.seq)),
            totals: Totals::default(),
        };
        for row in rows {
            b.tokens.extend_from_slice(&row.tokens);
            b.targets.extend_from_slice(&row.targets);
            if let Some(s) = &mut b.segment_ids {
                s.extend_from_slice(&row.segments);
            }
            b.totals.add(&Totals {
                rows: 1,
                slots: self.seq as u64,
                filled: row.filled as u64,
                documents: row.documents as u64,
            });
        }
        b
    }

    /// The position after `batch`.
    fn snapshot(&mut self, batch: &RowBatch) {
        let p = &mut self.position;
        p.cursor = self.stream.cursor();
        p.epoch_docs = self.epoch_docs;
        p.rng = self.rng.state();
        p.buffer = self.buffer.iter().map(|(d, _)| *d).collect();
        p.pending = self.pending.iter().map(|(d, _)| *d).collect();
        p.carry = self.packer.carry();
        p.read = self.stream.read_record();
        p.batches += 1;
        p.totals.add(&batch.totals);
    }
}
