//! Who takes part in a collective (`all-reduce`, `all-gather`, ...): XLA's
//! replica groups, and the channel that makes it cross-partition.

use crate::ir::iota::{check_permutation, iota_devices, PermutationError};
use crate::ir::mesh_groups::{MeshGroups, MeshGroupsError};
use crate::util::join::join;

/// `replica_groups=`: an explicit list of groups, or an iota of all device
/// ids reshaped and transposed, then read as `[groups, group_size]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReplicaGroups {
    /// `{{0,1},{2,3}}`; empty (`{}`) means one group of every participant.
    List(Vec<Vec<i64>>),
    /// `[2,4]<=[4,2]T(1,0)`.
    Iota {
        groups: i64,
        group_size: i64,
        reshape: Vec<i64>,
        /// Empty when written without `T(...)`.
        transpose: Vec<i64>,
    },
    /// `mesh['a'=2,'b'=4] {'b'}`: groups along axes of a named mesh.
    Mesh(MeshGroups),
}

impl Default for ReplicaGroups {
    fn default() -> Self {
        ReplicaGroups::List(Vec::new())
    }
}

/// The attributes every replica-grouped collective shares.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Collective {
    pub replica_groups: ReplicaGroups,
    /// `channel_id=`: set for cross-partition (SPMD) collectives.
    pub channel_id: Option<i64>,
    /// `use_global_device_ids=true`: group members are flattened
    /// `replica * partitions + partition` ids.
    pub use_global_device_ids: bool,
    /// `constrain_layout=true`: the operands' layouts are fixed.
    pub constrain_layout: bool,
}

