//! `result_accuracy={...}`: how exact a transcendental unary op must be,
//! where a backend has implementations of several accuracies (XLA's
//! `ResultAccuracy`). JAX writes it for `jax.lax.exp(x, accuracy=...)`.

use crate::ir::op::{F64Bits, Op, UnaryOp};

/// What the instruction asks for. XLA's default mode is no annotation at
/// all (`mode=default` reads as none, as XLA reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResultAccuracy {
    /// `mode=highest`: the most accurate implementation there is.
    Highest,
    /// `tolerance={atol=a,rtol=r,ulps=u}`: any implementation within these
    /// bounds of the exact result.
    Tolerance {
        atol: F64Bits,
        rtol: F64Bits,
        ulps: i64,
    },
}

impl ResultAccuracy {
    /// The unary ops XLA lets carry it (checked through jaxlib: its reader
    /// refuses the attribute on any other op).
    pub fn applies_to(op: UnaryOp) -> bool {
        matches!(
            op,
            UnaryOp::Exp
                | UnaryOp::Expm1
                | UnaryOp::Log
                | UnaryOp::Log1p
                | UnaryOp::Sqrt
                | UnaryOp::Rsqrt
                | UnaryOp::Cbrt
                | UnaryOp::Sin
                | UnaryOp::Cos
                | UnaryOp::Tan
                | UnaryOp::Tanh
                | UnaryOp::Erf
                | UnaryOp::Logistic
        )
    }

    /// Why `op` takes no `result_accuracy` at all: XLA's reader refuses
    /// the attribute there, whatever its value (`mode=default` included).
    pub fn refused_on(op: &Op) -> Option<String> {
        (!matches!(op, Op::Unary(u) if Self::applies_to(*u))).then(|| {
            format!(
                "{} takes no result_accuracy (XLA reads it on exponential, log, sqrt and the other transcendental unary ops)",
                op.opcode()
            )
        })
    }

    /// Why XLA would refuse it on `op`: [`ResultAccuracy::refused_on`],
    /// then [`ResultAccuracy::problem`]. The text reader and the verifier
    /// both ask.
    pub fn problem_on(&self, op: &Op) -> Option<String> {
        Self::refused_on(op).or_else(|| self.problem())
    }

    /// Why XLA would refuse it: a negative or NaN bound makes XLA abort
    /// (`CHECK` in `HloInstruction::CreateUnary`, measured), not err.
    pub fn problem(&self) -> Option<String> {
        let ResultAccuracy::Tolerance { atol, rtol, ulps } = *self else {
            return None;
        };
        for (name, v) in [("atol", atol.get()), ("rtol", rtol.get())] {
            if v.is_nan() || v < 0.0 {
                return Some(format!(
                    "result_accuracy's {name} is {v}; a bound must be a number of at least 0"
                ));
            }
        }
        (ulps < 0).then(|| format!("result_accuracy's ulps is {ulps}; it must be at least 0"))
    }
}

impl std::fmt::Display for ResultAccuracy {
    /// As XLA prints it, every bound written.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResultAccuracy::Highest => f.write_str("{mode=highest}"),
            ResultAccuracy::Tolerance { atol, rtol, ulps } => {
                write!(f, "{{tolerance={{atol={atol},rtol={rtol},ulps={ulps}}}}}")
            }
        }
    }
}
