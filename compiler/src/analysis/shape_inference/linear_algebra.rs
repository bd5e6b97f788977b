//! `dot`, `ragged-dot`, `triangular-solve`, `cholesky`, and the result
//! type of a contraction (shared with `convolution`).

use super::{
    array, check_dims_in_range, refuse, AttributeError, DimensionError, OperandError, ShapeError,
    ShapesError, TypeError,
};
use crate::ir::op::{DotDims, Opcode, Precision, RaggedDims};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

const DOT: Opcode = Opcode::new("dot");

/// The matrices of `a` (`[..., m, m]`) and what it solves against: `b`
/// is `[..., m, n]` from the left, `[..., n, m]` from the right, with the
/// same batch dimensions and type. The result is `b`'s shape.
pub(super) fn triangular_solve(left_side: bool, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (a, b) = (array(operands, 0)?, array(operands, 1)?);
    let m = square_matrix(const { Opcode::new("triangular-solve") }, a)?;
    if a.ty != b.ty || b.rank() != a.rank() || b.dims[..b.rank() - 2] != a.dims[..a.rank() - 2] {
        return refuse(ShapesError::TriangularSolveBatch {
            a: a.clone(),
            b: b.clone(),
        });
    }
    let solved = if left_side {
        b.dims[b.rank() - 2]
    } else {
        b.dims[b.rank() - 1]
    };
    if solved != m {
        return refuse(ShapesError::TriangularSolveSide {
            a: a.clone(),
            b: b.clone(),
            left_side,
            size: m,
        });
    }
    Ok(Shape::Array(b.clone()))
}

/// `cholesky` of a float `[..., n, n]`: the same shape.
pub(super) fn cholesky(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    square_matrix(const { Opcode::new("cholesky") }, a)?;
    Ok(Shape::Array(a.clone()))
}

/// The size of the square float matrices at the end of `a`'s dimensions.
fn square_matrix(opcode: Opcode, a: &ArrayShape) -> Result<i64, ShapeError> {
    match a.dims.as_slice() {
        [.., m, n] if m == n && (a.ty.is_float() || a.ty.is_complex()) => Ok(*m),
        _ => refuse(ShapesError::SquareMatrices {
            opcode,
            operand: a.clone(),
        }),
    }
}

pub(super) fn dot(
    dims: &DotDims,
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    dot_array(dims, precision, operands, declared).map(Shape::Array)
}

