//! A proto field hlatc does not model is refused by its path and XLA's
//! name, never skipped as protobuf would; an `xla.HloProto` wrapper (what
//! `--xla_dump_hlo_as_proto` writes) is read as its module.

use hlatc_compiler::{formats::proto, formats::text};

const MODULE: &str =
    "HloModule m\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT n = f32[2]{0} negate(p)\n}\n";

fn module_bytes() -> Vec<u8> {
    proto::encode_module(&text::parse_module(MODULE).unwrap())
}

/// A length-delimited field: key, length, payload.
fn message_field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint((number << 3 | 2) as u64, &mut out);
    varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

#[test]
fn an_unmodeled_module_field_is_refused_by_name() {
    // HloModuleProto.is_dynamic (11) = true, appended (protobuf merges).
    let mut bytes = module_bytes();
    bytes.extend_from_slice(&[11 << 3, 1]);
    let e = proto::decode_module(&bytes).unwrap_err().to_string();
    assert_eq!(
        e,
        "HloModuleProto: field 11 (is_dynamic) of HloModuleProto is not modeled by hlatc"
    );
}

#[test]
fn an_unmodeled_field_deep_inside_is_refused_at_its_path() {
    // A second computation whose first instruction has all_reduce_id (45).
    let mut instruction = Vec::new();
    varint(45 << 3, &mut instruction);
    varint(5, &mut instruction);
    let computation = message_field(2, &instruction);
    let mut bytes = module_bytes();
    bytes.extend(message_field(3, &computation));
    let e = proto::decode_module(&bytes).unwrap_err().to_string();
    assert_eq!(
        e,
        "HloModuleProto.computations[1].instructions[0]: field 45 (all_reduce_id) of HloInstructionProto is not modeled by hlatc"
    );
}

#[test]
fn control_predecessors_are_read_by_id_within_their_computation() {
    let mut p = proto::module_to_proto(&text::parse_module(MODULE).unwrap());
    let param_id = p.computations[0].instructions[0].id;
    p.computations[0].instructions[1].control_predecessor_ids = vec![param_id];
    let m = proto::decode_module(&prost::Message::encode_to_vec(&p)).unwrap();
    assert!(
        text::print_module(&m).contains("ROOT n = f32[2]{0} negate(p), control-predecessors={p}"),
        "{}",
        text::print_module(&m)
    );
    p.computations[0].instructions[1].control_predecessor_ids = vec![99];
    let e = proto::decode_module(&prost::Message::encode_to_vec(&p)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'n': control predecessor id 99 is not in this computation"
    );
}

/// The module with `extra` appended to the first instruction's layout
/// bytes (protobuf merges repeated and later fields).
fn with_layout_bytes(extra: &[u8]) -> Vec<u8> {
    let m = text::parse_module(MODULE).unwrap();
    let mut p = proto::module_to_proto(&m);
    let shape = p.computations[0].instructions[0].shape.as_mut().unwrap();
    let layout = shape.layout.take().unwrap();
    let mut layout_bytes = prost::Message::encode_to_vec(&layout);
    layout_bytes.extend_from_slice(extra);
    let mut shape_bytes = prost::Message::encode_to_vec(&*shape);
    shape_bytes.extend(message_field(5, &layout_bytes));
    let mut instr_bytes = Vec::new();
    p.computations[0].instructions[0].shape = None;
    prost::Message::encode(&p.computations[0].instructions[0], &mut instr_bytes).unwrap();
    instr_bytes.extend(message_field(3, &shape_bytes));
    let mut comp = p.computations[0].clone();
    let rest = comp.instructions.split_off(1);
    comp.instructions.clear();
    let mut comp_bytes = prost::Message::encode_to_vec(&comp);
    comp_bytes.extend(message_field(2, &instr_bytes));
    for i in &rest {
        comp_bytes.extend(message_field(2, &prost::Message::encode_to_vec(i)));
    }
    p.computations.clear();
    let mut bytes = prost::Message::encode_to_vec(&p);
    bytes.extend(message_field(3, &comp_bytes));
    bytes
}

