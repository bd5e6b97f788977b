//! Collectives: replica groups in both of XLA's forms, channels and
//! source-target pairs are read, printed back and carried through the
//! proto; a group, pair or result shape XLA would refuse is refused where
//! it goes wrong (golden files: `compiler/tests/filetests/{parse,verify}/`).

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
        .map(|g| g.replica_ids())
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
            i.replica_groups[0] = proto::messages::ListedGroup::new(vec![5, 2, 4, 6]);
        }
    }
    let e = proto::module_from_proto(&bad).unwrap_err().to_string();
    assert!(
        e.contains("replica_groups and iota_collective_device_list name different groups"),
        "{e}"
    );
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
fn all_to_all_without_a_dimension_is_a_tuple() {
    let m = parse("  ROOT a = (f32[8,4]) all-to-all(x), replica_groups={}").unwrap();
    let e = m.entry();
    assert!(matches!(
        e.instr(e.root().unwrap()).op,
        Op::AllToAll {
            dimension: None,
            ..
        }
    ));
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
}

/// A sharded step's collectives share one explicit list per group set:
/// the text writes it once and copies it, equal to writing it afresh; the
/// iota form that `iota_replica_groups` gives the same groups prints,
/// parses, encodes and decodes back to itself, and expands to the list.
#[test]
fn shared_lists_and_their_iota_form_survive_text_and_proto() {
    use hlatc_compiler::graph::collectives::iota_replica_groups;
    let entry = "  a = f32[8,4] all-reduce(x), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=sum\n  b = f32[8,4] all-reduce(a), replica_groups={{0,4},{1,5},{2,6},{3,7}}, to_apply=sum\n  c = f32[8,4] all-reduce(b), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=sum\n  ROOT g = f32[8,16] all-gather(c), replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={1}";
    let explicit = parse(entry).unwrap();
    let text = text::print_module(&explicit);
    // Printed twice (the second from the kept text), the same bytes.
    assert_eq!(text::print_module(&explicit), text);
    assert!(
        text.contains("replica_groups={{0,4},{1,5},{2,6},{3,7}}"),
        "{text}"
    );
    let mut iota = explicit.clone();
    assert_eq!(iota_replica_groups(&mut iota), 4);
    let printed = text::print_module(&iota);
    assert!(printed.contains("replica_groups=[2,4]<=[8]"), "{printed}");
    assert!(
        printed.contains("replica_groups=[4,2]<=[2,4]T(1,0)"),
        "{printed}"
    );
    let reparsed = text::parse_module(&printed).unwrap();
    verify(&reparsed).unwrap();
    assert_eq!(text::print_module(&reparsed), printed);
    let decoded = proto::decode_module(&proto::encode_module(&iota)).unwrap();
    verify(&decoded).unwrap();
    assert_eq!(text::print_module(&decoded), printed);
    let groups = |m: &Module| -> Vec<ReplicaGroups> {
        let e = m.entry();
        e.ids()
            .filter_map(|id| e.instr(id).op.collective())
            .map(|c| c.replica_groups.clone())
            .collect()
    };
    let (listed, compact) = (groups(&explicit), groups(&decoded));
    assert_eq!(compact.len(), 4);
    for (l, c) in listed.iter().zip(&compact) {
        assert!(matches!(c, ReplicaGroups::Iota { .. }), "{c:?}");
        assert_eq!(c.expanded(), l.expanded());
    }
    // Groups no iota lays out stay listed.
    let mut scattered =
        parse("  ROOT a = f32[8,4] all-reduce(x), replica_groups={{0,3},{1,2}}, to_apply=sum")
            .unwrap();
    assert_eq!(iota_replica_groups(&mut scattered), 0);
}

/// A 2,048-rank step has a thousand collectives over a handful of group
/// sets: read back from the proto, the collectives that name one set share
/// one list (checked, printed and encoded once), and the proto they write
/// is the bytes they were read from.
#[test]
fn collectives_read_from_a_proto_share_their_group_sets() {
    let m = parse(
        "  r0 = f32[8,4] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=sum\n  r1 = f32[8,4] all-reduce(r0), replica_groups={{0,1},{2,3}}, to_apply=sum\n  ROOT r2 = f32[8,4] all-reduce(r1), replica_groups={{0,2},{1,3}}, to_apply=sum",
    )
    .unwrap();
    let bytes = proto::encode_module(&m);
    let back = proto::decode_module(&bytes).unwrap();
    let list = |name: &str| match &op_of(&back, name).collective().unwrap().replica_groups {
        ReplicaGroups::List(l) => l.clone(),
        other => panic!("{name}: {other:?}"),
    };
    let (a, b, c) = (list("r0"), list("r1"), list("r2"));
    assert!(a.same_set(&b), "r0 and r1 name one set");
    assert!(!a.same_set(&c));
    assert_eq!(c.groups(), [vec![0, 2], vec![1, 3]]);
    assert_eq!(proto::encode_module(&back), bytes);
}
