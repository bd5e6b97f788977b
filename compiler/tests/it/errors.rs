//! Bad input gives an error that names the problem and where it is.

use hlatc_compiler::{formats::proto, formats::text, verify, ComputationId, Op};

fn parse_err(src: &str) -> String {
    match text::parse_module(src) {
        Ok(_) => panic!("expected a parse error for:\n{src}"),
        Err(e) => e.to_string(),
    }
}

fn entry(body: &str) -> String {
    format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n")
}

#[test]
fn syntax_errors_give_line_column_and_expectation() {
    let cases = [
        (
            entry("  x f32[] parameter(0)"),
            "4:5: expected `=`, found `f32[] parameter(0)`",
        ),
        (
            "HloModule m\nENTRY e {\n  x = f32[2 parameter(0)\n}\n".to_string(),
            "3:13: expected `,` or `]`, found `parameter(0)`",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT y = f32[2] broadcast(x), dimensions={0,}"),
            "5:33: 'dimensions' must be an integer list like {0,1}, got `{0,}`",
        ),
        (
            "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)".to_string(),
            "3:30: expected `,` or `}` or an instruction, found end of line",
        ),
        (
            "HloMod m".to_string(),
            "1:1: expected `HloModule`, found `HloMod m`",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x), foo=@@"),
            "5:34: expected an attribute value, found `@@`",
        ),
        (
            entry("  x = f32[2,<=?] parameter(0)"),
            "4:13: expected a dimension, a bound such as <=8, or ? for an unbounded dimension (which has no bound), found `<=?] parameter(0)`",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT y = f32[2] negate(x"),
            "6:1: expected `)` or `,`, found `}`",
        ),
        (
            "HloModule m\nENTRY e {\n  ROOT x = f32[] parameter(0)\n}\n}".to_string(),
            "5:1: expected `,` or a computation or end of input, found `}`",
        ),
    ];
    for (src, want) in cases {
        let got = parse_err(&src);
        assert_eq!(got, want, "src:\n{src}");
    }
}

