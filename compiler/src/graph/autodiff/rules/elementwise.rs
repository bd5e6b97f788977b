//! Backward rules of the elementwise ops: unary and binary arithmetic,
//! `select` and `clamp`.

use super::{masked, unbroadcast_scalar, AutodiffError, Site};
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;
use crate::ir::op::*;

pub(super) fn unary(
    b: &mut Builder,
    u: UnaryOp,
    x: InstrId,
    out: InstrId,
    g: InstrId,
) -> Result<Option<InstrId>, AutodiffError> {
    let r = match u {
        UnaryOp::Abs => {
            let s = b.unary(UnaryOp::Sign, x)?;
            b.mul(g, s)?
        }
        UnaryOp::Negate => b.unary(UnaryOp::Negate, g)?,
        UnaryOp::Exp => b.mul(g, out)?,
        UnaryOp::Expm1 => {
            let one = b.full_like(out, 1.0)?;
            let e = b.add2(out, one)?;
            b.mul(g, e)?
        }
        UnaryOp::Log => b.div(g, x)?,
        UnaryOp::Log1p => {
            let one = b.full_like(x, 1.0)?;
            let d = b.add2(x, one)?;
            b.div(g, d)?
        }
        UnaryOp::Sqrt => {
            let h = b.scale(g, 0.5)?;
            b.div(h, out)?
        }
        UnaryOp::Rsqrt => {
            // d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 out^3
            let o2 = b.mul(out, out)?;
            let o3 = b.mul(o2, out)?;
            let d = b.scale(o3, -0.5)?;
            b.mul(g, d)?
        }
        // Recomputed fresh from the saved operand: rotary embeddings take
        // both sin and cos of the same angles, and a shared forward value
        // would be read without being declared in `saves`.
        UnaryOp::Sin => {
            let c = b.add_fresh(Op::Unary(UnaryOp::Cos), &[x])?;
            b.mul(g, c)?
        }
        UnaryOp::Cos => {
            let s = b.add_fresh(Op::Unary(UnaryOp::Sin), &[x])?;
            let ns = b.unary(UnaryOp::Negate, s)?;
            b.mul(g, ns)?
        }
        UnaryOp::Tanh => {
            let o2 = b.mul(out, out)?;
            let one = b.full_like(out, 1.0)?;
            let d = b.sub(one, o2)?;
            b.mul(g, d)?
        }
        UnaryOp::Logistic => {
            let one = b.full_like(out, 1.0)?;
            let c = b.sub(one, out)?;
            let d = b.mul(out, c)?;
            b.mul(g, d)?
        }
        // d/dx tan x = 1 + tan^2 x
        UnaryOp::Tan => {
            let o2 = b.mul(out, out)?;
            let one = b.full_like(out, 1.0)?;
            let d = b.add2(one, o2)?;
            b.mul(g, d)?
        }
        // d/dx x^(1/3) = 1 / (3 out^2)
        UnaryOp::Cbrt => {
            let o2 = b.mul(out, out)?;
            let d = b.scale(o2, 3.0)?;
            b.div(g, d)?
        }
        // d/dx erf x = 2/sqrt(pi) exp(-x^2); x^2 made fresh, as sin's cos
        // is, so it cannot be a forward value read undeclared.
        UnaryOp::Erf => {
            let x2 = b.add_fresh(Op::Binary(BinaryOp::Multiply), &[x, x])?;
            let n = b.unary(UnaryOp::Negate, x2)?;
            let e = b.unary(UnaryOp::Exp, n)?;
            let d = b.scale(e, std::f64::consts::FRAC_2_SQRT_PI)?;
            b.mul(g, d)?
        }
        // Of a float (a complex operand is refused in `vjp`): the value
        // itself, and zero.
        UnaryOp::Copy | UnaryOp::Real => g,
        UnaryOp::Imag => return Ok(None),
        // Piecewise constant: zero derivative almost everywhere.
        UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::RoundNearestEven | UnaryOp::Sign => {
            return Ok(None)
        }
        UnaryOp::Not | UnaryOp::IsFinite | UnaryOp::PopulationCount => return Ok(None),
    };
    Ok(Some(r))
}

