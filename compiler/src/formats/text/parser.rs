//! HLO text to [`Module`]. Syntax errors come from the grammar
//! ([`super::syntax`]) with line:column and what was expected; semantic errors (unknown opcode, bad
//! attribute, undefined operand) carry the position of the offending token.

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
fn syntax_error(e: SyntaxError, input: &str) -> ParseError {
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
fn uniquify_instruction_names(m: &mut Module) -> Vec<String> {
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
fn check_schedule(m: &Module, at: &Pair<'_>) -> Result<(), ParseError> {
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

/// `{true,false,...}`.
fn bools(v: Value, at: &Pair<'_>) -> Result<Vec<bool>, ParseError> {
    let words = match v {
        Value::Words(w) => w,
        Value::Word(w) => vec![w],
        _ => return err_at(at, "expected a list of true/false, such as {true,false}"),
    };
    words
        .iter()
        .map(|w| match w.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => err_at(at, format!("expected true or false, found `{other}`")),
        })
        .collect()
}

fn strip_sigil(s: &str) -> &str {
    s.strip_prefix('%').unwrap_or(s)
}

fn int(p: &Pair<'_>) -> Result<i64, ParseError> {
    p.as_str()
        .parse()
        .or_else(|_| err_at(p, format!("integer {} is out of range", p.as_str())))
}

/// The integers of an atomic list token such as `{1, 0}` or `2,3`.
fn ints_in(p: &Pair<'_>) -> Result<Vec<i64>, ParseError> {
    let body = p
        .as_str()
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}');
    ints_of(body, p)
}

/// An array shape's dimensions, and which of them are bounds (`<=8`), one
/// bit each as `ArrayShape::dynamic` holds them.
fn dims_in(p: &Pair<'_>) -> Result<(Vec<i64>, u32), ParseError> {
    let text = p.as_str();
    if !text.bytes().any(|b| b == b'<' || b == b'?') {
        return Ok((ints_of(text, p)?, 0));
    }
    let mut dynamic = 0u32;
    let mut dims = Vec::new();
    for (i, d) in text.split(',').enumerate() {
        let d = d.trim();
        let bound = d.strip_prefix("<=");
        if bound.is_some() || d == "?" {
            if i > crate::ir::shape::MAX_DYNAMIC_DIMENSION {
                return err_at(
                    p,
                    format!(
                        "dimension {i} is dynamic; hlatc keeps dynamic dimensions up to {} only",
                        crate::ir::shape::MAX_DYNAMIC_DIMENSION
                    ),
                );
            }
            dynamic |= 1 << i;
        }
        match d {
            "?" => dims.push(crate::ir::shape::UNBOUNDED),
            _ => dims.extend(ints_of(bound.unwrap_or(d), p)?),
        }
    }
    Ok((dims, dynamic))
}

/// The comma-separated integers of `body` (part of `p`'s text), read
/// by hand: every shape's dims and layout come through here.
fn ints_of(body: &str, p: &Pair<'_>) -> Result<Vec<i64>, ParseError> {
    let bytes = body.as_bytes();
    let mut out = Vec::with_capacity(bytes.iter().filter(|&&b| b == b',').count() + 1);
    let mut i = 0;
    let skip_space = |i: &mut usize| {
        while *i < bytes.len() && bytes[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    skip_space(&mut i);
    if i == bytes.len() {
        return Ok(out);
    }
    loop {
        let start = i;
        let negative = bytes.get(i) == Some(&b'-');
        i += usize::from(negative);
        let mut value: Option<i64> = Some(0);
        let digits_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            let digit = i64::from(bytes[i] - b'0');
            value = value.and_then(|v| v.checked_mul(10)).and_then(|v| {
                if negative {
                    v.checked_sub(digit)
                } else {
                    v.checked_add(digit)
                }
            });
            i += 1;
        }
        match value {
            Some(v) if i > digits_start => out.push(v),
            Some(_) => return err_at(p, format!("expected an integer, found `{}`", body.trim())),
            None => {
                let token = &body[start..i];
                return err_at(p, format!("integer {token} is out of range"));
            }
        }
        skip_space(&mut i);
        if i == bytes.len() {
            return Ok(out);
        }
        if bytes[i] != b',' {
            return err_at(p, format!("expected an integer, found `{}`", body.trim()));
        }
        i += 1;
        skip_space(&mut i);
    }
}

fn shape_index(p: Pair<'_>) -> Result<Vec<i64>, ParseError> {
    p.into_inner().map(|i| int(&i)).collect()
}

fn alias_entry(p: Pair<'_>) -> Result<IoAlias, ParseError> {
    let mut it = p.into_inner();
    let output_index = shape_index(it.next().expect("grammar: output index"))?;
    let parameter = int(&it.next().expect("grammar: parameter"))?;
    let parameter_index = shape_index(it.next().expect("grammar: parameter index"))?;
    let kind = match it.next().map(|k| k.as_str().to_string()).as_deref() {
        Some("must-alias") => AliasKind::MustAlias,
        _ => AliasKind::MayAlias,
    };
    Ok(IoAlias {
        output_index,
        parameter,
        parameter_index,
        kind,
    })
}

fn shape(p: Pair<'_>) -> Result<Shape, ParseError> {
    let inner = p.into_inner().next().expect("grammar: shape has one child");
    match inner.as_rule() {
        Rule::tuple_shape => Ok(Shape::Tuple(
            inner.into_inner().map(shape).collect::<Result<_, _>>()?,
        )),
        Rule::buffer_shape => {
            let held = inner.into_inner().next().expect("grammar: buffer's shape");
            match shape(held)? {
                Shape::Array(a) => Ok(Shape::Buffer(a)),
                other => err_at(&held, format!("a buffer holds an array, not {other}")),
            }
        }
        Rule::array_shape => {
            let mut it = inner.into_inner();
            let ty_pair = it.next().expect("grammar: element type");
            if ty_pair.as_str() == "token" {
                let dims_pair = it.next().expect("grammar: dims");
                return match (dims_pair.as_str().trim(), it.next()) {
                    ("", None) => Ok(Shape::Token),
                    _ => err_at(
                        &inner,
                        "a token is written token[], with no dimensions or layout",
                    ),
                };
            }
            let ty = match ElementType::from_name(ty_pair.as_str()) {
                Some(t) => t,
                None => {
                    let known: Vec<&str> = ElementType::ALL.iter().map(|t| t.name()).collect();
                    return err_at(
                        &ty_pair,
                        format!(
                            "unsupported element type '{}' (supported: {}, and token[])",
                            ty_pair.as_str(),
                            known.join(", ")
                        ),
                    );
                }
            };
            let dims_pair = it.next().expect("grammar: dims");
            let (dims, dynamic) = dims_in(&dims_pair)?;
            // `?` reads as XLA's unbounded size, the one negative allowed.
            if dims.iter().any(|&d| d < 0) {
                if let Some(d) = dims.iter().enumerate().find_map(|(i, &d)| {
                    (d < 0 && !(d == crate::ir::shape::UNBOUNDED && dynamic >> i & 1 == 1))
                        .then_some(d)
                }) {
                    return err_at(&dims_pair, format!("negative dimension {d}"));
                }
            }
            let mut a = ArrayShape::new(ty, dims);
            a.dynamic = dynamic;
            if let Some(layout) = it.next() {
                let text = layout.as_str();
                let (order, tail) = match text.find(':') {
                    Some(colon) => (
                        &text[1..colon],
                        Some((colon + 1, &text[colon + 1..text.len() - 1])),
                    ),
                    None => (&text[1..text.len() - 1], None),
                };
                let m2m = ints_of(order, &layout)?;
                if let Some((offset, tail)) = tail {
                    a.physical = read_text_at(&layout, offset, "layout", || {
                        super::layout::parse_physical_layout(tail)
                    })?;
                }
                if !m2m.is_empty() || a.rank() == 0 {
                    if m2m.len() != a.rank() {
                        return err_at(
                            &layout,
                            format!("layout has {} entries for rank {}", m2m.len(), a.rank()),
                        );
                    }
                    a.minor_to_major = m2m;
                }
            }
            Ok(Shape::Array(a))
        }
        r => unreachable!("grammar: unexpected {r:?} in shape"),
    }
}

/// A parsed attribute value, before the opcode gives it meaning.
#[derive(Debug, Clone)]
pub(super) enum Value {
    Str(String),
    Number(String),
    Word(String),
    Ints(Vec<i64>),
    Words(Vec<String>),
    Map(Vec<(String, Value)>),
    Slices(Vec<SliceDim>),
    Padding(Vec<PadDim>),
    Shapes(Vec<Shape>),
    Shape(Shape),
    /// `s32[2]{0} {1, 2}`: a shape and a value of it.
    Literal(Literal),
    /// A braced value no other form reads (its text); no attribute hlatc
    /// models takes one.
    Raw(String),
}

impl Value {
    pub(super) fn kind(&self) -> String {
        match self {
            Value::Str(_) => "a string".to_string(),
            Value::Number(_) => "a number".to_string(),
            Value::Word(_) => "a word".to_string(),
            Value::Ints(_) => "an integer list".to_string(),
            Value::Words(_) => "a word list".to_string(),
            Value::Map(_) => "a key=value map".to_string(),
            Value::Slices(_) => "slice ranges".to_string(),
            Value::Padding(_) => "a padding spec".to_string(),
            Value::Shapes(_) => "a shape list".to_string(),
            Value::Shape(s) => format!("the shape {s}"),
            Value::Literal(l) => format!("the {} literal {l}", l.shape),
            Value::Raw(text) => {
                let short: String = text.chars().take(60).collect();
                let more = if text.chars().count() > 60 { "..." } else { "" };
                format!("`{short}{more}`")
            }
        }
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self, Value::Word(s) | Value::Number(s) if s == w)
    }

    fn into_string_map(self, at: &Pair<'_>) -> Result<BTreeMap<String, String>, ParseError> {
        match self {
            Value::Map(kvs) => kvs
                .into_iter()
                .map(|(k, v)| match v {
                    Value::Str(s) | Value::Word(s) | Value::Number(s) => Ok((k, s)),
                    // A dictionary written unquoted, as Shardy's meshes
                    // are (`xla.sdy.meshes={mesh = #sdy.mesh<...>}`): XLA
                    // keeps its text, braces included, as the value.
                    Value::Raw(s) if s.starts_with('{') => Ok((k, s)),
                    other => err_at(
                        at,
                        format!("attribute '{k}' must be a string, got {}", other.kind()),
                    ),
                })
                .collect(),
            Value::Ints(v) if v.is_empty() => Ok(BTreeMap::new()),
            other => err_at(
                at,
                format!("expected a {{key=\"value\"}} map, got {}", other.kind()),
            ),
        }
    }
}

fn value(p: Pair<'_>) -> Result<Value, ParseError> {
    Ok(match p.as_rule() {
        Rule::string => {
            let raw = p.into_inner().next().map(|s| s.as_str()).unwrap_or("");
            match unescape(raw) {
                Some(s) => Value::Str(s),
                None => return err_at(&p, "malformed escape sequence in string"),
            }
        }
        Rule::number => Value::Number(p.as_str().to_string()),
        Rule::word => Value::Word(strip_sigil(p.as_str()).to_string()),
        Rule::int_list => Value::Ints(ints_in(&p)?),
        Rule::word_list => Value::Words(p.into_inner().map(|w| w.as_str().to_string()).collect()),
        Rule::raw_value | Rule::arrow_value => Value::Raw(p.as_str().to_string()),
        Rule::shape_list => Value::Shapes(p.into_inner().map(shape).collect::<Result<_, _>>()?),
        Rule::shape => Value::Shape(shape(p)?),
        Rule::shaped_literal => {
            let mut it = p.into_inner();
            let shape_pair = it.next().expect("grammar: shape");
            let declared = shape(shape_pair)?;
            match it.next() {
                None => Value::Shape(declared),
                // Read as a constant's value is (one scalar for many
                // elements included), as XLA reads it.
                Some(lit) => Value::Literal(literal(lit, &declared, &shape_pair)?.0),
            }
        }
        Rule::kv_map => Value::Map(
            p.into_inner()
                .map(|kv| {
                    let mut it = kv.into_inner();
                    let k = it.next().expect("grammar: key").as_str().to_string();
                    Ok((k, value(it.next().expect("grammar: value"))?))
                })
                .collect::<Result<_, ParseError>>()?,
        ),
        Rule::slice_list => Value::Slices(
            p.into_inner()
                .map(|s| {
                    let v: Vec<i64> = s.into_inner().map(|i| int(&i)).collect::<Result<_, _>>()?;
                    Ok(SliceDim {
                        start: v[0],
                        limit: v[1],
                        stride: v.get(2).copied().unwrap_or(1),
                    })
                })
                .collect::<Result<_, ParseError>>()?,
        ),
        Rule::padding => {
            let mut dims = Vec::new();
            for d in p.as_str().split('x') {
                let v: Vec<i64> = match d.split('_').map(str::parse).collect() {
                    Ok(v) => v,
                    Err(_) => return err_at(&p, format!("malformed padding '{d}'")),
                };
                dims.push(PadDim {
                    low: v[0],
                    high: v[1],
                    interior: v.get(2).copied().unwrap_or(0),
                });
            }
            Value::Padding(dims)
        }
        r => unreachable!("grammar: unexpected {r:?} as attribute value"),
    })
}

fn attribute(p: Pair<'_>) -> Result<(String, Value, Pair<'_>), ParseError> {
    let mut it = p.into_inner();
    let key = it
        .next()
        .expect("grammar: attribute name")
        .as_str()
        .to_string();
    let v = value(it.next().expect("grammar: attribute value"))?;
    Ok((key, v, p))
}

/// The attributes of one instruction, consumed by the opcode that owns them;
/// whatever is left over is reported as unsupported.
/// An attribute's value as an integer list (`key={0,1}`).
pub(super) fn ints_value(key: &str, (v, p): (Value, Pair<'_>)) -> Result<Vec<i64>, ParseError> {
    match v {
        Value::Ints(v) => Ok(v),
        other => err_at(
            &p,
            format!(
                "'{key}' must be an integer list like {{0,1}}, got {}",
                other.kind()
            ),
        ),
    }
}

/// An attribute's value as an integer (`key=3`).
pub(super) fn int_value(key: &str, (v, p): (Value, Pair<'_>)) -> Result<i64, ParseError> {
    match v {
        Value::Number(n) => n
            .parse()
            .or_else(|_| err_at(&p, format!("'{key}' must be an integer, got {n}"))),
        other => err_at(
            &p,
            format!("'{key}' must be an integer, got {}", other.kind()),
        ),
    }
}

/// An attribute's value as a bare word (`key=name`), with where it is.
pub(super) fn word_value<'i>(
    key: &str,
    (v, p): (Value, Pair<'i>),
) -> Result<(String, Pair<'i>), ParseError> {
    match v {
        Value::Word(w) => Ok((w, p)),
        other => err_at(
            &p,
            format!("'{key}' must be a bare word, got {}", other.kind()),
        ),
    }
}

/// An attribute's value as `true` or `false`.
pub(super) fn flag_value(key: &str, (v, p): (Value, Pair<'_>)) -> Result<bool, ParseError> {
    match v {
        Value::Word(w) => match w.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => err_at(&p, format!("'{key}' must be true or false, got {w}")),
        },
        other => err_at(
            &p,
            format!("'{key}' must be true or false, got {}", other.kind()),
        ),
    }
}

pub(super) struct Attrs<'i> {
    pub(super) map: BTreeMap<String, (Value, Pair<'i>)>,
    pub(super) at: Pair<'i>,
    opcode: String,
    /// The op an async start's short form (`call-start`, ...) wraps,
    /// for the computation the reader builds around it. Boxed: rare, and
    /// every instruction carries the slot.
    wrapped: Option<Box<Op>>,
}

impl<'i> Attrs<'i> {
    pub(super) fn take(&mut self, key: &str) -> Option<(Value, Pair<'i>)> {
        self.map.remove(key)
    }

    fn required(&mut self, key: &str) -> Result<(Value, Pair<'i>), ParseError> {
        match self.take(key) {
            Some(v) => Ok(v),
            None => err_at(&self.at, format!("{} needs attribute '{key}'", self.opcode)),
        }
    }

    pub(super) fn ints(&mut self, key: &str) -> Result<Vec<i64>, ParseError> {
        ints_value(key, self.required(key)?)
    }

    pub(super) fn ints_or_empty(&mut self, key: &str) -> Result<Vec<i64>, ParseError> {
        if self.map.contains_key(key) {
            self.ints(key)
        } else {
            Ok(Vec::new())
        }
    }

    pub(super) fn int(&mut self, key: &str) -> Result<i64, ParseError> {
        int_value(key, self.required(key)?)
    }

    /// A float attribute, read as XLA reads it: as a double, then rounded
    /// to f32.
    fn f32(&mut self, key: &str) -> Result<F32Bits, ParseError> {
        match self.required(key)? {
            (Value::Number(n), p) => n
                .parse::<f64>()
                .map(|v| F32Bits::new(v as f32))
                .or_else(|_| err_at(&p, format!("'{key}' must be a number, got {n}"))),
            (other, p) => err_at(
                &p,
                format!("'{key}' must be a number, got {}", other.kind()),
            ),
        }
    }

    pub(super) fn optional_int(&mut self, key: &str) -> Result<Option<i64>, ParseError> {
        if self.map.contains_key(key) {
            self.int(key).map(Some)
        } else {
            Ok(None)
        }
    }

    pub(super) fn word(&mut self, key: &str) -> Result<(String, Pair<'i>), ParseError> {
        word_value(key, self.required(key)?)
    }

    pub(super) fn string(&mut self, key: &str) -> Result<Option<String>, ParseError> {
        match self.take(key) {
            None => Ok(None),
            Some((Value::Str(s), _)) => Ok(Some(s)),
            Some((other, p)) => err_at(
                &p,
                format!("'{key}' must be a quoted string, got {}", other.kind()),
            ),
        }
    }

    /// `backend_config`: a quoted string, or JSON written bare
    /// (`backend_config={"k":1}`), kept as its text.
    fn backend_config(&mut self) -> Result<String, ParseError> {
        match self.take("backend_config") {
            None => Ok(String::new()),
            Some((Value::Str(s), _)) => Ok(s),
            Some((Value::Raw(text), _)) if text.starts_with('{') => Ok(text),
            Some((Value::Ints(v), _)) if v.is_empty() => Ok("{}".to_string()),
            Some((other, p)) => err_at(
                &p,
                format!(
                    "'backend_config' must be a quoted string or a JSON object, got {}",
                    other.kind()
                ),
            ),
        }
    }

    pub(super) fn flag(&mut self, key: &str) -> Result<bool, ParseError> {
        self.take(key).map_or(Ok(false), |v| flag_value(key, v))
    }

    /// An attribute's value as written (`window={size=3 pad=1_1}` gives
    /// `{size=3 pad=1_1}`): for values with a syntax of their own, which
    /// the attribute grammar reads as raw text or, by accident, as a map.
    fn text(&mut self, key: &str) -> Option<(String, Pair<'i>)> {
        let (_, p) = self.take(key)?;
        let written = p.as_str().split_once('=').map_or("", |(_, v)| v.trim());
        Some((written.to_string(), p))
    }

    /// `window={...}`; an op without one slides over no dimensions.
    pub(super) fn window(&mut self) -> Result<Window, ParseError> {
        let Some((text, p)) = self.text("window") else {
            return Ok(Window::default());
        };
        let inner = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .map_or_else(
                || err_at(&p, "'window' must be braced: window={size=3x3 ...}"),
                Ok,
            )?;
        Window::parse(inner).or_else(|e| err_at(&p, e))
    }

    /// `output_to_operand_aliasing={{0}: (1, {})}`; none when not written.
    pub(super) fn operand_aliasing(&mut self) -> Result<Vec<OperandAlias>, ParseError> {
        match self.text("output_to_operand_aliasing") {
            None => Ok(Vec::new()),
            Some((text, p)) => OperandAlias::parse_list(&text).or_else(|e| err_at(&p, e)),
        }
    }

    /// `dim_labels=b01f_01io->b01f`, when written.
    pub(super) fn dim_labels(&mut self) -> Result<Option<ConvDims>, ParseError> {
        self.text("dim_labels")
            .map(|(labels, p)| ConvDims::parse(&labels).or_else(|e| err_at(&p, e)))
            .transpose()
    }

    pub(super) fn precision(&mut self) -> Result<Vec<Precision>, ParseError> {
        match self.take("operand_precision") {
            None => Ok(Vec::new()),
            Some((Value::Words(ws), p)) => ws
                .iter()
                // XLA reads the names in any case (`HIGH` as `high`).
                .map(|w| {
                    Precision::from_name(&w.to_ascii_lowercase())
                        .map_or_else(|| err_at(&p, format!("unknown precision '{w}'")), Ok)
                })
                .collect(),
            Some((other, p)) => err_at(
                &p,
                format!(
                    "'operand_precision' must be a word list, got {}",
                    other.kind()
                ),
            ),
        }
    }

    fn finish(self) -> Result<(), ParseError> {
        if let Some((key, (_, p))) = self.map.into_iter().next() {
            return err_at(
                &p,
                format!("unsupported attribute '{key}' on {}", self.opcode),
            );
        }
        Ok(())
    }
}

struct PendingInstr<'i> {
    id: InstrId,
    operands: Vec<OperandRef<'i>>,
    /// Written without a result shape, or with one XLA's parser replaces:
    /// inferred once its operands are.
    unshaped: Option<(Pair<'i>, Option<Shape>)>,
}

/// An operand as written: a name to look up once the computation is read,
/// or an instruction written in its place, already added.
enum OperandRef<'i> {
    Named(Pair<'i>),
    Nested(InstrId),
}

/// Where an instruction's shape comes from: the operands (written without
/// one, or one XLA's parser replaces, kept for the note) or as written.
fn shape_source<'i>(
    op: &Op,
    declared: &Shape,
    unshaped: bool,
    at: Pair<'i>,
) -> Option<(Pair<'i>, Option<Shape>)> {
    if xla_derives_shape(op) {
        Some((at, (!unshaped).then(|| declared.clone())))
    } else {
        unshaped.then_some((at, None))
    }
}

/// Adds the instructions written in place of operands, each after its own
/// operands (as XLA adds them, so a schedule of the written order holds),
/// and refers to each by its id. They are named later, when every written
/// name is known, in the order they are written.
fn add_nested<'i>(
    operands: Vec<Pair<'i>>,
    comp: &mut Computation,
    pending: &mut Vec<PendingInstr<'i>>,
    anonymous: &mut Vec<InstrId>,
    notes: &mut Vec<String>,
) -> Result<Vec<OperandRef<'i>>, ParseError> {
    let mut refs = Vec::with_capacity(operands.len());
    for o in operands {
        let is_body = o.into_inner().last().is_some_and(|n| {
            matches!(
                n.as_rule(),
                Rule::op_body | Rule::constant_body | Rule::parameter_body
            )
        });
        if !is_body {
            refs.push(OperandRef::Named(o));
            continue;
        }
        let (instr, inner, unshaped, note) = nested_instruction(o)?;
        notes.extend(note);
        let source = shape_source(&instr.op, &instr.shape, unshaped, o);
        let slot = anonymous.len();
        anonymous.push(InstrId::end());
        let inner = add_nested(inner, comp, pending, anonymous, notes)?;
        let id = comp.add(instr, &[]);
        anonymous[slot] = id;
        pending.push(PendingInstr {
            id,
            operands: inner,
            unshaped: source,
        });
        refs.push(OperandRef::Nested(id));
    }
    Ok(refs)
}

