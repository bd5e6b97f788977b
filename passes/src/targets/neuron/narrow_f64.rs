//! `narrow-f64`: every `f64` value computed in `f32` instead. Neither trn1
//! nor trn2 has f64 (the pre-flight's `[f64]` refusal), so a module that
//! holds one does not compile for Neuron at all; in f32 it does, with f32's
//! precision (about 7 significant digits instead of 16) and range (finite
//! up to 3.4e38, where f64 goes to 1.8e308).
//!
//! The contract:
//! - Every f64 array leaf of every instruction's shape, in every
//!   computation, becomes f32: constants are rounded to nearest even,
//!   converts to or from f64 convert to or from f32, and computations
//!   called with f64 values (reducers, comparators, loop bodies, branches)
//!   take f32 ones. A note counts the instructions and names the
//!   constants that lost precision.
//! - A constant whose finite value overflows f32 is refused, naming the
//!   instruction and the value: rounding it to inf would change what the
//!   program computes silently. Values computed at run time cannot be
//!   checked here; the note says they overflow to inf past 3.4e38.
//! - Ops whose meaning is the f64 bit layout or a contract outside the
//!   module are refused by name where they hold f64: `bitcast`,
//!   `bitcast-convert`, `stochastic-convert` (its random bits are as wide
//!   as its operand), `rng-bit-generator`, `custom-call`, `infeed`,
//!   `outfeed`, `send`/`recv`, and tuple constants (not yet narrowed).
//! - The entry's f64 parameters and outputs become f32 too, since
//!   neuronx-cc refuses them as much as any other f64 value: the module's
//!   signature changes, and a note lists the retyped parameters and
//!   outputs (feed them f32). Where the context keeps the signature
//!   ([`PassContext::keep_entry_signature`]: a step hlatc builds, whose
//!   manifest lists f64 inputs), a module with f64 at its boundary is left
//!   alone, with a note: its fp64 preset is for checks on XLA CPU, and the
//!   pre-flight refuses it for Neuron by name.

use crate::infra::context::PassContext;
use crate::infra::pass::{F64ConstantProblem, Pass, PassError};
use hlatc_compiler::{Computation, ElementType, Instruction, Literal, Module, Op, Scalar, Shape};

pub struct NarrowF64;

/// Constants named in a note, at most.
const NAMED_CONSTANTS: usize = 8;

impl NarrowF64 {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "narrow-f64";
}

