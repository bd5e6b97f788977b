//! The corpus as one stream of documents, file after file, of which a shard
//! keeps every `count`-th (document `i` goes to shard `i % count`): each
//! DP replica, or each process, reads the same files but parses and
//! tokenizes only its own documents. Each pass reads the files in an
//! order drawn from the seed and the pass' number.

use super::read_digest::{check_again, BlockHasher, FileDigest, ReadRecord, Resumed};
use super::sources::{DocBody, DocRef, FileReader, ReadSettings};
use super::LoaderError;
use hlatc_runtime::inputs::SplitMix64;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

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
    /// Each file's digest once it was read to its end.
    read: Vec<Option<Arc<FileDigest>>>,
    /// Where the file a resumed stream stopped in goes on hashing from.
    resume_hasher: Option<BlockHasher>,
}

/// What a stream resumed at a position knows of the bytes read before it:
/// the position's record, the files' sizes (a file's record is whole at
/// its size), and the hashers [`super::read_digest::check_records`] left.
pub struct ReadBefore<'a> {
    pub record: &'a ReadRecord,
    pub sizes: &'a [u64],
    pub resumed: &'a Resumed,
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
        before: ReadBefore<'_>,
    ) -> Self {
        let read: Vec<Option<Arc<FileDigest>>> = (0..files.len())
            .map(|i| {
                let whole = before.sizes.get(i).copied();
                before.record.0.get(i).and_then(|d| {
                    d.as_ref()
                        .filter(|d| Some(d.bytes) == whole)
                        .map(Arc::clone)
                })
            })
            .collect();
        let order = file_order(files.len(), seed, cursor.epoch);
        // The file this stream stopped in, read in part: its hashing goes
        // on from where the record stops.
        let resume_hasher = order.get(cursor.file as usize).and_then(|&f| {
            let f = f as usize;
            let partial = before.record.get(f).filter(|_| read[f].is_none())?;
            before.resumed.get(&(f, partial.bytes)).cloned()
        });
        DocStream {
            order,
            files,
            settings,
            shard,
            seed,
            cursor,
            reader: None,
            read,
            resume_hasher,
        }
    }

    /// What the stream has read of each file, for a position.
    pub fn read_record(&self) -> ReadRecord {
        let mut files = self.read.clone();
        if let Some(&f) = self.order.get(self.cursor.file as usize) {
            let slot = &mut files[f as usize];
            if slot.is_none() {
                // A resumed stream that has not read on yet holds its file's
                // record in the hasher it goes on with.
                *slot = match (&self.reader, &self.resume_hasher) {
                    (Some(r), _) => r.digest(),
                    (None, Some(h)) => Some(h.digest()),
                    (None, None) => None,
                }
                .map(Arc::new);
            }
        }
        ReadRecord(files)
    }

    /// The hasher for file `file` opened at `at`: from its start, always
    /// (a later pass checks the file against its record as it ends it);
    /// inside it, only where the file is not whole in the record (checked
    /// already when the stream resumed), going on from the record.
    fn hasher_for(&mut self, file: usize, at: Option<(u64, u64)>) -> Option<BlockHasher> {
        match at {
            None => Some(BlockHasher::default()),
            Some(_) if self.read[file].is_some() => None,
            Some(_) => Some(self.resume_hasher.take().unwrap_or_default()),
        }
    }

    /// Ends the file being read: reads its rest, and records its digest,
    /// or checks it against the one recorded.
    fn end_file(&mut self) -> Result<(), LoaderError> {
        let Some(reader) = self.reader.take() else {
            return Ok(());
        };
        let file = self.order[self.cursor.file as usize] as usize;
        let Some(now) = reader.finish()? else {
            return Ok(());
        };
        match &self.read[file] {
            Some(recorded) => check_again(&self.files[file], recorded, &now),
            None => {
                self.read[file] = Some(Arc::new(now));
                Ok(())
            }
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
                let hasher = self.hasher_for(file as usize, at);
                let path = &self.files[file as usize];
                self.reader = Some(FileReader::open_hashed(
                    path,
                    file,
                    &self.settings,
                    at,
                    hasher,
                )?);
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
                    self.end_file()?;
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
