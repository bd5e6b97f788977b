//! `sort-to-topk`: a `sort` that only serves a top k becomes the top k
//! itself: `AwsNeuronTopK` on `neuron`, XLA's `topk` on `cpu` (the form and
//! the custom call's contract are in `neuron_topk.rs`). Neuron runs its
//! TopK natively, where a whole sort is refused on trn2 (reported as
//! `NCC_EVRF029`, though the SDK documents no such page) or costs a full
//! sort for k values.
//!
//! What matches, all of it:
//! - a `sort` along the last dimension of a float operand `x` of a type
//!   the custom call takes (f32, bf16, f16), alone or with a second
//!   operand that is an integer `iota` along that dimension (the indices);
//! - a comparator that is exactly `compare(lhs_x, rhs_x), direction=GT`
//!   (with no comparison type, `FLOAT` or `TOTALORDER`): descending by
//!   `x` alone;
//! - every value the sort gives is read only by `slice`s that take the
//!   first k along the last dimension (stride 1) and everything of the
//!   other dimensions, the same k for all (through `get-tuple-element`
//!   for a sort of two operands).
//!
//! Each slice of values becomes the top k's values, each slice of indices
//! its indices converted to the iota's type. Values are the same whatever
//! the ties. Indices of tied values may differ: a stable sort keeps ties in
//! index order (as XLA's `topk` does), an unstable one promises no order,
//! and Neuron's order is not documented. `TOTALORDER` puts -0 below +0 and
//! orders NaNs, which the top k may not. Anything else (an ascending
//! comparator, a tie-break on the indices, a value read whole) is left
//! alone, with a note saying why.

use crate::infra::context::PassContext;
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use crate::targets::neuron::neuron_topk::{write_top_k, TOPK_INPUT_TYPES};
use hlatc_compiler::ir::op::{ComparisonDirection, ComparisonType};
use hlatc_compiler::{Computation, ElementType, InstrId, Module, Op};

pub struct SortToTopK;

/// A sort that serves a top k, and what reads it.
struct TopKSort {
    sort: InstrId,
    x: InstrId,
    k: i64,
    /// The iota's type, for a sort that carries indices.
    index_type: Option<ElementType>,
    value_slices: Vec<InstrId>,
    index_slices: Vec<InstrId>,
}

impl SortToTopK {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "sort-to-topk";
}

impl Pass for SortToTopK {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let (mut rewritten, mut left) = (Vec::new(), Vec::new());
        rewrite_matches(
            m,
            ctx,
            Sweep::Orphans,
            |m, c| {
                let mut found = Vec::new();
                for id in c.ids() {
                    if !matches!(c.instr(id).op, Op::Sort { .. }) {
                        continue;
                    }
                    match top_k_sort(m, c, id) {
                        Ok(t) => found.push(t),
                        Err(why) => left.push(format!("%{} ({why})", c.instr(id).name)),
                    }
                }
                found
            },
            |r, ctx, t| {
                r.provenance_of(t.sort);
                let index_type = t.index_type.unwrap_or(ElementType::S32);
                let (values, indices) = write_top_k(r, ctx.target, t.x, t.k, index_type)
                    .map_err(PassError::rewrite(self.name()))?;
                for s in t.value_slices {
                    r.replace(s, values)
                        .map_err(PassError::rewrite(self.name()))?;
                }
                for s in t.index_slices {
                    r.replace(s, indices)
                        .map_err(PassError::rewrite(self.name()))?;
                }
                rewritten.push(format!("%{} (k={})", r.comp().instr(t.sort).name, t.k));
                Ok(true)
            },
        )?;
        if !rewritten.is_empty() {
            ctx.note(
                self.name(),
                format!(
                    "{} sort(s) that served a top k are the top k now: {}",
                    rewritten.len(),
                    rewritten.join(", ")
                ),
            );
        }
        if !left.is_empty() {
            ctx.note(
                self.name(),
                format!("sorts left as they are: {}", left.join(", ")),
            );
        }
        Ok(!rewritten.is_empty())
    }
}

