//! One backward rule per differentiable op: the vector-Jacobian product for
//! operand `i`, given the output's adjoint `g`, and the forward values the
//! rule reads ([`saves`]).

use super::AutodiffError;
use crate::builder::Builder;
use crate::computation::InstrId;
use crate::op::*;

/// A forward value a backward rule reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Saved {
    Operand(usize),
    /// The op's own result.
    Output,
    /// Operands from this position on (start indices of dynamic slices).
    OperandsFrom(usize),
}

/// What the backward rule of `op` keeps from the forward pass. Everything
/// else it needs is static (shapes, attributes) or the incoming adjoint.
pub fn saves(op: &Op, reducer: Option<BinaryOp>) -> Vec<Saved> {
    use Saved::*;
    match op {
        Op::Unary(u) => match u {
            UnaryOp::Abs
            | UnaryOp::Log
            | UnaryOp::Log1p
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Erf => {
                vec![Operand(0)]
            }
            UnaryOp::Exp
            | UnaryOp::Expm1
            | UnaryOp::Sqrt
            | UnaryOp::Rsqrt
            | UnaryOp::Tanh
            | UnaryOp::Tan
            | UnaryOp::Cbrt
            | UnaryOp::Logistic => {
                vec![Output]
            }
            _ => vec![],
        },
        Op::Binary(b) => match b {
            BinaryOp::Add | BinaryOp::Subtract => vec![],
            BinaryOp::Divide => vec![Operand(1), Output],
            BinaryOp::Power | BinaryOp::Remainder => vec![Operand(0), Operand(1), Output],
            _ => vec![Operand(0), Operand(1)],
        },
        Op::Select => vec![Operand(0)],
        Op::Clamp => vec![Operand(0), Operand(1), Operand(2)],
        Op::Dot { .. } => vec![Operand(0), Operand(1)],
        Op::Reduce { .. } if reducer != Some(BinaryOp::Add) => vec![Operand(0), Output],
        Op::DynamicSlice { .. } => vec![OperandsFrom(1)],
        Op::DynamicUpdateSlice => vec![OperandsFrom(2)],
        Op::Gather { .. } | Op::Scatter { .. } => vec![Operand(1)],
        _ => vec![],
    }
}

fn not_differentiable<T>(
    b: &Builder,
    n: InstrId,
    reason: impl Into<String>,
) -> Result<T, AutodiffError> {
    let instr = b.computation().instr(n);
    Err(AutodiffError::NotDifferentiable {
        instruction: instr.name.clone(),
        opcode: instr.op.opcode(),
        reason: reason.into(),
    })
}

/// `g` masked by `p`: `p ? g : 0`.
fn masked(b: &mut Builder, p: InstrId, g: InstrId) -> Result<InstrId, AutodiffError> {
    let z = b.full_like(g, 0.0)?;
    Ok(b.select(p, g, z)?)
}

/// Sums `g` (shaped like `target` after broadcasting) back to `target`'s
/// shape; identity when the shapes already agree.
fn unbroadcast_scalar(
    b: &mut Builder,
    g: InstrId,
    target: InstrId,
) -> Result<InstrId, AutodiffError> {
    if b.dims(target).is_empty() && !b.dims(g).is_empty() {
        let all: Vec<i64> = (0..b.dims(g).len() as i64).collect();
        return Ok(b.reduce_sum(g, &all)?);
    }
    Ok(g)
}

fn as_operand_type(b: &mut Builder, g: InstrId, x: InstrId) -> Result<InstrId, AutodiffError> {
    let ty = b.ty(x);
    Ok(if b.ty(g) == ty { g } else { b.convert(g, ty)? })
}

