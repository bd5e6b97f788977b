//! parse(print(m)) == m and decode(encode(m)) == m for every test module,
//! and emission is deterministic.

use hlatc_compiler::{formats::proto, formats::text, verify, Module};
use std::path::{Path, PathBuf};

fn modules() -> Vec<(PathBuf, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    for dir in [
        "tests/fixtures/hlo",
        "tests/fixtures/jax",
        "tests/fixtures/torch_xla",
        "benches/data",
    ] {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.extension().is_some_and(|e| e == "hlo") {
                let t = std::fs::read_to_string(&p).unwrap();
                out.push((p, t));
            }
        }
    }
    assert!(out.len() >= 4, "fixtures missing: {out:?}");
    out
}

fn parse(path: &Path, t: &str) -> Module {
    let m = text::parse_module(t).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
    verify(&m).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    m
}

#[test]
fn text_round_trip_recovers_the_module() {
    for (path, t) in modules() {
        let m = parse(&path, &t);
        let printed = text::print_module(&m);
        let again = text::parse_module(&printed)
            .unwrap_or_else(|e| panic!("{}: reparse {e}", path.display()));
        assert!(again == m, "{}: parse(print(m)) != m", path.display());
        assert_eq!(
            text::print_module(&again),
            printed,
            "{}: printing is not idempotent",
            path.display()
        );
        assert_eq!(m.instruction_count(), again.instruction_count());
    }
}

#[test]
fn proto_round_trip_recovers_the_module() {
    for (path, t) in modules() {
        let m = parse(&path, &t);
        let bytes = proto::encode_module(&m);
        let back =
            proto::decode_module(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(back == m, "{}: decode(encode(m)) != m", path.display());
        verify(&back).unwrap();
        assert_eq!(
            proto::encode_module(&back),
            bytes,
            "{}: re-encoding changed bytes",
            path.display()
        );
    }
}

#[test]
fn emission_is_deterministic() {
    for (path, t) in modules() {
        let a = parse(&path, &t);
        let b = parse(&path, &t);
        assert_eq!(
            text::print_module(&a),
            text::print_module(&b),
            "{}",
            path.display()
        );
        assert_eq!(
            proto::encode_module(&a),
            proto::encode_module(&b),
            "{}",
            path.display()
        );
    }
}

#[test]
fn every_opcode_is_covered_by_the_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hlo/all_ops.hlo");
    let m = parse(&root, &std::fs::read_to_string(&root).unwrap());
    let mut seen: Vec<&str> = m
        .computations
        .iter()
        .flat_map(|c| c.ids().map(|i| c.instr(i).op.opcode()))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, hlatc_compiler::ir::op::all_opcodes());
}

#[test]
fn classic_xla_syntax_is_read() {
    let root =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/hlo/xla_classic.hlo");
    let m = parse(&root, &std::fs::read_to_string(&root).unwrap());
    assert_eq!(m.name, "classic_style");
    assert_eq!(m.entry().name, "main.14");
    assert_eq!(
        m.input_output_alias[0].kind,
        hlatc_compiler::AliasKind::MustAlias
    );
    let e = m.entry();
    let mul = e.find("multiply.3").unwrap();
    assert_eq!(e.instr(mul).metadata.source_line, 2);
    assert_eq!(e.instr(mul).metadata.op_name, "jit(f)/mul");
    let names: Vec<&str> = e
        .operands(mul)
        .iter()
        .map(|&o| e.instr(o).name.as_str())
        .collect();
    assert_eq!(names, ["Arg_0.1", "Arg_1.2"]);
    // Parameter order is by number, not by position in the text.
    let params: Vec<&str> = e
        .parameters()
        .iter()
        .map(|&p| e.instr(p).name.as_str())
        .collect();
    assert_eq!(params, ["Arg_0.1", "Arg_1.2"]);
}

