//! Token-id files: raw little-endian `u16` or `u32` ids, as nanoGPT and
//! Megatron write them, or a 1-D integer `.npy` array. `--corpus` and
//! `--data` both read them through [`IdReader`], so they accept the same
//! files and refuse the same ones with the same words.

use super::error::io;
use super::read_digest::{BlockHasher, FileDigest, HashedFile, READ_AHEAD};
use super::LoaderError;
use hlatc_compiler::util::input_file;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// How a raw `.bin` stream stores each id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawDtype {
    U16,
    U32,
}

impl RawDtype {
    pub const ALL: [RawDtype; 2] = [RawDtype::U16, RawDtype::U32];

    /// The name `--data-dtype` and Python's `raw_dtype=` take.
    pub fn name(self) -> &'static str {
        match self {
            RawDtype::U16 => "u16",
            RawDtype::U32 => "u32",
        }
    }

    fn width(self) -> usize {
        match self {
            RawDtype::U16 => 2,
            RawDtype::U32 => 4,
        }
    }
}

/// Refuses an end-of-text id past the vocabulary: no id of a file could
/// be it, so no document would end.
pub fn check_eos(eos: Option<u32>, vocab: i64) -> Result<(), LoaderError> {
    match eos.filter(|&id| i64::from(id) >= vocab) {
        Some(id) => Err(LoaderError::FlagOutsideVocabulary {
            flag: "--eos",
            id: id.into(),
            vocab,
        }),
        None => Ok(()),
    }
}

/// What a `.npy` file starts with; a file without it is raw ids.
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The most of a file read for its `.npy` header: numpy pads a 1-D
/// array's header to 64 or 128 bytes.
const HEADER_BYTES: u64 = 1 << 16;

/// Where a file's ids are and how each is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct IdLayout {
    signed: bool,
    /// Bytes per id.
    width: usize,
    len: u64,
    /// Byte offset of the first id.
    data_start: u64,
}

impl IdLayout {
    /// A `.npy` file's header says; a raw file is ids from its first byte.
    /// Either way the file's size must hold its ids exactly.
    fn of(path: &Path, f: &mut File, raw: RawDtype) -> Result<IdLayout, LoaderError> {
        let size = f.metadata().map_err(io(path))?.len();
        let mut head = Vec::new();
        f.by_ref()
            .take(HEADER_BYTES)
            .read_to_end(&mut head)
            .map_err(io(path))?;
        let bad = |message: String| LoaderError::TokenFile {
            path: path.to_path_buf(),
            message,
        };
        if !head.starts_with(NPY_MAGIC) {
            let width = raw.width();
            if size % width as u64 != 0 {
                return Err(bad(format!(
                    "{size} bytes is not a whole number of {width}-byte ids"
                )));
            }
            return Ok(IdLayout {
                signed: false,
                width,
                len: size / width as u64,
                data_start: 0,
            });
        }
        let layout = npy_layout(&head).map_err(|e| bad(e.to_string()))?;
        let data = size.saturating_sub(layout.data_start);
        if Some(data) != layout.len.checked_mul(layout.width as u64) {
            return Err(bad(format!(
                "the .npy header says {} ids of {} bytes, the file holds {data} bytes of data",
                layout.len, layout.width
            )));
        }
        Ok(layout)
    }
}

