//! Reading and writing `sharding={...}`, XLA's sharding syntax:
//!
//! ```text
//! {replicated}   {manual}   {unknown shard_as 1}   {maximal device=3}
//! {devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}
//! {devices=[2,2]<=[2,2]T(1,0) last_tile_dims={manual} metadata={op_name="a"}}
//! {{replicated}, {devices=[2]0,1}}            (one per tuple leaf)
//! ```
//!
//! Read by hand from the attribute's text: the HLO grammar takes it whole,
//! so an error here points at the offending character inside it.

use super::cursor::{AttrSyntaxError, Cursor};
use super::metadata::metadata_fields;
use crate::ir::metadata::Metadata;
use crate::ir::sharding::{
    ShardGroup, Sharding, ShardingKind, SingleSharding, SubgroupKind, Subgroups, TileDevices,
    TiledSharding,
};
use crate::util::join::join;
use std::collections::BTreeMap;
use std::fmt::Write;

type Result<T> = std::result::Result<T, AttrSyntaxError>;

/// Reads a whole `{...}` sharding.
pub(crate) fn parse_sharding(text: &str) -> Result<Sharding> {
    let mut c = Cursor::new(text);
    c.require("{")?;
    c.skip_ws();
    let sharding = if c.peek() == Some(b'{') || c.peek() == Some(b'}') {
        let mut leaves = Vec::new();
        while c.peek() == Some(b'{') {
            c.pos += 1;
            leaves.push(c.single()?);
            c.require("}")?;
            c.skip_ws();
            if c.peek() == Some(b',') {
                c.pos += 1;
                c.skip_ws();
            } else {
                break;
            }
        }
        Sharding::Tuple(leaves)
    } else {
        Sharding::Single(c.single()?)
    };
    c.require("}")?;
    c.skip_ws();
    if c.pos != text.len() {
        return c.fail("unexpected text after the sharding");
    }
    sharding.check().map_err(|e| AttrSyntaxError {
        offset: 0,
        message: e.to_string(),
    })?;
    Ok(sharding)
}

/// One sharding's keywords as read, before together they say which kind
/// it is.
struct Keywords {
    kind: Option<ShardingKind>,
    maximal: bool,
    device: Option<i64>,
    tiled: Option<(Vec<i64>, TileDevices)>,
    subgroups: Subgroups,
    metadata: Vec<Metadata>,
    shard_group: Option<ShardGroup>,
}

