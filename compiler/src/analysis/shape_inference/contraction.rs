//! `dot`, `ragged-dot` and the result type of a contraction (shared with `convolution`).

use super::{arr, array, check_dims_in_range, invalid, ShapeError};
use crate::ir::op::{DotDims, Precision, RaggedDims};
use crate::ir::shape::{ArrayShape, ElementType, Shape};

/// The matrices of `a` (`[..., m, m]`) and what it solves against: `b`
/// is `[..., m, n]` from the left, `[..., n, m]` from the right, with the
/// same batch dimensions and type. The result is `b`'s shape.
pub(super) fn triangular_solve(left_side: bool, operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let (a, b) = (array(operands, 0)?, array(operands, 1)?);
    let m = square_matrix("triangular-solve", a)?;
    if a.ty != b.ty || b.rank() != a.rank() || b.dims[..b.rank() - 2] != a.dims[..a.rank() - 2] {
        return invalid(format!(
            "triangular-solve of {a} needs a right-hand side of its type and batch dimensions, got {b}"
        ));
    }
    let solved = if left_side {
        b.dims[b.rank() - 2]
    } else {
        b.dims[b.rank() - 1]
    };
    if solved != m {
        return invalid(format!(
            "triangular-solve of {a} from the {} needs {m} there in {b}",
            if left_side { "left" } else { "right" }
        ));
    }
    Ok(Shape::Array(b.clone()))
}

/// `cholesky` of a float `[..., n, n]`: the same shape.
pub(super) fn cholesky(operands: &[&Shape]) -> Result<Shape, ShapeError> {
    let a = array(operands, 0)?;
    square_matrix("cholesky", a)?;
    Ok(Shape::Array(a.clone()))
}

/// The size of the square float matrices at the end of `a`'s dimensions.
fn square_matrix(opcode: &str, a: &ArrayShape) -> Result<i64, ShapeError> {
    match a.dims.as_slice() {
        [.., m, n] if m == n && (a.ty.is_float() || a.ty.is_complex()) => Ok(*m),
        _ => invalid(format!(
            "{opcode} needs float or complex square matrices in the last two dimensions, got {a}"
        )),
    }
}

pub(super) fn dot(
    dims: &DotDims,
    precision: &[Precision],
    operands: &[&Shape],
    declared: Option<&Shape>,
) -> Result<Shape, ShapeError> {
    let (l, r, ty) = contraction_operands("dot", precision, operands, declared)?;
    if dims.lhs_batch.len() != dims.rhs_batch.len()
        || dims.lhs_contracting.len() != dims.rhs_contracting.len()
    {
        return invalid("dot needs as many lhs as rhs batch and contracting dimensions");
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
            return invalid(format!(
                "dot dimension sizes differ: lhs dim {a} is {}, rhs dim {b} is {}",
                l.dims[*a as usize], r.dims[*b as usize]
            ));
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
    Ok(arr(ty, out))
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
        return invalid(format!(
            "ragged-dot's group sizes are an integer array, got {sizes}"
        ));
    };
    let &[ragged_dim] = ragged.lhs_ragged.as_slice() else {
        return invalid(format!(
            "ragged-dot needs one lhs_ragged_dims, got {:?}",
            ragged.lhs_ragged
        ));
    };
    check_dims_in_range(&[ragged_dim], l.rank(), "lhs")?;
    let two = [operands[0], operands[1]];
    if dims.lhs_contracting.contains(&ragged_dim) || dims.lhs_batch.contains(&ragged_dim) {
        if !ragged.rhs_group.is_empty() {
            return invalid(
                "a ragged-dot whose ragged dimension is contracted or a batch dimension takes no rhs_group_dims",
            );
        }
        let dot_shape = dot(dims, precision, &two, declared)?;
        if dims.lhs_batch.contains(&ragged_dim) {
            return Ok(dot_shape);
        }
        let Shape::Array(mut a) = dot_shape else {
            return invalid("a dot's shape is an array");
        };
        a.dims.insert(0, groups);
        return Ok(arr(a.ty, a.dims));
    }
    let &[group] = ragged.rhs_group.as_slice() else {
        return invalid(format!(
            "a ragged-dot whose ragged dimension is not contracted needs one rhs_group_dims, got {:?}",
            ragged.rhs_group
        ));
    };
    check_dims_in_range(&[group], r.rank(), "rhs")?;
    if dims.rhs_batch.contains(&group) || dims.rhs_contracting.contains(&group) {
        return invalid(format!(
            "ragged-dot's rhs group dimension {group} is also a batch or contracting dimension"
        ));
    }
    if r.dims[group as usize] != groups {
        return invalid(format!(
            "ragged-dot has {groups} groups in {sizes}, but rhs dimension {group} of {r} holds {}",
            r.dims[group as usize]
        ));
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
    opcode: &str,
    precision: &[Precision],
    operands: &[&'a Shape],
    declared: Option<&Shape>,
) -> Result<(&'a ArrayShape, &'a ArrayShape, ElementType), ShapeError> {
    let (l, r) = (array(operands, 0)?, array(operands, 1)?);
    if !precision.is_empty() && precision.len() != 2 {
        return invalid("operand_precision needs one entry per operand");
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
    opcode: &str,
    l: &ArrayShape,
    r: &ArrayShape,
    declared: Option<&Shape>,
) -> Result<ElementType, ShapeError> {
    match declared {
        Some(Shape::Array(d)) => Ok(d.ty),
        _ if l.ty != r.ty => invalid(format!(
            "a {opcode} of {} and {} needs its result type written",
            l.ty, r.ty
        )),
        _ => Ok(l.ty),
    }
}