/// d(loss)/d(operand i of n), given d(loss)/d(n) = `g`. `None` when the
/// operand gets no contribution (zero almost everywhere, or not a float).
pub fn vjp(
    b: &mut Builder,
    n: InstrId,
    i: usize,
    g: InstrId,
) -> Result<Option<InstrId>, AutodiffError> {
    let instr = b.computation().instr(n).clone();
    let ops = b.computation().operands(n);
    let x = ops[i];
    let complex = |s: &crate::types::Shape| s.as_array().is_some_and(|a| a.ty.is_complex());
    if complex(&instr.shape) || complex(&b.computation().instr(x).shape) {
        return not_differentiable(b, n, "complex values have no gradient rules in hlatc");
    }
    let r = match &instr.op {
        Op::Unary(u) => unary(b, *u, ops[0], n, g)?,
        Op::Binary(op) => binary(b, *op, &ops, n, i, g)?,
        Op::Select => match i {
            0 => None,
            1 => Some(masked(b, ops[0], g)?),
            _ => {
                let z = b.full_like(g, 0.0)?;
                Some(b.select(ops[0], z, g)?)
            }
        },
        Op::Clamp => {
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
            Some(unbroadcast_scalar(b, gm, x)?)
        }
        Op::Convert => Some(b.convert(g, b.ty(x))?),
        Op::Reshape { .. } => Some(b.reshape(g, &b.dims(x))?),
        Op::Transpose { permutation } => {
            let mut inverse = vec![0i64; permutation.len()];
            for (k, &p) in permutation.iter().enumerate() {
                inverse[p as usize] = k as i64;
            }
            Some(b.transpose(g, &inverse)?)
        }
        Op::Reverse { dimensions } => Some(b.add(
            Op::Reverse {
                dimensions: dimensions.clone(),
            },
            &[g],
            None,
        )?),
        Op::Broadcast { dimensions } => Some(unbroadcast(b, g, x, dimensions)?),
        Op::Slice { slices } => Some(slice_vjp(b, g, x, slices)?),
        Op::Concatenate { dimension } => {
            let d = *dimension as usize;
            let start: i64 = ops[..i].iter().map(|&o| b.dims(o)[d]).sum();
            let len = b.dims(x)[d];
            Some(b.slice_dim(g, d, start, start + len)?)
        }
        Op::Pad { config } => {
            if config.iter().any(|p| p.low < 0 || p.high < 0) {
                return not_differentiable(b, n, "negative padding");
            }
            let dims = b.dims(ops[0]);
            let slices: Vec<SliceDim> = config
                .iter()
                .zip(&dims)
                .map(|(p, &len)| SliceDim {
                    start: p.low,
                    limit: p.low + (len - 1).max(0) * (p.interior + 1) + i64::from(len > 0),
                    stride: p.interior + 1,
                })
                .collect();
            let gx = b.add(Op::Slice { slices }, &[g], None)?;
            if i == 0 {
                Some(gx)
            } else {
                let rank: Vec<i64> = (0..dims.len() as i64).collect();
                let all = b.reduce_sum(g, &rank)?;
                let inner = b.reduce_sum(gx, &rank)?;
                Some(b.sub(all, inner)?)
            }
        }
        Op::DynamicSlice { .. } => match i {
            0 => {
                let z = b.full_like(x, 0.0)?;
                let mut args = vec![z, g];
                args.extend_from_slice(&ops[1..]);
                Some(b.add(Op::DynamicUpdateSlice, &args, None)?)
            }
            _ => None,
        },
        Op::DynamicUpdateSlice => match i {
            0 => {
                let z = b.full_like(ops[1], 0.0)?;
                let mut args = vec![g, z];
                args.extend_from_slice(&ops[2..]);
                Some(b.add(Op::DynamicUpdateSlice, &args, None)?)
            }
            1 => {
                let mut args = vec![g];
                args.extend_from_slice(&ops[2..]);
                Some(b.add(Op::DynamicSlice { sizes: b.dims(x) }, &args, None)?)
            }
            _ => None,
        },
        Op::Dot { dims, .. } => Some(dot_vjp(b, dims, ops[0], ops[1], i, g)?),
        Op::Reduce {
            dimensions,
            to_apply,
        } => {
            if ops.len() != 2 {
                return not_differentiable(b, n, "variadic reduce");
            }
            if i == 1 {
                return not_differentiable(
                    b,
                    n,
                    "the gradient of a reduce's initial value is not supported",
                );
            }
            let xd = b.dims(x);
            let kept: Vec<i64> = (0..xd.len() as i64)
                .filter(|d| !dimensions.contains(d))
                .collect();
            let gb = b.broadcast(g, &xd, &kept)?;
            match b.reducer_op(to_apply) {
                Some(BinaryOp::Add) => Some(gb),
                Some(BinaryOp::Maximum | BinaryOp::Minimum) => {
                    // Ties share the adjoint equally, as JAX does.
                    let ob = b.broadcast(n, &xd, &kept)?;
                    let hit = b.compare(x, ob, ComparisonDirection::Eq)?;
                    let ones = b.full_like(x, 1.0)?;
                    let ind = masked(b, hit, ones)?;
                    let count = b.reduce_sum(ind, dimensions)?;
                    let cb = b.broadcast(count, &xd, &kept)?;
                    let share = b.div(gb, cb)?;
                    Some(b.mul(share, ind)?)
                }
                _ => {
                    return not_differentiable(
                        b,
                        n,
                        format!("reducer '{to_apply}' is not a sum, max or min"),
                    )
                }
            }
        }
        Op::Gather { dims, .. } => match i {
            0 => {
                let to_apply = b.reducer(BinaryOp::Add, b.ty(g));
                let z = b.full_like(x, 0.0)?;
                Some(b.add(
                    Op::Scatter {
                        dims: ScatterDims {
                            update_window_dims: dims.offset_dims.clone(),
                            inserted_window_dims: dims.collapsed_slice_dims.clone(),
                            scatter_dims_to_operand_dims: dims.start_index_map.clone(),
                            input_batching_dims: dims.operand_batching_dims.clone(),
                            scatter_indices_batching_dims: dims.start_indices_batching_dims.clone(),
                            index_vector_dim: dims.index_vector_dim,
                        },
                        to_apply,
                        indices_are_sorted: false,
                        unique_indices: false,
                    },
                    &[z, ops[1], g],
                    None,
                )?)
            }
            _ => None,
        },
        Op::Scatter { dims, to_apply, .. } => {
            if b.reducer_op(to_apply) != Some(BinaryOp::Add) {
                return not_differentiable(b, n, "only scatter-add has a gradient");
            }
            match i {
                0 => Some(g),
                2 => {
                    let operand_rank = b.dims(ops[0]).len() as i64;
                    let upd = b.dims(ops[2]);
                    let mut window = dims.update_window_dims.iter().map(|&d| upd[d as usize]);
                    let slice_sizes: Vec<i64> = (0..operand_rank)
                        .map(|d| {
                            if dims.inserted_window_dims.contains(&d)
                                || dims.input_batching_dims.contains(&d)
                            {
                                1
                            } else {
                                window.next().unwrap_or(1)
                            }
                        })
                        .collect();
                    Some(b.add(
                        Op::Gather {
                            dims: GatherDims {
                                offset_dims: dims.update_window_dims.clone(),
                                collapsed_slice_dims: dims.inserted_window_dims.clone(),
                                start_index_map: dims.scatter_dims_to_operand_dims.clone(),
                                operand_batching_dims: dims.input_batching_dims.clone(),
                                start_indices_batching_dims:
                                    dims.scatter_indices_batching_dims.clone(),
                                index_vector_dim: dims.index_vector_dim,
                            },
                            slice_sizes,
                            indices_are_sorted: false,
                        },
                        &[g, ops[1]],
                        None,
                    )?)
                }
                _ => None,
            }
        }
        Op::Parameter(_)
        | Op::Constant(_)
        | Op::TupleConstant(_)
        | Op::Iota { .. }
        | Op::RngBitGenerator { .. } => None,
        Op::Compare { .. } | Op::BitcastConvert => None,
        Op::Tuple | Op::GetTupleElement { .. } | Op::OptBarrier => {
            return not_differentiable(b, n, "tuples are not differentiated")
        }
        Op::Bitcast => return not_differentiable(b, n, "bitcast reinterprets bytes by layout"),
        Op::Call { .. } | Op::Fusion { .. } => {
            return not_differentiable(b, n, "calls are not differentiated; inline the callee")
        }
        Op::ReplicaId | Op::PartitionId => None,
        Op::Rng { .. } | Op::RngGetAndUpdateState { .. } => None,
        Op::Sort { .. } | Op::Map { .. } => {
            return not_differentiable(b, n, "sort and map have no gradient rule in hlatc")
        }
        Op::Convolution { .. } | Op::ReduceWindow { .. } | Op::SelectAndScatter { .. } => {
            return not_differentiable(b, n, "windowed ops have no gradient rule in hlatc")
        }
        Op::AllReduce { .. }
        | Op::AllGather { .. }
        | Op::ReduceScatter { .. }
        | Op::AllToAll { .. }
        | Op::RaggedAllToAll { .. }
        | Op::CollectiveBroadcast { .. }
        | Op::CollectivePermute { .. }
        | Op::AllReduceStart { .. }
        | Op::AllGatherStart { .. }
        | Op::CollectivePermuteStart { .. }
        | Op::CollectiveDone(_) => {
            return not_differentiable(b, n, "collectives have no gradient rule in hlatc")
        }
        Op::While { .. } | Op::Conditional { .. } => {
            return not_differentiable(b, n, "control flow has no gradient rule in hlatc")
        }
        Op::TopK { .. } => return not_differentiable(b, n, "topk has no gradient rule in hlatc"),
        Op::BatchNorm { .. } => {
            return not_differentiable(b, n, "batch-norm ops have no gradient rule in hlatc")
        }
        Op::RaggedDot { .. } => {
            return not_differentiable(b, n, "ragged-dot has no gradient rule in hlatc")
        }
        Op::Async { .. } => {
            return not_differentiable(b, n, "async ops have no gradient rule in hlatc")
        }
        Op::TriangularSolve { .. } | Op::Cholesky { .. } | Op::Fft { .. } => {
            return not_differentiable(b, n, "linear-algebra ops have no gradient rule in hlatc")
        }
        Op::Domain { .. } => {
            return not_differentiable(b, n, "sharding domains have no gradient rule in hlatc")
        }
        Op::SetDimensionSize { .. } | Op::GetDimensionSize { .. } | Op::DynamicReshape => {
            return not_differentiable(b, n, "dynamic dimensions have no gradient rules in hlatc")
        }
        Op::StochasticConvert | Op::ReducePrecision { .. } => return not_differentiable(
            b,
            n,
            "rounding ops (stochastic-convert, reduce-precision) have no gradient rule in hlatc",
        ),
        Op::CopyStart { .. } | Op::CopyDone => {
            return not_differentiable(b, n, "asynchronous copies have no gradient rule in hlatc")
        }
        Op::AfterAll
        | Op::AddDependency
        | Op::Transfer(_)
        | Op::Infeed { .. }
        | Op::Outfeed { .. } => {
            return not_differentiable(
                b,
                n,
                "ops ordered by tokens (transfers, feeds) have no gradient rule in hlatc",
            )
        }
        Op::CustomCall(cc) => {
            return not_differentiable(
                b,
                n,
                format!("custom call '{}' has no gradient rule", cc.target),
            )
        }
    };
    match r {
        Some(v) => Ok(Some(as_operand_type(b, v, x)?)),
        None => Ok(None),
    }
}