/// Names each instruction written in place of an operand as XLA does,
/// `{opcode}.anon`, then `.anon.1`, ... past every name already taken.
fn name_nested(comp: &mut Computation, anonymous: &[InstrId], written: &FxHashMap<&str, InstrId>) {
    let mut taken: FxHashSet<String> = FxHashSet::default();
    for &id in anonymous {
        let base = format!("{}.anon", comp.instr(id).op.opcode());
        let mut name = base.clone();
        let mut k = 0;
        while written.contains_key(name.as_str()) || taken.contains(&name) {
            k += 1;
            name = format!("{base}.{k}");
        }
        taken.insert(name.clone());
        comp.instr_mut(id).name = name;
    }
}

/// One computation, and the computations its short-form async starts wrap
/// (which come before it, as callees do).
// Kept out of line: inlined into `parse_module_noted` it cost the JAX 7B
// step's parse 2% more instructions (callgrind: 188.2 M against 184.0 M).
#[inline(never)]
fn computation(
    p: Pair<'_>,
    callees: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
    notes: &mut Vec<String>,
) -> Result<(Computation, bool, Vec<Computation>), ParseError> {
    let mut it = p.into_inner().peekable();
    let is_entry = it.peek().is_some_and(|q| q.as_rule() == Rule::entry_kw);
    if is_entry {
        it.next();
    }
    let name_pair = it.next().expect("grammar: computation name");
    let written = p
        .into_inner()
        .filter(|q| q.as_rule() == Rule::instruction)
        .count();
    let mut comp = Computation::with_capacity(strip_sigil(name_pair.as_str()), written);
    let mut pending = Vec::with_capacity(written);
    let mut control = Vec::new();
    let mut by_name: FxHashMap<&str, InstrId> =
        FxHashMap::with_capacity_and_hasher(written, Default::default());
    let mut anonymous = Vec::new();
    let mut wrapped_ops = Vec::new();
    let mut hoisted = Vec::new();
    let mut async_without_callee = false;
    let mut root = None;
    let mut last = None;
    for q in it {
        match q.as_rule() {
            Rule::signature => {}
            Rule::attribute => {
                let (key, value, at) = attribute(q)?;
                match (key.as_str(), value) {
                    ("execution_thread", Value::Str(thread)) => {
                        comp.execution_thread =
                            (thread != crate::ir::computation::MAIN_THREAD).then_some(thread)
                    }
                    ("execution_thread", other) => {
                        return err_at(
                            &at,
                            format!(
                                "'execution_thread' must be a quoted string, got {}",
                                other.kind()
                            ),
                        )
                    }
                    _ => return err_at(&at, format!("unsupported computation attribute '{key}'")),
                }
            }
            Rule::instruction => {
                let ParsedInstruction {
                    instr,
                    operands,
                    is_root,
                    at,
                    unshaped,
                    control: written_control,
                    source_name,
                    note,
                    wrapped,
                    inline,
                } = instruction(q)?;
                notes.extend(note);
                let source = shape_source(&instr.op, &instr.shape, unshaped, at);
                async_without_callee |=
                    matches!(&instr.op, Op::Async { calls, .. } if calls.is_empty());
                // Operands written in place come first, as in XLA.
                let operands =
                    add_nested(operands, &mut comp, &mut pending, &mut anonymous, notes)?;
                let id = comp.add(instr, &[]);
                if !inline.is_empty() {
                    let op = &mut comp.instr_mut(id).op;
                    adopt_inline(&mut hoisted, inline, op, &|n| callees(n).is_some());
                }
                if let Some(op) = wrapped {
                    wrapped_ops.push((id, *op, at));
                }
                if by_name.insert(source_name, id).is_some() {
                    let name = &comp.instr(id).name;
                    return err_at(&at, format!("instruction name '{name}' is defined twice"));
                }
                if is_root {
                    if root.is_some() {
                        return err_at(&at, "a second ROOT instruction");
                    }
                    root = Some(id);
                }
                last = Some(id);
                if let Some(c) = written_control {
                    control.push((id, c));
                }
                pending.push(PendingInstr {
                    id,
                    operands,
                    unshaped: source,
                });
            }
            r => unreachable!("grammar: unexpected {r:?} in computation"),
        }
    }
    // Operands may name instructions defined further down, as in XLA.
    let mut edges = Vec::with_capacity(pending.len());
    let mut unshaped = Vec::new();
    for PendingInstr {
        id,
        operands,
        unshaped: without_shape,
    } in pending
    {
        let mut ids = Vec::with_capacity(operands.len());
        for o in operands {
            let o = match o {
                OperandRef::Nested(nid) => {
                    ids.push(nid);
                    continue;
                }
                OperandRef::Named(o) => o,
            };
            let name_pair = o.into_inner().last().expect("grammar: operand name");
            let n = strip_sigil(name_pair.as_str());
            match by_name.get(n) {
                Some(&oid) => ids.push(oid),
                None => {
                    return err_at(
                        &name_pair,
                        format!(
                            "operand '{n}' is not defined in computation '{}'",
                            comp.name
                        ),
                    )
                }
            }
        }
        if let Some((at, written)) = without_shape {
            unshaped.push((id, ids.clone(), at, written));
        }
        edges.push((id, ids));
    }
    for (id, ops) in edges {
        comp.connect_operands(id, &ops);
    }
    for (id, (names, at)) in control {
        for n in names {
            match by_name.get(n.as_str()) {
                Some(&pred) => comp.add_control_dependency(pred, id),
                None => {
                    return err_at(
                        &at,
                        format!(
                            "control predecessor '{n}' is not defined in computation '{}'",
                            comp.name
                        ),
                    )
                }
            }
        }
    }
    name_nested(&mut comp, &anonymous, &by_name);
    // Computations written inline come first: a wrapped op may call one.
    let before = |n: &str| {
        hoisted
            .iter()
            .find(|c: &&Computation| c.name == n)
            .and_then(Computation::signature)
            .or_else(|| callees(n))
    };
    let mut wrapped = wrap_async_starts(&mut comp, wrapped_ops, &before)?;
    if async_without_callee {
        crate::ir::async_ops::find_async_callees(&mut comp).or_else(|m| err_at(&name_pair, m))?;
    }
    hoisted.append(&mut wrapped);
    let wrapped = hoisted;
    let callees = |n: &str| {
        wrapped
            .iter()
            .find(|c| c.name == n)
            .and_then(Computation::signature)
            .or_else(|| callees(n))
    };
    infer_unwritten_shapes(&mut comp, unshaped, &callees, notes)?;
    match root.or(last) {
        Some(r) => comp.set_root(r),
        None => {
            return err_at(
                &name_pair,
                format!("computation '{}' has no instructions", comp.name),
            )
        }
    }
    Ok((comp, is_entry, wrapped))
}

