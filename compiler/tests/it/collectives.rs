//! Collectives: replica groups in both of XLA's forms, channels and
//! source-target pairs are read, printed back and carried through the
//! proto; a group, pair or result shape XLA would refuse is refused here,
//! where it goes wrong.

use hlatc_compiler::ir::collective::ReplicaGroups;
use hlatc_compiler::{formats::proto, formats::text, verify, Module, Op};

fn parse(entry: &str) -> Result<Module, String> {
    let src = format!(
        "HloModule m\n\nsum {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}\n\nENTRY e {{\n  x = f32[8,4] parameter(0)\n{entry}\n}}\n"
    );
    let m = text::parse_module(&src).map_err(|e| e.to_string())?;
    verify(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

fn refused(entry: &str) -> String {
    parse(entry).expect_err("hlatc must refuse this module")
}

fn op_of<'m>(m: &'m Module, name: &str) -> &'m Op {
    let e = m.entry();
    &e.instr(e.find(name).unwrap()).op
}

#[test]
fn both_forms_of_replica_groups_survive_text_and_proto() {
    let m = parse(
        "  r = f32[8,4] all-reduce(x), replica_groups={{0,2},{1,3}}, channel_id=3, use_global_device_ids=true, to_apply=sum\n  g = f32[8,16] all-gather(r), replica_groups=[2,4]<=[4,2]T(1,0), dimensions={1}\n  ROOT p = f32[8,16] collective-permute(g), source_target_pairs={{0,1},{1,2},{2,0}}, channel_id=7",
    )
    .unwrap();
    let Op::AllGather { collective, .. } = op_of(&m, "g") else {
        panic!("an all-gather")
    };
    assert_eq!(
        collective.replica_groups,
        ReplicaGroups::Iota {
            groups: 2,
            group_size: 4,
            reshape: vec![4, 2],
            transpose: vec![1, 0]
        }
    );
    assert_eq!(
        collective.replica_groups.expanded(),
        [vec![0, 2, 4, 6], vec![1, 3, 5, 7]]
    );
    let printed = text::print_module(&m);
    assert!(
        printed.contains("all-reduce(x), replica_groups={{0,2},{1,3}}, channel_id=3, use_global_device_ids=true, to_apply=sum"),
        "{printed}"
    );
    assert!(
        printed.contains("replica_groups=[2,4]<=[4,2]T(1,0), dimensions={1}"),
        "{printed}"
    );
    assert!(
        printed.contains("source_target_pairs={{0,1},{1,2},{2,0}}, channel_id=7"),
        "{printed}"
    );
    assert_eq!(
        text::print_module(&text::parse_module(&printed).unwrap()),
        printed
    );

    // The iota goes into iota_collective_device_list, with the groups
    // spelled out in replica_groups for readers that predate it.
    let p = proto::module_to_proto(&m);
    let gather = p
        .computations
        .iter()
        .flat_map(|c| &c.instructions)
        .find(|i| i.name == "g")
        .unwrap();
    let ids: Vec<&[i64]> = gather
        .replica_groups
        .iter()
        .map(|g| g.replica_ids.as_slice())
        .collect();
    assert_eq!(ids, [&[0, 2, 4, 6][..], &[1, 3, 5, 7][..]]);
    let iota = gather.iota_collective_device_list.as_ref().unwrap();
    assert_eq!(
        (iota.num_replica_groups, iota.num_devices_per_group),
        (2, 4)
    );
    let back = proto::module_from_proto(&p).unwrap();
    assert_eq!(text::print_module(&back), printed);

    // XLA between the two spellings wrote the iota (or a list) inside
    // collective_device_list; that reads the same.
    let mut older = p.clone();
    for i in older
        .computations
        .iter_mut()
        .flat_map(|c| &mut c.instructions)
    {
        if let Some(iota) = i.iota_collective_device_list.take() {
            i.collective_device_list = Some(Box::new(proto::messages::CollectiveDeviceListProto {
                replica_groups: Vec::new(),
                iota_replica_group_list: Some(*iota),
            }));
        }
    }
    assert_eq!(
        text::print_module(&proto::module_from_proto(&older).unwrap()),
        printed
    );

    // Two spellings that disagree would lose one of them.
    let mut bad = p.clone();
    for i in bad
        .computations
        .iter_mut()
        .flat_map(|c| &mut c.instructions)
    {
        if i.name == "g" {
            i.replica_groups[0].replica_ids[0] = 5;
        }
    }
    let e = proto::module_from_proto(&bad).unwrap_err().to_string();
    assert!(
        e.contains("replica_groups and iota_collective_device_list name different groups"),
        "{e}"
    );
}

