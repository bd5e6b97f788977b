//! Pre-tokenized training data: a flat stream of token ids, as nanoGPT and
//! Megatron write it (raw little-endian `u16` or `u32`), or a 1-D `.npy`
//! array of unsigned or signed integers. Documents are separated by an
//! end-of-text token; windows of the stream become packed rows whose
//! segment ids follow the documents, and whose target at each document's
//! last token (the next document's unpredictable first token) is ignored.

use crate::data::Batch;
use crate::Error;
use hlatc_compiler::Literal;
use hlatc_runtime::inputs::SplitMix64;
use std::path::Path;

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
}

pub struct TokenData {
    tokens: Vec<u32>,
    /// Ids from here on are held out for evaluation.
    split: usize,
    eos: Option<u32>,
}

fn bad(path: &Path, message: impl Into<String>) -> Error {
    Error::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// A little-endian unsigned integer of 1 to 8 bytes.
pub(crate) fn le_u64(bytes: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(b)
}

/// Where a `.npy` file's ids are and how each is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NpyLayout {
    pub signed: bool,
    /// Bytes per id.
    pub width: usize,
    pub len: usize,
    /// Byte offset of the first id.
    pub data_start: usize,
}

/// The header of a `.npy` file (`bytes` holds at least its header): a 1-D
/// C-order array of `u1/u2/u4/u8/i1/i2/i4/i8`.
pub(crate) fn npy_layout(path: &Path, bytes: &[u8]) -> Result<NpyLayout, Error> {
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return Err(bad(path, "not a .npy file (no \\x93NUMPY magic)"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(path, format!(".npy version {v} is not supported"))),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| bad(path, "the .npy header is truncated or not text"))?;
    let field = |key: &str| {
        header
            .split(&format!("'{key}':"))
            .nth(1)
            .map(|rest| rest.trim_start())
    };
    let descr = field("descr")
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.split('\'').next())
        .ok_or_else(|| bad(path, "the .npy header has no descr"))?;
    if field("fortran_order").is_some_and(|r| r.starts_with("True")) {
        return Err(bad(path, "a Fortran-order .npy array is not supported"));
    }
    let shape = field("shape")
        .and_then(|r| r.strip_prefix('('))
        .and_then(|r| r.split(')').next())
        .ok_or_else(|| bad(path, "the .npy header has no shape"))?;
    let dims: Vec<&str> = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    if dims.len() != 1 {
        return Err(bad(
            path,
            format!("the .npy array has shape ({shape}); token data is 1-D"),
        ));
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
        other => {
            return Err(bad(
                path,
                format!(
                    ".npy dtype '{other}' is not an integer type hlatc reads (or is big-endian)"
                ),
            ))
        }
    };
    let len: usize = dims[0]
        .parse()
        .map_err(|_| bad(path, format!("bad .npy length '{}'", dims[0])))?;
    Ok(NpyLayout {
        signed,
        width,
        len,
        data_start: start + header_len,
    })
}

/// Id `index` of a `.npy` array, from its `width` bytes `c`.
pub(crate) fn npy_id(
    path: &Path,
    layout: &NpyLayout,
    index: usize,
    c: &[u8],
) -> Result<u64, Error> {
    if layout.signed && c[layout.width - 1] & 0x80 != 0 {
        return Err(bad(path, format!("token {index} is negative")));
    }
    Ok(le_u64(c))
}

/// The ids of a `.npy` file.
fn read_npy(path: &Path, bytes: &[u8]) -> Result<Vec<u64>, Error> {
    let layout = npy_layout(path, bytes)?;
    let data = &bytes[layout.data_start..];
    let (n, width) = (layout.len, layout.width);
    if data.len() != n * width {
        return Err(bad(
            path,
            format!(
                "the .npy header says {n} ids of {width} bytes, the file holds {} bytes of data",
                data.len()
            ),
        ));
    }
    data.chunks(width)
        .enumerate()
        .map(|(i, c)| npy_id(path, &layout, i, c))
        .collect()
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
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let ids: Vec<u64> = if bytes.starts_with(b"\x93NUMPY") {
            read_npy(path, &bytes)?
        } else {
            let width = match raw {
                RawDtype::U16 => 2,
                RawDtype::U32 => 4,
            };
            if bytes.len() % width != 0 {
                return Err(bad(
                    path,
                    format!(
                        "{} bytes is not a whole number of {width}-byte ids",
                        bytes.len()
                    ),
                ));
            }
            bytes.chunks(width).map(le_u64).collect()
        };
        if let Some(i) = ids.iter().position(|&t| t >= vocab as u64) {
            return Err(bad(
                path,
                format!("token {i} is {}, outside the vocabulary 0..{vocab}", ids[i]),
            ));
        }
        if let Some(e) = eos.filter(|&e| i64::from(e) >= vocab) {
            return Err(Error::EosOutsideVocabulary {
                eos: i64::from(e),
                vocab,
            });
        }
        let tokens: Vec<u32> = ids.into_iter().map(|t| t as u32).collect();
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
