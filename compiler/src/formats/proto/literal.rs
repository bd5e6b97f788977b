//! Constants' values as `LiteralProto`, both ways.

use super::messages::LiteralProto;
use super::shape::shape_to_proto;
use crate::ir::literal::{Literal, LiteralError, LiteralTree};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// A tuple constant's value: its shape, and one literal per element.
pub(super) fn literal_tree_to_proto(tree: &LiteralTree) -> LiteralProto {
    match tree {
        LiteralTree::Array(lit) => literal_to_proto(lit),
        LiteralTree::Tuple(elems) => LiteralProto {
            shape: Some(shape_to_proto(&tree.shape())),
            tuple_literals: elems.iter().map(literal_tree_to_proto).collect(),
            ..Default::default()
        },
    }
}

pub(super) fn literal_to_proto(lit: &Literal) -> LiteralProto {
    let mut shape = shape_to_proto(&Shape::Array(lit.shape.clone()));
    // A literal's values are one byte or more each, unpacked: XLA's reader
    // refuses a literal shape that packs them (`E(4)`), though the
    // constant instruction's own shape may say so.
    if let Some(l) = shape.layout.as_mut() {
        l.element_size_in_bits = 0;
    }
    let mut p = LiteralProto {
        shape: Some(shape),
        ..Default::default()
    };
    let b = lit.bytes();
    fn words<const N: usize>(b: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        b.chunks_exact(N)
            .map(|c| c.try_into().expect("chunks_exact yields N bytes"))
    }
    if let Some(field) = p.bytes_of_mut(lit.ty()) {
        *field = b.to_vec();
        return p;
    }
    match lit.ty() {
        ElementType::Pred => p.preds = b.iter().map(|&x| x != 0).collect(),
        ElementType::S32 => p.s32s = words(b).map(i32::from_le_bytes).collect(),
        ElementType::S64 => p.s64s = words(b).map(i64::from_le_bytes).collect(),
        ElementType::U32 => p.u32s = words(b).map(u32::from_le_bytes).collect(),
        ElementType::U64 => p.u64s = words(b).map(u64::from_le_bytes).collect(),
        ElementType::F32 => p.f32s = words(b).map(f32::from_le_bytes).collect(),
        ElementType::F64 => p.f64s = words(b).map(f64::from_le_bytes).collect(),
        ElementType::C64 => p.c64s = words(b).map(f32::from_le_bytes).collect(),
        ElementType::C128 => p.c128s = words(b).map(f64::from_le_bytes).collect(),
        ty => unreachable!("{ty} literals are raw bytes"),
    }
    p
}

/// Why a constant's `LiteralProto` is refused.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum LiteralProtoError {
    #[error("a constant of {shape} needs {needed} tuple_literals, has {has}")]
    TupleLiteralCount {
        shape: Shape,
        needed: usize,
        has: usize,
    },
    #[error("tuple constants are not supported")]
    TupleShape,
    #[error("constant is too large")]
    TooLarge,
    #[error("literal for {shape} holds {held} bytes, needs {needed}")]
    ByteCount {
        shape: ArrayShape,
        held: usize,
        needed: usize,
    },
    #[error(transparent)]
    Literal(#[from] LiteralError),
}

/// A constant's value: an array's, or a tuple's from one literal per
/// element (`tuple_literals`).
pub(super) fn literal_tree_from_proto(
    p: &LiteralProto,
    shape: &Shape,
) -> Result<LiteralTree, LiteralProtoError> {
    let Shape::Tuple(elems) = shape else {
        return literal_from_proto(p, shape).map(LiteralTree::Array);
    };
    if p.tuple_literals.len() != elems.len() {
        return Err(LiteralProtoError::TupleLiteralCount {
            shape: shape.clone(),
            needed: elems.len(),
            has: p.tuple_literals.len(),
        });
    }
    p.tuple_literals
        .iter()
        .zip(elems)
        .map(|(l, e)| literal_tree_from_proto(l, e))
        .collect::<Result<_, _>>()
        .map(LiteralTree::Tuple)
}

pub(super) fn literal_from_proto(
    p: &LiteralProto,
    shape: &Shape,
) -> Result<Literal, LiteralProtoError> {
    let a = shape.as_array().ok_or(LiteralProtoError::TupleShape)?;
    let needed = usize::try_from(a.element_count())
        .ok()
        .and_then(|n| n.checked_mul(a.ty.byte_size()))
        .ok_or(LiteralProtoError::TooLarge)?;
    let bytes = little_endian_bytes(p, a.ty);
    if bytes.len() != needed {
        return Err(LiteralProtoError::ByteCount {
            shape: a.clone(),
            held: bytes.len(),
            needed,
        });
    }
    let mut lit = Literal::from_bytes(a.ty, a.dims.clone(), bytes)?;
    lit.shape.minor_to_major = a.minor_to_major.clone();
    lit.shape.physical = a.physical.clone();
    Ok(lit)
}

/// The values of type `ty` in `p`, as hlatc's literals hold them.
fn little_endian_bytes(p: &LiteralProto, ty: ElementType) -> Vec<u8> {
    match (p.bytes_of(ty), ty) {
        (Some(raw), _) => raw.clone(),
        (None, ElementType::Pred) => p.preds.iter().map(|&b| b as u8).collect(),
        (None, ElementType::S32) => p.s32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::S64) => p.s64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::U32) => p.u32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::U64) => p.u64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::F32) => p.f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::F64) => p.f64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::C64) => p.c64s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ElementType::C128) => p.c128s.iter().flat_map(|v| v.to_le_bytes()).collect(),
        (None, ty) => unreachable!("{ty} literals are raw bytes"),
    }
}
