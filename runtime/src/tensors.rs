//! Named host tensors in safetensors files.

use hlatc_compiler::util::input_file::{self, NotRegularFile};
use hlatc_compiler::{ElementType, Literal};
use safetensors::{tensor::TensorView, Dtype, SafeTensorError, SafeTensors};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum TensorFileError {
    /// The file could not be read or written (of `tensor`, where one was
    /// being read): the operating system's error, its kind kept.
    #[error("{path}: {}{source}", tensor.as_ref().map_or(String::new(), |t| format!("tensor '{t}': ")))]
    Io {
        path: String,
        tensor: Option<String>,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid safetensors file: {message}")]
    Format { path: String, message: String },
    #[error("{path}: tensor '{name}' has dtype {dtype:?}, which hlatc does not support")]
    Dtype {
        path: String,
        name: String,
        dtype: Dtype,
    },
    #[error("{path}: tensor '{name}' is {ty}, which safetensors has no dtype for")]
    NoDtype {
        path: String,
        name: String,
        ty: ElementType,
    },
    /// A path that is not a regular file (`/dev/zero`, a FIFO), refused
    /// before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] NotRegularFile),
}

impl TensorFileError {
    /// The file at fault.
    pub fn path(&self) -> std::borrow::Cow<'_, str> {
        match self {
            TensorFileError::Io { path, .. }
            | TensorFileError::Format { path, .. }
            | TensorFileError::Dtype { path, .. }
            | TensorFileError::NoDtype { path, .. } => path.into(),
            TensorFileError::NotRegularFile(e) => e.path.to_string_lossy(),
        }
    }
}

/// safetensors' dtype for `t`; `None` for the types it has no dtype for
/// (the 2- and 4-bit integers and most 8-bit floats). Its `F8_E4M3` is
/// torch's `float8_e4m3fn`.
fn to_dtype(t: ElementType) -> Option<Dtype> {
    Some(match t {
        ElementType::Pred => Dtype::BOOL,
        ElementType::S8 => Dtype::I8,
        ElementType::S16 => Dtype::I16,
        ElementType::S32 => Dtype::I32,
        ElementType::S64 => Dtype::I64,
        ElementType::U8 => Dtype::U8,
        ElementType::U16 => Dtype::U16,
        ElementType::U32 => Dtype::U32,
        ElementType::U64 => Dtype::U64,
        ElementType::F8E5M2 => Dtype::F8_E5M2,
        ElementType::F8E4M3FN => Dtype::F8_E4M3,
        ElementType::F16 => Dtype::F16,
        ElementType::Bf16 => Dtype::BF16,
        ElementType::F32 => Dtype::F32,
        ElementType::F64 => Dtype::F64,
        ElementType::S2
        | ElementType::S4
        | ElementType::U2
        | ElementType::U4
        | ElementType::F8E4M3
        | ElementType::F8E4M3B11FNUZ
        | ElementType::F8E3M4
        | ElementType::F8E5M2FNUZ
        | ElementType::F8E4M3FNUZ
        | ElementType::F4E2M1FN
        | ElementType::F8E8M0FNU
        | ElementType::C64
        | ElementType::C128 => return None,
    })
}

fn from_dtype(d: Dtype) -> Option<ElementType> {
    ElementType::ALL
        .into_iter()
        .find(|&t| to_dtype(t) == Some(d))
}

/// Reads every tensor, keyed by name.
pub fn read_safetensors(path: &Path) -> Result<BTreeMap<String, Literal>, TensorFileError> {
    let p = path.display().to_string();
    let bytes = input_file::read(path, |source| TensorFileError::Io {
        path: p.clone(),
        tensor: None,
        source,
    })?;
    safetensors_from_bytes(&bytes, &p)
}

/// Every tensor of a safetensors file's `bytes` (read from `p`), by name.
pub fn safetensors_from_bytes(
    bytes: &[u8],
    p: &str,
) -> Result<BTreeMap<String, Literal>, TensorFileError> {
    let p = p.to_string();
    let st = SafeTensors::deserialize(bytes).map_err(|e| TensorFileError::Format {
        path: p.clone(),
        message: explain(&e, bytes.len()),
    })?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let ty = from_dtype(view.dtype()).ok_or_else(|| TensorFileError::Dtype {
            path: p.clone(),
            name: name.clone(),
            dtype: view.dtype(),
        })?;
        let dims = view.shape().iter().map(|&d| d as i64).collect();
        let lit = Literal::from_bytes(ty, dims, view.data().to_vec()).map_err(|e| {
            TensorFileError::Format {
                path: p.clone(),
                message: format!("tensor '{name}': {e}"),
            }
        })?;
        out.insert(name, lit);
    }
    Ok(out)
}

