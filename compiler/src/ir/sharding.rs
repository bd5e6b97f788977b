//! How an instruction's value is split across devices: XLA's `HloSharding`
//! (`sharding={...}` in text, `OpSharding` in a proto), kept exactly as
//! read so a module partitioned elsewhere round-trips. hlatc itself does not
//! partition; it carries shardings and checks that they are well formed.

use crate::ir::iota::{check_permutation, PermutationError};
use crate::ir::metadata::Metadata;
use crate::util::join::join;

/// An instruction's sharding: one for its whole value, or one per leaf of a
/// tuple-shaped value (in pre-order, as XLA flattens them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Sharding {
    Single(SingleSharding),
    Tuple(Vec<SingleSharding>),
}

/// A sharding of one array value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SingleSharding {
    pub kind: ShardingKind,
    /// Where the sharding came from (`metadata={...}` inside it).
    pub metadata: Vec<Metadata>,
    /// `shard_as N` / `shard_like N`.
    pub shard_group: Option<ShardGroup>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShardingKind {
    /// Every device holds the whole value.
    Replicated,
    /// Already partitioned by hand: the partitioner leaves it alone.
    Manual,
    /// A placeholder any other sharding overrides.
    Unknown,
    /// Each device holds a partial value that is never combined.
    Unreduced,
    /// One device holds the whole value.
    Maximal { device: i64 },
    /// The value is cut into tiles, one per entry of the tile assignment.
    Tiled(TiledSharding),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TiledSharding {
    /// The tile assignment's shape: one entry per array dimension, then one
    /// per subgroup dimension.
    pub dims: Vec<i64>,
    pub devices: TileDevices,
    pub subgroups: Subgroups,
}

/// Which device holds each tile, in row-major order of `dims`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TileDevices {
    /// `devices=[2,2]0,2,1,3`.
    List(Vec<i64>),
    /// `devices=[2,2]<=[2,2]T(1,0)`: `0..n` reshaped to `reshape`, then
    /// transposed by `transpose` (empty when written without `T(...)`).
    Iota {
        reshape: Vec<i64>,
        transpose: Vec<i64>,
    },
}

/// What the tile assignment's trailing dimensions mean.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Subgroups {
    /// Every dimension tiles the array.
    None,
    /// `last_tile_dim_replicate`: the last one replicates.
    ReplicateLast,
    /// `last_tile_dims={manual, replicated}`: one kind per trailing dim.
    Kinds(Vec<SubgroupKind>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubgroupKind {
    Replicated,
    Manual,
    Unreduced,
}

impl SubgroupKind {
    pub const ALL: [SubgroupKind; 3] = [
        SubgroupKind::Replicated,
        SubgroupKind::Manual,
        SubgroupKind::Unreduced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SubgroupKind::Replicated => "replicated",
            SubgroupKind::Manual => "manual",
            SubgroupKind::Unreduced => "unreduced",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// `OpSharding.Type`.
    pub fn proto(self) -> i32 {
        match self {
            SubgroupKind::Replicated => 0,
            SubgroupKind::Manual => 4,
            SubgroupKind::Unreduced => 6,
        }
    }

    pub fn from_proto(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.proto() == v)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShardGroup {
    pub id: i64,
    /// `shard_as` (exactly the same sharding) or `shard_like` (a hint).
    pub like: bool,
}

impl ShardGroup {
    pub fn keyword(self) -> &'static str {
        if self.like {
            "shard_like"
        } else {
            "shard_as"
        }
    }
}

impl SingleSharding {
    pub fn new(kind: ShardingKind) -> Self {
        SingleSharding {
            kind,
            metadata: Vec::new(),
            shard_group: None,
        }
    }
}

impl TiledSharding {
    /// How many tiles (devices) the assignment names.
    pub fn device_count(&self) -> i64 {
        match &self.devices {
            TileDevices::List(d) => d.len() as i64,
            TileDevices::Iota { reshape, .. } => reshape.iter().product(),
        }
    }

    /// Trailing tile dimensions that do not tile the array.
    pub fn subgroup_dims(&self) -> usize {
        match &self.subgroups {
            Subgroups::None => 0,
            Subgroups::ReplicateLast => 1,
            Subgroups::Kinds(k) => k.len(),
        }
    }
}

/// Why a sharding is not one XLA's parser accepts: its tile counts
/// disagree, a device is negative or holds two tiles, or a transpose does
/// not permute.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardingError {
    #[error("maximal sharding on device {0}")]
    MaximalDevice(i64),
    #[error("a tiled sharding needs at least one tile dimension")]
    NoTileDimension,
    #[error("tile dimension {0} is not positive")]
    TileDimension(i64),
    /// More trailing subgroup dimensions than the tile assignment has.
    #[error("{subgroups} subgroup dimensions in a {dims}-dimensional tile assignment")]
    SubgroupDimensions { subgroups: usize, dims: usize },
    /// The listed devices are not one per tile.
    #[error("tile assignment [{}] has {tiles} tiles but {listed} devices are listed", join(.dims))]
    DeviceCount {
        dims: Vec<i64>,
        tiles: i64,
        listed: usize,
    },
    #[error("device {0} is negative")]
    NegativeDevice(i64),
    #[error("device {0} holds two tiles")]
    DeviceTwice(i64),
    /// The device iota is empty, has a size below 1, or lays out another
    /// count of devices than there are tiles.
    #[error(
        "tile assignment [{}] has {tiles} tiles but the device iota <=[{}] has {devices}",
        join(.dims),
        join(.reshape)
    )]
    IotaCount {
        dims: Vec<i64>,
        tiles: i64,
        reshape: Vec<i64>,
        devices: i64,
    },
    #[error(transparent)]
    Permutation(#[from] PermutationError),
}