#[test]
fn literals_keep_every_bit() {
    let t = "HloModule m\nENTRY e {\n  a = f32[3] constant({0.1, 3.4028235e38, 1.4e-45})\n  b = bf16[2] constant({0.1, -0})\n  c = s64[2] constant({-9223372036854775808, 9223372036854775807})\n  ROOT t = (f32[3], bf16[2], s64[2]) tuple(a, b, c)\n}\n";
    let m = text::parse_module(t).unwrap();
    let again = text::parse_module(&text::print_module(&m)).unwrap();
    assert!(again == m);
    let e = m.entry();
    let a = e.find("a").unwrap();
    match &e.instr(a).op {
        hlatc_compiler::Op::Constant(l) => {
            assert_eq!(l.to_f32_vec(), vec![0.1f32, f32::MAX, 1.4e-45f32]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        text::print_module(&m).contains("b = bf16[2]{0} constant({0.100097656, -0.0})"),
        "{}",
        text::print_module(&m)
    );
}

#[test]
fn sixteen_bit_integers_round_trip_at_their_limits_and_refuse_beyond() {
    let src = "HloModule m, entry_computation_layout={()->(s16[3]{0}, u16[3]{0})}\n\nENTRY e {\n  a = s16[3]{0} constant({-32768, 7, 32767})\n  b = u16[3]{0} constant({0, 1, 65535})\n  ROOT t = (s16[3]{0}, u16[3]{0}) tuple(a, b)\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&m), src);
    let back = hlatc_compiler::formats::proto::decode_module(
        &hlatc_compiler::formats::proto::encode_module(&m),
    )
    .unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&back), src);
}

#[test]
fn bitcast_keeps_its_declared_shape_and_refuses_a_new_byte_size() {
    let src = "HloModule m, entry_computation_layout={(f32[2,3]{1,0})->(f32[6]{0}, f32[3,2]{0,1}, u32[6]{0})}\n\nENTRY e {\n  p = f32[2,3]{1,0} parameter(0)\n  a = f32[6]{0} bitcast(p)\n  b = f32[3,2]{0,1} bitcast(p)\n  c = u32[6]{0} bitcast(a)\n  ROOT t = (f32[6]{0}, f32[3,2]{0,1}, u32[6]{0}) tuple(a, b, c)\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&m), src);
    let back = hlatc_compiler::formats::proto::decode_module(
        &hlatc_compiler::formats::proto::encode_module(&m),
    )
    .unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&back), src);
}

#[test]
fn an_instruction_without_a_result_shape_gets_the_one_xla_infers() {
    let src = "HloModule m\nENTRY e {\n  p = f32[5,4]{0,1} parameter(0)\n  s = sqrt(p)\n  t = transpose(s), dimensions={1,0}\n  ROOT c = f16[4,5] convert(t)\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    let e = m.entry();
    let shape = |n: &str| e.instr(e.find(n).unwrap()).shape.to_string();
    // Elementwise: the operand's layout; transpose: the operand's permuted,
    // as XLA's parser gives them.
    assert_eq!(shape("s"), "f32[5,4]{0,1}");
    assert_eq!(shape("t"), "f32[4,5]{1,0}");
}

#[test]
fn a_shape_xla_derives_replaces_the_written_one_with_a_note() {
    // An older send was written (data, token[]); XLA's parser builds every
    // send as (data, u32[], token[]) whatever is written, and so does hlatc.
    let src = "HloModule m\nENTRY e {\n  p = f32[4]{0} parameter(0)\n  t = token[] after-all()\n  s = (f32[4], token[]) send(p, t), channel_id=1\n  d = (f32[4], token[]) send-done(s), channel_id=1\n  ROOT r = f32[4]{0} add-dependency(p, d)\n}\n";
    let (m, notes) = hlatc_compiler::formats::text::parse_module_noted(src).unwrap();
    let e = m.entry();
    let shape = |n: &str| e.instr(e.find(n).unwrap()).shape.to_string();
    assert_eq!(shape("s"), "(f32[4]{0}, u32[], token[])");
    assert_eq!(shape("d"), "token[]");
    assert_eq!(
        notes,
        [
            "5:3: 's' is written as (f32[4]{0}, token[]); XLA's parser gives a send the shape (f32[4]{0}, u32[], token[]) its operands make, and so does hlatc",
            "6:3: 'd' is written as (f32[4]{0}, token[]); XLA's parser gives a send-done the shape token[] its operands make, and so does hlatc",
        ]
    );
    hlatc_compiler::verify(&m).unwrap();
}

#[test]
fn a_json_backend_config_written_bare_is_kept_as_its_text() {
    let src = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT c = f32[2] custom-call(p), custom_call_target=\"foo\", backend_config={\"a\":{\"b\":[1,2]},\"s\":\"x y\"}\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    let e = m.entry();
    let instr = e.instr(e.root().unwrap());
    assert!(matches!(instr.op, hlatc_compiler::Op::CustomCall(_)));
    assert_eq!(instr.backend_config, r#"{"a":{"b":[1,2]},"s":"x y"}"#);
    let printed = hlatc_compiler::formats::text::print_module(&m);
    let again = hlatc_compiler::formats::text::parse_module(&printed).unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&again), printed);
}

