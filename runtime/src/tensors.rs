//! Named host tensors in safetensors files.

use hlatc_compiler::{ElementType, Literal};
use safetensors::{tensor::TensorView, Dtype, SafeTensorError, SafeTensors};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum TensorFileError {
    #[error("{path}: {message}")]
    Io { path: String, message: String },
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
}

impl TensorFileError {
    /// The file at fault.
    pub fn path(&self) -> &str {
        match self {
            TensorFileError::Io { path, .. }
            | TensorFileError::Format { path, .. }
            | TensorFileError::Dtype { path, .. }
            | TensorFileError::NoDtype { path, .. } => path,
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
    let bytes = std::fs::read(path).map_err(|e| TensorFileError::Io {
        path: p.clone(),
        message: e.to_string(),
    })?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| TensorFileError::Format {
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
    let bytes = safetensors::serialize(views, &None).map_err(|e| TensorFileError::Format {
        path: p.clone(),
        message: explain(&e, 0),
    })?;
    crate::atomic_file::write_atomic(path, &bytes).map_err(|e| TensorFileError::Io {
        path: p,
        message: e.to_string(),
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