/// For each short-form async start (`call-start(a, b), to_apply=f`), the
/// computation XLA's reader builds around the op it wraps: one parameter
/// per operand, of the shapes the start's bundle lists, and the op as the
/// root, of the bundle's result shape. The computation is named
/// `async_wrapped` (made unique against `taken`), as XLA names it.
fn wrap_async_starts(
    comp: &mut Computation,
    starts: Vec<(InstrId, Op, Pair<'_>)>,
    taken: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
) -> Result<Vec<Computation>, ParseError> {
    let mut made: Vec<Computation> = Vec::new();
    for (id, op, at) in starts {
        let start = comp.instr(id);
        let (params, result) = match &start.shape {
            Shape::Tuple(parts) if parts.len() >= 2 => match &parts[0] {
                Shape::Tuple(params) => (params.clone(), parts[1].clone()),
                other => (vec![other.clone()], parts[1].clone()),
            },
            other => {
                return err_at(
                    &at,
                    format!(
                        "{}-start needs its bundle shape ((operands), result, context...) written, got {other}",
                        op.opcode()
                    ),
                )
            }
        };
        let mut name = "async_wrapped".to_string();
        let mut k = 0;
        while taken(&name).is_some() || made.iter().any(|c| c.name == name) {
            k += 1;
            name = format!("async_wrapped.{k}");
        }
        let mut wrapped = Computation::new(name.clone());
        wrapped.execution_thread = match &start.op {
            Op::Async { thread, .. } => thread.clone(),
            _ => None,
        };
        let args: Vec<InstrId> = params
            .into_iter()
            .enumerate()
            .map(|(i, shape)| {
                let param =
                    Instruction::new(format!("{name}.param.{i}"), shape, Op::Parameter(i as i64));
                wrapped.add(param, &[])
            })
            .collect();
        let root_name = format!("{name}.{}", op.opcode());
        let root = wrapped.add(Instruction::new(root_name, result, op), &args);
        wrapped.set_root(root);
        if let Op::Async { calls, .. } = &mut comp.instr_mut(id).op {
            *calls = name;
        }
        made.push(wrapped);
    }
    Ok(made)
}

/// The ops whose result shape XLA's parser derives from their operands,
/// whatever shape is written: XLA builds them with constructors that take
/// no shape, so a written one that differs (an older tuple form of a send,
/// say) is replaced, not refused.
fn xla_derives_shape(op: &Op) -> bool {
    match op {
        Op::AfterAll | Op::AddDependency | Op::Outfeed { .. } => true,
        Op::Transfer(t) => t.step != TransferStep::Recv,
        _ => false,
    }
}

/// An instruction whose shape is inferred: its operands, where it is, and
/// the shape written for it, if any (which XLA's parser would replace).
type Unshaped<'i> = (InstrId, Vec<InstrId>, Pair<'i>, Option<Shape>);