#[test]
fn any_op_keeps_its_backend_config_and_cse_keeps_differently_configured_ones_apart() {
    let src = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[2] parameter(0)\n  c = f32[2] call(p, p), to_apply=add2, backend_config={\"known_trip_count\":{\"n\":\"5\"}}\n  ROOT n = f32[2] negate(c), backend_config=\"plain\"\n}\n".replace("add2", "add_v").replace("ENTRY", "add_v {\n  x = f32[2] parameter(0)\n  y = f32[2] parameter(1)\n  ROOT z = f32[2] add(x, y)\n}\n\nENTRY");
    let m = hlatc_compiler::formats::text::parse_module(&src).unwrap();
    let e = m.entry();
    let config = |name: &str| e.instr(e.find(name).unwrap()).backend_config.clone();
    assert_eq!(config("c"), r#"{"known_trip_count":{"n":"5"}}"#);
    assert_eq!(config("n"), "plain");
    let printed = hlatc_compiler::formats::text::print_module(&m);
    assert!(
        printed.contains("negate(c), backend_config=\"plain\""),
        "{printed}"
    );
    let back = hlatc_compiler::formats::proto::decode_module(
        &hlatc_compiler::formats::proto::encode_module(&m),
    )
    .unwrap();
    assert_eq!(hlatc_compiler::formats::text::print_module(&back), printed);
}

#[test]
fn one_value_for_an_array_constant_is_its_first_element_as_in_xla() {
    // XLA's parser reads `f32[2,2] constant(5)` as {{5, 0}, {0, 0}}.
    let src = "HloModule m\nENTRY e {\n  c = f32[2,2] constant(5)\n  p = pred[3] constant(true)\n  ROOT t = (f32[2,2], pred[3]) tuple(c, p)\n}\n";
    let (m, notes) = hlatc_compiler::formats::text::parse_module_noted(src).unwrap();
    let e = m.entry();
    let value = |n: &str| match &e.instr(e.find(n).unwrap()).op {
        hlatc_compiler::Op::Constant(l) => l.to_f64_vec(),
        other => panic!("{other:?}"),
    };
    assert_eq!(value("c"), [5.0, 0.0, 0.0, 0.0]);
    assert_eq!(value("p"), [1.0, 0.0, 0.0]);
    assert_eq!(
        notes[0],
        "3:25: 'c' writes one value for f32[2,2]{1,0}; XLA's parser makes it the first element and every other element zero, and so does hlatc"
    );
    assert!(hlatc_compiler::formats::text::print_module(&m).contains("constant({{5, 0}, {0, 0}})"));
    // Operand precisions are read in any case, as XLA reads them.
    let src = "HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT d = f32[2,2] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={HIGH,highest}\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    assert!(hlatc_compiler::formats::text::print_module(&m)
        .contains("operand_precision={high,highest}"));
}

#[test]
fn instructions_written_as_operands_are_named_as_xla_names_them() {
    let src = "HloModule m\nENTRY e {\n  parameter.anon = f32[10] parameter(3)\n  ROOT root = add(f32[10] parameter(0), multiply(f32[10] parameter(1), f32[10] parameter(2)))\n}\n";
    let m = hlatc_compiler::formats::text::parse_module(src).unwrap();
    hlatc_compiler::verify(&m).unwrap();
    let e = m.entry();
    let root = e.root().unwrap();
    let names = |id| -> Vec<String> {
        e.operands(id)
            .iter()
            .map(|&o| e.instr(o).name.clone())
            .collect()
    };
    // A written name keeps its own; the nested ones count on past it.
    assert_eq!(names(root), ["parameter.anon.1", "multiply.anon"]);
    let mul = e.find("multiply.anon").unwrap();
    assert_eq!(names(mul), ["parameter.anon.2", "parameter.anon.3"]);
    assert_eq!(e.instr(mul).shape.to_string(), "f32[10]{0}");
    assert_eq!(e.parameters().len(), 4);
}

/// A complex element is `(re, im)`; its parts are read as the part type and
/// keep their bits through text and proto. The bytes, c64 (1, -2.5) and
/// c128 (-0.0, inf), are checked one by one.
#[test]
fn complex_constants_read_print_and_encode_their_parts() {
    let src = "HloModule m\nENTRY e {\n  a = c64[2] constant({(1, -2.5), (3, 0.5)})\n  b = c128[] constant((-0.0, inf))\n  ROOT t = (c64[2], c128[]) tuple(a, b)\n}\n";
    let (m, notes) = hlatc_compiler::formats::text::parse_module_noted(src).unwrap();
    assert!(notes.is_empty(), "{notes:?}");
    let e = m.entry();
    let literal = |n: &str| match &e.instr(e.find(n).unwrap()).op {
        hlatc_compiler::Op::Constant(l) => l.clone(),
        other => panic!("{other:?}"),
    };
    let a = literal("a");
    assert_eq!(a.to_f64_vec(), [1.0, -2.5, 3.0, 0.5]);
    assert_eq!(&a.bytes()[..8], &[0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0]);
    assert_eq!(
        a.get(1),
        hlatc_compiler::Scalar::Complex(3.0, 0.5),
        "element 1 as (re, im)"
    );
    let b = literal("b");
    assert_eq!(b.bytes()[7], 0x80, "the real part keeps its negative zero");
    assert_eq!(&b.bytes()[8..], &f64::INFINITY.to_le_bytes());
    let printed = hlatc_compiler::formats::text::print_module(&m);
    assert!(
        printed.contains("constant({(1, -2.5), (3, 0.5)})")
            && printed.contains("constant((-0.0, inf))"),
        "{printed}"
    );
    let back = hlatc_compiler::formats::proto::decode_module(
        &hlatc_compiler::formats::proto::encode_module(&m),
    )
    .unwrap();
    assert_eq!(back, m);
}

/// XLA's parser (measured through jaxlib) copies a NaN real part into the
/// imaginary part and reads a c64's imaginary NaN through f64, losing its
/// payload; hlatc reads them the same way and says so.
#[test]
fn complex_nan_parts_are_read_as_xla_reads_them() {
    let src = "HloModule m\nENTRY e {\n  ROOT a = c64[3] constant({(-nan(0x7), 2), (1, -nan(0x5)), (nan, nan)})\n}\n";
    let (m, notes) = hlatc_compiler::formats::text::parse_module_noted(src).unwrap();
    let e = m.entry();
    let hlatc_compiler::Op::Constant(l) = &e.instr(e.root().unwrap()).op else {
        panic!("a constant")
    };
    let words: Vec<u32> = l
        .bytes()
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect();
    assert_eq!(
        words,
        [
            0xff80_0007,
            0xff80_0007,
            0x3f80_0000,
            0xffc0_0000,
            0x7fc0_0000,
            0x7fc0_0000
        ]
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("3:28: 'a' writes a complex value with a NaN part"),
        "{notes:?}"
    );
}

/// A complex constant whose NaN part XLA's text reader would change (a
/// proto can hold one) is named as something text cannot carry.
#[test]
fn a_complex_nan_text_cannot_carry_is_named() {
    let mut m = hlatc_compiler::formats::text::parse_module(
        "HloModule m\nENTRY e {\n  ROOT a = c64[] constant((1, 2))\n}\n",
    )
    .unwrap();
    assert!(hlatc_compiler::formats::text::unprintable(&m).is_empty());
    let c = m.entry_mut();
    let root = c.root().unwrap();
    let nan_real = hlatc_compiler::Literal::from_scalars(
        hlatc_compiler::ElementType::C64,
        vec![],
        &[hlatc_compiler::Scalar::Complex(f64::NAN, 2.0)],
    )
    .unwrap();
    c.instr_mut(root).op = hlatc_compiler::Op::Constant(nan_real);
    let notes = hlatc_compiler::formats::text::unprintable(&m);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("constant 'a' in 'e' holds a complex value with a NaN part"));
}

