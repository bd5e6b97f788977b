//! Reading and writing the attributes of collectives:
//!
//! ```text
//! replica_groups={}   replica_groups={{0,1},{2,3}}   replica_groups=[2,4]<=[4,2]T(1,0)
//! source_target_pairs={{0,1},{1,2},{2,0}}
//! ```
//!
//! Read by hand from the attribute's text, like shardings, so an error
//! points at the character where the value goes wrong.

use super::cursor::{AttrSyntaxError, Cursor};
use crate::collective::ReplicaGroups;
use crate::sharding::join;
use std::fmt::Write;

type Result<T> = std::result::Result<T, AttrSyntaxError>;

/// `{{a,b},{c}}` (`{}` is no group), or `[groups,size]<=[reshape]T(perm)`.
pub(crate) fn parse_replica_groups(text: &str) -> Result<ReplicaGroups> {
    let mut c = Cursor::new(text);
    c.skip_ws();
    if c.rest().starts_with("mesh[") {
        return c.fail(
            "replica groups over a mesh (`mesh[...] {...}`, as XLA writes them in partitioned programs) are not read yet",
        );
    }
    let groups = if c.rest().starts_with('[') {
        let at = c.pos;
        let dims = c.bracketed("[", "]")?;
        let [groups, group_size] = dims[..] else {
            c.pos = at;
            return c.fail(format!(
                "iota replica groups are [groups,group_size], got {} dimensions",
                dims.len()
            ));
        };
        c.expect("<=")?;
        let (reshape, transpose) = c.iota()?;
        ReplicaGroups::Iota {
            groups,
            group_size,
            reshape,
            transpose: crate::iota::without_identity(transpose),
        }
    } else {
        ReplicaGroups::List(int_lists(&mut c)?)
    };
    c.finish()?;
    Ok(groups)
}

/// `{{source,target},...}`.
pub(crate) fn parse_pairs(text: &str) -> Result<Vec<(i64, i64)>> {
    let mut c = Cursor::new(text);
    let at = c.pos;
    let lists = int_lists(&mut c)?;
    c.finish()?;
    lists
        .into_iter()
        .map(|l| match l[..] {
            [s, t] => Ok((s, t)),
            _ => Err(AttrSyntaxError {
                offset: at,
                message: format!("a source-target pair has two ids, got {{{}}}", join(&l)),
            }),
        })
        .collect()
}

/// `{{1,2},{3}}`, or `{}`.
fn int_lists(c: &mut Cursor) -> Result<Vec<Vec<i64>>> {
    c.expect("{")?;
    let mut lists = Vec::new();
    if c.eat("}") {
        return Ok(lists);
    }
    loop {
        c.expect("{")?;
        lists.push(if c.eat("}") {
            Vec::new()
        } else {
            let v = c.ints()?;
            c.expect("}")?;
            v
        });
        if !c.eat(",") {
            break;
        }
    }
    c.expect("}")?;
    Ok(lists)
}

pub(crate) fn write_replica_groups(out: &mut String, groups: &ReplicaGroups) {
    match groups {
        ReplicaGroups::List(lists) => write_int_lists(out, lists.iter().map(Vec::as_slice)),
        ReplicaGroups::Iota {
            groups,
            group_size,
            reshape,
            transpose,
        } => {
            let _ = write!(out, "[{groups},{group_size}]<=[{}]", join(reshape));
            if !transpose.is_empty() {
                let _ = write!(out, "T({})", join(transpose));
            }
        }
    }
}

pub(crate) fn write_pairs(out: &mut String, pairs: &[(i64, i64)]) {
    let lists: Vec<[i64; 2]> = pairs.iter().map(|&(s, t)| [s, t]).collect();
    write_int_lists(out, lists.iter().map(|l| l.as_slice()));
}

fn write_int_lists<'a>(out: &mut String, lists: impl Iterator<Item = &'a [i64]>) {
    out.push('{');
    for (i, l) in lists.enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{{{}}}", join(l));
    }
    out.push('}');
}
