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
    let (mut m, _) = parse_module_noted(&src).map_err(|e| {
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
    // The inline one last, after its callees.
    let entry = m.entry;
    let order: Vec<ComputationId> = m
        .computation_ids()
        .filter(|&id| id != entry)
        .chain([entry])
        .collect();
    m.reorder_computations(&order);
    Ok(Some(m.computations))
}

/// Adopts each group of computations an instruction writes inline (one
/// attribute's: callees first, the inline one last) after those already
/// adopted, each under a name no computation in scope or adopted uses
/// (`_`, then `_.1`, ...), and returns the id each group's inline one
/// gets.
pub(super) fn adopt_inline(
    adopted: &mut Vec<Computation>,
    groups: Vec<Vec<Computation>>,
    before: &[Computation],
) -> Vec<ComputationId> {
    let mut ids = Vec::with_capacity(groups.len());
    for mut group in groups {
        for i in 0..group.len() {
            let old = group[i].name.clone();
            let scope = Scope {
                before,
                own: adopted,
            };
            let free = |n: &str| {
                !scope.taken(n) && !group.iter().enumerate().any(|(j, c)| j != i && c.name == n)
            };
            if free(&old) {
                continue;
            }
            let base = old.split('.').next().unwrap_or(&old).to_string();
            group[i].name = first_free(&base, free);
        }
        // Callees keep their places within the group, after those before.
        let first = before.len() + adopted.len();
        let shift = |id: ComputationId| id.shifted(first);
        for c in &mut group {
            c.renumber_callees(&shift);
        }
        ids.push(ComputationId::new(first + group.len() - 1));
        adopted.extend(group);
    }
    ids
}