/// Spellings of older dumps and of XLA's own tests that XLA's reader still
/// takes, read as it reads them (each checked through jaxlib).
#[test]
fn older_spellings_are_read_as_xla_reads_them() {
    let read = |src: &str| {
        text::print_module(&text::parse_module(src).unwrap_or_else(|e| panic!("{e}\n{src}")))
    };
    // A module name ending in a colon; a layout a space after its shape.
    let printed = read("HloModule old_style:\n\nENTRY e {\n  p = f32[2,3] {0,1} parameter(0)\n  ROOT n = f32[2,3] {0,1} negate(p)\n}\n");
    assert!(printed.starts_with("HloModule old_style, "), "{printed}");
    assert!(printed.contains("n = f32[2,3]{0,1} negate(p)"), "{printed}");
    // A computation's `{` after its result shape is no layout.
    read("HloModule m\n\nENTRY e (p: f32[2]) -> f32[2] { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }\n");
    // The 64-bit integers through their bits: -1 as u64 is its two's
    // complement, and 2^63 as s64 wraps to its minimum.
    let printed = read("HloModule m\n\nENTRY e {\n  a = u64[] constant(-1)\n  ROOT b = s64[] constant(9223372036854775808)\n}\n");
    assert!(
        printed.contains("u64[] constant(18446744073709551615)"),
        "{printed}"
    );
    assert!(
        printed.contains("s64[] constant(-9223372036854775808)"),
        "{printed}"
    );
    // Nested literal lists one after another without a comma, with XLA's
    // index comments between them.
    let printed = read("HloModule m\n\nENTRY e {\n  ROOT c = s32[2,1,2] constant({ /*i0=0*/ { {1, 2} } /*i0=1*/ { {3, 4} } })\n}\n");
    assert!(
        printed.contains("constant({{{1, 2}}, {{3, 4}}})"),
        "{printed}"
    );
}

