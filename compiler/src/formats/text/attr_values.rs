//! How HLO text spells the attribute values that the printer's hand-written
//! ops and the described ops ([`super::described`]) share: lists, flags,
//! padding, aliasing, precision and a collective's common attributes. A
//! leaf, so that the printer and the described writer both use it without
//! importing each other.

use crate::ir::collective::Collective;
use crate::ir::op::{OperandAlias, PadDim, Precision};
use crate::util::join::write_joined;
use std::fmt::Write;

/// The attributes every replica-grouped collective has, as XLA prints them.
pub(super) fn write_collective(out: &mut String, c: &Collective) {
    out.push_str(", replica_groups=");
    super::collective::write_replica_groups(out, &c.replica_groups);
    if let Some(id) = c.channel_id {
        let _ = write!(out, ", channel_id={id}");
    }
    flag(out, "use_global_device_ids", c.use_global_device_ids);
    flag(out, "constrain_layout", c.constrain_layout);
}

pub(super) fn list(out: &mut String, key: &str, v: &[i64]) {
    let _ = write!(out, ", {key}={{");
    let _ = write_joined(out, v);
    out.push('}');
}

pub(super) fn list_if_any(out: &mut String, key: &str, v: &[i64]) {
    if !v.is_empty() {
        list(out, key, v);
    }
}

pub(super) fn flag(out: &mut String, key: &str, on: bool) {
    if on {
        let _ = write!(out, ", {key}=true");
    }
}

pub(super) fn write_padding(out: &mut String, config: &[PadDim]) {
    for (i, p) in config.iter().enumerate() {
        if i > 0 {
            out.push('x');
        }
        let _ = write!(out, "{}_{}", p.low, p.high);
        if p.interior != 0 {
            let _ = write!(out, "_{}", p.interior);
        }
    }
}

pub(super) fn write_aliasing(out: &mut String, aliasing: &[OperandAlias]) {
    if !aliasing.is_empty() {
        out.push_str(", output_to_operand_aliasing={");
        write_list(out, aliasing);
        out.push('}');
    }
}

/// `a, b, c`: the items, separated as XLA separates list entries.
pub(super) fn write_list<T: std::fmt::Display>(out: &mut String, items: &[T]) {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{x}");
    }
}

pub(super) fn write_precision(out: &mut String, precision: &[Precision]) {
    if !precision.is_empty() {
        let names: Vec<&str> = precision.iter().map(|p| p.name()).collect();
        let _ = write!(out, ", operand_precision={{{}}}", names.join(","));
    }
}