#[test]
fn semantic_errors_point_at_the_token() {
    let cases = [
        (
            entry("  x = f32[] parameter(0)\n  ROOT y = f32[] frobnicate(x)"),
            "5:18: unsupported opcode 'frobnicate' (supported: abs, add,",
        ),
        (
            entry("  ROOT y = f32[] negate(z)"),
            "4:25: operand 'z' is not defined in computation 'e'",
        ),
        // One value for a shape too large to fill (found by the fuzzer as
        // an aborting allocation).
        (
            entry("  ROOT c = f32[4611686018427387904] constant(1)"),
            "4:46: a constant of f32[4611686018427387904]{0} does not fit in memory",
        ),
        (
            entry("  ROOT x = s1[2] parameter(0)"),
            "4:12: unsupported element type 's1' (supported: pred, s2, s4, s8, s16, s32",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT y = f32[2] transpose(x)"),
            "5:3: transpose needs attribute 'dimensions'",
        ),
        (
            entry("  x = f32[] parameter(0)\n  ROOT y = f32[] negate(x), foo=1"),
            "5:29: unsupported attribute 'foo' on negate",
        ),
        (
            entry("  ROOT c = f32[3] constant({1, 2})"),
            "4:28: literal has 2 elements in dimension 0, f32[3]{0} needs 3",
        ),
        (
            entry("  ROOT c = f32[3] constant({...})"),
            "4:28: constant value was elided",
        ),
        (
            entry("  ROOT c = s8[] constant(300)"),
            "4:26: value 300 is not representable as s8",
        ),
        (
            entry("  ROOT c = s8[3] constant({1, 300, 2})"),
            "4:31: value 300 is not representable as s8",
        ),
        (
            entry("  ROOT c = pred[] constant(2.5)"),
            "4:28: '2.5' is not a valid pred value",
        ),
        (
            entry("  x = f32[] parameter(0)\n  x = f32[] parameter(1)\n  ROOT y = f32[] add(x, x)"),
            "5:3: instruction name 'x' is defined twice",
        ),
        (
            entry("  ROOT x = f32[] custom-call(), custom_call_target=\"a\\qb\""),
            "4:52: malformed escape sequence in string",
        ),
        (
            entry("  x = f32[] parameter(0)\n  ROOT y = pred[] compare(x, x), direction=SIDEWAYS"),
            "5:34: unknown direction 'SIDEWAYS' (expected one of EQ, NE, LT, LE, GT, GE)",
        ),
        (
            entry("  ROOT x = f32[2,3]{0} parameter(0)"),
            "4:20: layout has 1 entries for rank 2",
        ),
        (
            "HloModule m, num_replicas=8\nENTRY e {\n ROOT x = f32[] parameter(0)\n}\n".to_string(),
            "1:14: unsupported module attribute 'num_replicas'",
        ),
        (
            entry(
                "  x = f32[1,5,5,1] parameter(0)\n  k = f32[3,3,1,1] parameter(1)\n  ROOT c = f32[1,3,3,1] convolution(x, k), window={size=3x3 stride=2}, dim_labels=b01f_01io->b01f",
            ),
            "6:44: window 'stride' has 1 entries, 'size' has 2",
        ),
        (
            entry(
                "  x = f32[1,5,5,1] parameter(0)\n  k = f32[3,3,1,1] parameter(1)\n  ROOT c = f32[1,3,3,1] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b0f",
            ),
            "6:63: dim_labels 'b01f_01io->b0f' give input, kernel and output different numbers of spatial dimensions",
        ),
        (
            entry(
                "  x = f32[1,5,5,1] parameter(0)\n  k = f32[3,3,1,1] parameter(1)\n  ROOT c = f32[1,3,3,1] convolution(x, k), window={size=3x3}, dim_labels=b01f_01ix->b01f",
            ),
            "6:63: kernel labels '01ix': 'x' is neither i nor o nor a spatial dimension below 2",
        ),
        (
            entry("  x = f32[] parameter(0)\n  ROOT d = f32[] async-done(x)"),
            "3:7: 'd' (async-done) names no computation and does not continue an async-start to take it from; write calls=",
        ),
        (
            entry("  ROOT a = bf16[] constant(nan(0x80))"),
            "4:28: value nan(0x80) is not representable as bf16",
        ),
        (
            entry(
                "  x = f32[2,2] parameter(0)\n  ROOT d = f32[2,2] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_f32_f32_f17",
            ),
            "5:84: unknown algorithm 'dot_f32_f32_f17' (expected one of dot_any_f8_any_f8_f32,",
        ),
    ];
    for (src, want) in cases {
        let got = parse_err(&src);
        assert!(
            got.starts_with(want),
            "\nwant: {want}\ngot:  {got}\nsrc:\n{src}"
        );
    }
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

/// A callee is resolved where it is read: a name no computation before
/// it has (XLA's reader needs callees defined first too) is refused at
/// the name.
#[test]
fn an_unknown_callee_is_refused_where_it_is_written() {
    let cases = [
        (
            entry("  a = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=nowhere"),
            "6:48: calls unknown computation 'nowhere'",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(x), custom_call_target=\"t\", called_computations={nowhere}"),
            "5:59: calls unknown computation 'nowhere'",
        ),
        (
            "HloModule m\nENTRY e {\n  a = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=add\n}\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n".to_string(),
            "5:48: calls unknown computation 'add'",
        ),
    ];
    for (src, want) in cases {
        let got = text::parse_module(&src).unwrap_err().to_string();
        assert_eq!(got, want, "\nsrc:\n{src}");
    }
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

fn verify_err(src: &str) -> String {
    let m = text::parse_module(src).unwrap_or_else(|e| panic!("{e}"));
    verify(&m)
        .expect_err("expected a verifier error")
        .to_string()
}

#[test]
fn verifier_errors_name_instruction_and_rule() {
    let cases = [
        (
            entry("  a = f32[2,3] parameter(0)\n  b = f32[4,2] parameter(1)\n  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
            "computation 'e', instruction 'd': dot: dot dimension sizes differ: lhs dim 1 is 3, rhs dim 0 is 4",
        ),
        (
            entry("  a = f32[2] parameter(0)\n  b = f32[2] parameter(2)\n  ROOT s = f32[2] add(a, b)"),
            "computation 'e', instruction 'b': parameter numbers must be 0..2 without gaps; found 2",
        ),
        (
            entry("  a = f32[2] parameter(0)\n  ROOT s = f32[3] add(a, a)"),
            "computation 'e', instruction 's': add produces f32[2]{0} but the instruction declares f32[3]{0}",
        ),
        (
            entry("  a = f32[2] add(b, b)\n  ROOT b = f32[2] add(a, a)"),
            "computation 'e': instructions form a cycle",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(x), custom_call_target=\"t\", operand_layout_constraints={f32[2]{0}, f32[2]{0}}"),
            "computation 'e', instruction 'c': custom-call: operand_layout_constraints lists 2 shapes for 1 operands",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT c = f32[3] custom-call(x), custom_call_target=\"t\", output_to_operand_aliasing={{}: (0, {})}"),
            "computation 'e', instruction 'c': custom-call: output_to_operand_aliasing {}: (0, {}) does not name an output and an operand part of one shape",
        ),
        (
            entry("  x = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(x), custom_call_target=\"t\", operand_layout_constraints={s32[2]{0}}"),
            "computation 'e', instruction 'c': custom-call: operand_layout_constraints gives operand 0 as s32[2]{0}, but it is f32[2]{0}",
        ),
        (
            "HloModule m, input_output_alias={ {0}: (0, {}, may-alias) }\nENTRY e {\n  a = f32[2] parameter(0)\n  ROOT c = s32[2] convert(a)\n}\n".to_string(),
            "computation 'e': input_output_alias: output index [0] does not exist in s32[2]{0}",
        ),
        (
            "HloModule m\nmul {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\nENTRY e {\n  a = f32[2] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=mul\n}\n".to_string(),
            "computation 'e', instruction 'r': reduce: 'mul' has signature (f32[]) -> f32[] but (f32[], f32[]) -> f32[] is required",
        ),
        (
            entry("  ROOT a = f32[4611686018427387904,4] parameter(0)"),
            "computation 'e', instruction 'a': shape f32[4611686018427387904,4]{1,0} is too large to address",
        ),
    ];
    for (src, want) in cases {
        let got = verify_err(&src);
        assert!(
            got.starts_with(want),
            "\nwant: {want}\ngot:  {got}\nsrc:\n{src}"
        );
    }
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
    // XLA's parser reads a scalar's broadcast without its empty list.
    let m = text::parse_module(&entry(
        "  x = f32[] parameter(0)\n  ROOT y = f32[2,3] broadcast(x)",
    ))
    .unwrap();
    verify(&m).unwrap();
    assert!(text::print_module(&m).contains("broadcast(x), dimensions={}"));
    // Over anything else the missing list is an error at the instruction.
    let e = match text::parse_module(&entry(
        "  x = f32[3] parameter(0)\n  ROOT y = f32[2,3] broadcast(x)",
    )) {
        Err(e) => e.to_string(),
        Ok(m) => verify(&m).unwrap_err().to_string(),
    };
    assert!(
        e.contains("broadcast dimensions [] must have one entry per operand dimension (1)"),
        "{e}"
    );
}

#[test]
fn a_control_predecessor_must_be_in_the_computation() {
    let e = parse_err(&entry(
        "  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p), control-predecessors={q}",
    ));
    assert_eq!(
        e,
        "5:30: control predecessor 'q' is not defined in computation 'e'"
    );
}
