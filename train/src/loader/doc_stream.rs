//! The corpus as one stream of documents, file after file, of which a shard
//! keeps every `count`-th (document `i` goes to shard `i % count`): each
//! DP replica, or each process, reads the same files but parses and
//! tokenizes only its own documents. Each pass reads the files in an
//! order drawn from the seed and the pass' number.

use super::sources::{DocBody, DocRef, FileReader, ReadSettings};
use super::LoaderError;
use hlatc_runtime::inputs::SplitMix64;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the stream is: the next file (in the pass' order) and the place in it, how many
/// documents (of every shard) came before, and which pass over the corpus
/// this is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub epoch: u64,
    pub file: u32,
    pub offset: u64,
    pub line: u64,
    pub doc_index: u64,
}

/// Which documents a loader keeps: those whose index is `index` modulo
/// `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    fn owns(self, doc_index: u64) -> bool {
        doc_index % self.count as u64 == self.index as u64
    }
}

pub struct DocStream {
    files: Vec<PathBuf>,
    settings: ReadSettings,
    shard: Shard,
    seed: u64,
    cursor: Cursor,
    /// This pass' order of the files.
    order: Vec<u32>,
    reader: Option<FileReader>,
}

/// The order pass `epoch` reads `n` files in.
fn file_order(n: usize, seed: u64, epoch: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed ^ 0xF11E_0D3B_u64.wrapping_mul(epoch + 1));
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

impl DocStream {
    pub fn new(
        files: Vec<PathBuf>,
        settings: ReadSettings,
        shard: Shard,
        seed: u64,
        cursor: Cursor,
    ) -> Self {
        DocStream {
            order: file_order(files.len(), seed, cursor.epoch),
            files,
            settings,
            shard,
            seed,
            cursor,
            reader: None,
        }
    }

    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    pub fn settings(&self) -> &ReadSettings {
        &self.settings
    }

    /// The shard's next document of this epoch; `None` once every file is
    /// read.
    pub fn next_doc(&mut self) -> Result<Option<(DocRef, DocBody)>, LoaderError> {
        while (self.cursor.file as usize) < self.files.len() {
            if self.reader.is_none() {
                let at = (self.cursor.offset != 0 || self.cursor.line != 0)
                    .then_some((self.cursor.offset, self.cursor.line));
                let file = self.order[self.cursor.file as usize];
                let path = &self.files[file as usize];
                self.reader = Some(FileReader::open(path, file, &self.settings, at)?);
            }
            let reader = self.reader.as_mut().expect("opened above");
            let skip = !self.shard.owns(self.cursor.doc_index);
            let next = reader.next_doc(&self.settings, skip)?;
            (self.cursor.offset, self.cursor.line) = reader.at();
            match next {
                Some((doc, body)) => {
                    self.cursor.doc_index += 1;
                    if let Some(body) = body {
                        return Ok(Some((doc, body)));
                    }
                }
                None => {
                    self.reader = None;
                    self.cursor.file += 1;
                    (self.cursor.offset, self.cursor.line) = (0, 0);
                }
            }
        }
        Ok(None)
    }

    /// Starts the next pass over the corpus.
    pub fn next_epoch(&mut self) {
        self.reader = None;
        self.cursor = Cursor {
            epoch: self.cursor.epoch + 1,
            ..Cursor::default()
        };
        self.order = file_order(self.files.len(), self.seed, self.cursor.epoch);
    }
}