/// Writes tensors in the given order (safetensors sorts them by name on disk).
pub fn write_safetensors(
    path: &Path,
    tensors: &[(String, Literal)],
) -> Result<(), TensorFileError> {
    let p = path.display().to_string();
    let bytes = safetensors_bytes(tensors, &p)?;
    crate::atomic_file::write_atomic(path, &bytes).map_err(|source| TensorFileError::Io {
        path: p,
        tensor: None,
        source,
    })
}

/// The one key of a safetensors file's `__metadata__` that hlatc writes:
/// its value is JSON (what the file is: whose rank, which run). One key,
/// because the safetensors crate keeps metadata in a `HashMap`, whose order
/// would make two writes of the same file differ.
pub const HLATC_METADATA_KEY: &str = "hlatc";

/// [`write_safetensors`], with `metadata` (JSON) under
/// [`HLATC_METADATA_KEY`].
pub fn write_safetensors_with_metadata(
    path: &Path,
    tensors: &[(String, Literal)],
    metadata: Option<&str>,
) -> Result<(), TensorFileError> {
    let p = path.display().to_string();
    let bytes = safetensors_bytes_with_metadata(tensors, &p, metadata)?;
    crate::atomic_file::write_atomic(path, &bytes).map_err(|source| TensorFileError::Io {
        path: p,
        tensor: None,
        source,
    })
}

/// What a safetensors file's bytes hold under [`HLATC_METADATA_KEY`]
/// (`None`: nothing, as in a file another tool or an older hlatc wrote).
pub fn safetensors_metadata_from_bytes(
    bytes: &[u8],
    p: &str,
) -> Result<Option<String>, TensorFileError> {
    let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| TensorFileError::Format {
        path: p.to_string(),
        message: explain(&e, bytes.len()),
    })?;
    Ok(meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get(HLATC_METADATA_KEY).cloned()))
}

/// [`safetensors_metadata_from_bytes`] of the file at `path`, reading only
/// its header.
pub fn read_safetensors_metadata(path: &Path) -> Result<Option<String>, TensorFileError> {
    use std::io::Read;
    let p = path.display().to_string();
    let io = |source| TensorFileError::Io {
        path: p.clone(),
        tensor: None,
        source,
    };
    let (mut f, file_len) = input_file::open(path, io)?;
    let mut len = [0u8; 8];
    f.read_exact(&mut len).map_err(io)?;
    let n = u64::from_le_bytes(len);
    if n > file_len.saturating_sub(8) {
        return Err(TensorFileError::Format {
            path: p.clone(),
            message: explain(&SafeTensorError::InvalidHeaderLength, file_len as usize),
        });
    }
    let mut header = len.to_vec();
    header.resize(8 + n as usize, 0);
    f.read_exact(&mut header[8..]).map_err(io)?;
    let text = std::str::from_utf8(&header[8..]).map_err(|_| TensorFileError::Format {
        path: p.clone(),
        message: explain(&SafeTensorError::InvalidHeader, file_len as usize),
    })?;
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|e| TensorFileError::Format {
            path: p.clone(),
            message: format!("the JSON header is malformed: {e}"),
        })?;
    Ok(json
        .get("__metadata__")
        .and_then(|m| m.get(HLATC_METADATA_KEY))
        .and_then(|v| v.as_str())
        .map(str::to_string))
}

/// `tensors` as the bytes of a safetensors file (to be written to `p`).
pub fn safetensors_bytes(
    tensors: &[(String, Literal)],
    p: &str,
) -> Result<Vec<u8>, TensorFileError> {
    safetensors_bytes_with_metadata(tensors, p, None)
}

