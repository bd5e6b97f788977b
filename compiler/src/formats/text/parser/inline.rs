//! Computations written inline as an attribute's value, in place of a
//! callee's name (`to_apply={ ... }`): read as modules of their own and
//! adopted by the computation that writes them, under names no other uses.

use super::*;

/// What XLA's reader names a computation written inline.
pub(super) const INLINE_NAME: &str = "_";

/// The attributes that name one called computation.
pub(super) const CALLEE_ATTRIBUTES: [&str; 8] = [
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
pub(super) fn inline_computation(
    key: &str,
    value: &Value,
    attribute: &AttrPlace<'_>,
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
        // Line 3 of the module read holds the value's first line, after
        // the prefix's `ENTRY _ `.
        let (line, column) = attribute.value.line_col();
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
pub(super) fn adopt_inline(
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
        let new = first_free(&base, free);
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
