//! Whether a value is computed from some others: a search up the operand
//! edges that stops below a known position of the post-order, since
//! nothing before the earliest sought instruction can be one. A pass that
//! moves or merges instructions asks it before it would make a cycle.

use hlatc_compiler::util::fx::FxHashSet as HashSet;
use hlatc_compiler::{Computation, InstrId};

/// Whether one of `sought` is `start` or lies upstream of it, searching
/// only instructions whose post-order position (`position`; `None` for
/// one the caller did not place) is at least `from`.
pub(crate) fn reaches_any(
    c: &Computation,
    start: InstrId,
    sought: &HashSet<InstrId>,
    position: impl Fn(InstrId) -> Option<usize>,
    from: usize,
) -> bool {
    let mut seen: HashSet<InstrId> = HashSet::default();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        if sought.contains(&id) {
            return true;
        }
        if position(id).is_none_or(|p| p < from) || !seen.insert(id) {
            continue;
        }
        stack.extend(c.operands_unordered(id));
    }
    false
}
