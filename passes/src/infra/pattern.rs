//! Matching helpers every pass shares, in the manner of XLA's
//! `pattern_matcher.h`: they see through the layout-only ops that XLA and
//! JAX scatter around reductions, and [`Region`] refuses a match whose
//! interior values are read from outside it.

use hlatc_compiler::graph::builder::binary_reducer_op;
use hlatc_compiler::ir::op::BinaryOp;
use hlatc_compiler::{Computation, ComputationId, InstrId, Literal, Module, Op};
use std::collections::BTreeSet;

/// Ops that move or re-type data without computing: a matcher looks
/// through them to the value they carry.
pub fn is_layout_only(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. } | Op::Broadcast { .. } | Op::Transpose { .. } | Op::Convert
    ) || op == &Op::Unary(hlatc_compiler::ir::op::UnaryOp::Copy)
}

/// The value under a chain of layout-only ops, and the chain itself
/// (outermost first), so a region can claim it.
pub fn through_layout(c: &Computation, mut id: InstrId) -> (InstrId, Vec<InstrId>) {
    let mut chain = Vec::new();
    while is_layout_only(&c.instr(id).op) {
        chain.push(id);
        id = c.operands(id)[0];
    }
    (id, chain)
}

/// The binary op each scalar reducer of a module applies, by id.
pub struct ReducerOps(Vec<Option<BinaryOp>>);

impl ReducerOps {
    pub fn of(m: &Module) -> Self {
        ReducerOps(m.computations.iter().map(binary_reducer_op).collect())
    }

    pub fn get(&self, id: ComputationId) -> Option<BinaryOp> {
        self.0.get(id.index()).copied().flatten()
    }
}

/// A single-operand reduce by a known scalar reducer.
#[derive(Clone, Debug, PartialEq)]
pub struct ReduceMatch {
    pub op: BinaryOp,
    pub input: InstrId,
    pub init: InstrId,
    pub dimensions: Vec<i64>,
}

pub fn reduce(c: &Computation, reducers: &ReducerOps, id: InstrId) -> Option<ReduceMatch> {
    let Op::Reduce {
        dimensions,
        to_apply,
    } = &c.instr(id).op
    else {
        return None;
    };
    let ops = c.operands(id);
    (ops.len() == 2).then_some(())?;
    Some(ReduceMatch {
        op: reducers.get(*to_apply)?,
        input: ops[0],
        init: ops[1],
        dimensions: dimensions.clone(),
    })
}

/// The single value every element of a constant holds, seen through
/// layout-only ops (a broadcast scalar, a splat constant).
pub fn splat_value(c: &Computation, id: InstrId) -> Option<f64> {
    let (v, _) = through_layout(c, id);
    let Op::Constant(lit) = &c.instr(v).op else {
        return None;
    };
    uniform_value(lit)
}

/// The one value all elements of `lit` hold (as f64), if they agree. A
/// complex literal has none: one f64 cannot say its imaginary part.
pub fn uniform_value(lit: &Literal) -> Option<f64> {
    let n = lit.element_count();
    if n == 0 || lit.ty().is_complex() {
        return None;
    }
    let stride = lit.ty().byte_size();
    let bytes = lit.bytes();
    let first = &bytes[..stride];
    bytes
        .chunks_exact(stride)
        .all(|e| e == first)
        .then(|| lit.get(0).as_f64())
}

/// The two operands of a binary op `id` in either order, such that the
/// first satisfies `first`: for commutative ops.
pub fn commuted(
    c: &Computation,
    id: InstrId,
    op: BinaryOp,
    first: impl Fn(InstrId) -> bool,
) -> Option<(InstrId, InstrId)> {
    if c.instr(id).op != Op::Binary(op) {
        return None;
    }
    let o = c.operands(id);
    if first(o[0]) {
        Some((o[0], o[1]))
    } else if first(o[1]) {
        Some((o[1], o[0]))
    } else {
        None
    }
}

/// The operands of binary op `id`, if it is `op`.
pub fn binary(c: &Computation, id: InstrId, op: BinaryOp) -> Option<(InstrId, InstrId)> {
    (c.instr(id).op == Op::Binary(op)).then(|| {
        let o = c.operands(id);
        (o[0], o[1])
    })
}

/// Whether `b` broadcasts a value reduced over `axis` back over `axis`:
/// its dimension mapping keeps every dimension of a rank-`rank` array but
/// `axis`, in order. `b` is the outermost op of a layout chain; reshapes
/// that only add or drop unit dimensions (JAX's keepdims) are allowed.
pub fn broadcasts_back(c: &Computation, chain: &[InstrId], rank: usize, axis: i64) -> bool {
    let Some(&outer) = chain.first() else {
        return false;
    };
    let Op::Broadcast { dimensions } = &c.instr(outer).op else {
        return false;
    };
    let src = c.operands(outer)[0];
    let src_dims = match c.instr(src).shape.as_array() {
        Some(a) => a.dims.clone(),
        None => return false,
    };
    // Drop the unit dims a keepdims reshape added, with their mapping.
    let kept: Vec<i64> = dimensions
        .iter()
        .zip(&src_dims)
        .filter(|&(&d, &n)| !(n == 1 && d == axis))
        .map(|(&d, _)| d)
        .collect();
    let want: Vec<i64> = (0..rank as i64).filter(|&d| d != axis).collect();
    kept == want
        && chain[1..]
            .iter()
            .all(|&i| matches!(c.instr(i).op, Op::Reshape { .. } | Op::Convert))
}

/// A set of instructions to be replaced together, with the one value the
/// rest of the program reads.
#[derive(Clone, Debug, Default)]
pub struct Region {
    pub output: InstrId,
    pub interior: BTreeSet<InstrId>,
}

impl Region {
    pub fn new(output: InstrId) -> Self {
        Region {
            output,
            interior: BTreeSet::new(),
        }
    }

    pub fn claim(&mut self, ids: impl IntoIterator<Item = InstrId>) -> &mut Self {
        self.interior.extend(ids);
        self
    }

    /// An interior value read from outside the region (its output aside),
    /// if any: such a match must be refused, because fusing would either
    /// duplicate the work or leave the reader without its value.
    pub fn escape(&self, c: &Computation) -> Option<InstrId> {
        self.interior
            .iter()
            .copied()
            .filter(|&i| i != self.output)
            .find(|&i| {
                c.root() == Some(i)
                    || c.users(i)
                        .iter()
                        .any(|u| *u != self.output && !self.interior.contains(u))
            })
    }
}
