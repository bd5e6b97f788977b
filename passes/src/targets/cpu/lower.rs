//! What XLA CPU is handed: the module rewritten where XLA CPU could not
//! compile it as written, or the runtime could not pass or read it, with
//! what was done. The rewrites compute the same values.

use super::flat_entry::flatten_entry;
use super::{AsyncToSync, BitcastToReshape, WidenMixedDots};
use crate::infra::context::{PassContext, Target};
use crate::infra::pass::{Pass, PassError};
use crate::infra::pipeline::Pipeline;
use hlatc_compiler::{Module, Op};

/// A module lowered for XLA CPU: the rewritten module, and how it differs
/// from the one given.
#[derive(Clone, Debug)]
pub struct Lowered {
    /// `None` when the module needed no rewrite: XLA CPU compiles it as
    /// given.
    pub module: Option<Module>,
    /// What was done, in the order it was done.
    pub rewrites: Vec<Rewrite>,
}

/// What XLA CPU cannot compile as written, or the runtime cannot pass or
/// read, but computes the same values from, rewritten (`None` when the
/// module has none of it), with what was done: async ops and the split
/// collectives and copies, which its thunk emitter has no code for, as the
/// ops they run (`async-to-sync`); bitcasts, which read a buffer by the
/// layouts while XLA CPU compiles from before layout assignment, where it
/// refuses or mangles them, as the transposes and reshape that compute them
/// (`bitcast-to-reshape`); dots over narrower floats than their results,
/// some of which reach a `DotThunk` with no kernel for them, over their
/// operands converted to the result's type (`widen-mixed-dots`); and tuples
/// at the entry's edges as their leaves (`flat_entry`).
///
/// Each pass runs only where the module has what it rewrites, in a
/// pipeline that verifies what it made; a pass that fails fails the
/// lowering with its error.
pub fn lower(module: &Module) -> Result<Lowered, PassError> {
    let (mut split, mut bitcast, mut mixed_dot) = (false, false, false);
    for (c, id) in module
        .computations
        .iter()
        .flat_map(|c| c.ids().map(move |id| (c, id)))
    {
        let op = &c.instr(id).op;
        split |= matches!(op, Op::Async { .. } | Op::CollectiveDone(_) | Op::CopyDone);
        bitcast |= matches!(op, Op::Bitcast);
        mixed_dot |= WidenMixedDots::widens(c, id);
    }
    let needed: Vec<(Box<dyn Pass>, Rewrite)> = [
        (
            Box::new(AsyncToSync) as Box<dyn Pass>,
            Rewrite::AsyncToSync,
            split,
        ),
        (
            Box::new(BitcastToReshape),
            Rewrite::BitcastToReshape,
            bitcast,
        ),
        (Box::new(WidenMixedDots), Rewrite::WidenMixedDots, mixed_dot),
    ]
    .into_iter()
    .filter_map(|(pass, rewrite, needed)| needed.then_some((pass, rewrite)))
    .collect();
    let mut rewritten: Option<Module> = None;
    let mut rewrites = Vec::new();
    if !needed.is_empty() {
        // Through a pipeline, which verifies what each pass made and drops
        // a schedule the new instructions are not in.
        let mut pipeline = Pipeline::new("xla-cpu");
        let mut passes = Vec::new();
        for (pass, rewrite) in needed {
            passes.push((pass.name().to_string(), rewrite));
            pipeline.add(pass);
        }
        let mut m = module.clone();
        let mut ctx = PassContext::new(Target::Cpu);
        let report = pipeline.run_module(&mut m, &mut ctx)?;
        rewrites.extend(
            passes
                .into_iter()
                .filter(|(name, _)| report.fired(name))
                .map(|(_, rewrite)| rewrite),
        );
        rewritten = Some(m);
    }
    if let Some(flat) = flatten_entry(rewritten.as_ref().unwrap_or(module)) {
        let e = flat.entry();
        let parameters = e
            .parameters()
            .iter()
            .map(|&p| e.instr(p).name.clone())
            .collect();
        rewrites.push(Rewrite::FlatEntry { parameters });
        rewritten = Some(flat);
    }
    Ok(Lowered {
        module: rewritten,
        rewrites,
    })
}

/// A way the module XLA CPU compiled differs from the one given, each
/// computing the same values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// Async ops as calls, split collectives and copies as the op they
    /// split (`async-to-sync`): XLA CPU's thunk emitter has none of them.
    AsyncToSync,
    /// Bitcasts as transposes and reshapes (`bitcast-to-reshape`): XLA CPU
    /// compiles from before layout assignment.
    BitcastToReshape,
    /// Dots over narrower floats than their results over operands
    /// converted to the result's type (`widen-mixed-dots`): XLA CPU's
    /// `DotThunk`, which some shapes of them reach, has no bf16 x bf16 =
    /// f32 kernel.
    WidenMixedDots,
    /// Tuples at the entry's edges as their leaves; the parameters it
    /// takes, by name.
    FlatEntry { parameters: Vec<String> },
}

impl std::fmt::Display for Rewrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rewrite::AsyncToSync => f.write_str(
                "its async ops as calls, and its split collectives and copies as the ops they split (async-to-sync): XLA CPU compiles none of them, and the values are the same",
            ),
            Rewrite::BitcastToReshape => f.write_str(
                "its bitcasts as the transposes and reshapes that compute them (bitcast-to-reshape): XLA CPU compiles from before layout assignment",
            ),
            Rewrite::WidenMixedDots => f.write_str(
                "its dots over narrower floats than their results (bf16 accumulating in f32) over their operands converted to the result's type (widen-mixed-dots): XLA CPU has no kernel for some shapes of them, and the values are the same",
            ),
            Rewrite::FlatEntry { parameters } => write!(
                f,
                "the tuples at its entry's edges as their leaves: parameters {}; a tuple result's leaves in order",
                parameters.join(", ")
            ),
        }
    }
}