/// [`safetensors_bytes`], with `metadata` (JSON) under
/// [`HLATC_METADATA_KEY`].
pub fn safetensors_bytes_with_metadata(
    tensors: &[(String, Literal)],
    p: &str,
    metadata: Option<&str>,
) -> Result<Vec<u8>, TensorFileError> {
    let p = p.to_string();
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, l)| {
            let shape = l.dims().iter().map(|&d| d as usize).collect();
            let dtype = to_dtype(l.ty()).ok_or_else(|| TensorFileError::NoDtype {
                path: p.clone(),
                name: n.clone(),
                ty: l.ty(),
            })?;
            TensorView::new(dtype, shape, l.bytes())
                .map(|v| (n.clone(), v))
                .map_err(|e| TensorFileError::Format {
                    path: p.clone(),
                    message: e.to_string(),
                })
        })
        .collect::<Result<_, _>>()?;
    let metadata = metadata.map(|m| {
        std::collections::HashMap::from([(HLATC_METADATA_KEY.to_string(), m.to_string())])
    });
    safetensors::serialize(views, &metadata).map_err(|e| TensorFileError::Format {
        path: p.clone(),
        message: explain(&e, 0),
    })
}

/// The safetensors crate's errors print as bare enum names
/// (`HeaderTooLarge`); say what is wrong with the file in words.
fn explain(e: &SafeTensorError, file_len: usize) -> String {
    match e {
        SafeTensorError::HeaderTooSmall => format!(
            "{file_len} bytes is too short: a safetensors file starts with an 8-byte header length"
        ),
        SafeTensorError::HeaderTooLarge | SafeTensorError::InvalidHeaderLength => format!(
            "its first 8 bytes do not give a header length that fits the file ({file_len} bytes); \
             is it a safetensors file at all?"
        ),
        SafeTensorError::InvalidHeader | SafeTensorError::InvalidHeaderStart => {
            "the JSON header is not valid UTF-8 or does not start with '{'".into()
        }
        SafeTensorError::InvalidHeaderDeserialization => {
            "the JSON header does not describe tensors (name: dtype, shape, data_offsets)".into()
        }
        SafeTensorError::MetadataIncompleteBuffer => format!(
            "the tensors' data offsets do not cover the data section exactly ({file_len} bytes in all); \
             the file is truncated or its header is wrong"
        ),
        SafeTensorError::TensorInvalidInfo => {
            "a tensor's shape, dtype and data offsets disagree in size".into()
        }
        SafeTensorError::InvalidOffset(name) => {
            format!("tensor '{name}' has data offsets outside the data section or overlapping another")
        }
        SafeTensorError::ValidationOverflow => {
            "a tensor's shape is so large that its byte size overflows".into()
        }
        SafeTensorError::TensorNotFound(name) => format!("no tensor '{name}'"),
        SafeTensorError::InvalidTensorView(dtype, shape, len) => format!(
            "a {dtype:?} tensor of shape {shape:?} cannot hold {len} bytes"
        ),
        SafeTensorError::IoError(e) => e.to_string(),
        SafeTensorError::JsonError(e) => format!("the JSON header is malformed: {e}"),
    }
}

/// A safetensors file read by parts: its header once, then only the bytes
/// of the ranges asked for, so a rank of a sharded step reads its slices
/// of a checkpoint larger than host memory, not the whole file.
pub struct SafetensorsIndex {
    path: String,
    file: std::fs::File,
    /// Where the data section starts in the file.
    data_start: u64,
    tensors: BTreeMap<String, IndexedTensor>,
}

/// One tensor's entry in the header.
#[derive(Clone, Debug)]
pub struct IndexedTensor {
    pub ty: ElementType,
    pub dims: Vec<i64>,
    /// Its bytes, from the start of the data section.
    offsets: [u64; 2],
}

