//! Device groups as the IR holds them: replica groups listed or as an
//! iota, mesh-axes groups, the iotas that lay devices out and the device
//! assignment, each expanded as XLA reads it and refused with a named
//! reason when malformed.

use hlatc_compiler::ir::collective::{GroupList, ReplicaGroups, ReplicaGroupsError};
use hlatc_compiler::ir::device_assignment::DeviceAssignment;
use hlatc_compiler::ir::iota::{check_permutation, iota_devices, iota_of};
use hlatc_compiler::ir::mesh_groups::{AxisRef, MeshDevices, MeshGroups, MeshGroupsError};
use std::hash::{Hash, Hasher};

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
fn explicit_groups_find_their_iota() {
    // TP 4 x DP 2, TP-major: TP groups are runs, DP groups strided.
    let tp = ReplicaGroups::List(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]].into());
    let dp = ReplicaGroups::List(vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]].into());
    for g in [&tp, &dp] {
        let iota = g.to_iota().unwrap();
        assert_eq!(iota.expanded(), g.expanded());
    }
    assert_eq!(
        dp.to_iota(),
        Some(ReplicaGroups::Iota {
            groups: 4,
            group_size: 2,
            reshape: vec![2, 4],
            transpose: vec![1, 0],
        })
    );
    let scattered = ReplicaGroups::List(vec![vec![0, 3], vec![1, 2]].into());
    assert_eq!(scattered.to_iota(), None);
    assert_eq!(ReplicaGroups::default().to_iota(), None);
}

#[test]
fn a_shared_list_is_checked_once_and_compares_by_its_groups() {
    let a = GroupList::new(vec![vec![0, 1], vec![2, 3]]);
    let b = GroupList::new(vec![vec![0, 1], vec![2, 3]]);
    assert!(a == b && !a.same_set(&b) && a.clone().same_set(&a));
    let hash = |g: &GroupList| {
        let mut h = hlatc_compiler::util::fx::FxHasher::default();
        g.hash(&mut h);
        h.finish()
    };
    assert_eq!(hash(&a), hash(&b));
    let dup = ReplicaGroups::List(vec![vec![0, 0]].into());
    for _ in 0..2 {
        assert_eq!(dup.check(true), Err(ReplicaGroupsError::RepeatedId(0)));
    }
}

