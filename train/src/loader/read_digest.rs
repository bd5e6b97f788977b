//! What the loader has read of each corpus file, as a digest of every
//! block of its bytes, hashed as they are read: a position carries it, and
//! a loader opened at the position reads that much of each file again and
//! refuses one whose bytes differ, naming the file and the block. An edit
//! anywhere in what a run has read is caught, none sampled; what it has
//! not read yet it reads as it then is.
//!
//! After a pass over the corpus every file is whole in the record, and
//! each later pass hashes its files again and checks them as it finishes
//! each one (a file edited while the run reads it).

use super::error::{io, LoaderError};
use hlatc_compiler::util::input_file;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Bytes hashed into one digest: an edit is named to within 4 MiB, and a
/// 10 GB corpus' record is 2,385 digests.
pub const BLOCK: u64 = 4 << 20;

/// What was read of one file: its first `bytes` bytes, a digest (the first
/// 8 bytes of the SHA-256, little-endian) per [`BLOCK`], the last block
/// possibly shorter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub bytes: u64,
    pub blocks: Vec<u64>,
}

impl FileDigest {
    /// The first block whose digest differs from `other`'s, as the byte
    /// range of this record it covers.
    fn first_difference(&self, other: &FileDigest) -> Option<(u64, u64)> {
        let n = self.blocks.len().max(other.blocks.len());
        (0..n)
            .find(|&i| self.blocks.get(i) != other.blocks.get(i))
            .map(|i| {
                let start = i as u64 * BLOCK;
                (start, (start + BLOCK).min(self.bytes.max(other.bytes)))
            })
    }
}

/// The record of every corpus file by its number (`None`: not read yet).
/// Shared, not copied, from one position to the next: a file's digest no
/// longer changes once it is read to its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadRecord(pub Vec<Option<Arc<FileDigest>>>);

impl Serialize for ReadRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|d| d.as_deref()))
    }
}

impl<'de> Deserialize<'de> for ReadRecord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let files: Vec<Option<FileDigest>> = Vec::deserialize(d)?;
        Ok(ReadRecord(
            files.into_iter().map(|f| f.map(Arc::new)).collect(),
        ))
    }
}

impl ReadRecord {
    /// File `file`'s digest, if it was read.
    pub fn get(&self, file: usize) -> Option<&FileDigest> {
        self.0.get(file).and_then(Option::as_deref)
    }
}

/// A file's bytes hashed in order, a [`BLOCK`] at a time.
#[derive(Clone, Default)]
pub struct BlockHasher {
    blocks: Vec<u64>,
    current: Sha256,
    in_block: u64,
    total: u64,
}

fn word(digest: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(w)
}

impl BlockHasher {
    /// Bytes hashed so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = ((BLOCK - self.in_block) as usize).min(bytes.len());
            self.current.update(&bytes[..n]);
            self.in_block += n as u64;
            self.total += n as u64;
            bytes = &bytes[n..];
            if self.in_block == BLOCK {
                self.blocks.push(word(&self.current.finalize_reset()));
                self.in_block = 0;
            }
        }
    }

    /// The digest of what was hashed so far.
    pub fn digest(&self) -> FileDigest {
        let mut blocks = self.blocks.clone();
        if self.in_block > 0 {
            blocks.push(word(&self.current.clone().finalize()));
        }
        FileDigest {
            bytes: self.total,
            blocks,
        }
    }
}

/// The loader reads a file through a buffer of this size, each read
/// ending at a multiple of it: what a reader has read of a file is then
/// decided by where it is, not by where it was opened, so a loader that
/// resumed records what one that never stopped records.
pub const READ_AHEAD: usize = 1 << 20;

/// A file read from a place onwards, each byte past what its hasher holds
/// hashed as it is read.
pub struct HashedFile {
    file: File,
    pos: u64,
    hasher: Option<BlockHasher>,
}

impl HashedFile {
    /// `file` (at `path`) from byte `start`. The bytes between what
    /// `hasher` holds and `start` (a `.npy` header, or a resume past the
    /// record) are read and hashed first; without a hasher nothing is.
    pub fn open(
        mut file: File,
        path: &Path,
        start: u64,
        mut hasher: Option<BlockHasher>,
    ) -> Result<HashedFile, LoaderError> {
        if let Some(h) = hasher.as_mut().filter(|h| h.total() < start) {
            file.seek(SeekFrom::Start(h.total())).map_err(io(path))?;
            let gap = start - h.total();
            hash_from(&mut (&mut file).take(gap), h, path)?;
        }
        file.seek(SeekFrom::Start(start)).map_err(io(path))?;
        Ok(HashedFile {
            file,
            pos: start,
            hasher,
        })
    }

