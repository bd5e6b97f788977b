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
        let indices: Vec<&[i64]> = leaves.iter().map(|l| l.index.as_slice()).collect();
        if indices.is_empty() || well_formed(&indices) {
            None
        } else {
            Some(format!(
                "origin's leaves at {indices:?} do not form a tuple tree (each tuple numbered from 0, in order)"
            ))
        }
    }
}

/// Whether `indices` are the leaves of one tree, in order.
fn well_formed(indices: &[&[i64]]) -> bool {
    if let [only] = indices {
        if only.is_empty() {
            return true;
        }
    }
    let mut element = 0;
    let mut rest = indices;
    while !rest.is_empty() {
        let Some(&first) = rest[0].first() else {
            return false;
        };
        if first != element {
            return false;
        }
        let n = rest
            .iter()
            .take_while(|i| i.first() == Some(&first))
            .count();
        let inner: Vec<&[i64]> = rest[..n].iter().map(|i| &i[1..]).collect();
        if !well_formed(&inner) {
            return false;
        }
        rest = &rest[n..];
        element += 1;
    }
    true
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
        // `<=`: a malformed tree (the verifier names it) still ends.
        if leaf.index.len() <= depth {
            return write_leaf(f, leaf.array.as_ref());
        }
    }
    f.write_str("(")?;
    let mut rest = leaves;
    let mut first = true;
    while let Some(head) = rest.first() {
        let element = head.index.get(depth);
        let n = rest
            .iter()
            .take_while(|l| l.index.get(depth) == element)
            .count();
        if !first {
            f.write_str(", ")?;
        }
        first = false;
        write_tree(f, &rest[..n], depth + 1)?;
        rest = &rest[n..];
    }
    f.write_str(")")
}

fn write_leaf(f: &mut std::fmt::Formatter<'_>, array: Option<&OriginalArray>) -> std::fmt::Result {
    let Some(a) = array else {
        return f.write_str("{}");
    };
    write!(f, "{{\"{}\"", crate::text::escape(&a.instruction))?;
    if !a.shape_index.is_empty() {
        let index: Vec<String> = a.shape_index.iter().map(i64::to_string).collect();
        write!(f, " {{{}}}", index.join(","))?;
    }
    f.write_str("}")
}