/// Why replica groups are not ones XLA's parser and verifier accept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaGroupsError {
    #[error("replica group id {0} is negative")]
    NegativeId(i64),
    /// The smallest id that is in two groups, or twice in one.
    #[error("replica id {0} is in two groups")]
    RepeatedId(i64),
    #[error("a replica group is empty")]
    EmptyGroup,
    /// The op needs groups of one size and they differ.
    #[error("replica groups must all have the same size")]
    UnequalSizes,
    /// An iota `[groups,group_size]<=[reshape]` with a size below 1.
    #[error("replica groups [{groups},{group_size}]<=[{}] need positive sizes", join(.reshape))]
    IotaSizes {
        groups: i64,
        group_size: i64,
        reshape: Vec<i64>,
    },
    /// An iota whose groups hold another count of ids than it lays out.
    /// The count the groups need is printed in i128: an i64 overflow is
    /// one way for the counts to disagree.
    #[error(
        "replica groups [{groups},{group_size}] need {} ids but the iota <=[{}] has {devices}",
        i128::from(*.groups) * i128::from(*.group_size),
        join(.reshape)
    )]
    IotaCount {
        groups: i64,
        group_size: i64,
        reshape: Vec<i64>,
        /// How many ids the iota lays out.
        devices: i64,
    },
    #[error(transparent)]
    Permutation(#[from] PermutationError),
    #[error(transparent)]
    Mesh(#[from] MeshGroupsError),
}

/// The smallest id in two of `groups` (or twice in one), if any; the ids
/// are not negative. The verifier checks every collective of a step of
/// thousands of ranks, so dense ids are marked in a bitmap, not sorted.
fn repeated_id(groups: &[Vec<i64>]) -> Option<i64> {
    let count: usize = groups.iter().map(Vec::len).sum();
    let max = groups.iter().flatten().copied().max()?;
    if max as u64 > 4 * count as u64 + 64 {
        let mut ids: Vec<i64> = groups.iter().flatten().copied().collect();
        ids.sort_unstable();
        return ids.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
    }
    let mut seen = vec![false; max as usize + 1];
    let mut repeated: Option<i64> = None;
    for &id in groups.iter().flatten() {
        if std::mem::replace(&mut seen[id as usize], true) {
            repeated = Some(repeated.map_or(id, |r| r.min(id)));
        }
    }
    repeated
}

impl ReplicaGroups {
    /// The groups as explicit lists of ids.
    pub fn expanded(&self) -> Vec<Vec<i64>> {
        match self {
            ReplicaGroups::List(groups) => groups.clone(),
            ReplicaGroups::Iota {
                group_size,
                reshape,
                transpose,
                ..
            } => iota_devices(reshape, transpose)
                .chunks((*group_size).max(1) as usize)
                .map(<[i64]>::to_vec)
                .collect(),
            ReplicaGroups::Mesh(m) => m.expanded(),
        }
    }

    /// Members per group, when the groups say (an empty list leaves it to
    /// the device count).
    pub fn group_size(&self) -> Option<i64> {
        match self {
            ReplicaGroups::List(groups) => groups.first().map(|g| g.len() as i64),
            ReplicaGroups::Iota { group_size, .. } => Some(*group_size),
            ReplicaGroups::Mesh(m) => Some(m.group_size()),
        }
    }

    /// Well formed as XLA's parser and verifier require: ids are
    /// non-negative and appear once, an iota's shape covers its devices and
    /// its transpose permutes, and (where `same_size`) every group has as
    /// many members.
    pub fn check(&self, same_size: bool) -> Result<(), ReplicaGroupsError> {
        match self {
            ReplicaGroups::List(groups) => {
                if let Some(id) = groups.iter().flatten().find(|&&id| id < 0) {
                    return Err(ReplicaGroupsError::NegativeId(*id));
                }
                if let Some(id) = repeated_id(groups) {
                    return Err(ReplicaGroupsError::RepeatedId(id));
                }
                if groups.iter().any(Vec::is_empty) {
                    return Err(ReplicaGroupsError::EmptyGroup);
                }
                if same_size && groups.iter().any(|g| g.len() != groups[0].len()) {
                    return Err(ReplicaGroupsError::UnequalSizes);
                }
                Ok(())
            }
            ReplicaGroups::Iota {
                groups,
                group_size,
                reshape,
                transpose,
            } => {
                let n: i64 = reshape.iter().product();
                if *groups < 1 || *group_size < 1 || reshape.iter().any(|&d| d < 1) {
                    return Err(ReplicaGroupsError::IotaSizes {
                        groups: *groups,
                        group_size: *group_size,
                        reshape: reshape.clone(),
                    });
                }
                if groups.checked_mul(*group_size) != Some(n) {
                    return Err(ReplicaGroupsError::IotaCount {
                        groups: *groups,
                        group_size: *group_size,
                        reshape: reshape.clone(),
                        devices: n,
                    });
                }
                Ok(check_permutation(transpose, reshape.len())?)
            }
            ReplicaGroups::Mesh(m) => Ok(m.check()?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iota_expands_as_xla_reads_it() {
        // [2,4]<=[4,2]T(1,0): 0..8 as 4x2, transposed to 2x4.
        let g = ReplicaGroups::Iota {
            groups: 2,
            group_size: 4,
            reshape: vec![4, 2],
            transpose: vec![1, 0],
        };
        assert_eq!(g.expanded(), [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        g.check(true).unwrap();
    }

    #[test]
    fn malformed_groups_are_named() {
        let dup = ReplicaGroups::List(vec![vec![0, 1], vec![1, 2]]);
        assert_eq!(
            dup.check(false).unwrap_err().to_string(),
            "replica id 1 is in two groups"
        );
        let ragged = ReplicaGroups::List(vec![vec![0, 1], vec![2]]);
        ragged.check(false).unwrap();
        assert_eq!(
            ragged.check(true).unwrap_err(),
            ReplicaGroupsError::UnequalSizes
        );
        let short = ReplicaGroups::Iota {
            groups: 2,
            group_size: 2,
            reshape: vec![8],
            transpose: vec![],
        };
        assert_eq!(
            short.check(true).unwrap_err().to_string(),
            "replica groups [2,2] need 4 ids but the iota <=[8] has 8"
        );
    }
}