#[test]
fn malformed_groups_and_pairs_are_refused_where_they_go_wrong() {
    let e =
        refused("  ROOT r = f32[8,4] all-reduce(x), replica_groups={{0,1},{1,2}}, to_apply=sum");
    assert!(
        e.ends_with("all-reduce: replica id 1 is in two groups"),
        "{e}"
    );
    let e =
        refused("  ROOT r = f32[8,4] all-reduce(x), replica_groups={{0,1},{2,x}}, to_apply=sum");
    assert!(
        e.starts_with("11:61: replica_groups: expected an integer"),
        "{e}"
    );
    let e = refused("  ROOT r = f32[8,4] all-reduce(x), replica_groups=[2,2,2]<=[8], to_apply=sum");
    assert!(
        e.contains("iota replica groups are [groups,group_size], got 3 dimensions"),
        "{e}"
    );
    let e = refused("  ROOT r = f32[8,4] all-reduce(x), replica_groups=[2,2]<=[8], to_apply=sum");
    assert!(
        e.contains("replica groups [2,2] need 4 ids but the iota <=[8] has 8"),
        "{e}"
    );
    let e = refused("  ROOT r = f32[8,4] all-reduce(x), replica_groups={{0,1}}, use_global_device_ids=true, to_apply=sum");
    assert!(
        e.ends_with("all-reduce: use_global_device_ids=true needs a (positive) channel_id"),
        "{e}"
    );
    let e = refused("  ROOT p = f32[8,4] collective-permute(x), source_target_pairs={{0,1},{2,1}}");
    assert!(e.contains("collective-permute names target 1 twice"), "{e}");
    let e = refused("  ROOT p = f32[8,4] collective-permute(x), source_target_pairs={{0,1,2}}");
    assert!(
        e.contains("a source-target pair has two ids, got {0,1,2}"),
        "{e}"
    );
    // Groups over a mesh, where they go wrong.
    for (groups, want) in [
        (
            "mesh['a'=2,'b'=4] {'c'}",
            "11:70: replica_groups: 'c' is not an axis of the mesh",
        ),
        (
            "mesh['a'=2,'b'=4] {'b':(3)2}",
            "all-reduce: sub-axis 'b':(3)2 does not divide the axis (size 4)",
        ),
        (
            "mesh['a'=2,'b'=4], device_ids=(0,1,2) {'a'}",
            "all-reduce: device_ids=(0,1,2) are not the 8 devices of the mesh, each once",
        ),
        (
            "mesh['a'=2,'a'=4] {'a'}",
            "all-reduce: mesh axis 'a' is named twice",
        ),
    ] {
        let e = refused(&format!(
            "  ROOT r = f32[8,4] all-reduce(x), replica_groups={groups}, to_apply=sum"
        ));
        assert!(e.starts_with(want) || e.ends_with(want), "{groups}: {e}");
    }
}

#[test]
fn groups_over_a_mesh_survive_text_and_proto() {
    let m = parse(
        "  r = f32[8,4] all-reduce(x), channel_id=1, replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a','b':(2)2}, use_global_device_ids=true, to_apply=sum\n  ROOT g = f32[8,16] all-gather(r), replica_groups=mesh['a'=2,'b'=4], device_ids=(7,6,5,4,3,2,1,0) {'b'}, dimensions={1}",
    )
    .unwrap();
    let Op::AllReduce { collective, .. } = op_of(&m, "r") else {
        panic!("all-reduce")
    };
    let ReplicaGroups::Mesh(g) = &collective.replica_groups else {
        panic!("{:?}", collective.replica_groups)
    };
    // Devices 0..8 as [4,2] transposed: 0,2,4,6,1,3,5,7 over a 2 x 4
    // mesh; the groups span a and the minor half of b.
    assert_eq!(g.group_size(), 4);
    assert_eq!(g.expanded(), [vec![0, 2, 1, 3], vec![4, 6, 5, 7]]);
    let printed = text::print_module(&m);
    assert!(
        printed
            .contains("replica_groups=mesh['a'=2,'b'=4], device_ids=([4,2]T(1,0)) {'a','b':(2)2}"),
        "{printed}"
    );
    assert_eq!(
        text::print_module(&text::parse_module(&printed).unwrap()),
        printed
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), printed);
}

