//! HLO text to [`Module`]. Syntax errors come from the grammar
//! ([`super::syntax`]) with line:column and what was expected; semantic errors (unknown opcode, bad
//! attribute, undefined operand) carry the position of the offending token.
//!
//! Read by grammar level, top down: this file reads the module (its header,
//! computations and schedule); `computation` a computation's instructions
//! and their operands; `instruction` one instruction and its annotations;
//! `ops` the op its opcode and attributes name; `values` attribute values
//! and shapes; `literals` constants.

use super::syntax::{self, Pair, Rule, SyntaxError};
use crate::ir::collective::{Collective, ReplicaGroups};
use crate::ir::computation::{Computation, InstrId};
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
use std::fmt;

mod computation;
mod instruction;
mod literals;
mod ops;
mod values;

use computation::*;
use instruction::*;
use literals::*;
use ops::*;
use values::*;

pub(super) use ops::{channel_id, collective, permute_slice_sizes, source_target_pairs};
pub(super) use values::{flag_value, int_value, ints_value, word_value, Attrs, Value};

/// A parse failure at `line:column` (1-based).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

pub(super) fn err_at<T>(pair: &Pair<'_>, message: impl Into<String>) -> Result<T, ParseError> {
    Err(error_at(pair, message))
}

pub(super) fn error_at(pair: &Pair<'_>, message: impl Into<String>) -> ParseError {
    let (line, column) = pair.line_col();
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
    let tree = syntax::parse(text).map_err(|e| syntax_error(e, text))?;
    let mut inner = tree.root().into_inner();
    let name = strip_sigil(inner.next().expect("grammar: module name").as_str()).to_string();
    let mut aliases = Vec::new();
    let mut donors = Vec::new();
    let mut frontend_attributes = BTreeMap::new();
    let mut entry_layout = None;
    let mut is_scheduled = None;
    let mut spmd = crate::ir::module::SpmdPropagation::default();
    let mut devices = crate::ir::module::DeviceCounts::default();
    let mut alias_passthrough_params = false;
    let mut computations = Vec::new();
    let mut entry = None;
    let mut notes = Vec::new();
    for p in inner {
        match p.as_rule() {
            Rule::alias_attr => {
                for e in p.into_inner() {
                    aliases.push(alias_entry(e)?);
                }
            }
            Rule::donor_attr => {
                for e in p.into_inner() {
                    let mut it = e.into_inner();
                    let parameter = int(&it.next().expect("grammar: parameter"))?;
                    let parameter_index =
                        shape_index(it.next().expect("grammar: parameter index"))?;
                    donors.push(BufferDonor {
                        parameter,
                        parameter_index,
                    });
                }
            }
            Rule::layout_attr => {
                let at = p;
                let program = p.into_inner().next().expect("grammar: program shape");
                let mut shapes = program
                    .into_inner()
                    .map(shape)
                    .collect::<Result<Vec<_>, _>>()?;
                let result = shapes.pop().expect("grammar: result shape");
                entry_layout = Some((at, shapes, result));
            }
            Rule::attribute => {
                let (key, value, pair) = attribute(p)?;
                match key.as_str() {
                    "frontend_attributes" => frontend_attributes = value.into_string_map(&pair)?,
                    // Written by XLA with their default values; anything
                    // else would be lost, so it is refused by name.
                    "is_scheduled" if value.is_word("false") => {}
                    "is_scheduled" if value.is_word("true") => is_scheduled = Some(pair),
                    "allow_spmd_sharding_propagation_to_output" => {
                        spmd.to_output = bools(value, &pair)?
                    }
                    "allow_spmd_sharding_propagation_to_parameters" => {
                        spmd.to_parameters = bools(value, &pair)?
                    }
                    "replica_count" => devices.replica_count = device_count(&key, &value, &pair)?,
                    "num_partitions" => devices.num_partitions = device_count(&key, &value, &pair)?,
                    "alias_passthrough_params" => {
                        alias_passthrough_params = match value {
                            v if v.is_word("true") => true,
                            v if v.is_word("false") => false,
                            other => {
                                return err_at(
                                    &pair,
                                    format!(
                                        "'alias_passthrough_params' is true or false, got {}",
                                        other.kind()
                                    ),
                                )
                            }
                        }
                    }
                    // The dedicated rule did not read it: its shapes use
                    // syntax hlatc does not read yet.
                    "entry_computation_layout" => {
                        return err_at(
                            &pair,
                            format!(
                                "entry_computation_layout {}: its shapes use syntax hlatc does not read yet \
                                 (layout tiles, memory spaces or dynamic dimensions)",
                                value.kind()
                            ),
                        )
                    }
                    _ => return err_at(&pair, format!("unsupported module attribute '{key}'")),
                }
            }
            Rule::computation => {
                // Callees come before their callers, as XLA prints them.
                let callees = |n: &str| {
                    computations
                        .iter()
                        .find(|c: &&Computation| c.name == n)
                        .and_then(Computation::signature)
                };
                let (c, is_entry, wrapped) = computation(p, &callees, &mut notes)?;
                computations.extend(wrapped);
                if is_entry {
                    if entry.is_some() {
                        return err_at(&p, "a second ENTRY computation");
                    }
                    entry = Some(computations.len());
                }
                computations.push(c);
            }
            r => unreachable!("grammar: unexpected {r:?} in module"),
        }
    }
    let entry = entry.unwrap_or(computations.len() - 1);
    let mut m = Module {
        name,
        computations,
        entry,
        input_output_alias: aliases,
        buffer_donors: donors,
        frontend_attributes,
        is_scheduled: is_scheduled.is_some(),
        entry_layout: None,
        stack_frames,
        allow_spmd_sharding_propagation: spmd,
        alias_passthrough_params,
        devices,
        device_assignment: None,
    };
    if let Some(at) = is_scheduled {
        check_schedule(&m, &at)?;
    }
    if let Some((at, params, result)) = entry_layout {
        if m.entry < m.computations.len() {
            m.entry_layout = crate::ir::module::EntryLayout::against(&m, params, result)
                .or_else(|message| err_at(&at, message))?;
        }
    }
    notes.extend(uniquify_instruction_names(&mut m));
    crate::analysis::canonical::drop_default_attributes(&mut m);
    Ok((m, notes))
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
        let fresh = (1..)
            .map(|n| format!("{name}.{n}"))
            .find(|candidate| !used.contains(candidate))
            .expect("some suffix is free");
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
pub(super) fn check_schedule(m: &Module, at: &Pair<'_>) -> Result<(), ParseError> {
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