/// The sharding-specific readers.
impl Cursor<'_> {
    /// The body of one `{...}` sharding, up to its closing brace.
    fn single(&mut self) -> Result<SingleSharding> {
        let mut k = Keywords {
            kind: None,
            maximal: false,
            device: None,
            tiled: None,
            subgroups: Subgroups::None,
            metadata: Vec::new(),
            shard_group: None,
        };
        loop {
            self.skip_ws();
            if matches!(self.peek(), Some(b'}') | None) {
                break;
            }
            self.keyword(&mut k)?;
        }
        self.sharding_of(k)
    }

    /// One keyword and what it is given, into `k`.
    fn keyword(&mut self, k: &mut Keywords) -> Result<()> {
        let at = self.pos;
        let word = self.word().to_string();
        match word.as_str() {
            "replicated" => k.kind = Some(ShardingKind::Replicated),
            "manual" => k.kind = Some(ShardingKind::Manual),
            "unknown" => k.kind = Some(ShardingKind::Unknown),
            "unreduced" => k.kind = Some(ShardingKind::Unreduced),
            "maximal" => k.maximal = true,
            "device" => {
                self.require("=")?;
                k.device = Some(self.int()?);
            }
            "devices" => k.tiled = Some(self.tile_devices()?),
            "last_tile_dim_replicate" => k.subgroups = Subgroups::ReplicateLast,
            "last_tile_dims" => k.subgroups = Subgroups::Kinds(self.subgroup_kinds()?),
            "metadata" => self.metadata_list(&mut k.metadata)?,
            "shard_as" | "shard_like" => {
                k.shard_group = Some(ShardGroup {
                    id: self.int()?,
                    like: word == "shard_like",
                });
            }
            "" => {
                self.pos = at;
                let found: String = self.rest().chars().take(20).collect();
                return self.fail(format!("expected a sharding keyword, found `{found}`"));
            }
            other => {
                self.pos = at;
                return self.fail(format!("unknown sharding keyword '{other}'"));
            }
        }
        Ok(())
    }

    /// `=[2,2]0,1,2,3` or `=[2,2]<=[4]T(...)`: the tile dims and devices.
    fn tile_devices(&mut self) -> Result<(Vec<i64>, TileDevices)> {
        self.require("=")?;
        let dims = self.bracketed("[", "]")?;
        let devices = if self.eat("<=") {
            let (reshape, transpose) = self.iota()?;
            TileDevices::Iota { reshape, transpose }
        } else {
            TileDevices::List(self.ints()?)
        };
        Ok((dims, devices))
    }

    /// `={manual, replicated}`.
    fn subgroup_kinds(&mut self) -> Result<Vec<SubgroupKind>> {
        self.require("=")?;
        self.require("{")?;
        let mut kinds = Vec::new();
        loop {
            let at = self.pos;
            let w = self.word().to_string();
            match SubgroupKind::from_name(&w) {
                Some(k) => kinds.push(k),
                None => {
                    self.pos = at;
                    self.skip_ws();
                    return self.fail(format!(
                        "unknown subgroup kind '{w}' (expected replicated, manual or unreduced)"
                    ));
                }
            }
            if !self.eat(",") {
                break;
            }
        }
        self.require("}")?;
        Ok(kinds)
    }

    /// `={op_name="a"}`, or `={{...}, {...}}` for several, onto `out`.
    fn metadata_list(&mut self, out: &mut Vec<Metadata>) -> Result<()> {
        self.require("=")?;
        self.require("{")?;
        self.skip_ws();
        if self.peek() == Some(b'{') {
            loop {
                self.require("{")?;
                out.push(self.metadata()?);
                self.require("}")?;
                if !self.eat(",") {
                    break;
                }
            }
        } else {
            out.push(self.metadata()?);
        }
        self.require("}")
    }

    /// The sharding the keywords make, or why they make none.
    fn sharding_of(&self, k: Keywords) -> Result<SingleSharding> {
        let mut subgroups = k.subgroups;
        let kind = match (k.kind, k.maximal, k.device, k.tiled) {
            (Some(kind), false, None, None) => kind,
            (None, true, Some(device), None) => ShardingKind::Maximal { device },
            (None, false, None, Some((dims, devices))) => ShardingKind::Tiled(TiledSharding {
                dims,
                devices,
                subgroups: std::mem::replace(&mut subgroups, Subgroups::None),
            }),
            (None, true, None, _) => return self.fail("maximal sharding needs device=N"),
            (None, false, None, None) => {
                return self.fail(
                    "empty sharding: expected replicated, manual, unknown, maximal or devices=",
                )
            }
            _ => return self.fail("conflicting sharding kinds"),
        };
        if subgroups != Subgroups::None {
            return self.fail("last_tile_dim_replicate and last_tile_dims need devices=");
        }
        Ok(SingleSharding {
            kind,
            metadata: k.metadata,
            shard_group: k.shard_group,
        })
    }

    /// `op_name="a" source_line=3 ...` up to the closing brace.
    fn metadata(&mut self) -> Result<Metadata> {
        let start = self.pos;
        let mut fields = BTreeMap::new();
        loop {
            self.skip_ws();
            if matches!(self.peek(), Some(b'}') | None) {
                break;
            }
            let key = self.word().to_string();
            if key.is_empty() {
                return self.fail("expected a metadata field name");
            }
            self.require("=")?;
            self.skip_ws();
            let value = if self.peek() == Some(b'"') {
                self.string()?
            } else {
                let v = self.int()?;
                v.to_string()
            };
            fields.insert(key, value);
            self.eat(",");
        }
        metadata_fields(fields).map_err(|e| AttrSyntaxError {
            offset: start,
            message: e.to_string(),
        })
    }
}

/// `{...}` as XLA prints it; `metadata` writes one metadata's fields.
pub(crate) fn write_sharding(
    out: &mut String,
    s: &Sharding,
    metadata: &dyn Fn(&Metadata) -> String,
) {
    match s {
        Sharding::Single(s) => write_single(out, s, metadata),
        Sharding::Tuple(leaves) => {
            out.push('{');
            for (i, leaf) in leaves.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_single(out, leaf, metadata);
            }
            out.push('}');
        }
    }
}

fn write_single(out: &mut String, s: &SingleSharding, metadata: &dyn Fn(&Metadata) -> String) {
    out.push('{');
    match &s.kind {
        ShardingKind::Replicated => out.push_str("replicated"),
        ShardingKind::Manual => out.push_str("manual"),
        ShardingKind::Unknown => out.push_str("unknown"),
        ShardingKind::Unreduced => out.push_str("unreduced"),
        ShardingKind::Maximal { device } => {
            let _ = write!(out, "maximal device={device}");
        }
        ShardingKind::Tiled(t) => {
            let _ = write!(out, "devices=[{}]", join(&t.dims));
            match &t.devices {
                TileDevices::List(d) => out.push_str(&join(d)),
                TileDevices::Iota { reshape, transpose } => {
                    let _ = write!(out, "<=[{}]", join(reshape));
                    if !transpose.is_empty() {
                        let _ = write!(out, "T({})", join(transpose));
                    }
                }
            }
            match &t.subgroups {
                Subgroups::None => {}
                Subgroups::ReplicateLast => out.push_str(" last_tile_dim_replicate"),
                Subgroups::Kinds(k) => {
                    let names: Vec<&str> = k.iter().map(|k| k.name()).collect();
                    let _ = write!(out, " last_tile_dims={{{}}}", names.join(", "));
                }
            }
        }
    }
    match s.metadata.as_slice() {
        [] => {}
        [one] => {
            let _ = write!(out, " metadata={{{}}}", metadata(one));
        }
        many => {
            let all: Vec<String> = many
                .iter()
                .map(|m| format!("{{{}}}", metadata(m)))
                .collect();
            let _ = write!(out, " metadata={{{}}}", all.join(", "));
        }
    }
    if let Some(g) = s.shard_group {
        let _ = write!(out, " {} {}", g.keyword(), g.id);
    }
    out.push('}');
}
