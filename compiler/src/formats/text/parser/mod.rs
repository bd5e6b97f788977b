//! HLO text to [`Module`]. Syntax errors come from the grammar
//! ([`super::syntax`]) with line:column and what was expected; semantic errors (unknown opcode, bad
//! attribute, undefined operand) carry the position of the offending token.
//!
//! Read by grammar level, top down, over the typed syntax tree: this file
//! reads the module and its computations; `header` the module's
//! attributes; `computation` a computation's instructions and their
//! operands, with `inline` the computations written in place of a
//! callee's name, `async_wrapped` those async starts wrap and `inference`
//! the shapes left unwritten; `instruction` one instruction, with `annotations` what
//! any instruction may carry; `ops` the op its opcode and attributes
//! name, with `custom_call` the one op with many; `attrs` an
//! instruction's attributes; `values` attribute values; `shapes` shapes;
//! `literals` constants.

use super::syntax::{self, Span, SyntaxError};
use crate::ir::collective::{Collective, ReplicaGroups};
use crate::ir::computation::{Computation, InstrId};
use crate::ir::computation_id::ComputationId;
use crate::ir::instruction::Instruction;
use crate::ir::literal::{Literal, LiteralTree, Scalar};
use crate::ir::metadata::Metadata;
use crate::ir::module::BufferDonor;
use crate::ir::module::{AliasKind, IoAlias, Module};
use crate::ir::op::*;
use crate::ir::result_accuracy::ResultAccuracy;
use crate::ir::shape::{ArrayShape, ElementType, Shape};
use crate::ir::sharding::Sharding;
use crate::ir::window::{ConvDims, Window};
use crate::util::escape::unescape;
use crate::util::fx::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;

mod annotations;
mod async_wrapped;
mod attrs;
mod computation;
mod custom_call;
mod described;
mod header;
mod inference;
mod inline;
mod instruction;
mod literals;
mod ops;
mod scope;
mod shapes;
mod values;

use annotations::*;
use async_wrapped::*;
use computation::*;
use custom_call::*;
use header::*;
use inference::*;
use inline::*;
use instruction::*;
use literals::*;
use ops::*;
use scope::*;
use shapes::*;
use values::*;

pub use super::parse_error::ParseError;
pub(super) use attrs::{flag_value, int_value, ints_value, word_value, Attrs, WrittenCallee};
pub(super) use ops::{channel_id, collective, permute_slice_sizes, source_target_pairs};
pub(super) use values::{AttrPlace, Located, Value};

pub(super) fn err_at<'i, T>(
    at: &impl Located<'i>,
    message: impl Into<String>,
) -> Result<T, ParseError> {
    Err(error_at(at, message))
}

pub(super) fn error_at<'i>(at: &impl Located<'i>, message: impl Into<String>) -> ParseError {
    let (line, column) = at.span().line_col();
    ParseError {
        line,
        column,
        message: message.into(),
    }
}

/// Where the grammar stopped, what it would have accepted there, and the
/// text it found instead.
pub(super) fn syntax_error(e: SyntaxError, input: &str) -> ParseError {
    let pos = syntax::char_floor(input, e.offset);
    let (line, column) = syntax::line_col(input, pos);
    let found: String = input[pos..]
        .chars()
        .take_while(|&c| c != '\n')
        .take(24)
        .collect();
    let found = if found.trim().is_empty() {
        "end of line".to_string()
    } else {
        format!("`{}`", found.trim_end())
    };
    let message = if e.expected.is_empty() {
        format!("syntax error at {found}")
    } else {
        format!("expected {}, found {found}", e.expected.join(" or "))
    };
    ParseError {
        line,
        column,
        message,
    }
}

/// Parses a whole module. The result is well-formed as a graph (every operand
/// resolved, every computation rooted); call [`crate::verify`] for shapes.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    parse_module_noted(text).map(|(m, _)| m)
}

/// [`parse_module`], with a note for each change made to read the module
/// as XLA does: an instruction name repeated in another computation is
/// renamed (XLA's parser makes names module-wide unique the same way).
pub fn parse_module_noted(text: &str) -> Result<(Module, Vec<String>), ParseError> {
    // A byte-order mark, as some editors write, is invisible to the user, so
    // columns are counted without it.
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let (text, stack_frames) = super::stack_frame_tables::take_tables(text)?;
    let text: &str = &text;
    super::nesting::check_nesting(text)?;
    let tree = syntax::parse(&text).map_err(|e| syntax_error(e, text))?;
    let header = ModuleHeader::read(&tree.attributes)?;
    let mut notes = Vec::new();
    let (computations, entry) = computations(&tree.computations, &mut notes)?;
    let mut m = header.into_module(tree.name.text(), computations, entry, stack_frames)?;
    notes.extend(uniquify_instruction_names(&mut m));
    crate::analysis::canonical::drop_default_attributes(&mut m);
    Ok((m, notes))
}