/// Sort `id` of `c` as a top k, or why it is not one.
fn top_k_sort(m: &Module, c: &Computation, id: InstrId) -> Result<TopKSort, NotTopK> {
    let Op::Sort {
        dimension,
        comparator,
        ..
    } = &c.instr(id).op
    else {
        return Err(NotTopK::NotASort);
    };
    let operands = c.operand_ids(id);
    let &x = operands.first().ok_or(NotTopK::NoOperands)?;
    let xs = c.instr(x).shape.as_array().ok_or(NotTopK::KeysNotArray)?;
    if !TOPK_INPUT_TYPES.contains(&xs.ty) {
        return Err(NotTopK::KeyType(xs.ty));
    }
    let last = xs.rank() as i64 - 1;
    if *dimension != last || last < 0 {
        return Err(NotTopK::Dimension(*dimension));
    }
    let cmp = m
        .get_computation(*comparator)
        .ok_or_else(|| NotTopK::MissingComparator(comparator.describe()))?;
    if !descending_by_first(cmp) {
        return Err(NotTopK::Comparator);
    }
    let index_type = match operands {
        [_] => None,
        [_, i] => {
            let iota = c.instr(*i);
            let along = matches!(iota.op, Op::Iota { dimension: d } if d == last);
            let ty = iota
                .shape
                .as_array()
                .filter(|a| a.dims == xs.dims)
                .map(|a| a.ty);
            match ty {
                Some(ty) if along && ty.is_integer() => Some(ty),
                _ => return Err(NotTopK::NotIndices),
            }
        }
        _ => return Err(NotTopK::Operands(operands.len())),
    };
    // Who reads the values and the indices.
    let (values, indices) = if index_type.is_none() {
        (vec![id], vec![])
    } else {
        let mut v = (Vec::new(), Vec::new());
        for u in c.users(id) {
            match c.instr(u).op {
                Op::GetTupleElement { index: 0 } => v.0.push(u),
                Op::GetTupleElement { index: 1 } => v.1.push(u),
                _ => return Err(NotTopK::TupleReadWhole(c.instr(u).name.clone())),
            }
        }
        v
    };
    let mut k = None;
    let mut slices = |readers: &[InstrId]| -> Result<Vec<InstrId>, NotTopK> {
        let mut out = Vec::new();
        for &v in readers {
            if c.root() == Some(v) {
                return Err(NotTopK::IsResult);
            }
            for u in c.users(v) {
                let kk = first_k(c, u, &xs.dims)
                    .ok_or_else(|| NotTopK::ReadWhole(c.instr(u).name.clone()))?;
                if *k.get_or_insert(kk) != kk {
                    return Err(NotTopK::DifferentK);
                }
                out.push(u);
            }
        }
        Ok(out)
    };
    let value_slices = slices(&values)?;
    let index_slices = slices(&indices)?;
    let k = k.ok_or(NotTopK::NoSlice)?;
    Ok(TopKSort {
        sort: id,
        x,
        k,
        index_type,
        value_slices,
        index_slices,
    })
}

/// Why a sort is left as it is, for the pass's note.
#[derive(Debug, thiserror::Error)]
enum NotTopK {
    #[error("not a sort")]
    NotASort,
    #[error("it sorts nothing")]
    NoOperands,
    #[error("its keys are not an array")]
    KeysNotArray,
    /// Keys of a type the top k's custom call does not take.
    #[error("it sorts {}, not f32, bf16 or f16", .0.name())]
    KeyType(ElementType),
    /// A top k is along the last dimension only.
    #[error("it sorts dimension {0}, not the last")]
    Dimension(i64),
    #[error("its comparator '{0}' is not in the module")]
    MissingComparator(String),
    /// Any other order is not the top k's (ascending, a tie-break).
    #[error("its comparator is not compare(lhs, rhs), direction=GT on the keys alone")]
    Comparator,
    #[error("its second operand is not an integer iota along the sorted dimension")]
    NotIndices,
    #[error("it sorts {0} operands")]
    Operands(usize),
    /// The whole sorted tuple is read, not just its first k.
    #[error("'{0}' reads its tuple whole")]
    TupleReadWhole(String),
    #[error("the sorted values are the computation's result")]
    IsResult,
    #[error("'{0}' reads the sorted values other than as their first k")]
    ReadWhole(String),
    #[error("its slices take different k")]
    DifferentK,
    #[error("nothing takes its first k")]
    NoSlice,
}

/// Whether `cmp` is `compare(p0, p1), direction=GT`: the first operand's
/// lhs above its rhs, and nothing else compared.
fn descending_by_first(cmp: &Computation) -> bool {
    let Some(root) = cmp.root() else {
        return false;
    };
    let gt = matches!(
        cmp.instr(root).op,
        Op::Compare {
            direction: ComparisonDirection::Gt,
            kind: None | Some(ComparisonType::Float | ComparisonType::TotalOrder),
        }
    );
    let reads = cmp.operand_ids(root);
    gt && reads.len() == 2
        && matches!(cmp.instr(reads[0]).op, Op::Parameter(0))
        && matches!(cmp.instr(reads[1]).op, Op::Parameter(1))
}

/// k, when `u` is a slice of an array of `dims` that takes its first k
/// along the last dimension and everything of the others.
fn first_k(c: &Computation, u: InstrId, dims: &[i64]) -> Option<i64> {
    let Op::Slice { slices } = &c.instr(u).op else {
        return None;
    };
    let (last, rest) = slices.split_last()?;
    let whole = rest
        .iter()
        .zip(dims)
        .all(|(s, &d)| s.start == 0 && s.limit == d && s.stride == 1);
    (whole && last.start == 0 && last.stride == 1 && last.limit > 0).then_some(last.limit)
}
