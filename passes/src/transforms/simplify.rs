//! `simplify`: algebraic simplification and constant folding. Each rule is
//! local and exact: it gives the same bits as the instruction it replaces
//! (adding zero aside, which XLA's own simplifier also folds, and which can
//! only turn a -0 into +0).

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use crate::infra::pattern;
use crate::infra::rewriter::{ModuleRewriter, Rewriter};
use hlatc_compiler::ir::op::{BinaryOp, SliceDim, UnaryOp};
use hlatc_compiler::{Computation, InstrId, Literal, Module, Op, Scalar};

pub struct Simplify;

/// What a rule turns an instruction into.
enum Action {
    /// An existing value of the same shape.
    Use(InstrId),
    /// A new instruction.
    New(Op, Vec<InstrId>),
}

type Rule = fn(&Computation, InstrId) -> Option<Action>;

/// The rules, tried in order; the first that applies wins.
const RULES: [Rule; 7] = [
    identity_layout,
    layout_of_layout,
    neutral_operand,
    double_negation,
    flatten_concatenate,
    whole_slice,
    fold_scalar_arithmetic,
];

impl Simplify {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "simplify";
}

impl Pass for Simplify {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut rw: Option<ModuleRewriter> = None;
        let mut changed = false;
        for ci in 0..m.computations.len() {
            let c = &m.computations[ci];
            if !c
                .ids()
                .any(|id| RULES.iter().any(|rule| rule(c, id).is_some()))
            {
                continue;
            }
            let mut r = ModuleRewriter::on_demand(&mut rw, m, ci, ctx);
            for id in r.comp().post_order() {
                if !r.comp().contains(id) {
                    continue;
                }
                let Some(action) = RULES.iter().find_map(|rule| rule(r.comp(), id)) else {
                    continue;
                };
                changed |= apply(&mut r, id, action).map_err(PassError::rewrite(self.name()))?;
            }
            r.remove_dead();
        }
        ModuleRewriter::finish_on_demand(rw, ctx);
        Ok(changed)
    }
}

fn apply(
    r: &mut Rewriter<'_>,
    id: InstrId,
    action: Action,
) -> Result<bool, crate::infra::rewriter::RewriteError> {
    let shape = r.shape(id).clone();
    let new = match action {
        Action::Use(v) => v,
        Action::New(op, operands) => {
            r.provenance_of(id);
            r.add(op, &operands, Some(shape.clone()))?
        }
    };
    if r.shape(new) != &shape {
        // A rule may only offer a value of the same shape (and layout);
        // anything else is left as it was.
        return Ok(false);
    }
    r.replace(id, new)?;
    Ok(true)
}

fn operand(c: &Computation, id: InstrId, i: usize) -> InstrId {
    c.operands(id)[i]
}

/// reshape, transpose, broadcast or convert that leaves its operand as it
/// was.
fn identity_layout(c: &Computation, id: InstrId) -> Option<Action> {
    let i = c.instr(id);
    let identity = match &i.op {
        Op::Reshape { .. } | Op::Convert => true,
        Op::Transpose { permutation } => {
            permutation.iter().enumerate().all(|(k, &p)| p == k as i64)
        }
        Op::Broadcast { dimensions } => dimensions.iter().enumerate().all(|(k, &d)| d == k as i64),
        _ => false,
    };
    let x = identity.then(|| operand(c, id, 0))?;
    (c.instr(x).shape == i.shape).then_some(Action::Use(x))
}

/// reshape of a reshape is one reshape; a broadcast of a scalar broadcast
/// is one broadcast.
fn layout_of_layout(c: &Computation, id: InstrId) -> Option<Action> {
    let x = match &c.instr(id).op {
        Op::Reshape { .. } | Op::Broadcast { .. } => operand(c, id, 0),
        _ => return None,
    };
    match (&c.instr(id).op, &c.instr(x).op) {
        (Op::Reshape { .. }, Op::Reshape { .. }) => {
            Some(Action::New(Op::RESHAPE, vec![operand(c, x, 0)]))
        }
        (Op::Broadcast { .. }, Op::Broadcast { .. }) => {
            let inner = operand(c, x, 0);
            (c.instr(inner).shape.as_array()?.rank() == 0)
                .then(|| Action::New(Op::Broadcast { dimensions: vec![] }, vec![inner]))
        }
        _ => None,
    }
}

/// `x * 1`, `1 * x`, `x / 1`, `x + 0`, `0 + x`, `x - 0`, `max(x, -inf)`
/// and `min(x, +inf)` are `x` (XLA's max and min propagate NaN, so the
/// last two hold for every x).
fn neutral_operand(c: &Computation, id: InstrId) -> Option<Action> {
    let Op::Binary(op) = c.instr(id).op else {
        return None;
    };
    let (a, b) = (operand(c, id, 0), operand(c, id, 1));
    let is = |v: InstrId, k: f64| pattern::splat_value(c, v) == Some(k);
    let keep = match op {
        BinaryOp::Multiply if is(b, 1.0) => a,
        BinaryOp::Multiply if is(a, 1.0) => b,
        BinaryOp::Divide if is(b, 1.0) => a,
        BinaryOp::Add if is(b, 0.0) => a,
        BinaryOp::Add if is(a, 0.0) => b,
        BinaryOp::Subtract if is(b, 0.0) => a,
        BinaryOp::Maximum if is(b, f64::NEG_INFINITY) => a,
        BinaryOp::Maximum if is(a, f64::NEG_INFINITY) => b,
        BinaryOp::Minimum if is(b, f64::INFINITY) => a,
        BinaryOp::Minimum if is(a, f64::INFINITY) => b,
        _ => return None,
    };
    c.instr(keep)
        .shape
        .as_array()?
        .ty
        .is_float()
        .then_some(())?;
    Some(Action::Use(keep))
}

