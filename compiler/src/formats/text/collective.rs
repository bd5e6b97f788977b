//! Reading and writing the attributes of collectives:
//!
//! ```text
//! replica_groups={}   replica_groups={{0,1},{2,3}}   replica_groups=[2,4]<=[4,2]T(1,0)
//! replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a','b':(2)2}
//! source_target_pairs={{0,1},{1,2},{2,0}}
//! ```
//!
//! Read by hand from the attribute's text, like shardings, so an error
//! points at the character where the value goes wrong.

use super::cursor::{AttrSyntaxError, Cursor};
use crate::ir::collective::ReplicaGroups;
use crate::ir::mesh_groups::{AxisRef, MeshDevices, MeshGroups};
use crate::util::join::{join, push_joined};
use std::fmt::Write;

type Result<T> = std::result::Result<T, AttrSyntaxError>;

/// `{{a,b},{c}}` (`{}` is no group), or `[groups,size]<=[reshape]T(perm)`.
pub(crate) fn parse_replica_groups(text: &str) -> Result<ReplicaGroups> {
    let mut c = Cursor::new(text);
    c.skip_ws();
    let groups = if c.rest().starts_with("mesh[") {
        ReplicaGroups::Mesh(mesh_groups(&mut c)?)
    } else if c.rest().starts_with('[') {
        let at = c.pos;
        let dims = c.bracketed("[", "]")?;
        let [groups, group_size] = dims[..] else {
            c.pos = at;
            return c.fail(format!(
                "iota replica groups are [groups,group_size], got {} dimensions",
                dims.len()
            ));
        };
        c.require("<=")?;
        let (reshape, transpose) = c.iota()?;
        ReplicaGroups::Iota {
            groups,
            group_size,
            reshape,
            transpose: crate::ir::iota::without_identity(transpose),
        }
    } else {
        ReplicaGroups::List(int_lists(&mut c)?.into())
    };
    c.finish()?;
    Ok(groups)
}

/// `mesh['a'=2,'b'=4]`, then `, device_ids=(...)` if written, then the
/// spanned axes `{'a','b':(2)2}`.
fn mesh_groups(c: &mut Cursor) -> Result<MeshGroups> {
    c.require("mesh[")?;
    let mut axes = Vec::new();
    loop {
        let name = quoted_name(c)?;
        c.require("=")?;
        axes.push((name, c.int()?));
        if !c.eat(",") {
            break;
        }
    }
    c.require("]")?;
    let devices = if c.eat(",") {
        c.require("device_ids=")?;
        c.require("(")?;
        let devices = if c.rest().trim_start().starts_with('[') {
            let (reshape, transpose) = c.iota()?;
            MeshDevices::Tile {
                reshape,
                transpose: crate::ir::iota::without_identity(transpose),
            }
        } else {
            MeshDevices::List(c.ints()?)
        };
        c.require(")")?;
        devices
    } else {
        MeshDevices::Iota
    };
    c.require("{")?;
    let mut spans = Vec::new();
    loop {
        let at = c.pos;
        let name = quoted_name(c)?;
        let Some(axis) = axes.iter().position(|(n, _)| *n == name) else {
            c.pos = at;
            return c.fail(format!("'{name}' is not an axis of the mesh"));
        };
        let sub = if c.eat(":") {
            let pre = c.bracketed("(", ")")?;
            let [pre] = pre[..] else {
                c.pos = at;
                return c.fail("a sub-axis is written 'name':(pre_size)size");
            };
            Some((pre, c.int()?))
        } else {
            None
        };
        spans.push(AxisRef { axis, sub });
        if !c.eat(",") {
            break;
        }
    }
    c.require("}")?;
    Ok(MeshGroups {
        axes,
        devices,
        spans,
    })
}

/// `'name'`.
fn quoted_name(c: &mut Cursor) -> Result<String> {
    c.require("'")?;
    let rest = c.rest();
    let Some(end) = rest.find('\'') else {
        return c.fail("a mesh axis name has no closing `'`");
    };
    let name = rest[..end].to_string();
    c.pos += end + 1;
    Ok(name)
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

/// An in-place collective-permute's `{{1,8,128},{1,8,128}}`: one slice
/// size per dimension of each transfer, none empty.
pub(crate) fn parse_slice_sizes(text: &str) -> Result<Vec<Vec<i64>>> {
    let mut c = Cursor::new(text);
    let at = c.pos;
    let lists = int_lists(&mut c)?;
    c.finish()?;
    if lists.iter().any(|l| l.is_empty()) {
        return Err(AttrSyntaxError {
            offset: at,
            message: "a transfer's slice sizes cannot be empty".into(),
        });
    }
    Ok(lists)
}

pub(crate) fn write_slice_sizes(out: &mut String, sizes: &[Vec<i64>]) {
    write_int_lists(out, sizes.iter().map(Vec::as_slice));
}

/// `{{1,2},{3}}`, or `{}`.
fn int_lists(c: &mut Cursor) -> Result<Vec<Vec<i64>>> {
    c.require("{")?;
    let mut lists = Vec::new();
    if c.eat("}") {
        return Ok(lists);
    }
    loop {
        c.require("{")?;
        lists.push(if c.eat("}") {
            Vec::new()
        } else {
            let v = c.ints()?;
            c.require("}")?;
            v
        });
        if !c.eat(",") {
            break;
        }
    }
    c.require("}")?;
    Ok(lists)
}

pub(crate) fn write_replica_groups(out: &mut String, groups: &ReplicaGroups) {
    match groups {
        // Written once per shared set, copied for every collective of it.
        ReplicaGroups::List(lists) => out.push_str(lists.text_with(|groups| {
            let mut text = String::with_capacity(groups.iter().map(|g| 6 * g.len() + 3).sum());
            write_int_lists(&mut text, groups.iter().map(Vec::as_slice));
            text
        })),
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
        ReplicaGroups::Mesh(m) => write_mesh_groups(out, m),
    }
}

fn write_mesh_groups(out: &mut String, m: &MeshGroups) {
    out.push_str("mesh[");
    for (i, (name, size)) in m.axes.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(out, "{sep}'{name}'={size}");
    }
    out.push(']');
    match &m.devices {
        MeshDevices::Iota => {}
        MeshDevices::List(ids) => {
            let _ = write!(out, ", device_ids=({})", join(ids));
        }
        MeshDevices::Tile { reshape, transpose } => {
            let _ = write!(out, ", device_ids=([{}]", join(reshape));
            if !transpose.is_empty() {
                let _ = write!(out, "T({})", join(transpose));
            }
            out.push(')');
        }
    }
    out.push_str(" {");
    for (i, r) in m.spans.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let _ = write!(out, "{sep}'{}'", m.axes[r.axis].0);
        if let Some((pre, size)) = r.sub {
            let _ = write!(out, ":({pre}){size}");
        }
    }
    out.push('}');
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
        out.push('{');
        push_joined(out, l);
        out.push('}');
    }
    out.push('}');
}