    /// The digest of what was read, if it is hashed.
    pub fn digest(&self) -> Option<FileDigest> {
        self.hasher.as_ref().map(BlockHasher::digest)
    }

    /// Reads the rest of the file, hashing it: the whole file's digest, if
    /// it is hashed.
    pub fn finish(mut self, path: &Path) -> Result<Option<FileDigest>, LoaderError> {
        if self.hasher.is_none() {
            return Ok(None);
        }
        let mut sink = [0u8; 64 << 10];
        while self.read(&mut sink).map_err(io(path))? > 0 {}
        Ok(self.digest())
    }
}

impl Read for HashedFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = READ_AHEAD - (self.pos % READ_AHEAD as u64) as usize;
        let want = buf.len().min(room);
        let n = self.file.read(&mut buf[..want])?;
        if let Some(h) = &mut self.hasher {
            // Bytes before the hasher's end were hashed when first read.
            let end = self.pos + n as u64;
            if end > h.total() {
                let from = h.total().saturating_sub(self.pos) as usize;
                h.update(&buf[from..n]);
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

/// Everything `r` gives, hashed into `h`.
fn hash_from(r: &mut impl Read, h: &mut BlockHasher, path: &Path) -> Result<(), LoaderError> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = r.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            return Ok(());
        }
        h.update(&buf[..n]);
    }
}

/// The hasher of file `file` at `bytes`, as a resume's check left it: where
/// a loader that stopped inside the file goes on hashing.
pub type Resumed = BTreeMap<(usize, u64), BlockHasher>;

/// Reads again what `records` (one per position being resumed) say was
/// read of each of `files`, each file once, and refuses a file whose bytes
/// differ, naming the file and the first block that does. The hashers at
/// each recorded length, to go on from.
pub fn check_records(files: &[PathBuf], records: &[&ReadRecord]) -> Result<Resumed, LoaderError> {
    let mut resumed = Resumed::new();
    for (i, path) in files.iter().enumerate() {
        let wanted: BTreeSet<u64> = records
            .iter()
            .filter_map(|r| r.get(i))
            .map(|d| d.bytes)
            .collect();
        let Some(&last) = wanted.last() else {
            continue;
        };
        let (mut file, _) = input_file::open(path, io(path))?;
        let mut h = BlockHasher::default();
        for &len in &wanted {
            hash_from(&mut (&mut file).take(len - h.total()), &mut h, path)?;
            let now = h.digest();
            for d in records
                .iter()
                .filter_map(|r| r.get(i))
                .filter(|d| d.bytes == len)
            {
                if let Some((start, end)) = d.first_difference(&now) {
                    return Err(LoaderError::CorpusChanged {
                        path: path.clone(),
                        start,
                        end,
                    });
                }
            }
            resumed.insert((i, len), h.clone());
        }
        debug_assert_eq!(h.total(), last);
    }
    Ok(resumed)
}

/// Whether file `path`'s digest `now`, read again in a later pass, is the
/// one the first pass recorded.
pub fn check_again(
    path: &Path,
    recorded: &FileDigest,
    now: &FileDigest,
) -> Result<(), LoaderError> {
    match recorded.first_difference(now) {
        Some((start, end)) => Err(LoaderError::CorpusChanged {
            path: path.to_path_buf(),
            start,
            end,
        }),
        None if recorded.bytes != now.bytes => Err(LoaderError::CorpusChanged {
            path: path.to_path_buf(),
            start: recorded.bytes.min(now.bytes),
            end: recorded.bytes.max(now.bytes),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_where_they_should_and_a_partial_block_is_digested() {
        let data: Vec<u8> = (0..(BLOCK as usize + 10))
            .map(|i| (i % 251) as u8)
            .collect();
        let mut whole = BlockHasher::default();
        whole.update(&data);
        let mut pieces = BlockHasher::default();
        for c in data.chunks(777) {
            pieces.update(c);
        }
        assert_eq!(whole.digest(), pieces.digest());
        assert_eq!(whole.digest().blocks.len(), 2);
        assert_eq!(whole.digest().bytes, BLOCK + 10);
        let mut other = data.clone();
        other[BLOCK as usize + 3] ^= 1;
        let mut h = BlockHasher::default();
        h.update(&other);
        assert_eq!(
            whole.digest().first_difference(&h.digest()),
            Some((BLOCK, BLOCK + 10))
        );
    }
}