/// The module's computations, callees first (those its short-form async
/// starts wrap or its instructions write inline included), and which is
/// the entry: the one marked `ENTRY`, or else the last.
fn computations(
    written: &[syntax::Computation<'_>],
    notes: &mut Vec<String>,
) -> Result<(Vec<Computation>, usize), ParseError> {
    let mut computations: Vec<Computation> = Vec::with_capacity(written.len());
    let mut entry = None;
    for c in written {
        // Callees come before their callers, as XLA prints them.
        let (read, wrapped) = computation(c, &computations, notes)?;
        computations.extend(wrapped);
        if c.is_entry {
            if entry.is_some() {
                return err_at(&c.at, "a second ENTRY computation");
            }
            entry = Some(computations.len());
        }
        computations.push(read);
    }
    let entry = entry.unwrap_or(computations.len().saturating_sub(1));
    Ok((computations, entry))
}

/// Renames instructions whose name an earlier computation already uses to
/// `name.N`, the first N free anywhere in the module; one note per rename.
pub(super) fn uniquify_instruction_names(m: &mut Module) -> Vec<String> {
    // Clashes are found on borrowed names (most modules have none); the
    // first computation to use a name keeps it. A name twice in one
    // computation is an error the verifier reports, as XLA does, so only
    // its first use there is renamed.
    let clashes: Vec<(usize, InstrId, usize)> = {
        let mut owner: FxHashMap<&str, usize> = FxHashMap::default();
        let mut clashes = Vec::new();
        let mut renamed: FxHashSet<(usize, &str)> = FxHashSet::default();
        for (ci, c) in m.computations.iter().enumerate() {
            for id in c.ids() {
                let name = c.instr(id).name.as_str();
                let first = *owner.entry(name).or_insert(ci);
                if first != ci && renamed.insert((ci, name)) {
                    clashes.push((ci, id, first));
                }
            }
        }
        clashes
    };
    if clashes.is_empty() {
        return Vec::new();
    }
    let mut used: std::collections::HashSet<String> =
        m.computations.iter().map(|c| c.name.clone()).collect();
    for c in &m.computations {
        used.extend(c.ids().map(|id| c.instr(id).name.clone()));
    }
    let mut notes = Vec::new();
    for (ci, id, owner) in clashes {
        let name = m.computations[ci].instr(id).name.clone();
        let fresh = first_free(&name, |candidate| !used.contains(candidate));
        used.insert(fresh.clone());
        notes.push(format!(
            "instruction '{name}' in computation '{}' renamed to '{fresh}': '{name}' is taken in computation '{}', and XLA needs module-wide unique names",
            m.computations[ci].name,
            m.computations[owner].name
        ));
        m.computations[ci].instr_mut(id).name = fresh;
    }
    notes
}

/// A schedule is the order instructions are written in, so each must come
/// after its operands.
pub(super) fn check_schedule(m: &Module, at: &Span<'_>) -> Result<(), ParseError> {
    for c in &m.computations {
        let mut seen = std::collections::HashSet::new();
        for id in c.ids() {
            let early = |deps: &[InstrId]| deps.iter().find(|o| !seen.contains(*o)).copied();
            let found = early(c.operand_ids(id))
                .map(|o| ("operand", o))
                .or_else(|| early(c.control_predecessors(id)).map(|o| ("control predecessor", o)));
            if let Some((what, o)) = found {
                return err_at(
                    at,
                    format!(
                        "is_scheduled=true, but in '{}' instruction '{}' comes before its {what} '{}'",
                        c.name,
                        c.instr(id).name,
                        c.instr(o).name
                    ),
                );
            }
            seen.insert(id);
        }
    }
    Ok(())
}

/// `base.1`, `base.2`, ...: the first that `free` takes.
pub(super) fn first_free(base: &str, free: impl Fn(&str) -> bool) -> String {
    let mut n = 1u64;
    loop {
        let candidate = format!("{base}.{n}");
        if free(&candidate) {
            return candidate;
        }
        n += 1;
    }
}
