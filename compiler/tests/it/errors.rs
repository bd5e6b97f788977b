//! Bad input gives an error that names the problem and where it is. The
//! errors of HLO text, the reader's and the verifier's, are golden files
//! (`compiler/tests/filetests/{parse,verify}/`, run by `filetests.rs`);
//! what stays here needs a module built or changed in code, or a proto.

use hlatc_compiler::{formats::proto, formats::text, verify, ComputationId, Op};

fn entry(body: &str) -> String {
    format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")
}

/// The text parser renames a name another computation took (as XLA
/// does); a module built otherwise (in code, from a proto) is still held
/// to module-wide unique names.
#[test]
fn a_name_in_two_computations_is_a_verifier_error() {
    let src = "HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  x = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add\n}\n";
    let mut m = text::parse_module(src).unwrap();
    let renamed = m.entry().find("x.1").expect("renamed on parse");
    m.entry_mut().instr_mut(renamed).name = "x".into();
    let got = verify(&m).unwrap_err().to_string();
    assert!(
        got.starts_with("computation 'e', instruction 'x': name is also used in computation 'add'"),
        "{got}"
    );
}

/// A module built in code can hold any id: the verifier refuses one that
/// names no computation, and a call of the entry.
#[test]
fn a_callee_id_out_of_range_or_the_entry_is_a_verifier_error() {
    let src = "HloModule m\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\nENTRY e {\n  x = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let with_callee = |id: ComputationId| {
        let mut m = m.clone();
        let e = m.entry_mut();
        let r = e.find("r").unwrap();
        if let Op::Reduce { to_apply, .. } = &mut e.instr_mut(r).op {
            *to_apply = id;
        }
        verify(&m).unwrap_err().to_string()
    };
    assert_eq!(
        with_callee(ComputationId::new(5)),
        "computation 'e', instruction 'r': reduce: calls unknown computation #5"
    );
    assert_eq!(
        with_callee(m.entry),
        "computation 'e', instruction 'r': reduce: calls the entry computation 'e'"
    );
}

#[test]
fn malformed_protos_are_errors() {
    assert!(matches!(
        proto::decode_module(&[0xff, 0xff, 0xff]),
        Err(proto::ProtoError::Decode(_))
    ));
    // Valid wire format, but the entry computation does not exist.
    let e = proto::decode_module(&[0x0a, 0x01, b'm', 0x30, 0x07]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'm': entry computation id 7 not found"
    );
    // An instruction whose operand id is not in its computation.
    let m = text::parse_module(&entry(
        "  a = f32[2] parameter(0)\n  ROOT n = f32[2] negate(a)",
    ))
    .unwrap();
    let mut p = proto::module_to_proto(&m);
    p.computations[0].instructions[1].operand_ids = vec![99];
    let e = proto::module_from_proto(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'n': operand id 99 is not in this computation"
    );
    let mut p = proto::module_to_proto(&m);
    p.computations[0].instructions[1].opcode = "batch-norm-frobnicate".into();
    let e = proto::module_from_proto(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'n': unsupported opcode 'batch-norm-frobnicate'"
    );
    let mut p = proto::module_to_proto(&m);
    p.computations[0].instructions[1].opcode = "select-and-scatter".into();
    let e = proto::module_from_proto(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'n': select-and-scatter needs two called computations (select, scatter), has 0"
    );
    // The described ops' errors, worded from their descriptions.
    for (opcode, message) in [
        ("while", "while needs two called computations (body, condition), has 0"),
        ("fusion", "fusion needs one called computation (calls), has 0"),
        ("rng", "has unknown distribution (23) 0 (expected one of rng_uniform, rng_normal)"),
        ("sort", "sort needs one called computation (to_apply), has 0"),
        ("concatenate", "concatenate needs exactly one dimension, has []"),
        (
            "get-tuple-element",
            "get-tuple-element has field dimensions (14), which hlatc reads only on all-gather, all-gather-start, all-to-all, broadcast, concatenate,",
        ),
    ] {
        let mut p = proto::module_to_proto(&m);
        let n = &mut p.computations[0].instructions[1];
        n.opcode = opcode.into();
        if opcode == "get-tuple-element" {
            n.dimensions = vec![0];
        }
        let e = proto::module_from_proto(&p).unwrap_err().to_string();
        assert!(e.contains(message), "{opcode}: {e}");
    }
    // A fusion calling a computation, with no kind or an unknown one.
    for (kind, message) in [
        ("", "fusion needs fusion_kind (9)"),
        (
            "kFancy",
            "has unknown fusion_kind (9) kFancy (expected one of kLoop, kInput, kOutput, kCustom)",
        ),
    ] {
        let mut p = proto::module_to_proto(&m);
        let id = p.computations[0].id;
        let n = &mut p.computations[0].instructions[1];
        n.opcode = "fusion".into();
        n.called_computation_ids = vec![id];
        n.fusion_kind = kind.into();
        let e = proto::module_from_proto(&p).unwrap_err().to_string();
        assert!(e.ends_with(message), "{e}");
    }
    let mut p = proto::module_to_proto(&m);
    p.computations[0].instructions[0]
        .shape
        .as_mut()
        .unwrap()
        .element_type = 30; // S1, a 1-bit integer
    let e = proto::module_from_proto(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        "computation 'e', instruction 'a': unsupported element type 30 (PrimitiveType number)"
    );
}

#[test]
fn a_broadcast_leaves_out_dimensions_only_for_a_scalar() {
    // XLA's parser reads a scalar's broadcast without its empty list (over
    // anything else the missing list is an error:
    // `filetests/verify/array_broadcast_without_dimensions.hlo`).
    let m = text::parse_module(&entry(
        "  x = f32[] parameter(0)\n  ROOT y = f32[2,3] broadcast(x)",
    ))
    .unwrap();
    verify(&m).unwrap();
    assert!(text::print_module(&m).contains("broadcast(x), dimensions={}"));
}
