//! Dynamic dimensions (`f32[<=8]`): a bound that the array fills only up to
//! a size known at run time. hlatc keeps which dimensions are dynamic
//! through text and proto, types the three ops that make and read them,
//! and compares shapes by their bounds, as XLA's verifier does.

use hlatc_compiler::{formats::proto, formats::text, verify, Module, Op, Shape};

fn module(body: &str) -> Result<Module, String> {
    let src = format!("HloModule m\n\nENTRY e {{\n{body}\n}}\n");
    let m = text::parse_module(&src).map_err(|e| e.to_string())?;
    verify(&m).map_err(|e| e.to_string())?;
    Ok(m)
}

fn shape_of<'m>(m: &'m Module, name: &str) -> &'m Shape {
    let e = m.entry();
    &e.instr(e.find(name).unwrap()).shape
}

const MAKE_AND_READ: &str = "  x = f32[4,3] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[<=4,3] set-dimension-size(x, n), dimensions={0}\n  g = s32[] get-dimension-size(d), dimensions={0}\n  ROOT r = f32[<=12] dynamic-reshape(d, g)";

#[test]
fn bounds_survive_text_and_proto() {
    let m = module(MAKE_AND_READ).unwrap();
    let d = shape_of(&m, "d").as_array().unwrap();
    assert_eq!(d.dims, [4, 3]);
    assert!(d.is_dynamic(0) && !d.is_dynamic(1));
    assert_eq!(d.to_string(), "f32[<=4,3]{1,0}");
    let printed = text::print_module(&m);
    assert!(
        printed.contains("d = f32[<=4,3]{1,0} set-dimension-size(x, n), dimensions={0}"),
        "{printed}"
    );
    assert!(
        printed.contains("g = s32[] get-dimension-size(d), dimensions={0}"),
        "{printed}"
    );
    assert_eq!(text::parse_module(&printed).unwrap(), m);
    let p = proto::module_to_proto(&m);
    let set = p.computations[0]
        .instructions
        .iter()
        .find(|i| i.name == "d")
        .unwrap();
    assert_eq!(set.dimensions, [0]);
    assert_eq!(
        set.shape.as_ref().unwrap().is_dynamic_dimension,
        [true, false]
    );
    let back = proto::decode_module(&proto::encode_module(&m)).unwrap();
    assert_eq!(text::print_module(&back), printed);
    assert!(matches!(
        back.entry().instr(back.entry().find("r").unwrap()).op,
        Op::DynamicReshape
    ));
}

#[test]
fn shapes_compare_by_bounds_as_in_xla() {
    // XLA's verifier compares shapes with ShapeUtil::Compatible, which
    // ignores dynamic-ness: a static operand may feed a bounded result.
    module("  x = f32[4] parameter(0)\n  ROOT n = f32[<=4] negate(x)").unwrap();
    let e = module("  x = f32[4] parameter(0)\n  ROOT n = f32[<=5] negate(x)").unwrap_err();
    assert!(e.contains("negate produces f32[4]{0}"), "{e}");
}

#[test]
fn the_dimension_ops_are_typed() {
    let e = module("  x = f32[4] parameter(0)\n  n = s64[] parameter(1)\n  ROOT d = f32[<=4] set-dimension-size(x, n), dimensions={0}").unwrap_err();
    assert!(
        e.ends_with("set-dimension-size's size (operand 1) must be s32[], got s64[]"),
        "{e}"
    );
    let e =
        module("  x = f32[4] parameter(0)\n  ROOT g = s32[] get-dimension-size(x), dimensions={1}")
            .unwrap_err();
    assert!(
        e.ends_with("get-dimension-size dimension 1 out of range for f32[4]{0}"),
        "{e}"
    );
    let e =
        module("  x = f32[4] parameter(0)\n  ROOT g = s64[] get-dimension-size(x), dimensions={0}")
            .unwrap_err();
    assert!(
        e.contains("get-dimension-size produces s32[] but the instruction declares s64[]"),
        "{e}"
    );
    let e = module("  x = f32[4] parameter(0)\n  n = s32[] parameter(1)\n  ROOT r = f32[<=2,2] dynamic-reshape(x, n)").unwrap_err();
    assert!(
        e.ends_with("expects 3 (1 + one size per result dimension) operand(s), got 2"),
        "{e}"
    );
    let e = module(
        "  x = f32[4] parameter(0)\n  ROOT d = f32[4] set-dimension-size(x), dimensions={0,1}",
    )
    .unwrap_err();
    assert!(
        e.contains("set-dimension-size needs exactly one dimension, got [0, 1]"),
        "{e}"
    );
}

