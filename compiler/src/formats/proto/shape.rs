//! Shapes and their layouts as `ShapeProto`, both ways.

use super::messages::{LayoutProto, ShapeProto, SplitConfigProto, TileProto};
use crate::ir::shape::{
    ArrayShape, ElementType, PhysicalLayout, Shape, SplitConfig, BUFFER_PRIMITIVE_TYPE,
    MAX_DYNAMIC_DIMENSION, TOKEN_PRIMITIVE_TYPE, UNBOUNDED,
};

/// `PrimitiveType.TUPLE`.
const TUPLE: i32 = 13;

pub(super) fn shape_to_proto(s: &Shape) -> ShapeProto {
    match s {
        Shape::Array(a) => ShapeProto {
            element_type: a.ty.primitive_type(),
            dimensions: a.dims.clone(),
            tuple_shapes: Vec::new(),
            // Every array shape carries a layout: XLA rejects constants
            // without one, and compile caches key on it.
            layout: Some(layout_to_proto(a)),
            is_dynamic_dimension: (0..a.rank()).map(|i| a.is_dynamic(i)).collect(),
        },
        Shape::Tuple(elems) => ShapeProto {
            element_type: TUPLE,
            dimensions: Vec::new(),
            tuple_shapes: elems.iter().map(shape_to_proto).collect(),
            layout: None,
            is_dynamic_dimension: Vec::new(),
        },
        Shape::Buffer(a) => ShapeProto {
            element_type: BUFFER_PRIMITIVE_TYPE,
            tuple_shapes: vec![shape_to_proto(&Shape::Array(a.clone()))],
            ..Default::default()
        },
        Shape::Token => ShapeProto {
            element_type: TOKEN_PRIMITIVE_TYPE,
            ..Default::default()
        },
    }
}

fn layout_to_proto(a: &ArrayShape) -> LayoutProto {
    let mut l = LayoutProto {
        minor_to_major: a.minor_to_major.clone(),
        ..Default::default()
    };
    if let Some(p) = &a.physical {
        l.tiles = p
            .tiles
            .iter()
            .map(|t| TileProto {
                dimensions: t.clone(),
            })
            .collect();
        l.element_size_in_bits = p.element_size_in_bits;
        l.memory_space = p.memory_space;
        if p.tail_padding_alignment_in_elements != 1 {
            l.tail_padding_alignment_in_elements = p.tail_padding_alignment_in_elements;
        }
        l.split_configs = p
            .split_configs
            .iter()
            .map(|sc| SplitConfigProto {
                dimension: sc.dimension,
                split_indices: sc.split_indices.clone(),
            })
            .collect();
    }
    l
}

/// Why a `ShapeProto` is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShapeProtoError {
    #[error("shape nesting is too deep")]
    TooDeep,
    #[error("a buffer holds an array, not {0}")]
    BufferOfNonArray(Shape),
    #[error("a buffer shape has dimensions, a layout or other than one element")]
    MalformedBuffer,
    #[error("a token shape has dimensions or elements")]
    MalformedToken,
    #[error("unsupported element type {0} (PrimitiveType number)")]
    UnknownElementType(i32),
    #[error("negative dimension {size} (dimension {dimension})")]
    NegativeDimension { dimension: usize, size: i64 },
    #[error("is_dynamic_dimension has {flags} entries for rank {rank}")]
    DynamicFlagCount { flags: usize, rank: usize },
    #[error(
        "dimension {dimension} is dynamic; hlatc keeps dynamic dimensions up to {limit} only",
        limit = MAX_DYNAMIC_DIMENSION
    )]
    DynamicBeyondLimit { dimension: usize },
    #[error("layout has {entries} entries for rank {rank}")]
    LayoutRank { entries: usize, rank: usize },
}

pub(super) fn shape_from_proto(p: &ShapeProto) -> Result<Shape, ShapeProtoError> {
    shape_at_depth(p, 0)
}

fn shape_at_depth(p: &ShapeProto, depth: usize) -> Result<Shape, ShapeProtoError> {
    if depth > 64 {
        return Err(ShapeProtoError::TooDeep);
    }
    match p.element_type {
        TUPLE => Ok(Shape::Tuple(
            p.tuple_shapes
                .iter()
                .map(|s| shape_at_depth(s, depth + 1))
                .collect::<Result<_, _>>()?,
        )),
        BUFFER_PRIMITIVE_TYPE => match (&p.dimensions[..], &p.tuple_shapes[..], &p.layout) {
            ([], [inner], None) => match shape_at_depth(inner, depth + 1)? {
                Shape::Array(a) => Ok(Shape::Buffer(a)),
                other => Err(ShapeProtoError::BufferOfNonArray(other)),
            },
            _ => Err(ShapeProtoError::MalformedBuffer),
        },
        TOKEN_PRIMITIVE_TYPE => match (&p.dimensions[..], &p.tuple_shapes[..]) {
            ([], []) => Ok(Shape::Token),
            _ => Err(ShapeProtoError::MalformedToken),
        },
        ty => ElementType::from_primitive_type(ty)
            .ok_or(ShapeProtoError::UnknownElementType(ty))
            .and_then(|ty| array_from_proto(p, ty))
            .map(Shape::Array),
    }
}

fn array_from_proto(p: &ShapeProto, ty: ElementType) -> Result<ArrayShape, ShapeProtoError> {
    // A dynamic dimension may be unbounded (XLA's kUnboundedSize).
    let unbounded = |i: usize| p.is_dynamic_dimension.get(i) == Some(&true);
    if let Some((dimension, &size)) = p
        .dimensions
        .iter()
        .enumerate()
        .find(|&(i, &d)| d < 0 && !(d == UNBOUNDED && unbounded(i)))
    {
        return Err(ShapeProtoError::NegativeDimension { dimension, size });
    }
    let mut a = ArrayShape::new(ty, p.dimensions.clone());
    // XLA writes one flag per dimension, or none for a static shape.
    let flags = &p.is_dynamic_dimension;
    if !flags.is_empty() && flags.len() != a.rank() {
        return Err(ShapeProtoError::DynamicFlagCount {
            flags: flags.len(),
            rank: a.rank(),
        });
    }
    if let Some(i) = flags
        .iter()
        .rposition(|&d| d)
        .filter(|&i| i > MAX_DYNAMIC_DIMENSION)
    {
        return Err(ShapeProtoError::DynamicBeyondLimit { dimension: i });
    }
    for (i, &d) in flags.iter().enumerate() {
        a.set_dynamic(i, d);
    }
    if let Some(l) = &p.layout {
        if l.minor_to_major.len() == a.rank() {
            a.minor_to_major = l.minor_to_major.clone();
        } else if !l.minor_to_major.is_empty() {
            return Err(ShapeProtoError::LayoutRank {
                entries: l.minor_to_major.len(),
                rank: a.rank(),
            });
        }
        a.physical = physical_layout_from_proto(l);
    }
    Ok(a)
}

fn physical_layout_from_proto(l: &LayoutProto) -> Option<Box<PhysicalLayout>> {
    PhysicalLayout {
        tiles: l.tiles.iter().map(|t| t.dimensions.clone()).collect(),
        // XLA writes 1 for "none", and an unwritten field reads 0.
        tail_padding_alignment_in_elements: l.tail_padding_alignment_in_elements.max(1),
        element_size_in_bits: l.element_size_in_bits,
        memory_space: l.memory_space,
        split_configs: l
            .split_configs
            .iter()
            .map(|sc| SplitConfig {
                dimension: sc.dimension,
                split_indices: sc.split_indices.clone(),
            })
            .collect(),
    }
    .boxed_unless_default()
}