fn double_negation(c: &Computation, id: InstrId) -> Option<Action> {
    let neg = Op::Unary(UnaryOp::Negate);
    (c.instr(id).op == neg).then_some(())?;
    let x = operand(c, id, 0);
    (c.instr(x).op == neg).then(|| Action::Use(operand(c, x, 0)))
}

/// A concatenate whose operands include concatenates along the same
/// dimension reads their operands directly (coalescing builds these), and
/// consecutive slices that tile an operand along that dimension read the
/// operand itself.
fn flatten_concatenate(c: &Computation, id: InstrId) -> Option<Action> {
    let Op::Concatenate { dimension } = c.instr(id).op else {
        return None;
    };
    let ops = c.operands(id);
    if ops.len() == 1 {
        return Some(Action::Use(ops[0]));
    }
    let mut flat = Vec::new();
    for &o in &ops {
        match c.instr(o).op {
            Op::Concatenate { dimension: d } if d == dimension => flat.extend(c.operands(o)),
            _ => flat.push(o),
        }
    }
    let merged = merge_adjacent_slices(c, &flat, dimension as usize);
    (merged != ops).then_some(Action::New(Op::Concatenate { dimension }, merged))
}

/// Replaces each run of unit-stride slices of one value that tile it along
/// `dim` (and take all of the other dimensions) by the value itself.
fn merge_adjacent_slices(c: &Computation, xs: &[InstrId], dim: usize) -> Vec<InstrId> {
    let slice_of = |id: InstrId| -> Option<(InstrId, i64, i64)> {
        let Op::Slice { slices } = &c.instr(id).op else {
            return None;
        };
        let src = operand(c, id, 0);
        whole_but(c, src, slices, dim).then(|| (src, slices[dim].start, slices[dim].limit))
    };
    let mut out = Vec::new();
    let mut k = 0;
    while k < xs.len() {
        let Some((src, start, mut limit)) = slice_of(xs[k]) else {
            out.push(xs[k]);
            k += 1;
            continue;
        };
        let mut end = k + 1;
        while let Some((s2, b, l)) = xs.get(end).and_then(|&x| slice_of(x)) {
            if s2 != src || b != limit {
                break;
            }
            limit = l;
            end += 1;
        }
        let n = c.instr(src).shape.as_array().map(|a| a.dims[dim]);
        if start == 0 && Some(limit) == n {
            out.push(src);
        } else {
            out.extend_from_slice(&xs[k..end]);
        }
        k = end;
    }
    out
}

fn whole_but(c: &Computation, src: InstrId, sl: &[SliceDim], dim: usize) -> bool {
    let Some(a) = c.instr(src).shape.as_array() else {
        return false;
    };
    sl.iter()
        .enumerate()
        .all(|(k, s)| s.stride == 1 && (k == dim || (s.start == 0 && s.limit == a.dims[k])))
}

/// A slice that takes all of its operand.
fn whole_slice(c: &Computation, id: InstrId) -> Option<Action> {
    let Op::Slice { .. } = c.instr(id).op else {
        return None;
    };
    let x = operand(c, id, 0);
    (c.instr(x).shape == c.instr(id).shape).then_some(Action::Use(x))
}

/// `+ - * / max min` of two scalar float constants, and negation of one.
/// These are correctly rounded in f64 and then in the target type, which
/// equals rounding once, so the folded constant has XLA's bits.
fn fold_scalar_arithmetic(c: &Computation, id: InstrId) -> Option<Action> {
    let i = c.instr(id);
    let a = i.shape.as_array()?;
    if a.rank() != 0 || !a.ty.is_float() {
        return None;
    }
    let scalar = |v: InstrId| match &c.instr(v).op {
        Op::Constant(l) => Some(l.get(0).as_f64()),
        _ => None,
    };
    let ops = c.operands(id);
    let value = match i.op {
        Op::Unary(UnaryOp::Negate) => -scalar(ops[0])?,
        Op::Binary(op) => {
            let (x, y) = (scalar(ops[0])?, scalar(ops[1])?);
            match op {
                BinaryOp::Add => x + y,
                BinaryOp::Subtract => x - y,
                BinaryOp::Multiply => x * y,
                BinaryOp::Divide => x / y,
                BinaryOp::Maximum if !x.is_nan() && !y.is_nan() => x.max(y),
                BinaryOp::Minimum if !x.is_nan() && !y.is_nan() => x.min(y),
                _ => return None,
            }
        }
        _ => return None,
    };
    let lit = Literal::from_scalars(a.ty, vec![], &[Scalar::Float(value)]).ok()?;
    Some(Action::New(Op::Constant(lit), vec![]))
}