#[test]
fn a_layout_field_hlatc_does_not_model_is_refused_by_name() {
    // An index primitive type (LayoutProto field 11) of PRED.
    let e = proto::decode_module(&with_layout_bytes(&[11 << 3, 1]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "HloModuleProto.computations[0].instructions[0].shape[0].layout[0]: field 11 (index_primitive_type) of LayoutProto is not modeled by hlatc"
    );
}

#[test]
fn layout_tiles_and_memory_space_are_read() {
    // Tile.dimensions (1) = [8] in tiles (6), then memory_space (8) = 1.
    let mut extra = message_field(6, &message_field(1, &[8]));
    extra.extend_from_slice(&[8 << 3, 1]);
    let m = proto::decode_module(&with_layout_bytes(&extra)).unwrap();
    assert!(
        text::print_module(&m).contains("p = f32[2]{0:T(8)S(1)} parameter(0)"),
        "{}",
        text::print_module(&m)
    );
}

#[test]
fn an_hlo_proto_wrapper_is_read_as_its_module_with_a_note() {
    let module = module_bytes();
    let wrapped = message_field(1, &module);
    let (m, notes) = proto::decode_module_noted(&wrapped).unwrap();
    assert_eq!(
        text::print_module(&m),
        text::print_module(&text::parse_module(MODULE).unwrap())
    );
    assert_eq!(notes, ["an xla.HloProto: its module is read"]);

    // With a buffer assignment (field 3), the note says it is not kept.
    let mut with_assignment = wrapped.clone();
    with_assignment.extend(message_field(3, &[]));
    let (_, notes) = proto::decode_module_noted(&with_assignment).unwrap();
    assert!(notes[0].contains("buffer_assignment"), "{notes:?}");

    // A bare module is not taken for a wrapper.
    let (_, notes) = proto::decode_module_noted(&module).unwrap();
    assert!(notes.is_empty());
}

#[test]
fn group_counts_and_windows_are_read_only_where_they_mean_something() {
    // XLA writes feature_group_count (50) and batch_group_count (58) as 1
    // on every instruction: 1 says nothing, anything else on a negate would
    // be lost.
    let with = |field: fn(&mut proto::messages::HloInstructionProto)| {
        let mut p = proto::module_to_proto(&text::parse_module(MODULE).unwrap());
        field(&mut p.computations[0].instructions[1]);
        proto::decode_module(&prost::Message::encode_to_vec(&p))
            .map(|_| ())
            .map_err(stray_field)
    };
    assert_eq!(with(|i| i.feature_group_count = 1), Ok(()));
    assert_eq!(with(|i| i.batch_group_count = 1), Ok(()));
    // The whole sentence once; the cases below match the variant.
    let mut p = proto::module_to_proto(&text::parse_module(MODULE).unwrap());
    p.computations[0].instructions[1].feature_group_count = 2;
    assert_eq!(
        proto::module_from_proto(&p).unwrap_err().to_string(),
        "computation 'e', instruction 'n': negate has field feature_group_count (50), which hlatc reads only on convolution and custom-call; here it would be lost"
    );
    let stray = |field: &'static str, carriers: &str| Err((field, carriers.to_string()));
    assert_eq!(
        with(|i| i.feature_group_count = 2),
        stray("feature_group_count (50)", "convolution and custom-call")
    );
    assert_eq!(
        with(|i| i.batch_group_count = 4),
        stray("batch_group_count (58)", "convolution and custom-call")
    );
    assert_eq!(
        with(|i| i.window = Some(Default::default())),
        stray(
            "window (15)",
            "convolution, custom-call, reduce-window and select-and-scatter"
        )
    );
    assert_eq!(
        with(|i| i.is_composite = true),
        stray("is_composite (89)", "call")
    );
    // The transfer and feed fields, on an op that has none of them.
    assert_eq!(
        with(|i| i.is_host_transfer = true),
        stray(
            "is_host_transfer (47)",
            "send, send-done, recv and recv-done"
        )
    );
    assert_eq!(
        with(|i| i.infeed_config = b"cfg".to_vec()).map_err(|e| e.0),
        Err("infeed_config (27)")
    );
    assert_eq!(
        with(|i| i.outfeed_shape = Some(Default::default())).map_err(|e| e.0),
        Err("outfeed_config (22) or outfeed_shape (29)")
    );
    // The attributes of the complex, async, ragged, batch-norm and
    // custom-call ops, each on an op that has none of them.
    for (field, name) in [
        (
            (|i| i.fft_length = vec![4]) as fn(&mut proto::messages::HloInstructionProto),
            "fft_length (32), which hlatc reads only on fft",
        ),
        // The described ops' fields: where each may appear is read off
        // their descriptions.
        (
            |i| i.tuple_index = 2,
            "tuple_index (13), which hlatc reads only on get-tuple-element",
        ),
        (
            |i| i.comparison_direction = "EQ".into(),
            "comparison_direction (63), which hlatc reads only on compare",
        ),
        (
            |i| i.is_stable = true,
            "is_stable (60), which hlatc reads only on sort",
        ),
        (
            |i| {
                i.replica_groups = vec![proto::messages::ListedGroup::new(vec![0])]
            },
            "replica_groups (49), which hlatc reads only on all-gather, all-gather-start, all-reduce, all-reduce-start, all-to-all, collective-broadcast, ragged-all-to-all and reduce-scatter",
        ),
        (
            |i| i.fusion_kind = "kLoop".into(),
            "fusion_kind (9), which hlatc reads only on fusion",
        ),
        (|i| i.channel_id = 4, "channel_id (26), which hlatc reads only on all-gather,"),
        (
            |i| i.source_target_pairs = vec![Default::default()],
            "source_target_pairs (52), which hlatc reads only on collective-permute and collective-permute-start",
        ),
        (
            |i| i.gather_slice_sizes = vec![1],
            "gather_slice_sizes (34), which hlatc reads only on gather",
        ),
        (
            |i| i.indices_are_sorted = true,
            "indices_are_sorted (67), which hlatc reads only on gather and scatter",
        ),
        (
            |i| {
                i.precision_config = Some(proto::messages::PrecisionConfig {
                    operand_precision: vec![],
                    algorithm: 2,
                })
            },
            "precision_config.algorithm (51.2), which hlatc reads only on dot and ragged-dot",
        ),
        (
            |i| i.distribution = 1,
            "distribution (23), which hlatc reads only on rng",
        ),
        (
            |i| i.cholesky_options = Some(Default::default()),
            "cholesky_options (62), which hlatc reads only on cholesky",
        ),
        (
            |i| i.async_execution_thread = "host".into(),
            "async_execution_thread (79)",
        ),
        (|i| i.epsilon = 0.5, "epsilon (24) or feature_index (25)"),
        (
            |i| i.ragged_dot_dimension_numbers = Some(Default::default()),
            "ragged_dot_dimension_numbers (90)",
        ),
        (|i| i.custom_call_schedule = 1, "custom_call_schedule (76)"),
    ] {
        let (got_field, got_carriers) = with(field).unwrap_err();
        let (want_field, want_carriers) = name
            .split_once(", which hlatc reads only on ")
            .unwrap_or((name, ""));
        assert_eq!(got_field, want_field);
        assert!(got_carriers.starts_with(want_carriers), "{got_carriers}");
    }
}

/// The field and its carriers of a stray field on the negate of
/// [`MODULE`]; any other error fails the test.
fn stray_field(e: proto::ProtoError) -> (&'static str, String) {
    use proto::{ImportError, InstructionError, ProtoError};
    match e {
        ProtoError::Invalid {
            computation,
            instruction,
            error,
        } => match *error {
            ImportError::Instruction(InstructionError::StrayField {
                opcode,
                field,
                carriers,
            }) => {
                assert_eq!(
                    (
                        computation.as_str(),
                        instruction.as_deref(),
                        opcode.as_str()
                    ),
                    ("e", Some("n"), "negate")
                );
                (field, carriers)
            }
            other => panic!("not a stray field: {other}"),
        },
        other => panic!("not a stray field: {other}"),
    }
}

#[test]
fn transfers_and_feeds_keep_their_fields_through_the_proto() {
    let src = "HloModule m

ENTRY e {
  p = f32[4]{0} parameter(0)
  t = token[] after-all()
  s = (f32[4]{0}, u32[], token[]) send(p, t), channel_id=3, is_host_transfer=true
  sd = token[] send-done(s), channel_id=3, is_host_transfer=true
  r = (f32[4]{0}, u32[], token[]) recv(sd), channel_id=4
  rd = (f32[4]{0}, token[]) recv-done(r), channel_id=4
  x = f32[4]{0} get-tuple-element(rd), index=0
  i = ((f32[4]{0}, s32[]), token[]) infeed(t), infeed_config=\"in\"
  o = token[] outfeed(x, t), outfeed_shape=f32[4]{0}, outfeed_config=\"out\"
  o2 = token[] outfeed(p, o), outfeed_shape=f32[4]{0:T(4)}
  ROOT out = (f32[4]{0}, ((f32[4]{0}, s32[]), token[]), token[]) tuple(x, i, o2)
}
";
    let m = text::parse_module(src).unwrap();
    let p = proto::module_to_proto(&m);
    let field = |name: &str| {
        p.computations[0]
            .instructions
            .iter()
            .find(|i| i.name == name)
            .unwrap()
            .clone()
            .into_inner()
    };
    assert_eq!(
        (field("s").channel_id, field("s").is_host_transfer),
        (3, true)
    );
    assert_eq!(
        (field("r").channel_id, field("r").is_host_transfer),
        (4, false)
    );
    assert_eq!(field("i").infeed_config, b"in");
    assert_eq!(field("o").outfeed_config, b"out");
    // XLA writes outfeed_shape always: the data's own when none is set.
    let written = |name: &str| field(name).outfeed_shape.unwrap().layout.unwrap();
    assert!(written("o").tiles.is_empty());
    assert_eq!(written("o2").tiles[0].dimensions, [4]);
    assert_eq!(field("t").shape.unwrap().into_inner().element_type, 17);
    let back = proto::decode_module(&prost::Message::encode_to_vec(&p)).unwrap();
    assert_eq!(text::print_module(&back), text::print_module(&m));
    assert!(text::print_module(&m).contains("outfeed_shape=f32[4]{0:T(4)}"));
}

#[test]
fn is_fusion_computation_is_set_on_fused_callees_and_refused_elsewhere() {
    let src = "HloModule m\n\nfused {\n  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} negate(x)\n}\n\nplain {\n  a = f32[2]{0} parameter(0)\n  ROOT b = f32[2]{0} negate(a)\n}\n\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  f = f32[2]{0} fusion(p), kind=kLoop, calls=fused\n  ROOT c = f32[2]{0} call(f), to_apply=plain\n}\n";
    let mut p = proto::module_to_proto(&text::parse_module(src).unwrap());
    let flag = |p: &proto::messages::HloModuleProto, name: &str| {
        p.computations
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .is_fusion_computation
    };
    assert!(flag(&p, "fused"));
    assert!(!flag(&p, "plain"));
    proto::module_from_proto(&p).unwrap();
    for c in &mut p.computations {
        c.is_fusion_computation |= c.name == "plain";
    }
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("computation 'plain' is marked is_fusion_computation but no fusion calls it"),
        "{e}"
    );
}