/// Why a `.npy` header is not one of token ids hlatc reads.
#[derive(Debug, thiserror::Error)]
enum NpyHeaderError {
    #[error("the .npy header is truncated or not text")]
    Truncated,
    #[error(".npy version {0} is not supported")]
    Version(u8),
    #[error("the .npy header has no {0}")]
    Missing(&'static str),
    #[error("a Fortran-order .npy array is not supported")]
    FortranOrder,
    #[error("the .npy array has shape ({0}); token data is 1-D")]
    NotOneDimensional(String),
    #[error(".npy dtype '{0}' is not an integer type hlatc reads (or is big-endian)")]
    Dtype(String),
    #[error("bad .npy length '{0}'")]
    Length(String),
}

/// The header of a `.npy` file (`bytes` holds at least its header): a 1-D
/// C-order array of `u1/u2/u4/u8/i1/i2/i4/i8`.
fn npy_layout(bytes: &[u8]) -> Result<IdLayout, NpyHeaderError> {
    if bytes.len() < 10 {
        return Err(NpyHeaderError::Truncated);
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(NpyHeaderError::Version(v)),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or(NpyHeaderError::Truncated)?;
    let field = |key: &str| {
        header
            .split(&format!("'{key}':"))
            .nth(1)
            .map(|rest| rest.trim_start())
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or(NpyHeaderError::Missing("descr"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(NpyHeaderError::FortranOrder);
    }
    let shape = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or(NpyHeaderError::Missing("shape"))?;
    let dims: Vec<&str> = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if dims.len() != 1 {
        return Err(NpyHeaderError::NotOneDimensional(shape.to_string()));
    }
    let (signed, width) = match descr.trim_start_matches(['<', '|', '=']) {
        "u1" => (false, 1),
        "u2" => (false, 2),
        "u4" => (false, 4),
        "u8" => (false, 8),
        "i1" => (true, 1),
        "i2" => (true, 2),
        "i4" => (true, 4),
        "i8" => (true, 8),
        other => return Err(NpyHeaderError::Dtype(other.to_string())),
    };
    let len = dims[0]
        .parse()
        .map_err(|_| NpyHeaderError::Length(dims[0].to_string()))?;
    Ok(IdLayout {
        signed,
        width,
        len,
        data_start: (start + header_len) as u64,
    })
}

/// Reads a token-id file's ids in order from a place in it, checking each
/// against the vocabulary as it comes: a file is never read whole.
pub struct IdReader {
    path: PathBuf,
    reader: BufReader<HashedFile>,
    layout: IdLayout,
    /// The index of the next id.
    next: u64,
    /// Ids at or past this are refused.
    vocab: i64,
}

impl IdReader {
    /// `path`'s ids from index `at` on (`raw` says how a file without a
    /// `.npy` header stores them).
    pub fn open(path: &Path, raw: RawDtype, vocab: i64, at: u64) -> Result<IdReader, LoaderError> {
        Self::open_hashed(path, raw, vocab, at, None)
    }

    /// [`IdReader::open`], hashing the file's bytes into `hasher` as they
    /// are read (the loader's record of what it read).
    pub fn open_hashed(
        path: &Path,
        raw: RawDtype,
        vocab: i64,
        at: u64,
        hasher: Option<BlockHasher>,
    ) -> Result<IdReader, LoaderError> {
        let (mut f, _) = input_file::open(path, io(path))?;
        let layout = IdLayout::of(path, &mut f, raw)?;
        let byte = layout
            .data_start
            .saturating_add(at.saturating_mul(layout.width as u64));
        let f = HashedFile::open(f, path, byte, hasher)?;
        Ok(IdReader {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(READ_AHEAD, f),
            layout,
            next: at,
            vocab,
        })
    }

    /// The digest of the bytes read so far, if they are hashed.
    pub fn digest(&self) -> Option<FileDigest> {
        self.reader.get_ref().digest()
    }

    /// Reads the rest of the file: the whole file's digest, if it is
    /// hashed.
    pub fn finish(self) -> Result<Option<FileDigest>, LoaderError> {
        self.reader.into_inner().finish(&self.path)
    }

    /// The ids the file holds, as its size and header say.
    pub fn id_count(&self) -> u64 {
        self.layout.len
    }

    /// The index of the next id (or of the end).
    pub fn at(&self) -> u64 {
        self.next
    }

    /// The next id; `None` at the end.
    pub fn next_id(&mut self) -> Result<Option<u32>, LoaderError> {
        if self.next >= self.layout.len {
            return Ok(None);
        }
        let index = self.next;
        let mut buf = [0u8; 8];
        let bytes = &mut buf[..self.layout.width];
        self.reader.read_exact(bytes).map_err(|e| {
            // The size was checked at open: the file changed since.
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                LoaderError::TokenFile {
                    path: self.path.clone(),
                    message: format!("the file ends inside id {index}"),
                }
            } else {
                io(&self.path)(e)
            }
        })?;
        if self.layout.signed && bytes[self.layout.width - 1] & 0x80 != 0 {
            return Err(LoaderError::TokenFile {
                path: self.path.clone(),
                message: format!("token {index} is negative"),
            });
        }
        let id = u64::from_le_bytes(buf);
        if id >= self.vocab as u64 {
            return Err(LoaderError::IdOutsideVocabulary {
                path: self.path.clone(),
                index,
                id,
                vocab: self.vocab,
            });
        }
        self.next += 1;
        Ok(Some(id as u32))
    }
}