/// Gives each instruction written without a result shape, or whose shape
/// XLA's parser derives, the one its op infers from its operands, operands
/// first (they may be unwritten too). A written shape that differs is
/// replaced, with a note.
fn infer_unwritten_shapes(
    comp: &mut Computation,
    mut todo: Vec<Unshaped<'_>>,
    callees: &dyn Fn(&str) -> Option<crate::analysis::shape_inference::CalleeSignature>,
    notes: &mut Vec<String>,
) -> Result<(), ParseError> {
    let mut unknown: std::collections::HashSet<InstrId> = todo.iter().map(|t| t.0).collect();
    while !todo.is_empty() {
        let before = todo.len();
        let mut waiting = Vec::new();
        for (id, operands, at, written) in todo {
            if operands.iter().any(|o| unknown.contains(o)) {
                waiting.push((id, operands, at, written));
                continue;
            }
            let shapes: Vec<&Shape> = operands.iter().map(|&o| &comp.instr(o).shape).collect();
            let instr = comp.instr(id);
            let shape = match crate::analysis::shape_inference::infer_shape(
                &instr.op, &shapes, None, callees,
            ) {
                Ok(s) => s,
                // A shape XLA would derive from operands that give none:
                // the written one stays, for the verifier to refuse.
                Err(_) if written.is_some() => {
                    unknown.remove(&id);
                    continue;
                }
                Err(e) => {
                    return err_at(
                        &at,
                        format!(
                            "'{}' has no result shape and {} cannot infer one: {e}",
                            instr.name,
                            instr.op.opcode()
                        ),
                    )
                }
            };
            let shape = with_inferred_layout(shape, &instr.op, &shapes);
            if let Some(w) = written.filter(|w| *w != shape) {
                let (line, col) = at.line_col();
                notes.push(format!(
                    "{line}:{col}: '{}' is written as {w}; XLA's parser gives a {} the shape {shape} \
                     its operands make, and so does hlatc",
                    instr.name,
                    instr.op.opcode()
                ));
            }
            comp.instr_mut(id).shape = shape;
            unknown.remove(&id);
        }
        if waiting.len() == before {
            let at = &waiting[0].2;
            return err_at(
                at,
                format!(
                    "'{}' has no result shape and its operands' shapes depend on it",
                    comp.instr(waiting[0].0).name
                ),
            );
        }
        todo = waiting;
    }
    Ok(())
}

/// The layout XLA's parser gives an inferred shape: an elementwise op's
/// is its first operand's, a transpose's is its operand's permuted (so the
/// transpose moves no bytes), any other op's the default.
fn with_inferred_layout(mut shape: Shape, op: &Op, operands: &[&Shape]) -> Shape {
    let Shape::Array(out) = &mut shape else {
        return shape;
    };
    // XLA's inference copies one operand's shape: a select's `on_true`, a
    // clamp's operand, otherwise the first. Its whole layout comes along
    // (tiles, element size) where the element type stays.
    let copied = match op {
        Op::Select | Op::Clamp => operands.get(1),
        _ => operands.first(),
    };
    let first = copied.and_then(|s| s.as_array());
    let elementwise = matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Compare { .. } | Op::Select | Op::Clamp
    );
    match (op, first) {
        (_, Some(a)) if elementwise && a.dims == out.dims => {
            out.minor_to_major = a.minor_to_major.clone();
            if a.ty == out.ty {
                out.physical = a.physical.clone();
            }
        }
        (Op::Transpose { permutation }, Some(a)) if permutation.len() == a.rank() => {
            let mut inverse = vec![0; permutation.len()];
            for (i, &p) in permutation.iter().enumerate() {
                if let Some(slot) = usize::try_from(p).ok().and_then(|p| inverse.get_mut(p)) {
                    *slot = i as i64;
                }
            }
            out.minor_to_major = a
                .minor_to_major
                .iter()
                .map(|&d| {
                    usize::try_from(d)
                        .ok()
                        .and_then(|d| inverse.get(d))
                        .copied()
                        .unwrap_or(d)
                })
                .collect();
        }
        _ => {}
    }
    shape
}

/// An instruction as written, before names resolve.
struct ParsedInstruction<'i> {
    instr: Instruction,
    operands: Vec<Pair<'i>>,
    is_root: bool,
    at: Pair<'i>,
    unshaped: bool,
    /// `control-predecessors={a, b}`: the names, and where they are.
    control: Option<(Vec<String>, Pair<'i>)>,
    /// The name as written, without its sigil: the key operands name it by.
    source_name: &'i str,
    /// What reading it changed or assumed, for the module's notes.
    note: Option<String>,
    /// The op a short-form async start wraps (see [`Attrs::wrapped`]).
    wrapped: Option<Box<Op>>,
    /// Computations written inline as an attribute's value
    /// (`to_apply={ ... }`), callees first; the op names the last as `_`.
    inline: Vec<Computation>,
}