fn unary(
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

fn binary(
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

/// The adjoint of `broadcast(x, dimensions)`: sum over the new dimensions,
/// then put the kept ones back in x's dimension order.
fn unbroadcast(
    b: &mut Builder,
    g: InstrId,
    x: InstrId,
    dimensions: &[i64],
) -> Result<InstrId, AutodiffError> {
    let (xd, gd) = (b.dims(x), b.dims(g));
    let reduce: Vec<i64> = (0..gd.len() as i64)
        .filter(|d| !dimensions.contains(d))
        .collect();
    let mut r = if reduce.is_empty() {
        g
    } else {
        b.reduce_sum(g, &reduce)?
    };
    // Remaining dims are the kept out-dims in increasing order; map them back
    // to x's dimension order.
    let kept: Vec<i64> = (0..gd.len() as i64)
        .filter(|d| !reduce.contains(d))
        .collect();
    let x_order: Vec<i64> = dimensions
        .iter()
        .copied()
        .filter(|d| kept.contains(d))
        .collect();
    if x_order != kept {
        let perm: Vec<i64> = x_order
            .iter()
            .map(|d| kept.iter().position(|k| k == d).unwrap() as i64)
            .collect();
        r = b.transpose(r, &perm)?;
    }
    debug_assert_eq!(b.dims(r), xd);
    Ok(r)
}

fn slice_vjp(
    b: &mut Builder,
    g: InstrId,
    x: InstrId,
    slices: &[SliceDim],
) -> Result<InstrId, AutodiffError> {
    let (xd, gd) = (b.dims(x), b.dims(g));
    if gd.contains(&0) {
        return Ok(b.full_like(x, 0.0)?);
    }
    let config: Vec<PadDim> = slices
        .iter()
        .zip(xd.iter().zip(&gd))
        .map(|(s, (&n, &m))| PadDim {
            low: s.start,
            high: n - s.start - (m - 1) * s.stride - 1,
            interior: s.stride - 1,
        })
        .collect();
    let z = b.scalar(b.ty(g), 0.0);
    Ok(b.add(Op::Pad { config }, &[g, z], None)?)
}

/// Adjoint of a general dot for operand `i` (0 = lhs, 1 = rhs).
fn dot_vjp(
    b: &mut Builder,
    dims: &DotDims,
    l: InstrId,
    r: InstrId,
    i: usize,
    g: InstrId,
) -> Result<InstrId, AutodiffError> {
    let (lr, rr) = (b.dims(l).len() as i64, b.dims(r).len() as i64);
    let free = |rank: i64, batch: &[i64], contracting: &[i64]| -> Vec<i64> {
        (0..rank)
            .filter(|d| !batch.contains(d) && !contracting.contains(d))
            .collect()
    };
    let lf = free(lr, &dims.lhs_batch, &dims.lhs_contracting);
    let rf = free(rr, &dims.rhs_batch, &dims.rhs_contracting);
    let nb = dims.lhs_batch.len() as i64;
    let g_batch: Vec<i64> = (0..nb).collect();
    // For the lhs adjoint, contract g's rhs-free dims with rhs's free dims;
    // for the rhs adjoint, g's lhs-free dims with lhs's free dims.
    let (
        other,
        my_batch,
        my_free,
        my_contracting,
        other_batch,
        other_free,
        other_contracting,
        g_free,
    ) = if i == 0 {
        let g_rf: Vec<i64> =
            (nb + lf.len() as i64..nb + lf.len() as i64 + rf.len() as i64).collect();
        (
            r,
            &dims.lhs_batch,
            &lf,
            &dims.lhs_contracting,
            &dims.rhs_batch,
            &rf,
            &dims.rhs_contracting,
            g_rf,
        )
    } else {
        let g_lf: Vec<i64> = (nb..nb + lf.len() as i64).collect();
        (
            l,
            &dims.rhs_batch,
            &rf,
            &dims.rhs_contracting,
            &dims.lhs_batch,
            &lf,
            &dims.lhs_contracting,
            g_lf,
        )
    };
    let t = b.dot(
        g,
        other,
        DotDims {
            lhs_batch: g_batch,
            lhs_contracting: g_free,
            rhs_batch: other_batch.clone(),
            rhs_contracting: other_free.clone(),
        },
    )?;
    // t's dims: batch, g's remaining free dims (= my free dims), then the
    // other operand's contracting dims in increasing order (= my contracting
    // dims, paired through the dot's contracting lists).
    let mut src: Vec<i64> = my_batch.clone();
    src.extend(my_free.iter().copied());
    let mut oc: Vec<(i64, i64)> = other_contracting
        .iter()
        .copied()
        .zip(my_contracting.iter().copied())
        .collect();
    oc.sort_unstable();
    src.extend(oc.into_iter().map(|(_, mine)| mine));
    let rank = src.len();
    let perm: Vec<i64> = (0..rank as i64)
        .map(|d| src.iter().position(|&s| s == d).unwrap() as i64)
        .collect();
    if perm.iter().enumerate().all(|(k, &p)| p == k as i64) {
        Ok(t)
    } else {
        Ok(b.transpose(t, &perm)?)
    }
}