impl Pass for NarrowF64 {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let holds = |s: &Shape| s.any_leaf(&|l| leaf_type(l) == Some(ElementType::F64));
        if !m
            .computations
            .iter()
            .any(|c| c.ids().any(|id| holds(&c.instr(id).shape)))
        {
            return Ok(false);
        }
        let entry = m.entry();
        let params: Vec<String> = entry
            .parameters()
            .into_iter()
            .filter(|&p| holds(&entry.instr(p).shape))
            .map(|p| entry.instr(p).name.clone())
            .collect();
        let result_f64 = m.entry_result_shape().is_some_and(|s| holds(&s));
        if ctx.keep_entry_signature && (!params.is_empty() || result_f64) {
            ctx.note(
                self.name(),
                "the entry's f64 parameters or outputs are fixed by the caller (its manifest lists them), so f64 stays; neuronx-cc refuses it",
            );
            return Ok(false);
        }
        for c in &m.computations {
            refuse_bit_level_f64(self.name(), c)?;
        }
        // Every constant is checked before anything changes: a refusal
        // leaves the module as it was.
        let mut lost = Vec::new();
        let mut constants = Vec::new();
        for (ci, c) in m.computations.iter().enumerate() {
            for id in c.ids() {
                if let Some(l) = narrow_constant(self.name(), c, c.instr(id), &mut lost)? {
                    constants.push((ci, id, l));
                }
            }
        }
        for (ci, id, l) in constants {
            m.computations[ci].instr_mut(id).op = Op::Constant(l);
        }
        let mut retyped = 0usize;
        for c in &mut m.computations {
            let ids: Vec<_> = c.ids().collect();
            for id in ids {
                let shape = &mut c.instr_mut(id).shape;
                if holds(shape) {
                    narrow_shape(shape);
                    retyped += 1;
                }
            }
        }
        if let Some(layout) = &mut m.entry_layout {
            layout.parameters.iter_mut().for_each(narrow_shape);
            narrow_shape(&mut layout.result);
        }
        let mut note = format!(
            "{retyped} instructions holding f64 now compute in f32 (about 7 significant digits; values past 3.4e38 become inf)"
        );
        if !lost.is_empty() {
            let shown: Vec<&str> = lost
                .iter()
                .take(NAMED_CONSTANTS)
                .map(String::as_str)
                .collect();
            let more = lost.len().saturating_sub(NAMED_CONSTANTS);
            note += &format!(
                "; {} constant(s) lost precision in f32: {}{}",
                lost.len(),
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        let mut boundary = Vec::new();
        if !params.is_empty() {
            boundary.push(format!("parameters {}", params.join(", ")));
        }
        if result_f64 {
            boundary.push("its f64 outputs".to_string());
        }
        if !boundary.is_empty() {
            note += &format!(
                "; the entry's signature changed, feed and read f32: {}",
                boundary.join(" and ")
            );
        }
        ctx.note(self.name(), note);
        Ok(true)
    }
}

/// The element type of an array (or buffer) leaf.
fn leaf_type(s: &Shape) -> Option<ElementType> {
    match s {
        Shape::Array(a) | Shape::Buffer(a) => Some(a.ty),
        Shape::Tuple(_) | Shape::Token => None,
    }
}

/// `shape` with every f64 leaf made f32 (layouts kept).
fn narrow_shape(shape: &mut Shape) {
    match shape {
        Shape::Array(a) | Shape::Buffer(a) if a.ty == ElementType::F64 => a.ty = ElementType::F32,
        Shape::Tuple(parts) => parts.iter_mut().for_each(narrow_shape),
        _ => {}
    }
}

/// Refuses, by name, an instruction of `c` whose op reads or writes f64
/// bits or a contract outside the module (see the module's docs).
fn refuse_bit_level_f64(pass: &str, c: &Computation) -> Result<(), PassError> {
    let f64_leaf = |s: &Shape| s.any_leaf(&|l| leaf_type(l) == Some(ElementType::F64));
    for id in c.ids() {
        let i = c.instr(id);
        let bit_level = matches!(
            i.op,
            Op::Bitcast
                | Op::BitcastConvert
                | Op::StochasticConvert
                | Op::RngBitGenerator { .. }
                | Op::CustomCall(_)
                | Op::Infeed { .. }
                | Op::Outfeed { .. }
                | Op::Transfer(_)
                | Op::TupleConstant(_)
        );
        if !bit_level {
            continue;
        }
        let holds = f64_leaf(&i.shape)
            || c.operand_ids(id)
                .iter()
                .any(|&o| f64_leaf(&c.instr(o).shape));
        if holds {
            return Err(PassError::F64Bits {
                pass: pass.to_string(),
                computation: c.name.clone(),
                instruction: i.name.clone(),
                opcode: i.op.opcode(),
            });
        }
    }
    Ok(())
}

/// An f64 constant's values rounded to f32, noting its name in `lost`
/// when a value changed; refuses one whose finite value overflows f32.
/// `None` for any other instruction.
fn narrow_constant(
    pass: &str,
    c: &Computation,
    i: &Instruction,
    lost: &mut Vec<String>,
) -> Result<Option<Literal>, PassError> {
    let Op::Constant(l) = &i.op else {
        return Ok(None);
    };
    if l.ty() != ElementType::F64 {
        return Ok(None);
    }
    let failed = |problem: F64ConstantProblem| PassError::F64Constant {
        pass: pass.to_string(),
        computation: c.name.clone(),
        constant: i.name.clone(),
        problem: Box::new(problem),
    };
    let mut inexact = false;
    let mut values = Vec::with_capacity(l.element_count());
    for k in 0..l.element_count() {
        let Scalar::Float(v) = l.get(k) else {
            return Err(failed(F64ConstantProblem::NotFloat(k)));
        };
        // `as` rounds to nearest even, and to inf past f32's range.
        let narrow = v as f32;
        if v.is_finite() && narrow.is_infinite() {
            return Err(failed(F64ConstantProblem::Overflows(v)));
        }
        // NaN stays NaN; any other value that does not come back changed.
        inexact |= !v.is_nan() && f64::from(narrow) != v;
        values.push(narrow);
    }
    let mut narrowed =
        Literal::from_f32(l.dims().to_vec(), &values).map_err(|e| failed(e.into()))?;
    // The literal keeps its layout; only the type moves.
    narrowed.shape = l.shape.clone();
    narrowed.shape.ty = ElementType::F32;
    if inexact {
        lost.push(format!("%{}", i.name));
    }
    Ok(Some(narrowed))
}