/// The op an instruction's body writes, its operands as written, and a
/// note when reading it assumed something. Shared by named instructions and
/// those written in place of an operand.
fn instruction_body<'i>(
    body: Pair<'i>,
    shape_pair: Option<Pair<'i>>,
    declared: &Shape,
    name: &str,
    attrs: &mut Attrs<'i>,
) -> Result<(Op, Vec<Pair<'i>>, Option<String>), ParseError> {
    if shape_pair.is_none() && body.as_rule() != Rule::op_body {
        return err_at(
            &body,
            "a parameter or constant needs its result shape written",
        );
    }
    let mut operands = Vec::new();
    let mut note = None;
    let op = match body.as_rule() {
        Rule::parameter_body => {
            attrs.opcode = "parameter".into();
            Op::Parameter(int(&body
                .into_inner()
                .next()
                .expect("grammar: parameter number"))?)
        }
        Rule::constant_body => {
            attrs.opcode = "constant".into();
            let lit = body.into_inner().next().expect("grammar: literal");
            if lit.as_rule() == Rule::elided {
                return err_at(
                    &lit,
                    "constant value was elided as {...}; dump with large constants printed",
                );
            }
            let shape_pair = shape_pair.expect("checked: written");
            if let Shape::Tuple(_) = declared {
                return match literal_tree(lit, declared, &shape_pair)? {
                    LiteralTree::Tuple(elems) => Ok((Op::TupleConstant(elems), Vec::new(), None)),
                    LiteralTree::Array(_) => unreachable!("a tuple shape reads as a tuple"),
                };
            }
            let (value, reading) = literal(lit, declared, &shape_pair)?;
            // Where the note points is found only for a note: finding a
            // line and column scans the text from its start.
            let at = || {
                let (line, col) = lit.line_col();
                format!("{line}:{col}: '{name}'")
            };
            note = match reading {
                LiteralReading::AsWritten => None,
                LiteralReading::FirstOnly => Some(format!(
                    "{} writes one value for {declared}; XLA's parser makes it the first element and every other element zero, and so does hlatc",
                    at()
                )),
                LiteralReading::ComplexNan => Some(format!(
                    "{} writes a complex value with a NaN part; XLA's parser copies a NaN real part into the imaginary part and reads an imaginary NaN through f64, and so does hlatc",
                    at()
                )),
            };
            Op::Constant(value)
        }
        Rule::op_body => {
            let mut bi = body.into_inner();
            let opcode_pair = bi.next().expect("grammar: opcode");
            operands = bi.collect();
            attrs.opcode = opcode_pair.as_str().to_string();
            op_from_attrs(&opcode_pair, attrs)?
        }
        r => unreachable!("grammar: unexpected {r:?} as instruction body"),
    };
    Ok((op, operands, note))
}

/// An instruction written in place of an operand: its op, its own operands,
/// whether it was written without a shape, and a note. It has no name until
/// [`name_nested`] gives it XLA's, and no attributes.
fn nested_instruction<'i>(
    p: Pair<'i>,
) -> Result<(Instruction, Vec<Pair<'i>>, bool, Option<String>), ParseError> {
    let mut it = p.into_inner();
    let first = it.next().expect("grammar: nested body");
    let (shape_pair, body) = if first.as_rule() == Rule::shape {
        (Some(first), it.next().expect("grammar: nested body"))
    } else {
        (None, first)
    };
    let declared = match &shape_pair {
        Some(s) => shape(*s)?,
        None => Shape::Tuple(Vec::new()),
    };
    let mut attrs = Attrs {
        map: BTreeMap::new(),
        at: p,
        opcode: String::new(),
        wrapped: None,
    };
    let (op, operands, note) =
        instruction_body(body, shape_pair, &declared, "(nested)", &mut attrs)?;
    if attrs.wrapped.is_some() {
        return err_at(
            &p,
            "an async start written in place of an operand; give it a name",
        );
    }
    attrs.finish()?;
    let instr = Instruction::new(String::new(), declared, op);
    Ok((instr, operands, shape_pair.is_none(), note))
}

fn instruction<'i>(p: Pair<'i>) -> Result<ParsedInstruction<'i>, ParseError> {
    let at = p;
    let mut it = p.into_inner().peekable();
    let is_root = it.peek().is_some_and(|q| q.as_rule() == Rule::root_kw);
    if is_root {
        it.next();
    }
    let source_name = strip_sigil(it.next().expect("grammar: name").as_str());
    let name = source_name.to_string();
    let shape_pair = it.next_if(|q| q.as_rule() == Rule::shape);
    let unshaped = shape_pair.is_none();
    let declared = match &shape_pair {
        Some(s) => shape(*s)?,
        // A placeholder until the operands are known.
        None => Shape::Tuple(Vec::new()),
    };
    let body = it.next().expect("grammar: body");
    let mut attrs = Attrs {
        map: BTreeMap::new(),
        at,
        opcode: String::new(),
        wrapped: None,
    };
    let mut inline = Vec::new();
    for a in it {
        let (k, mut v, ap) = attribute(a)?;
        if attrs.map.contains_key(&k) {
            return err_at(&ap, format!("attribute '{k}' given twice"));
        }
        if let Some(hoisted) = inline_computation(&k, &v, &ap)? {
            inline.extend(hoisted);
            v = Value::Word(INLINE_NAME.to_string());
        }
        attrs.map.insert(k, (v, ap));
    }
    let (op, operands, note) = instruction_body(body, shape_pair, &declared, &name, &mut attrs)?;
    let wrapped = attrs.wrapped.take();
    let metadata = match attrs.take("metadata") {
        None => Metadata::default(),
        Some((v, p)) => metadata(v.into_string_map(&p)?, &p)?,
    };
    let frontend_attributes = match attrs.take("frontend_attributes") {
        None => BTreeMap::new(),
        Some((v, p)) => v.into_string_map(&p)?,
    };
    let sharding = match attrs.take("sharding") {
        None => None,
        Some((_, p)) => Some(sharding(&p)?),
    };
    let backend_config = attrs.backend_config()?;
    let parameter_replication = parameter_replication(&mut attrs)?;
    // Rare: most instructions have no attribute left by now, and three
    // lookups each were 1% of parsing a JAX dump.
    let (statistics, result_accuracy, original_value) = if attrs.map.is_empty() {
        (None, None, None)
    } else {
        annotations(&mut attrs, &op)?
    };
    let control = match attrs.take("control-predecessors") {
        None => None,
        Some((Value::Words(names), p)) => Some((
            names.iter().map(|n| strip_sigil(n).to_string()).collect(),
            p,
        )),
        Some((Value::Ints(v), p)) if v.is_empty() => Some((Vec::new(), p)),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'control-predecessors' must list instruction names, got {}",
                    other.kind()
                ),
            )
        }
    };
    attrs.finish()?;
    let instr = Instruction {
        name,
        shape: declared,
        op,
        metadata,
        frontend_attributes,
        sharding,
        backend_config,
        parameter_replication,
        statistics,
        result_accuracy,
        original_value,
    };
    Ok(ParsedInstruction {
        instr,
        operands,
        is_root,
        at,
        unshaped,
        control,
        source_name,
        note,
        wrapped,
        inline,
    })
}

/// What XLA's reader names a computation written inline.
const INLINE_NAME: &str = "_";

/// The attributes that name one called computation.
const CALLEE_ATTRIBUTES: [&str; 8] = [
    "to_apply",
    "calls",
    "condition",
    "body",
    "select",
    "scatter",
    "true_computation",
    "false_computation",
];

/// A computation written in place of a callee's name (`to_apply={ x = ...
/// ROOT r = ... }`), read as a module of its own whose entry is named
/// `_`, as XLA's reader names it: its computations, callees first, the
/// inline one last. None when the value is no such body.
fn inline_computation(
    key: &str,
    value: &Value,
    attribute: &Pair<'_>,
) -> Result<Option<Vec<Computation>>, ParseError> {
    let Value::Raw(text) = value else {
        return Ok(None);
    };
    if !CALLEE_ATTRIBUTES.contains(&key) || !text.contains('=') {
        return Ok(None);
    }
    const PREFIX: &str = "HloModule _\n\nENTRY _ ";
    let src = format!("{PREFIX}{text}\n");
    let (m, _) = parse_module_noted(&src).map_err(|e| {
        let value = (*attribute)
            .into_inner()
            .nth(1)
            .expect("grammar: attribute value");
        // Line 3 of the module read holds the value's first line, after
        // the prefix's `ENTRY _ `.
        let (line, column) = value.line_col();
        ParseError {
            line: line + e.line.saturating_sub(3),
            column: if e.line == 3 {
                column
                    + e.column
                        .saturating_sub(PREFIX.len() - "HloModule _\n\n".len() + 1)
            } else {
                e.column
            },
            message: format!(
                "in the computation written inline as '{key}': {}",
                e.message
            ),
        }
    })?;
    let entry = m.entry;
    let mut comps = m.computations;
    let inline = comps.remove(entry);
    comps.push(inline);
    Ok(Some(comps))
}

/// Gives the computations `inline` names no computation in `taken` or
/// already adopted uses (`_`, then `_.1`, ...), renaming their callers
/// among them and in `op`, and adopts them.
fn adopt_inline(
    adopted: &mut Vec<Computation>,
    mut inline: Vec<Computation>,
    op: &mut Op,
    taken: &dyn Fn(&str) -> bool,
) {
    for i in 0..inline.len() {
        let old = inline[i].name.clone();
        let free = |n: &str| {
            !taken(n)
                && !adopted.iter().any(|c| c.name == n)
                && !inline
                    .iter()
                    .enumerate()
                    .any(|(j, c)| j != i && c.name == n)
        };
        if free(&old) {
            continue;
        }
        let base = old.split('.').next().unwrap_or(&old).to_string();
        let new = (1..)
            .map(|k| format!("{base}.{k}"))
            .find(|n| free(n))
            .expect("some suffix is free");
        inline[i].name = new.clone();
        for c in inline.iter_mut() {
            let ids: Vec<_> = c.ids().collect();
            for id in ids {
                for callee in c.instr_mut(id).op.called_computations_mut() {
                    if *callee == old {
                        *callee = new.clone();
                    }
                }
            }
        }
        if i + 1 == inline.len() {
            for callee in op.called_computations_mut() {
                if *callee == old {
                    *callee = new.clone();
                }
            }
        }
    }
    adopted.extend(inline);
}

