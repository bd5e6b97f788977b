//! Reading the stack-frame tables between the module header and the first
//! computation. They are line-based, so they are read here by line and
//! blanked out (newlines kept, so every later error keeps its line and
//! column) before the grammar reads the rest.

use super::parse_error::ParseError;
use crate::ir::stack_frames::{FileLocation, Section, StackFrame, StackFrameIndex};
use std::borrow::Cow;

fn err<T>(line: usize, column: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        line,
        column,
        message: message.into(),
    })
}

/// `text` without its tables, and the tables.
pub(super) fn take_tables(text: &str) -> Result<(Cow<'_, str>, StackFrameIndex), ParseError> {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut index = StackFrameIndex::default();
    let mut consumed = vec![false; lines.len()];
    let mut section: Option<Section> = None;
    // The tables follow the header (the first line that is neither blank
    // nor a comment: a golden test's `// RUN:` line may precede it) and
    // come before any computation.
    let header = lines
        .iter()
        .position(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with("//")
        })
        .unwrap_or(0);
    for (i, raw) in lines.iter().enumerate().skip(header + 1) {
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim();
        if trimmed.is_empty() {
            section = None;
            continue;
        }
        if let Some(heading) = Section::from_name(trimmed) {
            section = Some(heading);
            consumed[i] = true;
            continue;
        }
        let Some(table) = section else {
            break;
        };
        read_entry(&mut index, table, line, i + 1)?;
        consumed[i] = true;
    }
    if index.is_empty() && !consumed.iter().any(|&c| c) {
        return Ok((Cow::Borrowed(text), index));
    }
    if let Err(e) = index.check() {
        let first = consumed.iter().position(|&c| c).unwrap_or(0);
        return err(first + 1, 1, format!("stack-frame tables: {e}"));
    }
    let blanked: Vec<Cow<str>> = lines
        .iter()
        .zip(&consumed)
        .map(|(l, &c)| {
            if c {
                Cow::Owned(" ".repeat(l.chars().count()))
            } else {
                Cow::Borrowed(*l)
            }
        })
        .collect();
    Ok((Cow::Owned(blanked.join("\n")), index))
}

/// One `N value` row of `table`, which must be the table's next id.
fn read_entry(
    index: &mut StackFrameIndex,
    table: Section,
    line: &str,
    line_no: usize,
) -> Result<(), ParseError> {
    let indent = line.len() - line.trim_start().len();
    let body = line.trim();
    let (id, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    let expected = match table {
        Section::FileNames => index.file_names.len(),
        Section::FunctionNames => index.function_names.len(),
        Section::FileLocations => index.file_locations.len(),
        Section::StackFrames => index.stack_frames.len(),
    } + 1;
    if id.parse::<usize>().ok() != Some(expected) {
        return err(
            line_no,
            indent + 1,
            format!("{table} entry `{id}`: expected id {expected} (ids count from 1 in order)"),
        );
    }
    let rest = rest.trim();
    let at = Place {
        line: line_no,
        column: indent + body.len() - rest.len() + 1,
    };
    match table {
        Section::FileNames => index.file_names.push(quoted(rest, id, table, at)?),
        Section::FunctionNames => index.function_names.push(quoted(rest, id, table, at)?),
        Section::FileLocations => index.file_locations.push(file_location(rest, id, at)?),
        Section::StackFrames => index.stack_frames.push(stack_frame(rest, id, at)?),
    }
    Ok(())
}

/// Where a row's value starts, which its errors point at.
#[derive(Clone, Copy)]
struct Place {
    line: usize,
    column: usize,
}

/// A name table's value: a quoted string.
fn quoted(rest: &str, id: &str, table: Section, at: Place) -> Result<String, ParseError> {
    let name = rest
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .and_then(crate::util::escape::unescape);
    name.map_or_else(
        || {
            err(
                at.line,
                at.column,
                format!("{table} entry {id}: expected a quoted string, found `{rest}`"),
            )
        },
        Ok,
    )
}

/// `{file_name_id=1 function_name_id=1 line=3 ...}`.
fn file_location(rest: &str, id: &str, at: Place) -> Result<FileLocation, ParseError> {
    let mut l = FileLocation::default();
    for (key, v) in fields(rest, at.line, at.column, Section::FileLocations)? {
        let slot = match key.as_str() {
            "file_name_id" => &mut l.file_name_id,
            "function_name_id" => &mut l.function_name_id,
            "line" => &mut l.line,
            "end_line" => &mut l.end_line,
            "column" => &mut l.column,
            "end_column" => &mut l.end_column,
            _ => {
                return err(
                    at.line,
                    at.column,
                    format!("FileLocations entry {id}: unknown field `{key}`"),
                )
            }
        };
        *slot = v;
    }
    Ok(l)
}

/// `{file_location_id=1 parent_frame_id=1}`.
fn stack_frame(rest: &str, id: &str, at: Place) -> Result<StackFrame, ParseError> {
    let mut f = StackFrame::default();
    for (key, v) in fields(rest, at.line, at.column, Section::StackFrames)? {
        match key.as_str() {
            "file_location_id" => f.file_location_id = v,
            // XLA prints a parent one above its id (1: no parent).
            "parent_frame_id" if v >= 1 => f.parent_frame_id = v - 1,
            "parent_frame_id" => {
                return err(
                    at.line,
                    at.column,
                    format!(
                        "StackFrames entry {id}: parent_frame_id={v}; XLA writes the parent's id plus one, so 1 means none"
                    ),
                )
            }
            _ => {
                return err(
                    at.line,
                    at.column,
                    format!("StackFrames entry {id}: unknown field `{key}`"),
                )
            }
        }
    }
    Ok(f)
}

/// `{key=int key=int ...}`.
fn fields(
    s: &str,
    line_no: usize,
    col: usize,
    section: Section,
) -> Result<Vec<(String, i32)>, ParseError> {
    let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) else {
        return err(
            line_no,
            col,
            format!("{section}: expected {{key=value ...}}, found `{s}`"),
        );
    };
    inner
        .split_whitespace()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match v.parse::<i32>() {
                Ok(v) => Ok((k.to_string(), v)),
                Err(_) => err(
                    line_no,
                    col,
                    format!("{section}: `{kv}` is not key=integer"),
                ),
            }
        })
        .collect()
}