impl Sharding {
    /// Checks the sharding is well formed on its own, as XLA's parser does:
    /// tile counts agree, devices are distinct, a transpose permutes.
    pub fn check(&self) -> Result<(), ShardingError> {
        match self {
            Sharding::Single(s) => s.check(),
            Sharding::Tuple(leaves) => leaves.iter().try_for_each(SingleSharding::check),
        }
    }
}

impl SingleSharding {
    fn check(&self) -> Result<(), ShardingError> {
        match &self.kind {
            ShardingKind::Maximal { device } if *device < 0 => {
                Err(ShardingError::MaximalDevice(*device))
            }
            ShardingKind::Tiled(t) => t.check(),
            _ => Ok(()),
        }
    }
}

impl TiledSharding {
    fn check(&self) -> Result<(), ShardingError> {
        if self.dims.is_empty() {
            return Err(ShardingError::NoTileDimension);
        }
        if let Some(d) = self.dims.iter().find(|&&d| d < 1) {
            return Err(ShardingError::TileDimension(*d));
        }
        if self.subgroup_dims() > self.dims.len() {
            return Err(ShardingError::SubgroupDimensions {
                subgroups: self.subgroup_dims(),
                dims: self.dims.len(),
            });
        }
        let tiles: i64 = self.dims.iter().product();
        match &self.devices {
            TileDevices::List(devices) => {
                if devices.len() as i64 != tiles {
                    return Err(ShardingError::DeviceCount {
                        dims: self.dims.clone(),
                        tiles,
                        listed: devices.len(),
                    });
                }
                let mut seen = devices.clone();
                seen.sort_unstable();
                if let Some(d) = seen.iter().find(|&&d| d < 0) {
                    return Err(ShardingError::NegativeDevice(*d));
                }
                if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                    return Err(ShardingError::DeviceTwice(w[0]));
                }
            }
            TileDevices::Iota { reshape, transpose } => {
                let n: i64 = reshape.iter().product();
                if reshape.is_empty() || reshape.iter().any(|&d| d < 1) || n != tiles {
                    return Err(ShardingError::IotaCount {
                        dims: self.dims.clone(),
                        tiles,
                        reshape: reshape.clone(),
                        devices: n,
                    });
                }
                check_permutation(transpose, reshape.len())?;
            }
        }
        Ok(())
    }
}