#[test]
fn gathered_and_scattered_shapes_follow_the_group_size() {
    parse("  ROOT g = f32[16,4] all-gather(x), replica_groups={{0,1},{2,3}}, dimensions={0}")
        .unwrap();
    parse("  ROOT s = f32[2,4] reduce-scatter(x), replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=sum").unwrap();
    // Without groups, any whole multiple is a group size.
    parse("  ROOT g = f32[8,12] all-gather(x), replica_groups={}, dimensions={1}").unwrap();
    let e = refused("  ROOT g = f32[24,4] all-gather(x), replica_groups={{0,1}}, dimensions={0}");
    assert!(
        e.contains("all-gather of f32[8,4]{1,0} along dimension 0 cannot give f32[24,4]{1,0}: dimension 0 is multiplied by 2, the rest stays"),
        "{e}"
    );
    let e = refused("  ROOT s = f32[3,4] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=sum");
    assert!(e.contains("dimension 0 is divided by 2"), "{e}");
    let e = refused("  ROOT g = f32[8,4] all-gather(x), replica_groups={}, dimensions={2}");
    assert!(e.contains("all-gather dimension 2 out of range"), "{e}");
    let e = refused("  ROOT a = f32[8,4] all-to-all(x), replica_groups={{0,1,2}}, dimensions={1}");
    assert!(e.contains("into 3 pieces, which does not divide it"), "{e}");
    // XLA's verifier does not hold the reducer's type to the operands'
    // (XLA CPU compiles its test that all-reduces u32 with an f32 adder).
    parse("  i = s32[8,4] convert(x)\n  ROOT r = s32[8,4] all-reduce(i), to_apply=sum").unwrap();
    let e = refused("  ROOT id = s32[] replica-id()");
    assert!(e.contains("replica-id produces u32[]"), "{e}");
}

#[test]
fn channels_widen_groups_across_partitions_and_all_to_all_without_a_dimension_is_a_tuple() {
    // A channel without global ids: a group of 2 replicas in every
    // partition, so any multiple of 2 participants.
    parse(
        "  ROOT g = f32[32,4] all-gather(x), replica_groups={{0,1}}, channel_id=1, dimensions={0}",
    )
    .unwrap();
    let e = refused("  ROOT g = f32[24,4] all-gather(x), replica_groups={{0,1,2,3}}, channel_id=1, dimensions={0}");
    assert!(
        e.contains("dimension 0 is multiplied by a multiple of 4"),
        "{e}"
    );
    // Global ids name the participants exactly.
    refused("  ROOT g = f32[32,4] all-gather(x), replica_groups={{0,1}}, channel_id=1, use_global_device_ids=true, dimensions={0}");
    // XLA reads channel_id=0 as no channel.
    let e = refused("  ROOT g = f32[16,4] all-gather(x), replica_groups={{0,1}}, channel_id=0, use_global_device_ids=true, dimensions={0}");
    assert!(e.ends_with("needs a (positive) channel_id"), "{e}");
    let m = parse("  ROOT a = (f32[8,4]) all-to-all(x), replica_groups={}").unwrap();
    let e = m.entry();
    assert!(matches!(
        e.instr(e.root().unwrap()).op,
        Op::AllToAll {
            dimension: None,
            ..
        }
    ));
    let e = refused("  ROOT a = f32[8,4] all-to-all(x), replica_groups={}");
    assert!(
        e.contains(
            "all-to-all produces (f32[8,4]{1,0}) but the instruction declares f32[8,4]{1,0}"
        ),
        "{e}"
    );
}

