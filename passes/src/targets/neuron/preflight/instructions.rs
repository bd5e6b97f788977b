//! A lower bound on the instructions neuronx-cc emits for a module, the
//! count its per-module limit (NCC_EVRF007) is about.
//!
//! neuronx-cc counts the instructions of the program it generates, for
//! every engine (TensorE, VectorE, ScalarE, GpSimd, DMA), after tiling
//! and unrolling; that count exists only inside the compiler. What the
//! HLO alone fixes is the matrix multiplies' share: a NeuronCore's TensorE
//! multiplies a stationary tile of at most 128 contraction rows by 128
//! output rows against a moving tile of at most 512 columns per
//! instruction, so a dot of `batch x [M, K] . [K, N]` takes at least
//! `batch * ceil(M/128) * ceil(K/128) * ceil(N/512)` of them, whichever
//! operand the compiler makes stationary (the smaller count of the two
//! layouts is taken). Everything else comes on top, so this bound can say
//! a module is too large, never that it fits. A block-scaled dot of MX
//! operands is counted over its packed operands, a 32-bit word (four
//! values) a contraction row: no instruction takes more, whatever it
//! takes.

use crate::targets::neuron::mx_calls::scaled_dot_packed;
use hlatc_compiler::ir::op::{DotDims, Op};
use hlatc_compiler::{Computation, InstrId, Module};

/// Contraction rows, and stationary rows, of one TensorE instruction.
pub const PARTITIONS: u64 = 128;
/// Moving columns of one TensorE instruction.
pub const MOVING_COLUMNS: u64 = 512;

/// The fewest TensorE instructions the module's dots need.
pub fn matmul_instructions(module: &Module) -> u64 {
    module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| (c, id)))
        .filter_map(|(c, id)| match dot_operands(c, id) {
            Some((dims, lhs, rhs)) => Some(dot_instructions(dims, lhs, rhs)),
            None => {
                let (dims, [lhs, rhs]) = scaled_dot_packed(c, id)?;
                Some(dot_instructions(&dims, &lhs, &rhs))
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// A dot's dimension numbers and its operands' dimensions; `None` for any
/// other instruction.
pub fn dot_operands(c: &Computation, id: InstrId) -> Option<(&DotDims, &[i64], &[i64])> {
    let Op::Dot { dims, .. } = &c.instr(id).op else {
        return None;
    };
    let ops = c.operand_ids(id);
    let dims_of = |k: usize| -> &[i64] {
        ops.get(k)
            .and_then(|&o| c.instr(o).shape.as_array())
            .map_or(&[], |a| a.dims.as_slice())
    };
    Some((dims, dims_of(0), dims_of(1)))
}

/// The fewest TensorE instructions one dot of these operand dimensions
/// needs: the tiles of [`PARTITIONS`] x [`PARTITIONS`] x [`MOVING_COLUMNS`]
/// it divides into, with the cheaper operand made stationary.
pub fn dot_instructions(d: &DotDims, lhs: &[i64], rhs: &[i64]) -> u64 {
    let product = |dims: &[i64], pick: &dyn Fn(usize) -> bool| -> u64 {
        dims.iter()
            .enumerate()
            .filter(|(k, _)| pick(*k))
            .map(|(_, &n)| n.max(0) as u64)
            .product()
    };
    let has = |v: &[i64], k: usize| v.contains(&(k as i64));
    let batch = product(lhs, &|k| has(&d.lhs_batch, k));
    let contraction = product(lhs, &|k| has(&d.lhs_contracting, k));
    let m = product(lhs, &|k| {
        !has(&d.lhs_batch, k) && !has(&d.lhs_contracting, k)
    });
    let n = product(rhs, &|k| {
        !has(&d.rhs_batch, k) && !has(&d.rhs_contracting, k)
    });
    let tiles = |stationary: u64, moving: u64| {
        contraction.div_ceil(PARTITIONS)
            * stationary.div_ceil(PARTITIONS)
            * moving.div_ceil(MOVING_COLUMNS)
    };
    batch.saturating_mul(tiles(m, n).min(tiles(n, m)))
}
