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
use crate::ir::op::{BinaryOp, Op, UnaryOp};

/// Which closed form a region's gradient has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeRule {
    /// `y = softmax(x)` over `axis`: `dx = y * (dy - sum(dy * y, axis))`.
    /// Saves only `y`, the output.
    Softmax { axis: i64 },
    /// SwiGLU's product `y = silu(gate) * up`, `silu(g) = g * s(g)` with
    /// `s` the logistic: `dup = dy * silu(gate)` and
    /// `dgate = dy * up * s(gate) * (1 + gate * (1 - s(gate)))`, computed
    /// as the chain rule computes it. Saves
    /// only its inputs, `gate` and `up`; `s(gate)` and `silu(gate)` are
    /// recomputed in the backward pass instead of kept.
    SwiGlu,
}

/// What a composite's backward reads from the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeSaves {
    /// The region's output.
    Output,
    /// The region's inputs.
    Inputs,
}

impl CompositeRule {
    /// What the rule reads from the forward pass.
    pub fn saves(self) -> CompositeSaves {
        match self {
            CompositeRule::Softmax { .. } => CompositeSaves::Output,
            CompositeRule::SwiGlu => CompositeSaves::Inputs,
        }
    }
}

/// A region from `inputs` to `output` with a closed-form gradient
/// (softmax: one input; SwiGLU: `[gate, up]`).
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
        (CompositeRule::SwiGlu, &[gate, up]) => {
            // Fresh, so value numbering cannot hand back the forward's
            // logistic and SiLU, which the rule does not save. The ops are
            // the chain rule's, in its order, so the gradient is the same
            // to the bit in every precision.
            let s = b.add_fresh(Op::Unary(UnaryOp::Logistic), &[gate])?;
            let dup = if wanted(up) {
                let silu = b.add_fresh(Op::Binary(BinaryOp::Multiply), &[gate, s])?;
                Some(b.mul(g, silu)?)
            } else {
                None
            };
            let dgate = if wanted(gate) {
                let dsilu = b.mul(g, up)?;
                let through_gate = b.mul(dsilu, s)?;
                let ds = b.mul(dsilu, gate)?;
                // The logistic's rule: ds * s * (1 - s).
                let one = b.full_like(s, 1.0)?;
                let c1 = b.sub(one, s)?;
                let d = b.mul(s, c1)?;
                let through_s = b.mul(ds, d)?;
                Some(b.add2(through_gate, through_s)?)
            } else {
                None
            };
            Ok(vec![dgate, dup])
        }
        (rule, inputs) => Err(AutodiffError::CompositeInputs {
            rule,
            inputs: inputs.len(),
        }),
    }
}