impl SafetensorsIndex {
    /// Reads `path`'s header: every tensor's dtype, shape and place, each
    /// checked against the file's length.
    pub fn open(path: &Path) -> Result<SafetensorsIndex, TensorFileError> {
        use std::io::Read;
        let p = path.display().to_string();
        let io = |source: std::io::Error| TensorFileError::Io {
            path: p.clone(),
            tensor: None,
            source,
        };
        let format = |message: String| TensorFileError::Format {
            path: p.clone(),
            message,
        };
        let (mut file, file_len) = input_file::open(path, io)?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .map_err(|_| format(explain(&SafeTensorError::HeaderTooSmall, file_len as usize)))?;
        let header_len = u64::from_le_bytes(len);
        if header_len.saturating_add(8) > file_len {
            return Err(format(explain(
                &SafeTensorError::InvalidHeaderLength,
                file_len as usize,
            )));
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header).map_err(io)?;
        // The safetensors crate checks a header against the whole file's
        // bytes; here the data section is never read whole, so the header
        // is read as the format defines it (name: dtype, shape,
        // data_offsets; `__metadata__` aside), each entry checked below.
        let entries: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&header)
            .map_err(|e| format(explain(&SafeTensorError::JsonError(e), file_len as usize)))?;
        let data_start = 8 + header_len;
        let mut tensors = BTreeMap::new();
        for (name, entry) in entries {
            if name == "__metadata__" {
                continue;
            }
            let info: safetensors::tensor::TensorInfo = serde_json::from_value(entry)
                .map_err(|e| format(format!("tensor '{name}': {e}")))?;
            let elements = info.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            let size = from_dtype(info.dtype).map(|t| t.byte_size());
            if let (Some(n), Some(size)) = (elements, size) {
                if n.checked_mul(size) != info.data_offsets.1.checked_sub(info.data_offsets.0) {
                    return Err(format(explain(
                        &SafeTensorError::TensorInvalidInfo,
                        file_len as usize,
                    )));
                }
            }
            let ty = from_dtype(info.dtype).ok_or_else(|| TensorFileError::Dtype {
                path: p.clone(),
                name: name.clone(),
                dtype: info.dtype,
            })?;
            let [a, b] = [info.data_offsets.0 as u64, info.data_offsets.1 as u64];
            if data_start + b > file_len {
                return Err(format(explain(
                    &SafeTensorError::MetadataIncompleteBuffer,
                    file_len as usize,
                )));
            }
            let dims = info.shape.iter().map(|&d| d as i64).collect();
            tensors.insert(
                name,
                IndexedTensor {
                    ty,
                    dims,
                    offsets: [a, b],
                },
            );
        }
        Ok(SafetensorsIndex {
            path: p,
            file,
            data_start,
            tensors,
        })
    }

    /// The file, as messages name it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every tensor in the file, by name.
    pub fn tensors(&self) -> &BTreeMap<String, IndexedTensor> {
        &self.tensors
    }

    /// Indices `range[0]..range[1]` along dimension `dim` of tensor `name`,
    /// read from the file alone: one read per run of contiguous bytes (one
    /// for a range of rows). `None` when there is no such tensor; the
    /// range must lie within the tensor.
    pub fn read_range(
        &self,
        name: &str,
        dim: usize,
        range: [i64; 2],
    ) -> Result<Option<Literal>, TensorFileError> {
        use std::os::unix::fs::FileExt;
        let Some(t) = self.tensors.get(name) else {
            return Ok(None);
        };
        let io = |source: std::io::Error| TensorFileError::Io {
            path: self.path.clone(),
            tensor: Some(name.to_string()),
            source,
        };
        let [a, b] = range;
        assert!(dim < t.dims.len() && 0 <= a && a <= b && b <= t.dims[dim]);
        let elem = t.ty.byte_size() as u64;
        // Bytes of one index along `dim` (everything after it), and how
        // many blocks of the dimensions before it there are.
        let inner: u64 = t.dims[dim + 1..].iter().product::<i64>() as u64 * elem;
        let outer: u64 = t.dims[..dim].iter().product::<i64>() as u64;
        let run = (b - a) as u64 * inner;
        let mut bytes = vec![0u8; (outer * run) as usize];
        let start = self.data_start + t.offsets[0];
        let block = t.dims[dim] as u64 * inner;
        for (o, chunk) in bytes.chunks_mut(run.max(1) as usize).enumerate() {
            let at = start + o as u64 * block + a as u64 * inner;
            self.file.read_exact_at(chunk, at).map_err(io)?;
        }
        let mut dims = t.dims.clone();
        dims[dim] = b - a;
        Literal::from_bytes(t.ty, dims, bytes)
            .map(Some)
            .map_err(|e| TensorFileError::Format {
                path: self.path.clone(),
                message: format!("tensor '{name}': {e}"),
            })
    }
}
