//! Who takes part in a collective (`all-reduce`, `all-gather`, ...): XLA's
//! replica groups, and the channel that makes it cross-partition.

use crate::ir::iota::{check_permutation, iota_devices};
use crate::ir::mesh_groups::MeshGroups;
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
    pub fn check(&self, same_size: bool) -> Result<(), String> {
        match self {
            ReplicaGroups::List(groups) => {
                if let Some(id) = groups.iter().flatten().find(|&&id| id < 0) {
                    return Err(format!("replica group id {id} is negative"));
                }
                if let Some(id) = repeated_id(groups) {
                    return Err(format!("replica id {id} is in two groups"));
                }
                if groups.iter().any(Vec::is_empty) {
                    return Err("a replica group is empty".into());
                }
                if same_size && groups.iter().any(|g| g.len() != groups[0].len()) {
                    return Err("replica groups must all have the same size".into());
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
                    return Err(format!(
                        "replica groups [{groups},{group_size}]<=[{}] need positive sizes",
                        join(reshape)
                    ));
                }
                if groups.checked_mul(*group_size) != Some(n) {
                    return Err(format!(
                        "replica groups [{groups},{group_size}] need {} ids but the iota <=[{}] has {n}",
                        groups * group_size,
                        join(reshape)
                    ));
                }
                check_permutation(transpose, reshape.len())
            }
            ReplicaGroups::Mesh(m) => m.check(),
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
            dup.check(false).unwrap_err(),
            "replica id 1 is in two groups"
        );
        let ragged = ReplicaGroups::List(vec![vec![0, 1], vec![2]]);
        ragged.check(false).unwrap();
        assert!(ragged.check(true).is_err());
        let short = ReplicaGroups::Iota {
            groups: 2,
            group_size: 2,
            reshape: vec![8],
            transpose: vec![],
        };
        assert!(short.check(true).unwrap_err().contains("need 4 ids"));
    }
}