/// An unbounded dimension (`?`) is read as XLA holds it (i64::MIN,
/// dynamic), kept through text and proto, and passed through the ops
/// that need no size; anything that would compute with it is refused.
#[test]
fn unbounded_dimensions_pass_through_parameters_calls_and_tuples() {
    let m = module("  x = f32[?,784] parameter(0)\n  s = s64[2] parameter(1)\n  r = f32[?,?] custom-call(x, s), custom_call_target=\"mhlo.dynamic_reshape\"\n  ROOT t = (f32[?,?], f32[?,784]) tuple(r, x)").unwrap();
    let x = shape_of(&m, "x").as_array().unwrap();
    assert_eq!(x.dims, [i64::MIN, 784]);
    assert!(x.is_unbounded(0) && !x.is_unbounded(1) && x.is_dynamic(0));
    assert_eq!(x.checked_element_count(), None, "no size to count");
    assert_eq!(x.to_string(), "f32[?,784]{1,0}");
    let printed = text::print_module(&m);
    assert_eq!(
        text::print_module(&text::parse_module(&printed).unwrap()),
        printed
    );
    let p = proto::module_to_proto(&m);
    let dims = &p.computations[0].instructions[0].shape.as_ref().unwrap();
    assert_eq!(dims.dimensions, [i64::MIN, 784]);
    assert_eq!(dims.is_dynamic_dimension, [true, false]);
    let back = proto::module_from_proto(&p).unwrap();
    assert_eq!(text::print_module(&back), printed);

    let e = module("  x = f32[?,784] parameter(0)\n  ROOT n = f32[?,784] negate(x)").unwrap_err();
    assert!(
        e.ends_with("negate: f32[?,784]{1,0} has an unbounded dimension (?), which hlatc reads on parameters, custom calls, tuples and get-tuple-element only: no other op has a shape rule over one"),
        "{e}"
    );
    // Without a written result shape, inference refuses it the same way.
    let e = module("  x = f32[?] parameter(0)\n  ROOT n = reduce-precision(x), exponent_bits=5, mantissa_bits=2").unwrap_err();
    assert!(e.contains("has an unbounded dimension (?)"), "{e}");
    let e = module("  ROOT x = f32[<=?] parameter(0)").unwrap_err();
    assert!(
        e.contains("expected a dimension, a bound such as <=8, or ? for an unbounded dimension"),
        "{e}"
    );
    // i64::MIN is unbounded only where the dimension is dynamic.
    let mut p = proto::module_to_proto(&m);
    let s = p.computations[0].instructions[0].shape.as_mut().unwrap();
    s.is_dynamic_dimension = vec![false, false];
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("negative dimension -9223372036854775808 (dimension 0)"),
        "{e}"
    );
    let e = module("  ROOT x = f32[-9223372036854775808] parameter(0)").unwrap_err();
    assert!(e.contains("negative dimension -9223372036854775808"), "{e}");
}

#[test]
fn a_proto_must_flag_every_dimension_or_none() {
    let m = module(MAKE_AND_READ).unwrap();
    let mut p = proto::module_to_proto(&m);
    let d = p.computations[0]
        .instructions
        .iter_mut()
        .find(|i| i.name == "d")
        .unwrap();
    d.shape.as_mut().unwrap().is_dynamic_dimension = vec![true];
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("is_dynamic_dimension has 1 entries for rank 2"),
        "{e}"
    );
}

/// A shape keeps one bit per dimension up to dimension 31; a dynamic
/// dimension past that is refused by name rather than read as static.
#[test]
fn a_dynamic_dimension_past_31_is_refused() {
    let dims: Vec<String> = (0..33)
        .map(|i| if i == 32 { "<=1".into() } else { "1".into() })
        .collect();
    let e = module(&format!("  ROOT p = f32[{}] parameter(0)", dims.join(","))).unwrap_err();
    assert!(
        e.contains("dimension 32 is dynamic; hlatc keeps dynamic dimensions up to 31 only"),
        "{e}"
    );
}

/// A reshape's `inferred_dimension` (the result dimension a frontend left
/// to be inferred) is kept, in the proto's `dimensions` as XLA keeps it,
/// and must be a dimension of the result.
#[test]
fn a_reshapes_inferred_dimension_is_kept() {
    let m = module("  x = f32[4,3] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[<=4,3] set-dimension-size(x, n), dimensions={0}\n  ROOT r = f32[<=12] reshape(d), inferred_dimension=0").unwrap();
    let printed = text::print_module(&m);
    assert!(
        printed.contains("r = f32[<=12]{0} reshape(d), inferred_dimension=0"),
        "{printed}"
    );
    let p = proto::module_to_proto(&m);
    let r = p.computations[0]
        .instructions
        .iter()
        .find(|i| i.name == "r")
        .unwrap();
    assert_eq!(r.dimensions, [0]);
    assert_eq!(
        text::print_module(&proto::decode_module(&proto::encode_module(&m)).unwrap()),
        printed
    );
    let e =
        module("  x = f32[4,3] parameter(0)\n  ROOT r = f32[12] reshape(x), inferred_dimension=1")
            .unwrap_err();
    assert!(
        e.ends_with("reshape's inferred_dimension 1 is not a dimension of f32[12]{0}"),
        "{e}"
    );
}