fn metadata(m: BTreeMap<String, String>, at: &Pair<'_>) -> Result<Metadata, ParseError> {
    metadata_fields(m).or_else(|message| err_at(at, message))
}

/// Metadata from its `key=value` fields, refusing a field it does not know.
fn metadata_fields(mut m: BTreeMap<String, String>) -> Result<Metadata, String> {
    let mut int = |key: &str| -> Result<i64, String> {
        match m.remove(key) {
            Some(s) => s
                .parse()
                .map_err(|_| format!("metadata {key} must be an integer, got {s}")),
            None => Ok(0),
        }
    };
    let source_line = int("source_line")?;
    let source_end_line = int("source_end_line")?;
    let source_column = int("source_column")?;
    let source_end_column = int("source_end_column")?;
    let stack_frame_id = int("stack_frame_id")?;
    let stack_frame_id = i32::try_from(stack_frame_id)
        .map_err(|_| format!("metadata stack_frame_id {stack_frame_id} is out of range"))?;
    let md = Metadata {
        op_type: m.remove("op_type").unwrap_or_default(),
        op_name: m.remove("op_name").unwrap_or_default(),
        source_file: m.remove("source_file").unwrap_or_default(),
        source_line,
        source_end_line,
        source_column,
        source_end_column,
        stack_frame_id,
        scheduling_name: m.remove("scheduling_name").unwrap_or_default(),
        deduplicated_name: m.remove("deduplicated_name").unwrap_or_default(),
    };
    if let Some(key) = m.keys().next() {
        return Err(format!("unsupported metadata field '{key}'"));
    }
    Ok(md)
}

/// An instruction's `statistics=`, `result_accuracy=` (on the ops XLA
/// lets carry it) and `origin=`.
#[allow(clippy::type_complexity)]
fn annotations(
    attrs: &mut Attrs,
    op: &Op,
) -> Result<
    (
        Option<Box<crate::ir::statistics::Statistics>>,
        Option<Box<ResultAccuracy>>,
        Option<Box<crate::ir::original_value::OriginalValue>>,
    ),
    ParseError,
> {
    let statistics = attrs
        .take("statistics")
        .map(|(_, p)| read_whole_value(&p, "statistics", super::annotations::parse_statistics))
        .transpose()?;
    let result_accuracy = match attrs.take("result_accuracy") {
        None => None,
        Some((_, p)) => {
            let accuracy = read_whole_value(&p, "result_accuracy", |text| {
                super::annotations::parse_result_accuracy(text)
            })?;
            // Written, it must fit the op even when it reads as none.
            let problem = match &accuracy {
                Some(a) => a.problem_on(op),
                None => ResultAccuracy::refused_on(op),
            };
            if let Some(problem) = problem {
                return err_at(&p, problem);
            }
            accuracy
        }
    };
    let original_value = attrs
        .take("origin")
        .map(|(_, p)| read_whole_value(&p, "origin", super::annotations::parse_original_value))
        .transpose()?
        .map(Box::new);
    Ok((
        statistics.map(Box::new),
        result_accuracy.map(Box::new),
        original_value,
    ))
}

/// `parameter_replication={true,false}`: one flag per leaf buffer.
fn parameter_replication(attrs: &mut Attrs) -> Result<Option<Vec<bool>>, ParseError> {
    Ok(match attrs.take("parameter_replication") {
        None => None,
        Some((Value::Words(ws), p)) => Some(
            ws.iter()
                .map(|w| match w.as_str() {
                    "true" => Ok(true),
                    "false" => Ok(false),
                    other => err_at(
                        &p,
                        format!("'parameter_replication' lists true or false, got '{other}'"),
                    ),
                })
                .collect::<Result<Vec<bool>, _>>()?,
        ),
        Some((other, p)) => {
            return err_at(
                &p,
                format!(
                    "'parameter_replication' must be a list like {{true,false}}, got {}",
                    other.kind()
                ),
            )
        }
    })
}

/// The sharding of a `sharding=...` attribute, with an error pointing
/// inside its text.
fn sharding(attribute: &Pair<'_>) -> Result<Sharding, ParseError> {
    read_whole_value(attribute, "sharding", |text| {
        super::sharding::parse_sharding(text, &metadata_fields)
    })
}

/// Reads an attribute's value (taken whole by the grammar) with `read`; an
/// error points at the byte inside the value where it went wrong.
fn read_whole_value<T>(
    attribute: &Pair<'_>,
    what: &str,
    read: impl FnOnce(&str) -> Result<T, super::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    let value = (*attribute)
        .into_inner()
        .nth(1)
        .expect("grammar: attribute value");
    read_text_at(&value, 0, what, || read(value.as_str()))
}

/// Runs `read` over text that starts `offset` bytes into `value`; an
/// error points at the byte where it went wrong.
fn read_text_at<T>(
    value: &Pair<'_>,
    offset: usize,
    what: &str,
    read: impl FnOnce() -> Result<T, super::cursor::AttrSyntaxError>,
) -> Result<T, ParseError> {
    read().map_err(|e| {
        let (line, column) = value.line_col_at(offset + e.offset);
        ParseError {
            line,
            column,
            message: format!("{what}: {}", e.message),
        }
    })
}

/// `replica_groups`, `channel_id`, `use_global_device_ids` and
/// `constrain_layout`.
pub(super) fn collective(a: &mut Attrs) -> Result<Collective, ParseError> {
    let replica_groups = match a.take("replica_groups") {
        None => ReplicaGroups::default(),
        Some((Value::Ints(v), _)) if v.is_empty() => ReplicaGroups::default(),
        Some((_, p)) => read_whole_value(&p, "replica_groups", |text| {
            super::collective::parse_replica_groups(text)
        })?,
    };
    Ok(Collective {
        replica_groups,
        channel_id: channel_id(a)?,
        use_global_device_ids: a.flag("use_global_device_ids")?,
        constrain_layout: a.flag("constrain_layout")?,
    })
}

/// `domain={kind="sharding", entry={...}, exit={...}}`: the one kind of
/// domain XLA's text writes.
fn domain(at: &Pair<'_>, a: &mut Attrs) -> Result<Op, ParseError> {
    let (value, p) = a.required("domain")?;
    let Value::Map(entries) = value else {
        return err_at(
            &p,
            format!(
                "'domain' must be {{kind=..., entry=..., exit=...}}, got {}",
                value.kind()
            ),
        );
    };
    let mut kind = None;
    let (mut entry, mut exit) = (None, None);
    for (k, v) in entries {
        match (k.as_str(), v) {
            ("kind", Value::Str(s)) => kind = Some(s),
            ("entry", Value::Raw(text)) => entry = Some(text),
            ("exit", Value::Raw(text)) => exit = Some(text),
            (other, v) => {
                return err_at(
                    &p,
                    format!(
                        "domain has '{other}' ({}), which hlatc does not read",
                        v.kind()
                    ),
                )
            }
        }
    }
    if kind.as_deref() != Some("sharding") {
        return err_at(
            at,
            format!("domain of kind {kind:?}: hlatc reads sharding domains only"),
        );
    }
    let sharding = |text: Option<String>, side: &str| -> Result<Box<Sharding>, ParseError> {
        let Some(text) = text else {
            return err_at(&p, format!("domain needs its {side} sharding"));
        };
        super::sharding::parse_sharding(&text, &metadata_fields)
            .map(Box::new)
            .or_else(|e| err_at(&p, format!("domain {side}: {}", e.message)))
    };
    Ok(Op::Domain {
        entry: sharding(entry, "entry")?,
        exit: sharding(exit, "exit")?,
    })
}

/// `channel_id=N`. XLA reads a non-positive id as none (its proto cannot
/// tell `channel_id=0` from no channel), and so does hlatc.
pub(super) fn channel_id(a: &mut Attrs) -> Result<Option<i64>, ParseError> {
    Ok(a.optional_int("channel_id")?.filter(|&id| id > 0))
}

/// `source_target_pairs={{0,1},...}`.
pub(super) fn source_target_pairs(a: &mut Attrs) -> Result<Vec<(i64, i64)>, ParseError> {
    match a.take("source_target_pairs") {
        None => Ok(Vec::new()),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Vec::new()),
        Some((_, p)) => read_whole_value(&p, "source_target_pairs", |text| {
            super::collective::parse_pairs(text)
        }),
    }
}

/// An in-place collective-permute's `slice_sizes={{1,8},{1,8}}`; none
/// (absent or `{}`) for the other forms.
pub(super) fn permute_slice_sizes(a: &mut Attrs) -> Result<Vec<Vec<i64>>, ParseError> {
    match a.take("slice_sizes") {
        None => Ok(Vec::new()),
        Some((Value::Ints(v), _)) if v.is_empty() => Ok(Vec::new()),
        Some((_, p)) => read_whole_value(&p, "slice_sizes", |text| {
            super::collective::parse_slice_sizes(text)
        }),
    }
}

/// `replica_count=N` / `num_partitions=N`: a positive count.
fn device_count(key: &str, value: &Value, at: &Pair<'_>) -> Result<i64, ParseError> {
    match value {
        Value::Number(n) => match n.parse::<i64>() {
            Ok(v) if v >= 1 => Ok(v),
            _ => err_at(
                at,
                format!("module attribute '{key}' must be a positive integer, got {n}"),
            ),
        },
        other => err_at(
            at,
            format!(
                "module attribute '{key}' must be a positive integer, got {}",
                other.kind()
            ),
        ),
    }
}

