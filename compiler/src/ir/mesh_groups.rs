//! Replica groups over a named mesh of devices, as XLA writes them in the
//! programs it partitions (`MeshAxesReplicaGroupList`):
//!
//! ```text
//! mesh['a'=2,'b'=4] {'b'}                                  groups along b
//! mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a','b':(2)2}
//! ```
//!
//! The mesh lays the devices out over its axes (row-major, `a` the most
//! major); a group holds the devices that differ only along the listed
//! axes, one group for each position along the others. `'b':(2)2` is a
//! sub-axis: axis `b` (size 4) seen as `[2, 2, 1]`, its middle part.

use crate::ir::iota::{check_permutation, iota_devices, PermutationError};
use crate::util::join::join;

/// Which devices sit where in the mesh.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MeshDevices {
    /// `0, 1, 2, ...` in order: written without `device_ids=`.
    Iota,
    /// `device_ids=(3,2,1,0)`.
    List(Vec<i64>),
    /// `device_ids=([4,2]T(1,0))`: the ids in order, reshaped and
    /// transposed (`transpose` empty when written without `T(...)`).
    Tile {
        reshape: Vec<i64>,
        transpose: Vec<i64>,
    },
}

/// One of the axes a group spans: a mesh axis by index, or part of one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisRef {
    pub axis: usize,
    /// `(pre_size, size)` of a sub-axis: the axis split as
    /// `[pre_size, size, rest]`, major to minor, and its middle part.
    pub sub: Option<(i64, i64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MeshGroups {
    /// The mesh's axes, major to minor: name and size.
    pub axes: Vec<(String, i64)>,
    pub devices: MeshDevices,
    /// The axes each group spans, in the order written.
    pub spans: Vec<AxisRef>,
}

/// Why replica groups over a mesh are not ones XLA would hold: the mesh's
/// axes, its devices or the axes the groups span are malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeshGroupsError {
    #[error("mesh axis '{name}' has size {size}")]
    AxisSize { name: String, size: i64 },
    #[error("mesh axis '{0}' is named twice")]
    AxisNamedTwice(String),
    /// `device_ids=(...)` is not a permutation of the mesh's ids.
    #[error("device_ids=({}) are not the {devices} devices of the mesh, each once", join(.ids))]
    DeviceList { ids: Vec<i64>, devices: i64 },
    /// `device_ids=([...])` has another count of ids than the mesh.
    #[error("device_ids=([{}]) do not tile the {devices} devices of the mesh", join(.reshape))]
    DeviceTile { reshape: Vec<i64>, devices: i64 },
    #[error(transparent)]
    Permutation(#[from] PermutationError),
    #[error("replica groups over a mesh span no axis")]
    NoSpan,
    #[error("axis {0} is not an axis of the mesh")]
    UnknownAxis(usize),
    /// `'name':(pre)size` is not a part of the axis: the sizes are not
    /// positive or do not divide the axis's.
    #[error("sub-axis '{name}':({pre}){size} does not divide the axis (size {axis_size})")]
    SubAxis {
        name: String,
        pre: i64,
        size: i64,
        axis_size: i64,
    },
    #[error("axis '{0}' is spanned twice")]
    SpannedTwice(String),
}

impl MeshGroups {
    fn device_count(&self) -> i64 {
        self.axes.iter().map(|&(_, s)| s).product()
    }

    /// The size of an axis reference.
    fn span_size(&self, r: &AxisRef) -> i64 {
        match r.sub {
            Some((_, size)) => size,
            None => self.axes.get(r.axis).map_or(1, |&(_, size)| size),
        }
    }

    /// Members per group: the product of the spanned sizes.
    pub fn group_size(&self) -> i64 {
        self.spans.iter().map(|r| self.span_size(r)).product()
    }

    /// Well formed as XLA requires: named axes of positive size, devices
    /// a permutation of the mesh's ids, spans that name an axis (or a
    /// part of one that divides it) at most once.
    pub fn check(&self) -> Result<(), MeshGroupsError> {
        for (i, (name, size)) in self.axes.iter().enumerate() {
            if *size < 1 {
                return Err(MeshGroupsError::AxisSize {
                    name: name.clone(),
                    size: *size,
                });
            }
            if self.axes[..i].iter().any(|(n, _)| n == name) {
                return Err(MeshGroupsError::AxisNamedTwice(name.clone()));
            }
        }
        let n = self.device_count();
        match &self.devices {
            MeshDevices::Iota => {}
            MeshDevices::List(ids) => {
                let mut sorted = ids.clone();
                sorted.sort_unstable();
                if sorted != (0..n).collect::<Vec<_>>() {
                    return Err(MeshGroupsError::DeviceList {
                        ids: ids.clone(),
                        devices: n,
                    });
                }
            }
            MeshDevices::Tile { reshape, transpose } => {
                if reshape.iter().any(|&d| d < 1) || reshape.iter().product::<i64>() != n {
                    return Err(MeshGroupsError::DeviceTile {
                        reshape: reshape.clone(),
                        devices: n,
                    });
                }
                check_permutation(transpose, reshape.len())?;
            }
        }
        if self.spans.is_empty() {
            return Err(MeshGroupsError::NoSpan);
        }
        for (i, r) in self.spans.iter().enumerate() {
            let Some((name, size)) = self.axes.get(r.axis) else {
                return Err(MeshGroupsError::UnknownAxis(r.axis));
            };
            if let Some((pre, sub)) = r.sub {
                if pre < 1 || sub < 1 || size % (pre * sub) != 0 {
                    return Err(MeshGroupsError::SubAxis {
                        name: name.clone(),
                        pre,
                        size: sub,
                        axis_size: *size,
                    });
                }
            }
            if self.spans[..i].contains(r) {
                return Err(MeshGroupsError::SpannedTwice(name.clone()));
            }
        }
        Ok(())
    }

    /// The device ids in mesh order, row-major.
    fn device_ids(&self) -> Vec<i64> {
        match &self.devices {
            MeshDevices::Iota => (0..self.device_count()).collect(),
            MeshDevices::List(ids) => ids.clone(),
            MeshDevices::Tile { reshape, transpose } => iota_devices(reshape, transpose),
        }
    }

    /// The groups as explicit lists of ids: one per position along the
    /// parts of the mesh no span covers (row-major), each listing its
    /// devices along the spans in the order written, the first most major.
    /// Malformed groups ([`MeshGroups::check`]) expand to none.
    pub fn expanded(&self) -> Vec<Vec<i64>> {
        if self.check().is_err() {
            return Vec::new();
        }
        // Each axis split where any span of it begins or ends.
        let mut parts: Vec<Vec<i64>> = Vec::new();
        for (i, &(_, size)) in self.axes.iter().enumerate() {
            let mut cuts = vec![1, size];
            for r in self.spans.iter().filter(|r| r.axis == i) {
                if let Some((pre, sub)) = r.sub {
                    cuts.extend([pre, pre * sub]);
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            parts.push(cuts.windows(2).map(|w| w[1] / w[0]).collect());
        }
        // Fine dimensions, major to minor, and the ones each span covers.
        let mut dims = Vec::new();
        let mut of_axis = Vec::new();
        for p in &parts {
            of_axis.push(dims.len());
            dims.extend(p.iter().copied());
        }
        let covered = |r: &AxisRef| -> Vec<usize> {
            let start = of_axis[r.axis];
            let p = &parts[r.axis];
            match r.sub {
                None => (start..start + p.len()).collect(),
                Some((pre, sub)) => {
                    let (mut prod, mut out) = (1, Vec::new());
                    for (k, &d) in p.iter().enumerate() {
                        if prod >= pre && prod < pre * sub {
                            out.push(start + k);
                        }
                        prod *= d;
                    }
                    out
                }
            }
        };
        let spanned: Vec<usize> = self.spans.iter().flat_map(covered).collect();
        let batch: Vec<usize> = (0..dims.len()).filter(|d| !spanned.contains(d)).collect();
        let strides: Vec<i64> = (0..dims.len())
            .map(|d| dims[d + 1..].iter().product())
            .collect();
        let ids = self.device_ids();
        let positions = |which: &[usize]| -> Vec<i64> {
            // Offsets into the mesh of every position along `which`,
            // row-major.
            let mut out = vec![0i64];
            for &d in which {
                let (n, stride) = (dims[d], strides[d]);
                out = out
                    .iter()
                    .flat_map(|&o| (0..n).map(move |k| o + k * stride))
                    .collect();
            }
            out
        };
        let within = positions(&spanned);
        positions(&batch)
            .into_iter()
            .map(|base| within.iter().map(|&o| ids[(base + o) as usize]).collect())
            .collect()
    }
}
