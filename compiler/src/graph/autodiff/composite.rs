//! Composite backward rules: a region of forward ops whose gradient has a
//! closed form that is cheaper, and better conditioned, than chaining the
//! rules of its ops, as JAX's `custom_jvp` gives softmax. The forward
//! builder declares the region; `grad` applies the rule at its output and
//! sends the adjoint straight to its inputs, so nothing inside the region
//! is differentiated or saved: each rule states what it reads from the
//! forward pass ([`CompositeRule::saves`]), and recomputes the rest.

use super::AutodiffError;
use crate::graph::blocked_attention::{AttentionOperands, BlockedAttention, BlockedForward};
use crate::graph::builder::{BuildError, Builder};
use crate::graph::looped_attention::{LoopOperands, LoopedAttention};
use crate::graph::ring_attention::RingAttention;
use crate::ir::computation::InstrId;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::Op;

/// Which closed form a region's gradient has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeRule {
    /// `y = softmax(x)` over `axis`: `dx = y * (dy - sum(dy * y, axis))`.
    /// Saves only `y`, the output.
    Softmax { axis: i64 },
    /// Attention tile by tile ([`BlockedAttention`]): inputs q, k, v and,
    /// for packed rows, the segment ids; one residual, the rows'
    /// log-sum-exp. Saves q, k, v, the output and the log-sum-exp, and
    /// recomputes each tile pair's probabilities.
    BlockedAttention(BlockedAttention),
    /// Attention tile by tile in a loop ([`LoopedAttention`]): inputs as
    /// [`LoopOperands::inputs`] lists them (q, k, v, the positions, the
    /// pairs, the segment ids); one residual, the rows' log-sum-exp. Saves
    /// what blocked attention saves, and the loop's reads.
    LoopedAttention(LoopedAttention),
    /// Looped attention over keys and values passed round a CP ring
    /// ([`RingAttention`]): inputs as [`LoopOperands::inputs`] lists them,
    /// with one row a ring step in the keys' tables; one residual, the
    /// rows' log-sum-exp. Saves what looped attention saves (this rank's
    /// keys and values, not the blocks it was passed), and passes the
    /// blocks round again.
    RingAttention(RingAttention),
    /// A kernel brought in whole (`imported`): the forward is a call, and
    /// the backward calls the computation [`Composite::backward_call`]
    /// names over what it names. Saves what that call reads.
    Imported,
}

/// What a composite's backward reads from the forward pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompositeSaves {
    /// The region's output.
    Output,
    /// Its inputs, its output and its residuals.
    InputsOutputAndResiduals,
}

impl CompositeRule {
    /// What the rule reads from the forward pass.
    pub fn saves(self) -> CompositeSaves {
        match self {
            CompositeRule::Softmax { .. } => CompositeSaves::Output,
            CompositeRule::BlockedAttention(_)
            | CompositeRule::LoopedAttention(_)
            | CompositeRule::RingAttention(_)
            | CompositeRule::Imported => CompositeSaves::InputsOutputAndResiduals,
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
    /// Values the region computes beside its output for its backward
    /// alone (blocked attention's log-sum-exp); none for softmax.
    pub residuals: Vec<InstrId>,
    /// An imported kernel's backward: what it calls and over what.
    pub backward_call: Option<BackwardCall>,
}

/// The backward of an imported kernel: a call of `computation`, whose
/// parameters read `operands` in order and whose results (a tuple, or one
/// array) are the adjoints of the region's inputs `results` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackwardCall {
    pub computation: ComputationId,
    pub operands: Vec<BackwardOperand>,
    /// For each result in order, the index of the input it is the adjoint
    /// of.
    pub results: Vec<usize>,
}

/// What one parameter of an imported backward reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackwardOperand {
    /// The region's input at this index.
    Input(usize),
    /// The region's output.
    Output,
    /// The residual at this index.
    Residual(usize),
    /// The adjoint of the output.
    Adjoint,
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
        (CompositeRule::BlockedAttention(a), inputs) => blocked_attention(b, c, a, inputs, g),
        (CompositeRule::LoopedAttention(a), inputs) => {
            loop_operands(c, inputs, |fwd, x| a.backward(b, x, fwd, g))
        }
        (CompositeRule::RingAttention(a), inputs) => {
            loop_operands(c, inputs, |fwd, x| a.backward(b, x, fwd, g))
        }
        (CompositeRule::Imported, inputs) => match &c.backward_call {
            Some(call) => imported(b, c, call, inputs, g),
            None => Err(AutodiffError::CompositeInputs {
                rule: c.rule,
                inputs: inputs.len(),
            }),
        },
        (rule, inputs) => Err(AutodiffError::CompositeInputs {
            rule,
            inputs: inputs.len(),
        }),
    }
}