#[test]
fn malformed_groups_are_named() {
    let dup = ReplicaGroups::List(vec![vec![0, 1], vec![1, 2]].into());
    assert_eq!(
        dup.check(false).unwrap_err().to_string(),
        "replica id 1 is in two groups"
    );
    let ragged = ReplicaGroups::List(vec![vec![0, 1], vec![2]].into());
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

#[test]
fn an_iota_reads_in_transposed_order() {
    assert_eq!(iota_devices(&[2, 3], &[]), [0, 1, 2, 3, 4, 5]);
    assert_eq!(iota_devices(&[2, 3], &[1, 0]), [0, 3, 1, 4, 2, 5]);
    assert_eq!(
        check_permutation(&[0, 0], 2).unwrap_err().to_string(),
        "T(0,0) does not permute the 2 iota dimensions"
    );
    check_permutation(&[1, 0], 2).unwrap();
}

#[test]
fn layouts_are_found_again() {
    for (reshape, transpose) in [
        (vec![8], vec![]),
        (vec![4, 2], vec![1, 0]),
        (vec![2, 3, 4], vec![0, 2, 1]),
        (vec![2, 3, 4], vec![2, 0, 1]),
        (vec![64, 32], vec![1, 0]),
    ] {
        // The same ids, in as few dimensions: [2,3,4]T(2,0,1) is
        // [6,4]T(1,0), its first two dimensions moving together.
        let ids = iota_devices(&reshape, &transpose);
        let (r, t) = iota_of(&ids).unwrap();
        assert_eq!(iota_devices(&r, &t), ids);
        assert!(r.len() <= reshape.len());
    }
    let ids = iota_devices(&[2, 3, 4], &[2, 0, 1]);
    assert_eq!(iota_of(&ids), Some((vec![6, 4], vec![1, 0])));
    let dp = iota_devices(&[64, 32], &[1, 0]);
    assert_eq!(iota_of(&dp), Some((vec![64, 32], vec![1, 0])));
    assert_eq!(iota_of(&[1, 0]), None);
    assert_eq!(iota_of(&[0, 2, 1, 3, 5, 4]), None);
    assert_eq!(iota_of(&[0, 1, 3]), None);
}

fn mesh(axes: &[(&str, i64)], spans: Vec<AxisRef>) -> MeshGroups {
    MeshGroups {
        axes: axes.iter().map(|&(n, s)| (n.to_string(), s)).collect(),
        devices: MeshDevices::Iota,
        spans,
    }
}

fn axis(axis: usize) -> AxisRef {
    AxisRef { axis, sub: None }
}

#[test]
fn groups_span_the_listed_axes_as_xla_materializes_them() {
    // XLA's own MeshAxesReplicaGroupList test on a 2 x 2 mesh.
    let xy = [("x", 2), ("y", 2)];
    assert_eq!(mesh(&xy, vec![axis(0)]).expanded(), [[0, 2], [1, 3]]);
    assert_eq!(mesh(&xy, vec![axis(1)]).expanded(), [[0, 1], [2, 3]]);
    assert_eq!(mesh(&xy, vec![axis(0), axis(1)]).expanded(), [[0, 1, 2, 3]]);
    let g = mesh(&[("a", 2), ("b", 4)], vec![axis(1)]);
    assert_eq!(g.group_size(), 4);
    g.check().unwrap();
}

#[test]
fn a_sub_axis_is_the_middle_of_its_axis() {
    // b (size 4) as [2, 2, 1]: 'b':(2)2 is its minor half here.
    let g = mesh(
        &[("b", 4)],
        vec![AxisRef {
            axis: 0,
            sub: Some((2, 2)),
        }],
    );
    assert_eq!(g.expanded(), [[0, 1], [2, 3]]);
    let g = mesh(
        &[("b", 4)],
        vec![AxisRef {
            axis: 0,
            sub: Some((1, 2)),
        }],
    );
    assert_eq!(g.expanded(), [[0, 2], [1, 3]]);
}

#[test]
fn device_ids_place_the_devices() {
    let mut g = mesh(&[("a", 2), ("b", 2)], vec![axis(0)]);
    g.devices = MeshDevices::List(vec![3, 2, 1, 0]);
    assert_eq!(g.expanded(), [[3, 1], [2, 0]]);
    g.devices = MeshDevices::Tile {
        reshape: vec![2, 2],
        transpose: vec![1, 0],
    };
    // 0..4 as 2x2, transposed: 0, 2, 1, 3.
    assert_eq!(g.expanded(), [[0, 1], [2, 3]]);
}

#[test]
fn malformed_meshes_are_named() {
    let mut g = mesh(&[("a", 2), ("a", 2)], vec![axis(0)]);
    assert_eq!(
        g.check().unwrap_err().to_string(),
        "mesh axis 'a' is named twice"
    );
    g.axes[1].0 = "b".into();
    g.devices = MeshDevices::List(vec![0, 1, 2, 2]);
    assert_eq!(
        g.check().unwrap_err().to_string(),
        "device_ids=(0,1,2,2) are not the 4 devices of the mesh, each once"
    );
    g.devices = MeshDevices::Iota;
    g.spans = vec![AxisRef {
        axis: 1,
        sub: Some((2, 2)),
    }];
    assert_eq!(
        g.check().unwrap_err().to_string(),
        "sub-axis 'b':(2)2 does not divide the axis (size 2)"
    );
    g.spans = vec![axis(0), axis(0)];
    assert_eq!(
        g.check().unwrap_err().to_string(),
        "axis 'a' is spanned twice"
    );
    g.spans = vec![];
    assert_eq!(g.check().unwrap_err(), MeshGroupsError::NoSpan);
}

#[test]
fn an_assignment_is_checked_as_xla_reads_it() {
    let one = DeviceAssignment {
        replica_count: 1,
        computation_count: 1,
        devices: vec![vec![0]],
    };
    assert_eq!(one.check(), Ok(()));
    assert_eq!(one.single_device(), Some(0));
    assert_eq!(
        one.to_string(),
        "1 replica(s) x 1 computation(s) on devices [[0]]"
    );
    let two = DeviceAssignment {
        replica_count: 2,
        computation_count: 1,
        devices: vec![vec![0, 1]],
    };
    assert_eq!(two.check(), Ok(()));
    assert_eq!(two.single_device(), None);
    let short = DeviceAssignment {
        devices: vec![vec![0]],
        ..two.clone()
    };
    assert_eq!(
        short.check().unwrap_err().to_string(),
        "device_assignment gives computation 0 1 device(s), its replica_count is 2"
    );
    let twice = DeviceAssignment {
        devices: vec![vec![1, 1]],
        ..two
    };
    assert_eq!(
        twice.check().unwrap_err().to_string(),
        "device_assignment uses device 1 twice or as a negative id"
    );
    let empty = DeviceAssignment {
        replica_count: 0,
        computation_count: 1,
        devices: vec![vec![]],
    };
    assert_eq!(
        empty.check().unwrap_err().to_string(),
        "device_assignment has replica_count 0 and computation_count 1; both must be positive"
    );
}
