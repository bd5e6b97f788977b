//! The graph pieces the single-device forward ([`crate::llama`]) and the
//! tensor-parallel one ([`crate::parallel::layers`]) build alike: the
//! embedding's row lookup and the loss's total over the counted tokens.
//! They live apart from both so that neither imports the other.

use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{ComparisonDirection, GatherDims, Op};
use hlatc_compiler::{ElementType, InstrId};

/// Rows of `table` (`[rows, d]`) at `index` (`s32[n, 1]`): `[n, d]`.
pub(crate) fn gather_rows(
    b: &mut Builder,
    table: InstrId,
    index: InstrId,
    d: i64,
) -> Result<InstrId, BuildError> {
    b.add(
        Op::Gather {
            dims: GatherDims {
                offset_dims: vec![1],
                collapsed_slice_dims: vec![0],
                start_index_map: vec![0],
                index_vector_dim: 1,
                ..Default::default()
            },
            slice_sizes: vec![1, d],
            indices_are_sorted: false,
        },
        &[table, index],
        None,
    )
}

/// The sum of the per-token losses `nll` (`[n]`) over the tokens whose
/// target (`t`, `s32[n]`) is not [`IGNORE_INDEX`], and how many those are
/// (as `ty`).
pub(crate) fn counted_total(
    b: &mut Builder,
    nll: InstrId,
    t: InstrId,
    ty: ElementType,
) -> Result<(InstrId, InstrId), BuildError> {
    let n = b.dims(t)[0];
    let ignore = b.full(ElementType::S32, &[n], IGNORE_INDEX as f64)?;
    let counted = b.compare(t, ignore, ComparisonDirection::Ne)?;
    let zero = b.full_like(nll, 0.0)?;
    let nll = b.select(counted, nll, zero)?;
    let total = b.reduce_sum(nll, &[0])?;
    let ones = b.convert(counted, ty)?;
    let count = b.reduce_sum(ones, &[0])?;
    Ok((total, count))
}

/// Targets equal to this are left out of the loss and its mean, as
/// `torch.nn.CrossEntropyLoss` does by default (Hugging Face pads labels
/// with it).
pub const IGNORE_INDEX: i64 = -100;