fn parse_enum<T>(
    attrs: &mut Attrs,
    key: &str,
    from: fn(&str) -> Option<T>,
    choices: &str,
) -> Result<T, ParseError> {
    let (w, p) = attrs.word(key)?;
    from(&w).map_or_else(
        || {
            err_at(
                &p,
                format!("unknown {key} '{w}' (expected one of {choices})"),
            )
        },
        Ok,
    )
}

/// [`parse_enum`] where the attribute is written, the default where not.
fn optional_enum<T: Default>(
    attrs: &mut Attrs,
    key: &str,
    from: fn(&str) -> Option<T>,
    choices: &str,
) -> Result<T, ParseError> {
    if attrs.map.contains_key(key) {
        parse_enum(attrs, key, from, choices)
    } else {
        Ok(T::default())
    }
}

/// A conditional's branches: `branch_computations={...}`, or the pred
/// form's `true_computation` and `false_computation`.
fn conditional_branches(at: &Pair<'_>, a: &mut Attrs) -> Result<Vec<String>, ParseError> {
    let listed = a.take("branch_computations");
    let pred_form =
        a.map.contains_key("true_computation") || a.map.contains_key("false_computation");
    match listed {
        Some((_, p)) if pred_form => err_at(
            &p,
            "conditional has both branch_computations and true_computation/false_computation",
        ),
        Some((Value::Words(ws), _)) => Ok(ws.iter().map(|w| strip_sigil(w).to_string()).collect()),
        Some((Value::Word(w), _)) => Ok(vec![w]),
        Some((other, p)) => err_at(
            &p,
            format!(
                "'branch_computations' must list computations like {{%a, %b}}, got {}",
                other.kind()
            ),
        ),
        None if pred_form => Ok(vec![
            a.word("true_computation")?.0,
            a.word("false_computation")?.0,
        ]),
        None => err_at(
            at,
            "conditional needs branch_computations={...} or true_computation and false_computation",
        ),
    }
}

fn op_from_attrs(opcode_pair: &Pair<'_>, a: &mut Attrs) -> Result<Op, ParseError> {
    op_named(opcode_pair.as_str(), opcode_pair, a)
}

/// The op `opcode` with its attributes from `a`; `opcode_pair` is where
/// it is written (for a short-form async op, the wrapped op's opcode is
/// part of the word).
fn op_named(opcode: &str, opcode_pair: &Pair<'_>, a: &mut Attrs) -> Result<Op, ParseError> {
    if let Some(op) = Op::without_attributes(opcode) {
        return Ok(op);
    }
    // The op families whose opcodes their step or kind spells.
    if let Some(kind) = BatchNormKind::from_opcode(opcode) {
        return Ok(Op::BatchNorm {
            kind,
            epsilon: a.f32("epsilon")?,
            feature_index: a.int("feature_index")?,
        });
    }
    if let Some(step) = TransferStep::from_opcode(opcode) {
        return Ok(Op::Transfer(Transfer {
            step,
            channel_id: channel_id(a)?,
            is_host_transfer: a.flag("is_host_transfer")?,
        }));
    }
    if let Some(step) = AsyncStep::from_opcode(opcode) {
        // An update or done may leave out the computation: it is its
        // start's, found once the operands are known.
        let calls = if step == AsyncStep::Start || a.map.contains_key("calls") {
            a.word("calls")?.0
        } else {
            String::new()
        };
        return Ok(Op::Async {
            step,
            calls,
            thread: async_thread(a)?,
        });
    }
    let mut described = super::described::TextReader {
        attrs: a,
        opcode,
        last: None,
    };
    if let Some(op) = Op::read_described(opcode, &mut described)? {
        return Ok(op);
    }
    Ok(match opcode {
        "conditional" => Op::Conditional {
            branches: conditional_branches(opcode_pair, a)?,
        },
        "domain" => domain(opcode_pair, a)?,
        "outfeed" => Op::Outfeed {
            config: a.string("outfeed_config")?.unwrap_or_default(),
            shape: match a.take("outfeed_shape") {
                None => None,
                Some((Value::Shape(s), _)) => Some(Box::new(s)),
                Some((other, p)) => {
                    return err_at(
                        &p,
                        format!("'outfeed_shape' must be a shape, got {}", other.kind()),
                    )
                }
            },
        },
        "custom-call" => {
            let target = match a.string("custom_call_target")? {
                Some(t) => t,
                None => return err_at(opcode_pair, "custom-call needs custom_call_target=\"...\""),
            };
            let api_version = optional_enum(
                a,
                "api_version",
                CustomCallApiVersion::from_name,
                "API_VERSION_*",
            )?;
            let convolution = [
                "window",
                "dim_labels",
                "feature_group_count",
                "batch_group_count",
                "operand_precision",
            ]
            .iter()
            .any(|k| a.map.contains_key(*k))
            .then(|| -> Result<_, ParseError> {
                let window = a
                    .map
                    .contains_key("window")
                    .then(|| a.window())
                    .transpose()?;
                Ok(Box::new(CallConvolution {
                    window,
                    dims: a.dim_labels()?,
                    feature_group_count: a.optional_int("feature_group_count")?.unwrap_or(1),
                    batch_group_count: a.optional_int("batch_group_count")?.unwrap_or(1),
                    precision: a.precision()?,
                }))
            })
            .transpose()?;
            let operand_layouts = match a.take("operand_layout_constraints") {
                None => None,
                Some((Value::Shapes(shapes), _)) => Some(shapes),
                Some((Value::Ints(v), _)) if v.is_empty() => Some(Vec::new()),
                Some((other, p)) => {
                    return err_at(
                        &p,
                        format!(
                            "'operand_layout_constraints' must list one shape per operand, got {}",
                            other.kind()
                        ),
                    )
                }
            };
            Op::CustomCall(CustomCall {
                target,
                api_version,
                has_side_effect: a.flag("custom_call_has_side_effect")?,
                schedule: optional_enum(
                    a,
                    "schedule",
                    CustomCallSchedule::from_name,
                    "SCHEDULE_NONE, SCHEDULE_LATEST, SCHEDULE_EARLIEST",
                )?,
                padding_type: optional_enum(
                    a,
                    "padding_type",
                    PaddingType::from_name,
                    "PADDING_INVALID, PADDING_VALID, PADDING_SAME",
                )?,
                literal: match a.take("literal") {
                    None => None,
                    Some((Value::Literal(lit), _)) => Some(Box::new(lit)),
                    Some((other, p)) => {
                        return err_at(
                            &p,
                            format!(
                                "'literal' must be a shape and its value, like s32[2]{{0}} {{1, 2}}, got {}",
                                other.kind()
                            ),
                        )
                    }
                },
                convolution,
                operand_layouts,
                aliasing: a.operand_aliasing()?,
                // XLA's reader takes `to_apply=f` on a custom call as its
                // one called computation, and prints it back as
                // `called_computations={f}` (checked through jaxlib).
                called: match a.take("called_computations") {
                    None => match a.take("to_apply") {
                        None => Vec::new(),
                        Some((Value::Word(name), _)) => vec![strip_sigil(&name).to_string()],
                        Some((other, p)) => {
                            return err_at(
                                &p,
                                format!("'to_apply' must name a computation, got {}", other.kind()),
                            )
                        }
                    },
                    Some((Value::Words(names), _)) => {
                        names.iter().map(|n| strip_sigil(n).to_string()).collect()
                    }
                    Some((Value::Ints(v), _)) if v.is_empty() => Vec::new(),
                    Some((other, p)) => {
                        return err_at(
                            &p,
                            format!(
                                "'called_computations' must list computation names, got {}",
                                other.kind()
                            ),
                        )
                    }
                },
            })
        }
        _ => match async_short_form(opcode, opcode_pair, a)? {
            Some(op) => op,
            None => {
                return err_at(
                    opcode_pair,
                    format!(
                        "unsupported opcode '{opcode}' (supported: {}, and an async form \
                         `<opcode>-start`, `-update`, `-done` of each)",
                        all_opcodes().join(", ")
                    ),
                )
            }
        },
    })
}

/// A dot's (or ragged dot's) dimension numbers, precisions and algorithm.
/// `async_execution_thread="..."`; the main thread is none.
fn async_thread(a: &mut Attrs) -> Result<Option<String>, ParseError> {
    Ok(a.string("async_execution_thread")?
        .filter(|t| t != crate::ir::computation::MAIN_THREAD))
}

/// XLA's short form of the async ops: `call-start(a, b), to_apply=f` is an
/// `async-start` of a computation whose root is that `call`, built by the
/// reader (see [`wrap_async_starts`]); `call-update` and `call-done` are
/// the update and done of it. `None` when `opcode` is not such a form.
fn async_short_form(
    opcode: &str,
    opcode_pair: &Pair<'_>,
    a: &mut Attrs,
) -> Result<Option<Op>, ParseError> {
    let Some((step, wrapped)) = AsyncStep::ALL
        .into_iter()
        .find_map(|s| opcode.strip_suffix(s.suffix()).map(|w| (s, w)))
    else {
        return Ok(None);
    };
    if !all_opcodes().contains(&wrapped) {
        return Ok(None);
    }
    let thread = async_thread(a)?;
    if step == AsyncStep::Start {
        a.wrapped = Some(Box::new(op_named(wrapped, opcode_pair, a)?));
    }
    Ok(Some(Op::Async {
        step,
        calls: String::new(),
        thread,
    }))
}

