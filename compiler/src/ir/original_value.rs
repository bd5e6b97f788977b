//! `origin={...}`: which value of the program as first written an
//! instruction computes, kept through XLA's rewrites so a debugger can map
//! optimized HLO back (XLA's `OriginalValue`). hlatc keeps it as read.

/// A leaf's source: an instruction of the original program, and where in
/// its (tuple) result the value sits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OriginalArray {
    pub instruction: String,
    pub shape_index: Vec<i64>,
}

/// One leaf of the tree, at `index` (`{}` for a value that is not a
/// tuple); `None` where the original value is unknown (written `{}`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OriginalLeaf {
    pub index: Vec<i64>,
    pub array: Option<OriginalArray>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OriginalValue {
    /// A tree of leaves, in order, its shape given by their indices: its
    /// own, not the instruction's (XLA reads a tuple origin on an array
    /// instruction). No leaves: the empty tuple, `{()}`.
    Tree(Vec<OriginalLeaf>),
    /// `{[synthetic_call]}`: the instruction is a call XLA made up, with no
    /// original value of its own.
    SyntheticCall,
}

impl OriginalValue {
    /// Why the leaves form no tree text could write: each tuple's elements
    /// numbered from 0 in order, no leaf inside another.
    pub fn problem(&self) -> Option<String> {
        let OriginalValue::Tree(leaves) = self else {
            return None;
        };
        if leaves.is_empty() || well_formed(leaves, 0) {
            return None;
        }
        let indices: Vec<&[i64]> = leaves.iter().map(|l| l.index.as_slice()).collect();
        Some(format!(
            "origin's leaves at {indices:?} do not form a tuple tree (each tuple numbered from 0, in order)"
        ))
    }
}

/// The runs of `leaves` that share their index's element at `depth`, in
/// order, each with that element (`None` for a leaf whose index ends
/// before it): a tuple's elements, for the check and the printer alike.
fn elements(
    leaves: &[OriginalLeaf],
    depth: usize,
) -> impl Iterator<Item = (Option<i64>, &[OriginalLeaf])> {
    let mut rest = leaves;
    std::iter::from_fn(move || {
        let element = rest.first()?.index.get(depth).copied();
        let n = rest
            .iter()
            .take_while(|l| l.index.get(depth).copied() == element)
            .count();
        let (run, tail) = rest.split_at(n);
        rest = tail;
        Some((element, run))
    })
}

/// Whether `leaves` (sharing their first `depth` index elements) are the
/// leaves of one tree, in order.
fn well_formed(leaves: &[OriginalLeaf], depth: usize) -> bool {
    if let [leaf] = leaves {
        if leaf.index.len() == depth {
            return true;
        }
    }
    elements(leaves, depth)
        .enumerate()
        .all(|(k, (element, run))| element == Some(k as i64) && well_formed(run, depth + 1))
}

impl std::fmt::Display for OriginalValue {
    /// As XLA prints it, the braces included: `{({"a"}, {"b" {1}})}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OriginalValue::SyntheticCall => f.write_str("{[synthetic_call]}"),
            OriginalValue::Tree(leaves) => {
                f.write_str("{")?;
                write_tree(f, leaves, 0)?;
                f.write_str("}")
            }
        }
    }
}

/// The subtree of `leaves` (all sharing their first `depth` indices).
fn write_tree(
    f: &mut std::fmt::Formatter<'_>,
    leaves: &[OriginalLeaf],
    depth: usize,
) -> std::fmt::Result {
    if let [leaf] = leaves {
        // `<=`: a malformed tree (the verifier names it) still prints.
        if leaf.index.len() <= depth {
            return write_leaf(f, leaf.array.as_ref());
        }
    }
    f.write_str("(")?;
    for (k, (element, run)) in elements(leaves, depth).enumerate() {
        if k > 0 {
            f.write_str(", ")?;
        }
        if element.is_some() {
            write_tree(f, run, depth + 1)?;
            continue;
        }
        // Leaves whose index ends here, more than one (malformed): each
        // as itself, so printing ends.
        for (j, leaf) in run.iter().enumerate() {
            if j > 0 {
                f.write_str(", ")?;
            }
            write_leaf(f, leaf.array.as_ref())?;
        }
    }
    f.write_str(")")
}

fn write_leaf(f: &mut std::fmt::Formatter<'_>, array: Option<&OriginalArray>) -> std::fmt::Result {
    let Some(a) = array else {
        return f.write_str("{}");
    };
    write!(f, "{{\"{}\"", crate::util::escape::escape(&a.instruction))?;
    if !a.shape_index.is_empty() {
        f.write_str(" {")?;
        crate::util::join::write_joined(f, &a.shape_index)?;
        f.write_str("}")?;
    }
    f.write_str("}")
}
