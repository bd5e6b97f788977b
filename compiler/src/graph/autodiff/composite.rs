//! Composite backward rules: a region of forward ops whose gradient has a
//! closed form that is cheaper, and better conditioned, than chaining the
//! rules of its ops, as JAX's `custom_jvp` gives softmax. The forward
//! builder declares the region; `grad` applies the rule at its output and
//! sends the adjoint straight to its inputs, so nothing inside the region
//! is differentiated or saved: each rule states what it reads from the
//! forward pass ([`CompositeRule::saves`]), and recomputes the rest.

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

/// What a composite's backward reads from the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeSaves {
    /// The region's output.
    Output,
}

impl CompositeRule {
    /// What the rule reads from the forward pass.
    pub fn saves(self) -> CompositeSaves {
        match self {
            CompositeRule::Softmax { .. } => CompositeSaves::Output,
        }
    }
}

/// A region from `inputs` to `output` with a closed-form gradient
/// (softmax: one input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Composite {
    pub inputs: Vec<InstrId>,
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
    /// Forward values a backward rule recomputes from their operands
    /// instead of reading them, so the forward pass need not keep them:
    /// cheap values whose operands the backward keeps anyway (SwiGLU's
    /// logistic, SiLU and product; an RMSNorm's broadcasts, normalized
    /// input and output). See `recompute.rs`.
    pub recompute: Vec<InstrId>,
}

/// The adjoint of each of `c.inputs` (in order) given the adjoint `g` of
/// `c.output`; only those in `wanted` are built.
pub(super) fn vjp(
    b: &mut Builder,
    c: &Composite,
    g: InstrId,
    wanted: impl Fn(InstrId) -> bool,
) -> Result<Vec<Option<InstrId>>, AutodiffError> {
    match (c.rule, c.inputs.as_slice()) {
        (CompositeRule::Softmax { axis }, &[x]) => Ok(vec![wanted(x)
            .then(|| b.softmax_backward(c.output, g, axis))
            .transpose()?]),
        (rule, inputs) => Err(AutodiffError::CompositeInputs {
            rule,
            inputs: inputs.len(),
        }),
    }
}
