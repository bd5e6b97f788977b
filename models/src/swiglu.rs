//! SwiGLU's activation, `silu(g) * u`, as the dense MLP and the experts
//! both compute it, and what its backward recomputes rather than keeps:
//! everything after the gate and up projections, the down projection's
//! input included.

use hlatc_compiler::graph::autodiff::GradHints;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::UnaryOp;
use hlatc_compiler::InstrId;

/// `g * sigmoid(g) * u`, its parts marked for recomputation in `hints`.
pub(crate) fn swiglu(
    b: &mut Builder,
    hints: &mut GradHints,
    g: InstrId,
    u: InstrId,
) -> Result<InstrId, BuildError> {
    let sg = b.unary(UnaryOp::Logistic, g)?;
    let silu = b.mul(g, sg)?;
    let a = b.mul(silu, u)?;
    hints.recompute.extend([sg, silu, a]);
    Ok(a)
}
