//! Device ids as XLA writes them compactly, for shardings and replica
//! groups alike: `<=[4,2]T(1,0)` is `0..8` laid out as 4x2, transposed.

use crate::util::join::join;

/// `0..n` (n the product of `reshape`) laid out as `reshape`, transposed by
/// `transpose` (none when empty), read back in order: an iota tile
/// assignment's devices, as in shardings.
pub fn iota_devices(reshape: &[i64], transpose: &[i64]) -> Vec<i64> {
    let n: i64 = reshape.iter().product();
    if transpose.is_empty() {
        return (0..n).collect();
    }
    let dims: Vec<i64> = transpose.iter().map(|&p| reshape[p as usize]).collect();
    // Strides of the source layout, taken in transposed order.
    let mut strides = vec![1i64; reshape.len()];
    for d in (0..reshape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * reshape[d + 1];
    }
    let strides: Vec<i64> = transpose.iter().map(|&p| strides[p as usize]).collect();
    let mut out = Vec::with_capacity(n as usize);
    let mut index = vec![0i64; dims.len()];
    for _ in 0..n {
        out.push(index.iter().zip(&strides).map(|(i, s)| i * s).sum());
        for d in (0..dims.len()).rev() {
            index[d] += 1;
            if index[d] < dims[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// `perm`, or nothing when it leaves every dimension in place: XLA writes
/// an identity transpose into a proto but prints none.
pub fn without_identity(perm: Vec<i64>) -> Vec<i64> {
    if perm.iter().enumerate().all(|(i, &p)| p == i as i64) {
        Vec::new()
    } else {
        perm
    }
}

/// A transpose `T(...)` of an iota that does not permute its dimensions:
/// some dimension is named twice, or not at all, or is not one of them.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("T({}) does not permute the {rank} iota dimensions", join(.perm))]
pub struct PermutationError {
    /// The transpose as written.
    pub perm: Vec<i64>,
    /// How many dimensions the iota has.
    pub rank: usize,
}

/// Whether `perm` (when given) permutes `0..rank`.
pub fn check_permutation(perm: &[i64], rank: usize) -> Result<(), PermutationError> {
    if perm.is_empty() {
        return Ok(());
    }
    let mut p = perm.to_vec();
    p.sort_unstable();
    if p != (0..rank as i64).collect::<Vec<_>>() {
        return Err(PermutationError {
            perm: perm.to_vec(),
            rank,
        });
    }
    Ok(())
}

/// The iota that lays out `ids` in this order, if one does: `(reshape,
/// transpose)` with [`iota_devices`]`(reshape, transpose) == ids`, the
/// fewest dimensions (each maximal run of a constant stride is one) and
/// `transpose` empty when it is the identity. `ids` must be `0..n` in
/// some order; anything else has no iota.
pub fn iota_of(ids: &[i64]) -> Option<(Vec<i64>, Vec<i64>)> {
    let n = ids.len();
    if n == 0 || ids[0] != 0 {
        return None;
    }
    // Output dimensions, minor first: (size, stride in the iota).
    let mut dims: Vec<(i64, i64)> = Vec::new();
    let mut block = 1usize;
    while block < n {
        let stride = ids[block];
        let mut runs = 1usize;
        while (runs + 1) * block <= n
            && (0..block).all(|i| ids[runs * block + i] == runs as i64 * stride + ids[i])
        {
            runs += 1;
        }
        if runs == 1 || stride <= 0 {
            return None;
        }
        dims.push((runs as i64, stride));
        block *= runs;
    }
    if block != n {
        return None;
    }
    // The strides must be a row-major layout: sorted by stride, each the
    // product of the sizes below it.
    let mut by_stride: Vec<usize> = (0..dims.len()).collect();
    by_stride.sort_by_key(|&d| dims[d].1);
    let mut expect = 1i64;
    for &d in &by_stride {
        if dims[d].1 != expect {
            return None;
        }
        expect *= dims[d].0;
    }
    // The iota's dimensions, major first (largest stride first); the
    // output's, major first, name them.
    let reshape: Vec<i64> = by_stride.iter().rev().map(|&d| dims[d].0).collect();
    let major_first: Vec<usize> = by_stride.iter().rev().copied().collect();
    let transpose: Vec<i64> = (0..dims.len())
        .rev()
        .map(|d| {
            major_first
                .iter()
                .position(|&m| m == d)
                .expect("a dimension") as i64
        })
        .collect();
    let (reshape, transpose) = (reshape, without_identity(transpose));
    (iota_devices(&reshape, &transpose) == ids).then_some((reshape, transpose))
}