/// A tuple constant is read element by element against its shape, carried
/// in the proto as one literal per element (`tuple_literals`), and a count
/// that does not match is an error at the value.
#[test]
fn tuple_constants_read_by_their_shape() {
    let src = "HloModule m\n\nENTRY e {\n  ROOT c = ((f32[], f32[]), f32[2]{0}) constant(((7, 42), {1, 2}))\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    assert!(text::print_module(&m).contains("constant(((7, 42), {1, 2}))"));
    let p = proto::module_to_proto(&m);
    let lit = p.computations[0].instructions[0].literal.as_ref().unwrap();
    assert_eq!(lit.tuple_literals.len(), 2);
    assert_eq!(lit.tuple_literals[0].tuple_literals.len(), 2);
    assert_eq!(lit.tuple_literals[1].f32s, [1.0, 2.0]);
    assert_eq!(proto::decode_module(&proto::encode_module(&m)).unwrap(), m);
}

/// `?` in `dim_labels` labels a dimension of no role (cuDNN's vectorized
/// int8 convolutions): it is left out of the dimension numbers, as XLA
/// leaves it, and printed as XLA prints it, up to the highest dimension
/// named (checked through jaxlib on XLA's own tests).
#[test]
fn unlabelled_convolution_dimensions_print_as_xla_prints_them() {
    let read = |labels: &str| {
        let src = format!("HloModule m\n\nENTRY e {{\n  x = s8[10,20,30,42,4] parameter(0)\n  w = s8[2,2,41,4,168] parameter(1)\n  ROOT r = (s8[10,20,30,42,4], u8[0]) custom-call(x, w), window={{size=2x2}}, dim_labels={labels}, custom_call_target=\"__cudnn$convForward\"\n}}\n");
        let m = text::parse_module(&src).unwrap_or_else(|e| panic!("{e}"));
        verify(&m).unwrap();
        let printed = text::print_module(&m);
        assert_eq!(text::parse_module(&printed).unwrap(), m);
        let at = printed.find("dim_labels=").unwrap() + "dim_labels=".len();
        printed[at..].split(',').next().unwrap().to_string()
    };
    assert_eq!(read("b01f?_01i?o->b01f?"), "b01f_01i?o->b01f");
    assert_eq!(read("bf?01_i?o01->bf?01"), "bf?01_i?o01->bf?01");
    assert_eq!(read("b01f_01io->b01f"), "b01f_01io->b01f");
}

#[test]
fn an_instruction_written_in_place_comes_before_its_user() {
    // As XLA adds it: a scheduled module's written order then holds (XLA
    // test 05109 nests a tuple inside a while this way).
    let src = "HloModule m, is_scheduled=true\n\nENTRY e {\n  c = s32[] constant(1)\n  ROOT n = s32[] negate(s32[] add(c, s32[] multiply(c, c)))\n}\n";
    let m = text::parse_module(src).unwrap();
    verify(&m).unwrap();
    let printed = text::print_module(&m);
    assert!(
        printed.contains(
            "  multiply.anon = s32[] multiply(c, c)\n  add.anon = s32[] add(c, multiply.anon)\n  ROOT n = s32[] negate(add.anon)\n"
        ),
        "{printed}"
    );
}
