//! `fold-causal-mask`: a constant lower-triangular attention mask becomes
//! the same pattern generated in the graph from iota and compare, so no
//! `[S, S]` mask is stored in the program or read from memory.
//!
//! It recognizes any constant whose trailing `[S, S]` block holds one value
//! on and below the diagonal and another above it, the same block for every
//! leading index: a boolean mask (either polarity), an additive bias of 0
//! and -inf or -10000, or a 1/0 multiplier. Everything else, a banded or
//! random mask included, is left alone. A mask that arrives as a parameter
//! is never folded from its shape: bind it first (`hlatc opt --bind`).

use crate::infra::context::PassContext;
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use crate::infra::rewriter::{RewriteError, Rewriter};
use hlatc_compiler::ir::op::ComparisonDirection;
use hlatc_compiler::{ArrayShape, ElementType, InstrId, Literal, Module, Op, Shape};

pub struct FoldCausalMask;

/// The two values of a causal constant: `on` at key <= query, `above`
/// where the key is later than the query.
struct CausalSplit {
    on: Literal,
    above: Literal,
    side: i64,
}

impl FoldCausalMask {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "fold-causal-mask";
}

impl Pass for FoldCausalMask {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        rewrite_matches(
            m,
            ctx,
            Sweep::Dead,
            |_, c| -> Vec<(InstrId, CausalSplit)> {
                c.ids()
                    .filter_map(|id| match &c.instr(id).op {
                        Op::Constant(lit) => Some((id, causal_split(lit)?)),
                        _ => None,
                    })
                    .collect()
            },
            |r, ctx, (id, split)| {
                let shape = r
                    .shape(id)
                    .as_array()
                    .cloned()
                    .expect("constants are arrays");
                r.provenance_of(id);
                let generated =
                    generate(r, &shape, &split).map_err(PassError::rewrite(self.name()))?;
                if r.shape(generated) != r.shape(id) {
                    return Ok(false);
                }
                ctx.note(
                    self.name(),
                    format!(
                        "folded causal mask '{}' {} ({} on and below the diagonal, {} above) into iota/compare",
                        r.comp().instr(id).name,
                        r.shape(id),
                        split.on.element_string(0),
                        split.above.element_string(0)
                    ),
                );
                r.replace(id, generated)
                    .map_err(PassError::rewrite(self.name()))?;
                Ok(true)
            },
        )
    }
}

/// The two values, when `lit` is causal: rank >= 2, trailing dims `S x S`
/// with S >= 2, two different values split at the diagonal, the same block
/// for every leading index.
fn causal_split(lit: &Literal) -> Option<CausalSplit> {
    let dims = lit.dims();
    let r = dims.len();
    if r < 2 || dims[r - 1] != dims[r - 2] || dims[r - 1] < 2 {
        return None;
    }
    let s = dims[r - 1] as usize;
    let w = lit.ty().byte_size();
    let bytes = lit.bytes();
    let block = s * s * w;
    if bytes.is_empty() || !bytes.len().is_multiple_of(block) {
        return None;
    }
    let first = &bytes[..block];
    let on = &first[..w];
    let above = &first[w..2 * w];
    if on == above {
        return None;
    }
    for q in 0..s {
        for k in 0..s {
            let e = &first[(q * s + k) * w..(q * s + k + 1) * w];
            if e != if k <= q { on } else { above } {
                return None;
            }
        }
    }
    if !bytes.chunks_exact(block).all(|b| b == first) {
        return None;
    }
    let scalar = |b: &[u8]| Literal::from_bytes(lit.ty(), vec![], b.to_vec()).ok();
    Some(CausalSplit {
        on: scalar(on)?,
        above: scalar(above)?,
        side: s as i64,
    })
}

/// `key <= query` over `[S, S]`, as the constant's values, broadcast to its
/// shape.
fn generate(
    r: &mut Rewriter<'_>,
    shape: &ArrayShape,
    split: &CausalSplit,
) -> Result<InstrId, RewriteError> {
    let s = split.side;
    let square = |ty| Some(Shape::array(ty, vec![s, s]));
    let q = r.add(Op::Iota { dimension: 0 }, &[], square(ElementType::S32))?;
    let k = r.add(Op::Iota { dimension: 1 }, &[], square(ElementType::S32))?;
    let compare = |direction| Op::Compare {
        direction,
        kind: None,
    };
    let is_true = |l: &Literal| l.bytes() == [1];
    let block = match shape.ty {
        ElementType::Pred if is_true(&split.on) => {
            r.add(compare(ComparisonDirection::Ge), &[q, k], None)?
        }
        ElementType::Pred => r.add(compare(ComparisonDirection::Lt), &[q, k], None)?,
        ty => {
            let visible = r.add(compare(ComparisonDirection::Ge), &[q, k], None)?;
            let on = r.add(Op::Constant(split.on.clone()), &[], None)?;
            let above = r.add(Op::Constant(split.above.clone()), &[], None)?;
            let on = r.add(Op::Broadcast { dimensions: vec![] }, &[on], square(ty))?;
            let above = r.add(Op::Broadcast { dimensions: vec![] }, &[above], square(ty))?;
            r.add(Op::Select, &[visible, on, above], None)?
        }
    };
    let rank = shape.rank() as i64;
    if rank == 2 {
        return Ok(block);
    }
    r.add(
        Op::Broadcast {
            dimensions: vec![rank - 2, rank - 1],
        },
        &[block],
        Some(Shape::Array(shape.clone())),
    )
}
