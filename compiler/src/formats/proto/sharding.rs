//! [`Sharding`] as `xla.OpSharding`, both ways, as XLA's
//! `HloSharding::ToProto` and `FromProto` write and read it.

use super::messages::{OpMetadata, OpSharding};
use crate::ir::metadata::Metadata;
use crate::ir::sharding::{
    ShardGroup, Sharding, ShardingError, ShardingKind, SingleSharding, SubgroupKind, Subgroups,
    TileDevices, TiledSharding,
};

// `OpSharding.Type`.
const REPLICATED: i32 = 0;
const MAXIMAL: i32 = 1;
const TUPLE: i32 = 2;
const OTHER: i32 = 3;
const MANUAL: i32 = 4;
const UNKNOWN: i32 = 5;
const UNREDUCED: i32 = 6;
// `OpSharding.ShardGroupType`.
const SHARD_LIKE: i32 = 1;

pub(crate) fn metadata_to_proto(md: &Metadata) -> OpMetadata {
    OpMetadata {
        op_type: md.op_type.clone(),
        op_name: md.op_name.clone(),
        source_file: md.source_file.clone(),
        source_line: md.source_line as i32,
        deduplicated_name: md.deduplicated_name.clone(),
        stack_frame_id: md.stack_frame_id,
        scheduling_name: md.scheduling_name.clone(),
        source_end_line: md.source_end_line as i32,
        source_column: md.source_column as i32,
        source_end_column: md.source_end_column as i32,
    }
}

pub(crate) fn metadata_from_proto(m: &OpMetadata) -> Metadata {
    Metadata {
        op_type: m.op_type.clone(),
        op_name: m.op_name.clone(),
        source_file: m.source_file.clone(),
        source_line: m.source_line as i64,
        source_end_line: m.source_end_line as i64,
        source_column: m.source_column as i64,
        source_end_column: m.source_end_column as i64,
        stack_frame_id: m.stack_frame_id,
        scheduling_name: m.scheduling_name.clone(),
        deduplicated_name: m.deduplicated_name.clone(),
    }
}

pub(crate) fn to_proto(s: &Sharding) -> OpSharding {
    match s {
        Sharding::Single(s) => single_to_proto(s),
        Sharding::Tuple(leaves) => OpSharding {
            r#type: TUPLE,
            tuple_shardings: leaves.iter().map(single_to_proto).collect(),
            ..Default::default()
        },
    }
}

fn single_to_proto(s: &SingleSharding) -> OpSharding {
    let mut p = OpSharding {
        metadata: s.metadata.iter().map(metadata_to_proto).collect(),
        ..Default::default()
    };
    if let Some(g) = s.shard_group {
        p.is_shard_group = true;
        p.shard_group_id = g.id;
        p.shard_group_type = i32::from(g.like) * SHARD_LIKE;
    }
    match &s.kind {
        ShardingKind::Replicated => p.r#type = REPLICATED,
        ShardingKind::Manual => p.r#type = MANUAL,
        ShardingKind::Unknown => p.r#type = UNKNOWN,
        ShardingKind::Unreduced => p.r#type = UNREDUCED,
        ShardingKind::Maximal { device } => {
            p.r#type = MAXIMAL;
            p.tile_assignment_dimensions = vec![1];
            p.tile_assignment_devices = vec![*device];
        }
        ShardingKind::Tiled(t) => {
            p.r#type = OTHER;
            p.tile_assignment_dimensions = t.dims.clone();
            match &t.devices {
                TileDevices::List(d) => p.tile_assignment_devices = d.clone(),
                TileDevices::Iota { reshape, transpose } => {
                    p.iota_reshape_dims = reshape.clone();
                    // XLA writes the permutation even when it is the identity.
                    p.iota_transpose_perm = if transpose.is_empty() {
                        (0..reshape.len() as i32).collect()
                    } else {
                        transpose.iter().map(|&d| d as i32).collect()
                    };
                }
            }
            match &t.subgroups {
                Subgroups::None => {}
                Subgroups::ReplicateLast => p.replicate_on_last_tile_dim = true,
                Subgroups::Kinds(k) => p.last_tile_dims = k.iter().map(|k| k.proto()).collect(),
            }
        }
    }
    p
}