pub(super) fn binary(
    b: &mut Builder,
    op: BinaryOp,
    ops: &[InstrId],
    out: InstrId,
    i: usize,
    g: InstrId,
) -> Result<Option<InstrId>, AutodiffError> {
    let (x, y) = (ops[0], ops[1]);
    let r = match (op, i) {
        (BinaryOp::Add, _) | (BinaryOp::Subtract, 0) => g,
        (BinaryOp::Subtract, _) => b.unary(UnaryOp::Negate, g)?,
        (BinaryOp::Multiply, 0) => b.mul(g, y)?,
        (BinaryOp::Multiply, _) => b.mul(g, x)?,
        (BinaryOp::Divide, 0) => b.div(g, y)?,
        (BinaryOp::Divide, _) => {
            // d/dy x/y = -x/y^2 = -out/y
            let q = b.div(out, y)?;
            let t = b.mul(g, q)?;
            b.unary(UnaryOp::Negate, t)?
        }
        (BinaryOp::Maximum | BinaryOp::Minimum, _) => {
            // The winner takes the adjoint; ties split it, as JAX does.
            let (me, other) = if i == 0 { (x, y) } else { (y, x) };
            let dir = if op == BinaryOp::Maximum {
                ComparisonDirection::Gt
            } else {
                ComparisonDirection::Lt
            };
            let wins = b.compare(me, other, dir)?;
            let ties = b.compare(me, other, ComparisonDirection::Eq)?;
            let ones = b.full_like(g, 1.0)?;
            let halves = b.full_like(g, 0.5)?;
            let zeros = b.full_like(g, 0.0)?;
            let tie_w = b.select(ties, halves, zeros)?;
            let w = b.select(wins, ones, tie_w)?;
            b.mul(g, w)?
        }
        (BinaryOp::Power, 0) => {
            // y * x^(y-1)
            let one = b.full_like(y, 1.0)?;
            let ym1 = b.sub(y, one)?;
            let p = b.binary(BinaryOp::Power, x, ym1)?;
            let d = b.mul(y, p)?;
            b.mul(g, d)?
        }
        (BinaryOp::Power, _) => {
            let l = b.unary(UnaryOp::Log, x)?;
            let d = b.mul(out, l)?;
            b.mul(g, d)?
        }
        (BinaryOp::Atan2, _) => {
            // atan2(x, y): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2)
            let x2 = b.mul(x, x)?;
            let y2 = b.mul(y, y)?;
            let den = b.add2(x2, y2)?;
            let num = if i == 0 {
                y
            } else {
                b.unary(UnaryOp::Negate, x)?
            };
            let d = b.div(num, den)?;
            b.mul(g, d)?
        }
        (BinaryOp::Remainder, 0) => g,
        (BinaryOp::Remainder, _) => {
            // x = q*y + out with q = trunc(x/y): d/dy = -q = -(x - out)/y
            let diff = b.sub(x, out)?;
            let q = b.div(diff, y)?;
            let t = b.mul(g, q)?;
            b.unary(UnaryOp::Negate, t)?
        }
        // Never reached: its result is complex, which `vjp` refuses.
        (BinaryOp::Complex, _) => return Ok(None),
        (BinaryOp::And | BinaryOp::Or | BinaryOp::Xor, _)
        | (BinaryOp::ShiftLeft | BinaryOp::ShiftRightLogical | BinaryOp::ShiftRightArithmetic, _) => {
            return Ok(None)
        }
    };
    Ok(Some(r))
}

pub(super) fn select(b: &mut Builder, s: &Site) -> Result<Option<InstrId>, AutodiffError> {
    let Site { ops, i, g, .. } = *s;
    Ok(match i {
        0 => None,
        1 => Some(masked(b, ops[0], g)?),
        _ => {
            let z = b.full_like(g, 0.0)?;
            Some(b.select(ops[0], z, g)?)
        }
    })
}

pub(super) fn clamp(b: &mut Builder, s: &Site) -> Result<InstrId, AutodiffError> {
    let Site { ops, i, x, g, .. } = *s;
    let (lo, v, hi) = (ops[0], ops[1], ops[2]);
    let dims = b.dims(v);
    let lob = if b.dims(lo).is_empty() {
        b.broadcast(lo, &dims, &[])?
    } else {
        lo
    };
    let hib = if b.dims(hi).is_empty() {
        b.broadcast(hi, &dims, &[])?
    } else {
        hi
    };
    let mask = match i {
        0 => b.compare(v, lob, ComparisonDirection::Lt)?,
        2 => b.compare(v, hib, ComparisonDirection::Gt)?,
        _ => {
            let above = b.compare(v, lob, ComparisonDirection::Ge)?;
            let below = b.compare(v, hib, ComparisonDirection::Le)?;
            b.binary(BinaryOp::And, above, below)?
        }
    };
    let gm = masked(b, mask, g)?;
    unbroadcast_scalar(b, gm, x)
}
