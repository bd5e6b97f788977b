//! A collective's participants in `HloInstructionProto`: the explicit
//! groups in `replica_groups` (49), which every XLA reads. An iota goes in
//! `iota_collective_device_list` (92), where current XLA writes and reads
//! it, with the same groups spelled out in 49 for older readers
//! (neuronx-cc's among them), which skip 92. An iota or a list in
//! `collective_device_list` (87), as XLA writes in between, is read too.
//! Groups over a mesh go in `mesh_axes_replica_group_list` (93) alone, as
//! XLA writes them: the order it spells their members out in is its own.

use super::messages::{
    AxisRefProto, CollectiveDeviceListProto, HloInstructionProto, IotaDeviceIdsProto,
    IotaReplicaGroupListProto, ListedGroup, MeshAxesReplicaGroupListProto, MeshAxisProto,
    MeshProto, SourceTarget, SubAxisProto,
};
use crate::ir::collective::{Collective, ReplicaGroups};
use crate::ir::iota::without_identity;
use crate::ir::mesh_groups::{AxisRef, MeshDevices, MeshGroups, MeshGroupsError};

/// Why a collective's participants are refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CollectiveProtoError {
    #[error("mesh_axes_replica_group_list is set beside other replica groups (XLA sets one)")]
    MeshBesideOthers,
    #[error("collective_device_list and iota_collective_device_list are both set (XLA sets one)")]
    BothDeviceLists,
    /// `replica_groups` (49) and the named field both set, and apart: one
    /// of them would be lost.
    #[error("replica_groups and {0} name different groups")]
    GroupsDiffer(&'static str),
    #[error("MeshProto has both device_ids and iota_device_ids (XLA sets one)")]
    MeshDevicesTwice,
    #[error("mesh axis index {0} is negative")]
    NegativeMeshAxis(i64),
    /// Read, but not groups hlatc holds ([`MeshGroups::check`]).
    #[error(transparent)]
    InvalidMesh(#[from] MeshGroupsError),
    #[error("dynamic_slice_sizes holds {sizes} sizes, not a whole number of slices of the buffers' rank {rank}")]
    SliceSizes { sizes: usize, rank: usize },
}

pub(super) fn fill_collective(c: &Collective, p: &mut HloInstructionProto) {
    if let ReplicaGroups::Mesh(m) = &c.replica_groups {
        p.mesh_axes_replica_group_list = Some(Box::new(mesh_to_proto(m)));
    } else if let ReplicaGroups::List(list) = &c.replica_groups {
        p.replica_groups = ListedGroup::all_of(list);
    } else {
        p.replica_groups = c
            .replica_groups
            .expanded()
            .into_iter()
            .map(ListedGroup::new)
            .collect();
    }
    if let ReplicaGroups::Iota {
        groups,
        group_size,
        reshape,
        transpose,
    } = &c.replica_groups
    {
        p.iota_collective_device_list = Some(Box::new(IotaReplicaGroupListProto {
            num_replica_groups: *groups,
            num_devices_per_group: *group_size,
            iota_reshape_dims: reshape.clone(),
            iota_transpose_perm: transpose.iter().map(|&d| d as i32).collect(),
        }));
    }
    p.channel_id = c.channel_id.unwrap_or(0);
    p.use_global_device_ids = c.use_global_device_ids;
    p.constrain_layout = c.constrain_layout;
}

/// The channel id, where one is set (XLA: a non-positive one is none).
pub(super) fn channel_from_proto(p: &HloInstructionProto) -> Option<i64> {
    (p.channel_id > 0).then_some(p.channel_id)
}

pub(super) fn collective_from_proto(
    p: &HloInstructionProto,
) -> Result<Collective, CollectiveProtoError> {
    let listed: Vec<Vec<i64>> = p
        .replica_groups
        .iter()
        .map(|g| g.replica_ids().to_vec())
        .collect();
    if let Some(mesh) = p.mesh_axes_replica_group_list.as_deref() {
        if !listed.is_empty()
            || p.collective_device_list.is_some()
            || p.iota_collective_device_list.is_some()
        {
            return Err(CollectiveProtoError::MeshBesideOthers);
        }
        let groups = mesh_from_proto(mesh)?;
        return Ok(Collective {
            replica_groups: ReplicaGroups::Mesh(groups),
            channel_id: channel_from_proto(p),
            use_global_device_ids: p.use_global_device_ids,
            constrain_layout: p.constrain_layout,
        });
    }
    let replica_groups = match (
        p.collective_device_list.as_deref(),
        p.iota_collective_device_list.as_deref(),
    ) {
        (Some(_), Some(_)) => return Err(CollectiveProtoError::BothDeviceLists),
        (None, Some(iota)) => {
            let groups = iota_from_proto(iota);
            if !listed.is_empty() && groups.expanded() != listed {
                return Err(CollectiveProtoError::GroupsDiffer(
                    "iota_collective_device_list",
                ));
            }
            groups
        }
        (None, None) => ReplicaGroups::List(listed.into()),
        (
            Some(CollectiveDeviceListProto {
                replica_groups,
                iota_replica_group_list,
            }),
            None,
        ) => {
            let groups = match iota_replica_group_list {
                Some(iota) => iota_from_proto(iota),
                None => ReplicaGroups::List(
                    replica_groups
                        .iter()
                        .map(|g| g.replica_ids.clone())
                        .collect::<Vec<_>>()
                        .into(),
                ),
            };
            // Both fields set must agree, or one of them would be lost.
            if !listed.is_empty() && groups.expanded() != listed {
                return Err(CollectiveProtoError::GroupsDiffer("collective_device_list"));
            }
            groups
        }
    };
    Ok(Collective {
        replica_groups,
        channel_id: channel_from_proto(p),
        use_global_device_ids: p.use_global_device_ids,
        constrain_layout: p.constrain_layout,
    })
}

fn mesh_to_proto(m: &MeshGroups) -> MeshAxesReplicaGroupListProto {
    let (device_ids, iota_device_ids) = match &m.devices {
        MeshDevices::Iota => (Vec::new(), None),
        MeshDevices::List(ids) => (ids.clone(), None),
        MeshDevices::Tile { reshape, transpose } => (
            Vec::new(),
            Some(IotaDeviceIdsProto {
                reshape_dims: reshape.clone(),
                transpose_perm: transpose.iter().map(|&d| d as i32).collect(),
            }),
        ),
    };
    MeshAxesReplicaGroupListProto {
        mesh: Some(MeshProto {
            axes: m
                .axes
                .iter()
                .map(|(name, size)| MeshAxisProto {
                    name: name.clone(),
                    size: *size,
                })
                .collect(),
            device_ids,
            iota_device_ids,
        }),
        axes: m
            .spans
            .iter()
            .map(|r| AxisRefProto {
                mesh_axis_index: r.axis as i64,
                sub_axis_info: r
                    .sub
                    .map(|(pre_size, size)| SubAxisProto { pre_size, size }),
            })
            .collect(),
    }
}

fn mesh_from_proto(p: &MeshAxesReplicaGroupListProto) -> Result<MeshGroups, CollectiveProtoError> {
    let mesh = p.mesh.clone().unwrap_or_default();
    let devices = match (mesh.device_ids.is_empty(), &mesh.iota_device_ids) {
        (true, None) => MeshDevices::Iota,
        (false, None) => MeshDevices::List(mesh.device_ids),
        (true, Some(iota)) => MeshDevices::Tile {
            reshape: iota.reshape_dims.clone(),
            transpose: without_identity(
                iota.transpose_perm.iter().map(|&d| i64::from(d)).collect(),
            ),
        },
        (false, Some(_)) => return Err(CollectiveProtoError::MeshDevicesTwice),
    };
    let spans = p
        .axes
        .iter()
        .map(|r| {
            usize::try_from(r.mesh_axis_index)
                .map(|axis| AxisRef {
                    axis,
                    sub: r.sub_axis_info.as_ref().map(|s| (s.pre_size, s.size)),
                })
                .map_err(|_| CollectiveProtoError::NegativeMeshAxis(r.mesh_axis_index))
        })
        .collect::<Result<_, _>>()?;
    let groups = MeshGroups {
        axes: mesh.axes.into_iter().map(|a| (a.name, a.size)).collect(),
        devices,
        spans,
    };
    groups.check()?;
    Ok(groups)
}

fn iota_from_proto(iota: &IotaReplicaGroupListProto) -> ReplicaGroups {
    ReplicaGroups::Iota {
        groups: iota.num_replica_groups,
        group_size: iota.num_devices_per_group,
        reshape: iota.iota_reshape_dims.clone(),
        transpose: without_identity(
            iota.iota_transpose_perm
                .iter()
                .map(|&d| i64::from(d))
                .collect(),
        ),
    }
}

pub(super) fn pairs_to_proto(pairs: &[(i64, i64)]) -> Vec<SourceTarget> {
    pairs
        .iter()
        .map(|&(source, target)| SourceTarget { source, target })
        .collect()
}

pub(super) fn pairs_from_proto(p: &HloInstructionProto) -> Vec<(i64, i64)> {
    p.source_target_pairs
        .iter()
        .map(|st| (st.source, st.target))
        .collect()
}

/// An in-place collective-permute's slice sizes, which XLA's proto keeps
/// flattened in `dynamic_slice_sizes`: one list per transfer, as long as
/// the rank of the buffers (the first array the instruction's shape holds).
pub(super) fn slice_sizes_from_proto(
    p: &HloInstructionProto,
) -> Result<Vec<Vec<i64>>, CollectiveProtoError> {
    let flat = &p.dynamic_slice_sizes;
    if flat.is_empty() {
        return Ok(Vec::new());
    }
    let mut shape = p.shape.as_deref();
    while let Some(s) = shape.filter(|s| !s.tuple_shapes.is_empty()) {
        shape = s.tuple_shapes.first();
    }
    let rank = shape.map_or(0, |s| s.dimensions.len());
    if rank == 0 || !flat.len().is_multiple_of(rank) {
        return Err(CollectiveProtoError::SliceSizes {
            sizes: flat.len(),
            rank,
        });
    }
    Ok(flat.chunks(rank).map(<[i64]>::to_vec).collect())
}