#[test]
fn a_device_assignment_is_kept_and_checked() {
    let mut p = proto::module_to_proto(&text::parse_module(MODULE).unwrap());
    p.device_assignment = Some(proto::messages::DeviceAssignmentProto {
        replica_count: 2,
        computation_count: 1,
        computation_devices: vec![proto::messages::ComputationDevice {
            replica_device_ids: vec![3, 1],
        }],
    });
    let m = proto::decode_module(&prost::Message::encode_to_vec(&p)).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    let kept = m.device_assignment.as_ref().unwrap();
    assert_eq!(kept.devices, [[3, 1]]);
    assert_eq!(
        proto::module_to_proto(&m).device_assignment,
        p.device_assignment
    );
    // One device per replica, as XLA's reader requires.
    p.device_assignment.as_mut().unwrap().computation_devices[0]
        .replica_device_ids
        .pop();
    let m = proto::decode_module(&prost::Message::encode_to_vec(&p)).unwrap();
    let e = hlatc_compiler::verify(&m).unwrap_err().to_string();
    assert!(
        e.ends_with("device_assignment gives computation 0 1 device(s), its replica_count is 2"),
        "{e}"
    );
}

/// Where a described op's field may appear is read off the op table: a
/// convolution's `precision_config.algorithm` (XLA reads it only on dots)
/// is refused, a dot's and a ragged dot's are kept.
#[test]
fn a_dot_algorithm_is_kept_on_dots_and_refused_on_a_convolution() {
    let conv = text::parse_module(
        "HloModule m\n\nENTRY e {\n  x = f32[1,4,4,1] parameter(0)\n  k = f32[3,3,1,1] parameter(1)\n  ROOT c = f32[1,2,2,1] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f\n}\n",
    )
    .unwrap();
    let mut p = proto::module_to_proto(&conv);
    p.computations[0].instructions[2].precision_config = Some(proto::messages::PrecisionConfig {
        operand_precision: vec![],
        algorithm: 2,
    });
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("convolution has field precision_config.algorithm (51.2), which hlatc reads only on dot and ragged-dot"),
        "{e}"
    );
    let dot = text::parse_module(
        "HloModule m\n\nENTRY e {\n  a = bf16[2,3] parameter(0)\n  b = bf16[3,4] parameter(1)\n  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,default}, algorithm=dot_bf16_bf16_f32\n}\n",
    )
    .unwrap();
    let p = proto::module_to_proto(&dot);
    let config = p.computations[0].instructions[2]
        .precision_config
        .clone()
        .unwrap();
    assert_eq!(
        (config.operand_precision, config.algorithm > 0),
        (vec![1, 0], true)
    );
    let back = proto::module_from_proto(&p).unwrap();
    assert_eq!(text::print_module(&back), text::print_module(&dot));
    assert!(text::print_module(&back).contains(
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,default}, algorithm=dot_bf16_bf16_f32"
    ));
}
