//! How stored parameters map to Hugging Face tensors. With
//! `fused_projections`, `qkv_proj` and `gate_up_proj` stack the rows of the
//! Hugging Face projections ([`crate::params::FUSED_PROJECTIONS`]); every
//! other tensor is stored as it is. Rows are the leading dimension, so each
//! part is a contiguous byte range: joining and splitting copy bytes and
//! change no value.

use crate::config::ModelConfig;
use crate::params::{param_specs, ParamSpec};
use hlatc_compiler::Literal;
use std::collections::BTreeMap;

/// A tensor the layout needs that is missing or has the wrong shape.
#[derive(Debug, Clone, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum LayoutError {
    #[error("no tensor '{name}' (shape {dims:?})")]
    Missing { name: String, dims: Vec<i64> },
    #[error("tensor '{name}' has shape {got:?}, the model needs {want:?}")]
    Shape {
        name: String,
        got: Vec<i64>,
        want: Vec<i64>,
    },
    #[error("tensor '{name}' is {got}, the fused tensor '{fused}' is {want}")]
    Type {
        name: String,
        fused: String,
        got: String,
        want: String,
    },
}

/// The Hugging Face view of `cfg`: the same model, every tensor under its
/// own name.
pub fn hugging_face_config(cfg: &ModelConfig) -> ModelConfig {
    ModelConfig {
        fused_projections: false,
        ..cfg.clone()
    }
}

/// The stored parameters of `cfg` (in [`param_specs`] order) from tensors
/// by Hugging Face name; each is taken out of `tensors`, so what is left
/// was not needed.
pub fn join(
    cfg: &ModelConfig,
    tensors: &mut BTreeMap<String, Literal>,
) -> Result<Vec<(String, Literal)>, LayoutError> {
    let mut take = |name: &str, dims: &[i64]| -> Result<Literal, LayoutError> {
        let t = tensors.remove(name).ok_or_else(|| LayoutError::Missing {
            name: name.to_string(),
            dims: dims.to_vec(),
        })?;
        if t.dims() != dims {
            return Err(LayoutError::Shape {
                name: name.to_string(),
                got: t.dims().to_vec(),
                want: dims.to_vec(),
            });
        }
        Ok(t)
    };
    param_specs(cfg)
        .into_iter()
        .map(|p| {
            if p.parts.is_empty() {
                let t = take(&p.name, &p.dims)?;
                return Ok((p.name, t));
            }
            let mut bytes = Vec::new();
            let mut ty = None;
            for part in &p.parts {
                let t = take(&part.name, &part.dims(&p.dims))?;
                let want = *ty.get_or_insert(t.ty());
                if t.ty() != want {
                    return Err(LayoutError::Type {
                        name: part.name.clone(),
                        fused: p.name.clone(),
                        got: t.ty().to_string(),
                        want: want.to_string(),
                    });
                }
                bytes.extend_from_slice(t.bytes());
            }
            let ty = ty.expect("a fused tensor has parts");
            let lit = Literal::from_bytes(ty, p.dims.clone(), bytes)
                .expect("the parts' rows add up to the fused tensor");
            Ok((p.name, lit))
        })
        .collect()
}

/// The Hugging Face tensors of stored parameters `stored` (by name), in
/// Hugging Face order.
pub fn split(
    cfg: &ModelConfig,
    stored: &BTreeMap<String, Literal>,
) -> Result<Vec<(String, Literal)>, LayoutError> {
    let mut parts: BTreeMap<String, Literal> = BTreeMap::new();
    for p in param_specs(cfg) {
        let t = stored.get(&p.name).ok_or_else(|| LayoutError::Missing {
            name: p.name.clone(),
            dims: p.dims.clone(),
        })?;
        if t.dims() != p.dims.as_slice() {
            return Err(LayoutError::Shape {
                name: p.name.clone(),
                got: t.dims().to_vec(),
                want: p.dims.clone(),
            });
        }
        parts.extend(parts_of(&p, t));
    }
    // Hugging Face's own order interleaves a fused group's weights and
    // biases (q weight, q bias, k weight, ...); experts stay stacked in
    // that view, and come out one by one.
    Ok(param_specs(&hugging_face_config(cfg))
        .into_iter()
        .flat_map(|p| match p.parts.is_empty() {
            true => vec![p.name],
            false => p.parts.into_iter().map(|part| part.name).collect(),
        })
        .filter_map(|name| parts.remove_entry(&name))
        .collect())
}

/// `t` (stored as `p`) as Hugging Face tensors.
fn parts_of(p: &ParamSpec, t: &Literal) -> Vec<(String, Literal)> {
    if p.parts.is_empty() {
        return vec![(p.name.clone(), t.clone())];
    }
    let row_bytes = t.bytes().len() / p.dims[0].max(1) as usize;
    p.parts
        .iter()
        .map(|part| {
            let [a, b] = part.rows.map(|r| r as usize * row_bytes);
            let lit = Literal::from_bytes(t.ty(), part.dims(&p.dims), t.bytes()[a..b].to_vec())
                .expect("a row range of the fused tensor");
            (part.name.clone(), lit)
        })
        .collect()
}
