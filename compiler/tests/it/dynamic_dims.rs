//! Dynamic dimensions (`f32[<=8]`): a bound that the array fills only up to
//! a size known at run time. hlatc keeps which dimensions are dynamic
//! through text and proto, types the three ops that make and read them,
//! and compares shapes by their bounds, as XLA's verifier does. What is
//! refused of them is in golden files (`compiler/tests/filetests/`).

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
    // i64::MIN is unbounded only where the dimension is dynamic.
    let mut p = proto::module_to_proto(&m);
    let s = p.computations[0].instructions[0].shape.as_mut().unwrap();
    s.is_dynamic_dimension = vec![false, false];
    let e = proto::module_from_proto(&p).unwrap_err().to_string();
    assert!(
        e.contains("negative dimension -9223372036854775808 (dimension 0)"),
        "{e}"
    );
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
}