/// Where a constant's value, as XLA's parser reads it, is not what its text
/// says at face value.
enum LiteralReading {
    AsWritten,
    /// One value written for a whole array: XLA's parser takes it as the
    /// first element with every other element zero (`f32[3] constant(2)`
    /// is `{2, 0, 0}`).
    FirstOnly,
    /// A complex element with a NaN part, which XLA's parser reads its
    /// own way (see [`crate::ir::literal::complex_nans_as_xla_reads_them`]).
    ComplexNan,
}

/// A constant of `declared` shape, a tuple's elements each read as their
/// own constant: `(a, b)` (a pair of scalars parses as a complex value's
/// parts would, and is read here as two elements).
fn literal_tree(p: Pair<'_>, declared: &Shape, at: &Pair<'_>) -> Result<LiteralTree, ParseError> {
    let Shape::Tuple(elems) = declared else {
        return literal(p, declared, at).map(|(l, _)| LiteralTree::Array(l));
    };
    let inner = p.into_inner().next().expect("grammar: literal has a body");
    if !matches!(inner.as_rule(), Rule::tuple_literal | Rule::complex_scalar) {
        return err_at(
            &inner,
            format!("a constant of {declared} is written as a tuple, (a, b, ...)"),
        );
    }
    let values: Vec<Pair<'_>> = inner.into_inner().collect();
    if values.len() != elems.len() {
        return err_at(
            &inner,
            format!(
                "a constant of {declared} needs {} elements, got {}",
                elems.len(),
                values.len()
            ),
        );
    }
    values
        .into_iter()
        .zip(elems)
        .map(|(v, e)| literal_tree(v, e, at))
        .collect::<Result<_, _>>()
        .map(LiteralTree::Tuple)
}

/// A constant's value, read as XLA's parser reads it, and where that
/// differs from the text's face value.
fn literal(
    p: Pair<'_>,
    declared: &Shape,
    at: &Pair<'_>,
) -> Result<(Literal, LiteralReading), ParseError> {
    let arr = match declared {
        Shape::Array(a) => a,
        Shape::Tuple(_) => return err_at(at, "tuple constants are not supported"),
        Shape::Token => return err_at(at, "a token has no value to write as a constant"),
        Shape::Buffer(_) => return err_at(at, "a buffer has no value to write as a constant"),
    };
    // A complex element is read as its two parts, each a value of the part
    // type, so the parts keep their NaN signs and payloads as a float does.
    let (part_ty, per_element) = match arr.ty.complex_component() {
        Some(part) => (part, 2),
        None => (arr.ty, 1),
    };
    let mut values = Vec::new();
    let mut nans = Vec::new();
    let whole = p;
    let first_only = arr.rank() > 0
        && arr.element_count() > 0
        && p.into_inner()
            .next()
            .is_some_and(|v| matches!(v.as_rule(), Rule::scalar | Rule::complex_scalar));
    if first_only {
        let only = ArrayShape::scalar(arr.ty);
        collect_literal(p, &only, 0, &mut values, &mut nans)?;
        let zero = match part_ty {
            ElementType::Pred => Scalar::Bool(false),
            t if t.is_signed_int() => Scalar::Int(0),
            t if t.is_unsigned_int() => Scalar::UInt(0),
            _ => Scalar::Float(0.0),
        };
        // The shape is as written, not yet verified: a mistyped dimension
        // must be an error, not an allocation that aborts.
        let n = arr
            .checked_element_count()
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(per_element))
            .filter(|&n| {
                values
                    .try_reserve_exact(n.saturating_sub(values.len()))
                    .is_ok()
            });
        let Some(n) = n else {
            return err_at(
                &whole,
                format!("a constant of {arr} does not fit in memory"),
            );
        };
        values.resize(n, zero);
    } else {
        collect_literal(p, arr, 0, &mut values, &mut nans)?;
    }
    let parts_dims = if per_element == 1 {
        arr.dims.clone()
    } else {
        vec![values.len() as i64]
    };
    let mut lit = Literal::from_scalars(part_ty, parts_dims, &values)
        .or_else(|e| err_at(&whole, e.to_string()))?;
    // A NaN's sign and payload, which a value of the literal's scalars
    // does not carry, are set bit for bit.
    for (i, pair) in nans {
        let (negative, payload) = nan_spelling(&pair)?;
        lit.set_nan(i, negative, payload)
            .or_else(|e| err_at(&pair, e.to_string()))?;
    }
    let mut reading = if first_only {
        LiteralReading::FirstOnly
    } else {
        LiteralReading::AsWritten
    };
    if per_element != 1 {
        let mut bytes = lit.into_bytes();
        if crate::ir::literal::complex_nans_as_xla_reads_them(part_ty, &mut bytes) {
            reading = LiteralReading::ComplexNan;
        }
        lit = Literal::from_bytes(arr.ty, arr.dims.clone(), bytes)
            .or_else(|e| err_at(&whole, e.to_string()))?;
    }
    lit.shape.minor_to_major = arr.minor_to_major.clone();
    lit.shape.physical = arr.physical.clone();
    Ok((lit, reading))
}

/// The literal's values in row-major order into `out`, and each value
/// spelled as a NaN, by index, into `nans`.
fn collect_literal<'i>(
    p: Pair<'i>,
    arr: &ArrayShape,
    depth: usize,
    out: &mut Vec<Scalar>,
    nans: &mut Vec<(usize, Pair<'i>)>,
) -> Result<(), ParseError> {
    let inner = p
        .into_inner()
        .next()
        .expect("grammar: literal has one child");
    match inner.as_rule() {
        Rule::literal_list => {
            if depth >= arr.rank() {
                return err_at(
                    &inner,
                    format!("literal is nested deeper than the rank of {arr}"),
                );
            }
            let items: Vec<_> = inner.into_inner().collect();
            if items.len() as i64 != arr.dims[depth] {
                return err_at(
                    &inner,
                    format!(
                        "literal has {} elements in dimension {depth}, {arr} needs {}",
                        items.len(),
                        arr.dims[depth]
                    ),
                );
            }
            for it in items {
                collect_literal(it, arr, depth + 1, out, nans)?;
            }
            Ok(())
        }
        Rule::scalar => {
            if depth != arr.rank() {
                return err_at(
                    &inner,
                    format!("scalar value where {arr} needs nested braces"),
                );
            }
            if arr.ty.is_complex() {
                return err_at(&inner, format!("a {} value is written (re, im)", arr.ty));
            }
            scalar_into(inner, arr.ty, out, nans)
        }
        Rule::complex_scalar => {
            if depth != arr.rank() {
                return err_at(
                    &inner,
                    format!("scalar value where {arr} needs nested braces"),
                );
            }
            let Some(part) = arr.ty.complex_component() else {
                return err_at(
                    &inner,
                    format!("(re, im) is a complex value; {} is not complex", arr.ty),
                );
            };
            for p in inner.into_inner() {
                let part_value = p.into_inner().next().expect("grammar: a scalar part");
                scalar_into(part_value, part, out, nans)?;
            }
            Ok(())
        }
        Rule::tuple_literal => err_at(
            &inner,
            format!("a tuple of values where {arr} needs an array value"),
        ),
        r => unreachable!("grammar: unexpected {r:?} in literal"),
    }
}

/// One value, read as `ty`, onto `out`; noted in `nans` when it is one.
fn scalar_into<'i>(
    p: Pair<'i>,
    ty: ElementType,
    out: &mut Vec<Scalar>,
    nans: &mut Vec<(usize, Pair<'i>)>,
) -> Result<(), ParseError> {
    out.push(scalar(&p, ty)?);
    if spells_nan(p.as_str()) {
        nans.push((out.len() - 1, p));
    }
    Ok(())
}

/// `nan`, `-nan`, `nan(0x1)`, ...
fn spells_nan(s: &str) -> bool {
    s.trim_start_matches('-').starts_with("nan")
}

/// `-nan(0x1)` as (negative, payload); `nan` has none.
fn nan_spelling(p: &Pair<'_>) -> Result<(bool, Option<u64>), ParseError> {
    let s = p.as_str();
    let payload = match s.split_once("(0x") {
        None => None,
        Some((_, rest)) => {
            let hex = rest.trim_end_matches(')');
            match u64::from_str_radix(hex, 16) {
                Ok(v) => Some(v),
                Err(_) => return err_at(p, format!("NaN payload 0x{hex} does not fit in 64 bits")),
            }
        }
    };
    Ok((s.starts_with('-'), payload))
}

fn scalar(p: &Pair<'_>, ty: ElementType) -> Result<Scalar, ParseError> {
    let s = p.as_str();
    let bad = || err_at(p, format!("'{s}' is not a valid {ty} value"));
    match s {
        "true" | "false" if ty == ElementType::Pred => return Ok(Scalar::Bool(s == "true")),
        "true" | "false" => return bad(),
        _ => {}
    }
    if ty.is_float() {
        let v = match s {
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ if spells_nan(s) => f64::NAN,
            _ => match s.parse::<f64>() {
                Ok(v) => v,
                Err(_) => return bad(),
            },
        };
        return Ok(Scalar::Float(v));
    }
    // XLA's reader takes the 64-bit integers through their bits: a
    // negative u64 is its two's complement (`u64[] constant(-1)` is
    // 18446744073709551615) and an s64 past i64::MAX wraps (measured
    // through jaxlib). Narrower types are range-checked.
    if let Ok(v) = s.parse::<i64>() {
        return Ok(match ty {
            ElementType::U64 if v < 0 => Scalar::UInt(v as u64),
            _ => Scalar::Int(v),
        });
    }
    if let Ok(v) = s.parse::<u64>() {
        return Ok(match ty {
            ElementType::S64 => Scalar::Int(v as i64),
            _ => Scalar::UInt(v),
        });
    }
    bad()
}
