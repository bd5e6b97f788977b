//! `narrow-f64`: f64 values become f32 for Neuron, what lost precision is
//! named, and what f32 cannot hold is refused by name.

use hlatc_compiler::{formats::text, verify};
use hlatc_passes::{NarrowF64, Pass, PassContext, PassError, Target};

fn run(src: &str, keep: bool) -> (Result<bool, PassError>, String, Vec<String>) {
    let mut m = text::parse_module(src).unwrap();
    let mut ctx = PassContext::new(Target::Neuron);
    ctx.keep_entry_signature = keep;
    let result = NarrowF64.run(&mut m, &mut ctx);
    if result.is_ok() {
        verify(&m).unwrap_or_else(|e| panic!("{e}\n{}", text::print_module(&m)));
    }
    (result, text::print_module(&m), ctx.notes().to_vec())
}

const SUM: &str = "HloModule m\n\nadd {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n  ROOT s = f64[] add(a, b)\n}\n\nENTRY e {\n  p = f64[4] parameter(0)\n  k = f64[4] constant({0.1, 0.5, 1e300, 2})\n  m = f64[4] multiply(p, k)\n  z = f64[] constant(0)\n  ROOT r = f64[] reduce(m, z), dimensions={0}, to_apply=add\n}\n";

#[test]
fn every_f64_value_becomes_f32_and_what_lost_precision_is_named() {
    let src = SUM.replace("1e300", "0.25");
    let (result, out, notes) = run(&src, false);
    assert!(result.unwrap());
    assert!(!out.contains("f64"), "{out}");
    assert!(out.contains("ROOT s = f32[] add(a, b)"), "{out}");
    assert!(notes[0].contains("8 instructions"), "{notes:?}");
    assert!(
        notes[0].contains("1 constant(s) lost precision in f32: %k"),
        "{notes:?}"
    );
    assert!(
        notes[0].contains("signature changed, feed and read f32: parameters p and its f64 outputs"),
        "{notes:?}"
    );
}

#[test]
fn a_constant_beyond_f32_is_refused_by_name() {
    let (result, out, _) = run(SUM, false);
    let err = result.unwrap_err().to_string();
    assert!(err.contains("constant 'k': 1e300 overflows f32"), "{err}");
    // Nothing was retyped before the refusal.
    assert!(out.contains("p = f64[4]"), "{out}");
}

#[test]
fn a_kept_signature_leaves_f64_alone() {
    let src = SUM.replace("1e300", "0.25");
    let (result, out, notes) = run(&src, true);
    assert!(!result.unwrap());
    assert_eq!(out, text::print_module(&text::parse_module(&src).unwrap()));
    assert!(notes[0].contains("fixed by the caller"), "{notes:?}");
}

#[test]
fn a_bitcast_of_f64_bits_is_refused() {
    let (result, _, _) = run(
        "HloModule m\n\nENTRY e {\n  p = f64[2] parameter(0)\n  ROOT b = s64[2] bitcast-convert(p)\n}\n",
        false,
    );
    let err = result.unwrap_err().to_string();
    assert!(
        err.contains("instruction 'b': a bitcast-convert of f64"),
        "{err}"
    );
}