fn dot_array(
    dims: &DotDims,
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<ArrayShape, ShapeError> {
    let (l, r, ty) = contraction_operands(DOT, precision, operands, declared)?;
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contracting.len() != dims.rhs_contracting.len()
    {
        return refuse(AttributeError::DotDims(dims.clone()));
    }
    let lhs_all: Vec<i64> = dims
        .lhs_batch
        .iter()
        .chain(&dims.lhs_contracting)
        .copied()
        .collect();
    let rhs_all: Vec<i64> = dims
        .rhs_batch
        .iter()
        .chain(&dims.rhs_contracting)
        .copied()
        .collect();
    check_dims_in_range(&lhs_all, l.rank(), "lhs")?;
    check_dims_in_range(&rhs_all, r.rank(), "rhs")?;
    for (a, b) in dims
        .lhs_batch
        .iter()
        .zip(&dims.rhs_batch)
        .chain(dims.lhs_contracting.iter().zip(&dims.rhs_contracting))
    {
        if l.dims[*a as usize] != r.dims[*b as usize] {
            return refuse(ShapesError::DotSizes {
                lhs_dim: *a,
                lhs_size: l.dims[*a as usize],
                rhs_dim: *b,
                rhs_size: r.dims[*b as usize],
            });
        }
    }
    let mut out: Vec<i64> = dims.lhs_batch.iter().map(|&d| l.dims[d as usize]).collect();
    out.extend(
        (0..l.rank() as i64)
            .filter(|d| !lhs_all.contains(d))
            .map(|d| l.dims[d as usize]),
    );
    out.extend(
        (0..r.rank() as i64)
            .filter(|d| !rhs_all.contains(d))
            .map(|d| r.dims[d as usize]),
    );
    Ok(ArrayShape::new(ty, out))
}

/// `ragged-dot(lhs, rhs, group_sizes)`, in XLA's three modes, by where the
/// ragged lhs dimension is: not contracted, each group of rows meets the
/// rhs matrix its `rhs_group` index picks, and the result is the dot's
/// with that dimension gone from rhs; contracted, each group's partial
/// product is its own result, so the group count leads the dot's shape;
/// a batch dimension, it is the dot's shape. The group count is the last
/// dimension of `group_sizes` (an integer array).
pub(super) fn ragged_dot(
    dims: &DotDims,
    ragged: &RaggedDims,
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (l, r, sizes) = (
        array(operands, 0)?,
        array(operands, 1)?,
        array(operands, 2)?,
    );
    let Some(&groups) = sizes.dims.last().filter(|_| sizes.ty.is_integer()) else {
        return refuse(OperandError::GroupSizes(sizes.clone()));
    };
    let &[ragged_dim] = ragged.lhs_ragged.as_slice() else {
        return refuse(AttributeError::LhsRagged(ragged.lhs_ragged.clone()));
    };
    check_dims_in_range(&[ragged_dim], l.rank(), "lhs")?;
    let two = [operands[0], operands[1]];
    if dims.lhs_contracting.contains(&ragged_dim) || dims.lhs_batch.contains(&ragged_dim) {
        if !ragged.rhs_group.is_empty() {
            return refuse(AttributeError::UnusedRhsGroup(ragged.rhs_group.clone()));
        }
        let mut a = dot_array(dims, precision, &two, declared)?;
        if !dims.lhs_batch.contains(&ragged_dim) {
            a.dims.insert(0, groups);
        }
        return Ok(Shape::array(a.ty, a.dims));
    }
    let &[group] = ragged.rhs_group.as_slice() else {
        return refuse(AttributeError::RhsGroup(ragged.rhs_group.clone()));
    };
    check_dims_in_range(&[group], r.rank(), "rhs")?;
    if dims.rhs_batch.contains(&group) || dims.rhs_contracting.contains(&group) {
        return refuse(DimensionError::RaggedGroup { dimension: group });
    }
    if r.dims[group as usize] != groups {
        return refuse(ShapesError::RaggedGroups {
            groups,
            group_sizes: sizes.clone(),
            dimension: group,
            rhs: r.clone(),
            held: r.dims[group as usize],
        });
    }
    // The dot of lhs with one group's rhs matrix: rhs without its group
    // dimension, the dimensions after it numbered one lower.
    let mut matrix = r.clone();
    matrix.dims.remove(group as usize);
    let renumber = |v: &[i64]| -> Vec<i64> {
        v.iter()
            .map(|&d| if d > group { d - 1 } else { d })
            .collect()
    };
    let per_group = DotDims {
        lhs_batch: dims.lhs_batch.clone(),
        lhs_contracting: dims.lhs_contracting.clone(),
        rhs_batch: renumber(&dims.rhs_batch),
        rhs_contracting: renumber(&dims.rhs_contracting),
    };
    let matrix = Shape::array(matrix.ty, matrix.dims);
    dot(&per_group, precision, &[operands[0], &matrix], declared)
}

/// A dot's or convolution's two operands, with one operand precision each
/// if any is written, and the element type they contract to.
pub(super) fn contraction_operands<'a>(
    opcode: Opcode,
    precision: &[Precision],
    operands: &[&'a Shape],
    declared: Option<&Shape>,
) -> Result<(&'a ArrayShape, &'a ArrayShape, ElementType), ShapeError> {
    let (l, r) = (array(operands, 0)?, array(operands, 1)?);
    if !precision.is_empty() && precision.len() != 2 {
        return refuse(AttributeError::OperandPrecision {
            entries: precision.len(),
        });
    }
    Ok((l, r, contraction_type(opcode, l, r, declared)?))
}

/// The element type of a dot or convolution of `l` and `r`: the written
/// one, whatever the operands' types, as XLA's verifier takes the written
/// type for the preferred element type (`s8` x `s8` may accumulate to
/// `bf16`, `pred` x `pred` to `pred`, integer weights may meet float
/// activations). Unwritten, it is the operands' common type; mixed
/// operands must say what they give.
fn contraction_type(
    opcode: Opcode,
    l: &ArrayShape,
    r: &ArrayShape,
    declared: Option<&Shape>,
) -> Result<ElementType, ShapeError> {
    match declared {
        Some(Shape::Array(d)) => Ok(d.ty),
        _ if l.ty != r.ty => refuse(TypeError::Unwritten {
            opcode,
            lhs: l.ty,
            rhs: r.ty,
        }),
        _ => Ok(l.ty),
    }
}