#[test]
fn async_starts_hold_operands_and_results_and_dones_read_the_results() {
    let m = parse(
        "  s = (f32[8,4], f32[16,4]) all-gather-start(x), replica_groups={{0,1}}, dimensions={0}\n  ROOT d = f32[16,4] all-gather-done(s)",
    )
    .unwrap();
    let printed = text::print_module(&m);
    assert!(
        printed.contains("all-gather-start(x), replica_groups={{0,1}}, dimensions={0}"),
        "{printed}"
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), printed);
    let e = refused("  s = (f32[8,4], f32[24,4]) all-gather-start(x), replica_groups={{0,1}}, dimensions={0}\n  ROOT d = f32[24,4] all-gather-done(s)");
    assert!(e.contains("dimension 0 is multiplied by 2"), "{e}");
    let e =
        refused("  ROOT s = f32[16,4] all-gather-start(x), replica_groups={{0,1}}, dimensions={0}");
    assert!(
        e.contains("an async collective start is the tuple (operands, results, ...); declare it"),
        "{e}"
    );
    let e = refused("  s = (f32[8,4], f32[8,4], s32[]) collective-permute-start(x), source_target_pairs={{0,1}}\n  ROOT d = f32[8,4] collective-permute-done(s)");
    assert!(e.contains("(operand, result, u32[], u32[])"), "{e}");
    let e = refused("  ROOT d = f32[8,4] all-gather-done(x)");
    assert!(
        e.contains(
            "a collective done reads its start's tuple (operands, results), got f32[8,4]{1,0}"
        ),
        "{e}"
    );
    parse("  s = f32[8,4] all-reduce-start(x), replica_groups={}, to_apply=sum\n  ROOT d = f32[8,4] all-reduce-done(s)").unwrap();
}

/// XLA combines permutes into one of several operands, and has an in-place
/// form that writes slices of `input` into `output` at given offsets; both
/// are read, checked as XLA's verifier checks them, and carried through
/// text and proto (the slice sizes flattened in `dynamic_slice_sizes`).
#[test]
fn combined_and_in_place_permutes() {
    let m = parse("  y = f32[8,4] negate(x)\n  c = (f32[8,4], f32[8,4]) collective-permute(x, y), source_target_pairs={{0,1},{1,0}}\n  z = s32[] constant(0)\n  o = (s32[], s32[]) tuple(z, z)\n  oo = ((s32[], s32[]), (s32[], s32[])) tuple(o, o)\n  ROOT p = f32[8,4] collective-permute(x, y, oo, oo), source_target_pairs={{0,1},{0,2},{1,0}}, slice_sizes={{1,4},{2,4}}").unwrap();
    let Op::CollectivePermute { slice_sizes, .. } = op_of(&m, "p") else {
        panic!("a permute");
    };
    assert_eq!(slice_sizes, &[vec![1, 4], vec![2, 4]]);
    let printed = text::print_module(&m);
    assert!(
        printed.contains("source_target_pairs={{0,1},{0,2},{1,0}}, slice_sizes={{1,4},{2,4}}"),
        "{printed}"
    );
    let p = proto::module_to_proto(&m);
    let inst = p.computations[1]
        .instructions
        .iter()
        .find(|i| i.name == "p")
        .unwrap();
    assert_eq!(inst.dynamic_slice_sizes, [1, 4, 2, 4]);
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), printed);

    // Two transfers per pair (offsets are a tuple of two index tuples), so
    // a source may appear twice but not three times.
    let e = refused("  y = f32[8,4] negate(x)\n  z = s32[] constant(0)\n  o = (s32[], s32[]) tuple(z, z)\n  oo = ((s32[], s32[]), (s32[], s32[])) tuple(o, o)\n  ROOT p = f32[8,4] collective-permute(x, y, oo, oo), source_target_pairs={{0,1},{0,2},{0,3}}, slice_sizes={{1,4},{2,4}}");
    assert!(
        e.contains("collective-permute names source 0 more than 2 times, once per transfer"),
        "{e}"
    );
    let e = refused("  y = f32[8,4] negate(x)\n  z = s32[] constant(0)\n  o = (s32[]) tuple(z)\n  ROOT p = f32[8,4] collective-permute(x, y, o, o), source_target_pairs={{0,1}}, slice_sizes={{1,4}}");
    assert!(
        e.contains("input offset (s32[]) is not a tuple of 2 indices, or a tuple of such tuples, for f32[8,4]{1,0}"),
        "{e}"
    );
    let e = refused("  y = f32[8,4] negate(x)\n  ROOT p = f32[8,4] collective-permute(x, y), source_target_pairs={{0,1}}, slice_sizes={{1,4}}");
    assert!(
        e.contains(
            "expects 4 (input, output, input offsets, output offsets) in place operand(s), got 2"
        ),
        "{e}"
    );
}
