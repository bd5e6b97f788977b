//! Reverse-mode automatic differentiation over the IR.
//!
//! [`grad`] appends the backward pass of a scalar loss to the computation
//! being built: adjoints flow from the loss to the requested values in
//! reverse topological order, contributions that reach one value are
//! summed, and only values on a path from a requested input to the loss get
//! an adjoint, so no work nothing needs is emitted. Integer and boolean
//! values are never differentiated.
//!
//! Each op's backward rule lives in [`rules`] and states exactly which
//! forward values it reads ([`rules::saves`]): that is the contract the
//! rematerialization policy builds on. A value it reads that is cheap to
//! recompute (a broadcast of a smaller value, or one the forward builder
//! names in [`GradHints::recompute`]) is recomputed in the backward pass
//! instead, so the forward pass keeps only what it is recomputed from (see
//! `recompute.rs`).

mod composite;
mod recompute;
pub mod rules;

pub use composite::{
    BackwardCall, BackwardOperand, Composite, CompositeRule, CompositeSaves, GradHints,
};
pub use recompute::RECOMPUTED;
pub use rules::{gradient, saves, Gradient, Saved};

use crate::graph::builder::{BuildError, Builder};
use crate::graph::scope;
use crate::ir::computation::InstrId;
use crate::ir::shape::Shape;
use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AutodiffError {
    #[error("the loss must be a floating-point scalar, '{name}' is {shape}")]
    LossNotScalar { name: String, shape: String },
    #[error("cannot differentiate through '{instruction}' ({opcode}): {reason}")]
    NotDifferentiable {
        instruction: String,
        opcode: &'static str,
        reason: String,
    },
    #[error("a {rule:?} composite has {inputs} inputs, which its rule does not take")]
    CompositeInputs { rule: CompositeRule, inputs: usize },
    #[error("building the backward pass: {0}")]
    Build(#[from] BuildError),
}

/// Appends d(loss)/d(x) for every `x` in `wrt` to `b` and returns them in
/// order. Values in `hints.stop` are treated as constants (their dependence
/// on the inputs is not followed), like JAX's `stop_gradient`; the regions
/// in `hints.composites` are differentiated by their closed form.
/// Reductions are differentiable when their reducer is a sum, max or min
/// callee the builder knows ([`Builder::reducer_op`]).
pub fn grad(
    b: &mut Builder,
    loss: InstrId,
    wrt: &[InstrId],
    hints: &GradHints,
) -> Result<Vec<InstrId>, AutodiffError> {
    grad_of_scaled(b, loss, 1.0, wrt, hints)
}

/// [`grad`] of `scale * loss`: the backward pass starts from `scale`
/// instead of one. A sharded step takes each rank's share of the gradient
/// this way, without a forward `loss * scale` whose backward is `1 * scale`
/// for `simplify` to fold.
pub fn grad_of_scaled(
    b: &mut Builder,
    loss: InstrId,
    scale: f64,
    wrt: &[InstrId],
    hints: &GradHints,
) -> Result<Vec<InstrId>, AutodiffError> {
    let stop = &hints.stop;
    let composites: HashMap<InstrId, &Composite> =
        hints.composites.iter().map(|c| (c.output, c)).collect();
    let loss_shape = b.shape(loss).clone();
    match &loss_shape {
        Shape::Array(a) if a.rank() == 0 && a.ty.is_float() => {}
        s => {
            return Err(AutodiffError::LossNotScalar {
                name: b.computation().instr(loss).name.clone(),
                shape: s.to_string(),
            })
        }
    }
    let order = topological_to(b, loss);
    let needed = needs_adjoint(b, (&order, loss), wrt, stop, &hints.composites)?;
    let mut adjoint: HashMap<InstrId, InstrId> = HashMap::new();
    let mut recompute = recompute::Recompute::new(&hints.recompute);
    let outer_scope = b.set_scope(scope::BACKWARD);
    if needed.contains(&loss) {
        let ty = b.ty(loss);
        adjoint.insert(loss, b.scalar(ty, scale));
    }
    for &n in order.iter().rev() {
        let Some(&g) = adjoint.get(&n) else { continue };
        b.set_scope(scope::backward(&b.computation().instr(n).metadata.op_name));
        if let Some(c) = composites.get(&n) {
            let contributions = composite::vjp(b, c, g, |x| needed.contains(&x))?;
            for (&x, contribution) in c.inputs.iter().zip(contributions) {
                let Some(contribution) = contribution else {
                    continue;
                };
                let total = match adjoint.get(&x) {
                    Some(&prev) => b.add2(prev, contribution)?,
                    None => contribution,
                };
                adjoint.insert(x, total);
            }
            continue;
        }
        let operands = b.computation().operands(n);
        for (i, &x) in operands.iter().enumerate() {
            if !needed.contains(&x) {
                continue;
            }
            let mut read = |b: &mut Builder, v| recompute.read(b, v);
            if let Some(contribution) = rules::vjp_reading(b, n, i, g, &mut read)? {
                let total = match adjoint.get(&x) {
                    Some(&prev) => b.add2(prev, contribution)?,
                    None => contribution,
                };
                adjoint.insert(x, total);
            }
        }
    }
    b.set_scope(scope::BACKWARD);
    let grads = wrt
        .iter()
        .map(|&x| match adjoint.get(&x) {
            Some(&g) => Ok(g),
            // The loss does not depend on x: its gradient is zero.
            None => match b.shape(x).clone() {
                Shape::Array(a) if a.ty.is_float() => Ok(b.full(a.ty, &a.dims, 0.0)?),
                s => Err(AutodiffError::NotDifferentiable {
                    instruction: b.computation().instr(x).name.clone(),
                    opcode: b.computation().instr(x).op.opcode(),
                    reason: format!("a gradient was requested for a non-float value of shape {s}"),
                }),
            },
        })
        .collect();
    b.set_scope(outer_scope);
    grads
}

/// Everything `loss` depends on, operands before users.
fn topological_to(b: &Builder, loss: InstrId) -> Vec<InstrId> {
    let c = b.computation();
    let mut order = Vec::new();
    let mut state: HashMap<InstrId, bool> = HashMap::new();
    let mut stack = vec![(loss, false)];
    while let Some((n, expanded)) = stack.pop() {
        if expanded {
            state.insert(n, true);
            order.push(n);
            continue;
        }
        if state.contains_key(&n) {
            continue;
        }
        state.insert(n, false);
        stack.push((n, true));
        for o in c.operands(n).into_iter().rev() {
            if !state.contains_key(&o) {
                stack.push((o, false));
            }
        }
    }
    order
}

/// `loss` and the values it is computed from, not looking past `stop`
/// (constants to the backward pass).
fn reaching(b: &Builder, loss: InstrId, stop: &HashSet<InstrId>) -> HashSet<InstrId> {
    let c = b.computation();
    let mut seen: HashSet<InstrId> = HashSet::new();
    let mut stack = vec![loss];
    while let Some(n) = stack.pop() {
        if !seen.insert(n) || stop.contains(&n) {
            continue;
        }
        stack.extend(c.operands(n));
    }
    seen
}

/// The tuple-shaped values within composite `r`: between its inputs and
/// its output and residuals.
fn region_tuples(b: &Builder, r: &Composite) -> Vec<InstrId> {
    let c = b.computation();
    let inputs: HashSet<InstrId> = r.inputs.iter().copied().collect();
    let mut seen: HashSet<InstrId> = HashSet::new();
    let mut stack: Vec<InstrId> = r.residuals.iter().chain([&r.output]).copied().collect();
    let mut tuples = Vec::new();
    while let Some(n) = stack.pop() {
        if inputs.contains(&n) || !seen.insert(n) {
            continue;
        }
        if c.instr(n).shape.is_tuple() {
            tuples.push(n);
        }
        stack.extend(c.operands(n));
    }
    tuples
}

/// Float values on a path from some `wrt` to the loss, not cut by `stop`.
/// Integer and boolean results end a path (they have no derivative); a tuple
/// on a path is an error rather than a silently zero gradient. A tuple
/// that reaches the loss only through `stop` is on no path (an
/// `opt-barrier` ordering values the step differentiates from elsewhere).
fn needs_adjoint(
    b: &Builder,
    (order, loss): (&[InstrId], InstrId),
    wrt: &[InstrId],
    stop: &[InstrId],
    composites: &[Composite],
) -> Result<HashSet<InstrId>, AutodiffError> {
    let c = b.computation();
    let stop: HashSet<InstrId> = stop.iter().copied().collect();
    let reaches_loss = reaching(b, loss, &stop);
    let is_float = |n: InstrId| c.instr(n).shape.as_array().is_some_and(|a| a.ty.is_float());
    let mut depends: HashSet<InstrId> = wrt.iter().copied().filter(|&x| is_float(x)).collect();
    // A region's output depends on its inputs through its rule; the
    // tuples within it (an imported kernel's call results, a loop's
    // state) are never differentiated.
    let region_inputs: HashMap<InstrId, &[InstrId]> = composites
        .iter()
        .map(|r| (r.output, r.inputs.as_slice()))
        .collect();
    let kernel_results: HashSet<InstrId> = composites
        .iter()
        .flat_map(|r| region_tuples(b, r))
        .collect();
    for &n in order {
        if stop.contains(&n) || depends.contains(&n) || kernel_results.contains(&n) {
            continue;
        }
        let operands = match region_inputs.get(&n) {
            Some(inputs) => inputs.to_vec(),
            None => c.operands(n),
        };
        if !operands.iter().any(|o| depends.contains(o)) {
            continue;
        }
        if c.instr(n).shape.is_tuple() {
            if !reaches_loss.contains(&n) {
                continue;
            }
            return Err(AutodiffError::NotDifferentiable {
                instruction: c.instr(n).name.clone(),
                opcode: c.instr(n).op.opcode(),
                reason:
                    "tuple-shaped values are not differentiated; build the graph without tuples"
                        .into(),
            });
        }
        if is_float(n) {
            depends.insert(n);
        }
    }
    Ok(depends)
}