/// Why an `OpSharding` is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ShardingProtoError {
    #[error("a tuple sharding carries metadata or a shard group itself")]
    TupleCarriesOwn,
    #[error("OpSharding.tile_shape is not modeled")]
    TileShape,
    #[error("an OpSharding of type {0} lists tuple_shardings")]
    TupleShardingsOnType(i32),
    #[error("an OpSharding of type {0} carries a tile assignment")]
    TileAssignmentOnType(i32),
    #[error("a maximal sharding names {0} devices")]
    MaximalDeviceCount(usize),
    #[error(
        "a tiled OpSharding needs exactly one of tile_assignment_devices and iota_reshape_dims"
    )]
    TiledDevices,
    #[error("last_tile_dims names OpSharding type {0}")]
    UnknownSubgroupKind(i32),
    #[error("replicate_on_last_tile_dim and last_tile_dims are both set")]
    ReplicateAndLastTileDims,
    #[error("unknown OpSharding type {0}")]
    UnknownType(i32),
    /// Read, but not a sharding hlatc holds ([`Sharding::check`]).
    #[error(transparent)]
    Invalid(#[from] ShardingError),
}

pub(crate) fn from_proto(p: &OpSharding) -> Result<Sharding, ShardingProtoError> {
    let s = if p.r#type == TUPLE {
        if !p.metadata.is_empty() || p.is_shard_group {
            return Err(ShardingProtoError::TupleCarriesOwn);
        }
        Sharding::Tuple(
            p.tuple_shardings
                .iter()
                .map(single_from_proto)
                .collect::<Result<_, _>>()?,
        )
    } else {
        Sharding::Single(single_from_proto(p)?)
    };
    s.check()?;
    Ok(s)
}

fn single_from_proto(p: &OpSharding) -> Result<SingleSharding, ShardingProtoError> {
    if p.tile_shape.is_some() {
        return Err(ShardingProtoError::TileShape);
    }
    if !p.tuple_shardings.is_empty() && p.r#type != TUPLE {
        return Err(ShardingProtoError::TupleShardingsOnType(p.r#type));
    }
    let bare = |kind: ShardingKind| -> Result<ShardingKind, ShardingProtoError> {
        if p.tile_assignment_dimensions.is_empty()
            && p.tile_assignment_devices.is_empty()
            && p.iota_reshape_dims.is_empty()
            && p.last_tile_dims.is_empty()
            && !p.replicate_on_last_tile_dim
        {
            Ok(kind)
        } else {
            Err(ShardingProtoError::TileAssignmentOnType(p.r#type))
        }
    };
    let kind = match p.r#type {
        REPLICATED => bare(ShardingKind::Replicated)?,
        MANUAL => bare(ShardingKind::Manual)?,
        UNKNOWN => bare(ShardingKind::Unknown)?,
        UNREDUCED => bare(ShardingKind::Unreduced)?,
        MAXIMAL => match p.tile_assignment_devices.as_slice() {
            [device] => ShardingKind::Maximal { device: *device },
            d => return Err(ShardingProtoError::MaximalDeviceCount(d.len())),
        },
        OTHER => ShardingKind::Tiled(tiled_from_proto(p)?),
        t => return Err(ShardingProtoError::UnknownType(t)),
    };
    Ok(SingleSharding {
        kind,
        metadata: p.metadata.iter().map(metadata_from_proto).collect(),
        shard_group: p.is_shard_group.then_some(ShardGroup {
            id: p.shard_group_id,
            like: p.shard_group_type == SHARD_LIKE,
        }),
    })
}

fn tiled_from_proto(p: &OpSharding) -> Result<TiledSharding, ShardingProtoError> {
    let devices = match (
        p.tile_assignment_devices.is_empty(),
        p.iota_reshape_dims.is_empty(),
    ) {
        (false, true) => TileDevices::List(p.tile_assignment_devices.clone()),
        (true, false) => {
            let transpose: Vec<i64> = p.iota_transpose_perm.iter().map(|&d| d as i64).collect();
            let identity = transpose.iter().enumerate().all(|(i, &d)| d == i as i64);
            TileDevices::Iota {
                reshape: p.iota_reshape_dims.clone(),
                transpose: if identity { Vec::new() } else { transpose },
            }
        }
        _ => return Err(ShardingProtoError::TiledDevices),
    };
    let subgroups = match (p.replicate_on_last_tile_dim, p.last_tile_dims.as_slice()) {
        (false, []) => Subgroups::None,
        (true, []) => Subgroups::ReplicateLast,
        (false, kinds) => Subgroups::Kinds(
            kinds
                .iter()
                .map(|&k| {
                    SubgroupKind::from_proto(k).ok_or(ShardingProtoError::UnknownSubgroupKind(k))
                })
                .collect::<Result<_, _>>()?,
        ),
        (true, _) => return Err(ShardingProtoError::ReplicateAndLastTileDims),
    };
    Ok(TiledSharding {
        dims: p.tile_assignment_dimensions.clone(),
        devices,
        subgroups,
    })
}