/// Blocked attention's adjoints: q, k and v's, and none for the segment
/// ids.
fn blocked_attention(
    b: &mut Builder,
    c: &Composite,
    a: BlockedAttention,
    inputs: &[InstrId],
    g: InstrId,
) -> Result<Vec<Option<InstrId>>, AutodiffError> {
    let (operands, lse) = match (inputs, c.residuals.as_slice()) {
        (&[q, k, v], &[lse]) => (
            AttentionOperands {
                q,
                k,
                v,
                segments: None,
            },
            lse,
        ),
        (&[q, k, v, s], &[lse]) => (
            AttentionOperands {
                q,
                k,
                v,
                segments: Some(s),
            },
            lse,
        ),
        _ => {
            return Err(AutodiffError::CompositeInputs {
                rule: c.rule,
                inputs: inputs.len(),
            })
        }
    };
    tiled_adjoints(c, lse, inputs.len(), |fwd| a.backward(b, operands, fwd, g))
}

/// q, k and v's adjoints from a tiled attention's `backward` of the
/// region's output and log-sum-exp `lse`, and none for the rest of its
/// `inputs` inputs (segment ids, positions, pairs).
fn tiled_adjoints(
    c: &Composite,
    lse: InstrId,
    inputs: usize,
    backward: impl FnOnce(BlockedForward) -> Result<[InstrId; 3], BuildError>,
) -> Result<Vec<Option<InstrId>>, AutodiffError> {
    let fwd = BlockedForward {
        output: c.output,
        lse,
    };
    let mut out: Vec<Option<InstrId>> = backward(fwd)?.into_iter().map(Some).collect();
    out.resize(inputs, None);
    Ok(out)
}

/// Looped or ring attention's adjoints from `backward` over the operands
/// `inputs` lists: q, k and v's, and none for the positions, the pairs and
/// the segment ids.
fn loop_operands(
    c: &Composite,
    inputs: &[InstrId],
    backward: impl FnOnce(BlockedForward, LoopOperands) -> Result<[InstrId; 3], BuildError>,
) -> Result<Vec<Option<InstrId>>, AutodiffError> {
    let (Some(operands), &[lse]) = (LoopOperands::from_inputs(inputs), c.residuals.as_slice())
    else {
        return Err(AutodiffError::CompositeInputs {
            rule: c.rule,
            inputs: inputs.len(),
        });
    };
    tiled_adjoints(c, lse, inputs.len(), |fwd| backward(fwd, operands))
}

/// An imported kernel's adjoints: its backward called over what it reads.
fn imported(
    b: &mut Builder,
    c: &Composite,
    call: &BackwardCall,
    inputs: &[InstrId],
    g: InstrId,
) -> Result<Vec<Option<InstrId>>, AutodiffError> {
    let missing = || AutodiffError::CompositeInputs {
        rule: c.rule,
        inputs: inputs.len(),
    };
    let operands = call
        .operands
        .iter()
        .map(|o| match *o {
            BackwardOperand::Input(i) => inputs.get(i).copied().ok_or_else(missing),
            BackwardOperand::Output => Ok(c.output),
            BackwardOperand::Residual(i) => c.residuals.get(i).copied().ok_or_else(missing),
            BackwardOperand::Adjoint => Ok(g),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let op = Op::Call {
        to_apply: call.computation,
        is_composite: false,
    };
    let result = b.add_fresh(op, &operands)?;
    let mut out = vec![None; inputs.len()];
    for (k, &input) in call.results.iter().enumerate() {
        let adjoint = match call.results.len() {
            1 if !b.shape(result).is_tuple() => result,
            _ => b.add(Op::GetTupleElement { index: k as i64 }, &[result], None)?,
        };
        *out.get_mut(input).ok_or_else(missing)? = Some(adjoint);
    }
    Ok(out)
}
