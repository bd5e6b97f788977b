//! Composite backward rules: a region of forward ops whose gradient has a
//! closed form that is cheaper, and better conditioned, than chaining the
//! rules of its ops, as JAX's `custom_jvp` gives softmax. The forward
//! builder declares the region; `grad` applies the rule at its output and
//! sends the adjoint straight to its input, so nothing inside the region is
//! differentiated or saved.

use super::AutodiffError;
use crate::graph::builder::Builder;
use crate::ir::computation::InstrId;

/// Which closed form a region's gradient has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeRule {
    /// `y = softmax(x)` over `axis`: `dx = y * (dy - sum(dy * y, axis))`.
    /// Saves only `y`, the output.
    Softmax { axis: i64 },
}

/// A region from `input` to `output` with a closed-form gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Composite {
    pub input: InstrId,
    pub output: InstrId,
    pub rule: CompositeRule,
}

/// What a graph's builder tells autodiff beyond the graph itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GradHints {
    /// Values treated as constants, like JAX's `stop_gradient`.
    pub stop: Vec<InstrId>,
    /// Regions differentiated by their closed form.
    pub composites: Vec<Composite>,
}

/// The adjoint of `c.input` given the adjoint `g` of `c.output`.
pub(super) fn vjp(b: &mut Builder, c: &Composite, g: InstrId) -> Result<InstrId, AutodiffError> {
    match c.rule {
        CompositeRule::Softmax { axis } => Ok(b.softmax_backward(c.output, g, axis)?),
    }
}
