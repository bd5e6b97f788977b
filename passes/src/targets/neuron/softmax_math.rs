//! Softmax and its backward as plain HLO computations, and the Neuron
//! custom calls that stand for them. `fuse-softmax` calls these on `cpu`
//! and emits the custom calls on `neuron`; `lower-neuron` maps the custom
//! calls back to these computations, so both give the same numbers.

use crate::infra::context::{PassContext, Target};
use crate::infra::pass::PassError;
use crate::infra::rewriter::ModuleRewriter;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::{CustomCall, CustomCallApiVersion};
use hlatc_compiler::{ArrayShape, ComputationId, InstrId, Instruction, Module, Op, Shape};

pub const SOFTMAX_TARGET: &str = "AwsNeuronSoftmax";
pub const SOFTMAX_BACKWARD_TARGET: &str = "AwsNeuronSoftmaxBackward";

/// Which of the two a custom call or callee computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Forward,
    Backward,
}

impl Direction {
    pub fn target(self) -> &'static str {
        match self {
            Direction::Forward => SOFTMAX_TARGET,
            Direction::Backward => SOFTMAX_BACKWARD_TARGET,
        }
    }

    pub fn from_target(t: &str) -> Option<Direction> {
        [Direction::Forward, Direction::Backward]
            .into_iter()
            .find(|d| d.target() == t)
    }

    /// The name stem of a plain callee or a call of one.
    pub fn stem(self) -> &'static str {
        match self {
            Direction::Forward => "softmax",
            Direction::Backward => "softmax_backward",
        }
    }
}

/// The Neuron custom call: operands `{x}` forward, `{y, dy}` backward; the
/// axis as a bare decimal `backend_config` (its second half); API version
/// 1 (original).
fn neuron_call(d: Direction, axis: i64) -> (Op, String) {
    let op = Op::CustomCall(CustomCall {
        target: d.target().to_string(),
        api_version: CustomCallApiVersion::Original,
        has_side_effect: false,
        convolution: None,
        operand_layouts: None,
        aliasing: Vec::new(),
        called: Vec::new(),
        ..Default::default()
    });
    (op, axis.to_string())
}

/// The axis a Neuron softmax custom call names, if `instr` is one and its
/// `backend_config` is a valid axis for rank `rank`.
pub fn neuron_call_axis(instr: &Instruction, rank: usize) -> Option<(Direction, i64)> {
    let Op::CustomCall(cc) = &instr.op else {
        return None;
    };
    let d = Direction::from_target(&cc.target)?;
    let axis: i64 = instr.backend_config.trim().parse().ok()?;
    (0..rank as i64).contains(&axis).then_some((d, axis))
}

/// Writes softmaxes into a module in the form a target runs: the Neuron
/// custom call, or a `call` of a plain callee (made once per shape).
pub struct SoftmaxWriter {
    target: Target,
    rw: ModuleRewriter,
    callees: SoftmaxCallees,
}

impl SoftmaxWriter {
    pub fn new(m: &Module, target: Target, ctx: &mut PassContext) -> Self {
        SoftmaxWriter {
            target,
            rw: ModuleRewriter::for_pass(m, ctx),
            callees: SoftmaxCallees::new(),
        }
    }

    /// Hands the module's name index on (see [`ModuleRewriter::finish`]).
    pub fn finish(self, ctx: &mut PassContext) {
        self.rw.finish(ctx);
    }

    /// Puts the softmax (or its backward) over `axis` of `operands` in
    /// place of `old` in computation `ci`, with `old`'s metadata, and
    /// returns it. `old` stays until [`SoftmaxWriter::remove_dead`].
    pub fn replace(
        &mut self,
        pass: &str,
        m: &mut Module,
        ci: usize,
        (d, axis): (Direction, i64),
        operands: &[InstrId],
        old: InstrId,
    ) -> Result<InstrId, PassError> {
        let shape = m.computations[ci]
            .instr(old)
            .shape
            .as_array()
            .cloned()
            .ok_or_else(|| PassError::SoftmaxNotArray {
                pass: pass.to_string(),
                instruction: m.computations[ci].instr(old).name.clone(),
            })?;
        let (op, backend_config, stem) = match self.target {
            Target::Neuron => {
                let (op, config) = neuron_call(d, axis);
                (op, config, d.target())
            }
            Target::Cpu => {
                let to_apply = plain_callee(&mut self.rw, m, &mut self.callees, d, &shape, axis)
                    .map_err(|e| PassError::Build {
                        pass: pass.to_string(),
                        source: Box::new(e),
                    })?;
                (
                    Op::Call {
                        to_apply,
                        is_composite: false,
                    },
                    String::new(),
                    d.stem(),
                )
            }
        };
        let mut r = self.rw.on(&mut m.computations[ci]);
        r.provenance_of(old).set_backend_config(backend_config);
        let new = r
            .add_named(stem, op, operands, Some(Shape::Array(shape)))
            .map_err(PassError::rewrite(pass))?;
        r.replace(old, new).map_err(PassError::rewrite(pass))?;
        Ok(new)
    }

    /// Sweeps what the replacements left unread in computation `ci`.
    pub fn remove_dead(&mut self, m: &mut Module, ci: usize) {
        self.rw.on(&mut m.computations[ci]).remove_dead();
    }
}

/// Callees made so far, by what they compute.
type SoftmaxCallees = std::collections::HashMap<(Direction, ArrayShape, i64), ComputationId>;

/// A callee computing softmax (or its backward) over `axis` of `shape`,
/// added to `m` through `rw`. Callees are made once per module
/// and shape: `cache` remembers them.
fn plain_callee(
    rw: &mut ModuleRewriter,
    m: &mut Module,
    cache: &mut SoftmaxCallees,
    d: Direction,
    shape: &ArrayShape,
    axis: i64,
) -> Result<ComputationId, BuildError> {
    if let Some(&id) = cache.get(&(d, shape.clone(), axis)) {
        return Ok(id);
    }
    let part = match d {
        Direction::Forward => softmax_module(shape, axis)?,
        Direction::Backward => softmax_backward_module(shape, axis)?,
    };
    let id = rw.graft(m, part);
    cache.insert((d, shape.clone(), axis), id);
    Ok(id)
}

/// `exp(x - max(x)) / sum(exp(x - max(x)))` over `axis`.
fn softmax_module(shape: &ArrayShape, axis: i64) -> Result<Module, BuildError> {
    let mut b = Builder::new(Direction::Forward.stem());
    let x = b.parameter("x", Shape::Array(shape.clone()));
    let (y, _) = b.softmax(x, axis)?;
    Ok(b.into_module(Direction::Forward.stem(), y))
}

/// `y * (dy - sum(dy * y))` over `axis`: the gradient through a softmax
/// whose output is `y`.
fn softmax_backward_module(shape: &ArrayShape, axis: i64) -> Result<Module, BuildError> {
    let mut b = Builder::new(Direction::Backward.stem());
    let y = b.parameter("y", Shape::Array(shape.clone()));
    let dy = b.parameter("dy", Shape::Array(shape.clone()));
    let dx = b.softmax_backward(y, dy, axis)?;
    Ok(b.into_module(Direction::Backward.stem(), dx))
}
