//! Who takes part in a collective (`all-reduce`, `all-gather`, ...): XLA's
//! replica groups, and the channel that makes it cross-partition.

use crate::ir::iota::{check_permutation, iota_devices, PermutationError};
use crate::ir::mesh_groups::{MeshGroups, MeshGroupsError};
use crate::util::join::join;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// `replica_groups=`: an explicit list of groups, or an iota of all device
/// ids reshaped and transposed, then read as `[groups, group_size]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReplicaGroups {
    /// `{{0,1},{2,3}}`; empty (`{}`) means one group of every participant.
    List(GroupList),
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
        ReplicaGroups::List(GroupList::default())
    }
}

/// Explicit replica groups, held once and shared by every collective that
/// names them. A sharded step of 2,048 ranks has about a thousand
/// collectives over a handful of group sets (the TP groups, the DP
/// groups, ...), each 2,048 ids: the set is checked once, and its text
/// written once, whatever the number of collectives that share it.
/// Equality and hashing are by the groups, as for the plain lists.
#[derive(Clone, Default)]
pub struct GroupList(Arc<GroupListData>);

#[derive(Default)]
struct GroupListData {
    groups: Vec<Vec<i64>>,
    /// A hash of `groups`, so hashing an op with 2,048 ids is one word.
    fingerprint: u64,
    /// [`ReplicaGroups::check`] of these groups, without and with
    /// `same_size`.
    checked: [OnceLock<Result<(), ReplicaGroupsError>>; 2],
    /// The groups as a format writes them (its writer's choice: the text
    /// format's `{{0,1},{2,3}}`).
    text: OnceLock<String>,
    /// Each group as a binary format encodes it (the proto writer's
    /// `ReplicaGroup`), so that each collective copies bytes instead of
    /// encoding 2,048 ids again.
    encoded: OnceLock<EncodedGroups>,
}

/// Every group of a set, each encoded by one writer, end to end.
#[derive(Debug, Default)]
pub struct EncodedGroups {
    bytes: Vec<u8>,
    /// Where each group's bytes end in `bytes`.
    ends: Vec<usize>,
}

impl EncodedGroups {
    /// Group `index`'s bytes; empty past the last group.
    pub fn group(&self, index: usize) -> &[u8] {
        let start = match index {
            0 => 0,
            _ => self
                .ends
                .get(index - 1)
                .copied()
                .unwrap_or(self.bytes.len()),
        };
        let end = self.ends.get(index).copied().unwrap_or(start);
        &self.bytes[start..end]
    }
}

impl GroupList {
    pub fn new(groups: Vec<Vec<i64>>) -> Self {
        let mut h = crate::util::fx::FxHasher::default();
        groups.hash(&mut h);
        GroupList(Arc::new(GroupListData {
            fingerprint: h.finish(),
            groups,
            checked: Default::default(),
            text: OnceLock::new(),
            encoded: OnceLock::new(),
        }))
    }

    pub fn groups(&self) -> &[Vec<i64>] {
        &self.0.groups
    }

    /// Whether `self` and `other` are the one shared set (not only equal).
    pub fn same_set(&self, other: &GroupList) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The groups' text as `write` spells it, written on the first call
    /// and kept for every collective that shares the set. Every caller
    /// must spell the groups alike (one format owns this).
    pub fn text_with(&self, write: impl FnOnce(&[Vec<i64>]) -> String) -> &str {
        self.0.text.get_or_init(|| write(&self.0.groups))
    }

    /// Each group as `encode` appends it to a buffer, encoded on the first
    /// call and kept for every collective that shares the set. As with
    /// [`GroupList::text_with`], one format owns this.
    pub fn encoded_with(&self, encode: impl Fn(&[i64], &mut Vec<u8>)) -> &EncodedGroups {
        self.0.encoded.get_or_init(|| {
            let mut out = EncodedGroups::default();
            for group in &self.0.groups {
                encode(group, &mut out.bytes);
                out.ends.push(out.bytes.len());
            }
            out
        })
    }
}

impl std::ops::Deref for GroupList {
    type Target = [Vec<i64>];
    fn deref(&self) -> &[Vec<i64>] {
        &self.0.groups
    }
}

impl From<Vec<Vec<i64>>> for GroupList {
    fn from(groups: Vec<Vec<i64>>) -> Self {
        GroupList::new(groups)
    }
}

impl PartialEq for GroupList {
    fn eq(&self, other: &Self) -> bool {
        self.same_set(other)
            || (self.0.fingerprint == other.0.fingerprint && self.0.groups == other.0.groups)
    }
}

impl Eq for GroupList {}

impl Hash for GroupList {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.fingerprint);
    }
}

impl std::fmt::Debug for GroupList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.groups.fmt(f)
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

/// [`ReplicaGroups::check`] of explicit groups.
fn check_list(groups: &[Vec<i64>], same_size: bool) -> Result<(), ReplicaGroupsError> {
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

impl ReplicaGroups {
    /// The groups as explicit lists of ids.
    pub fn expanded(&self) -> Vec<Vec<i64>> {
        match self {
            ReplicaGroups::List(groups) => groups.to_vec(),
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

    /// The same groups in XLA's compact form, `[groups,group_size]<=[...]`,
    /// when an iota lays them out (a sharded step's TP, DP and PP groups
    /// all are); `None` for any other groups, an empty list and a mesh.
    pub fn to_iota(&self) -> Option<ReplicaGroups> {
        let ReplicaGroups::List(list) = self else {
            return None;
        };
        let group_size = list.first()?.len();
        if group_size == 0 || list.iter().any(|g| g.len() != group_size) {
            return None;
        }
        let ids: Vec<i64> = list.iter().flatten().copied().collect();
        let (reshape, transpose) = crate::ir::iota::iota_of(&ids)?;
        Some(ReplicaGroups::Iota {
            groups: list.len() as i64,
            group_size: group_size as i64,
            reshape,
            transpose,
        })
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
            ReplicaGroups::List(list) => list.0.checked[usize::from(same_size)]
                .get_or_init(|| check_list(list.groups(), same_size))
                .clone(),
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
