//! Passes keep what control dependencies say: cse never merges an
//! instruction that one orders (either end), and dce hands a removed instruction's
//! predecessors on to what waited for it.

use hlatc_compiler::formats::text;
use hlatc_passes::{pipeline_from_names, PassContext, Target};

fn run(passes: &[&str], src: &str) -> String {
    let mut m = text::parse_module(src).unwrap();
    pipeline_from_names("p", passes)
        .unwrap()
        .run_module(&mut m, &mut PassContext::new(Target::Cpu))
        .unwrap();
    text::print_module(&m)
}

#[test]
fn cse_leaves_ordered_twins_apart() {
    let out = run(
        &["cse", "dce"],
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  a = f32[2] negate(p)\n  b = f32[2] negate(p), control-predecessors={a}\n  c = f32[2] negate(p)\n  d = f32[2] add(a, b)\n  ROOT r = f32[2] add(d, c)\n}\n",
    );
    assert!(
        out.contains("b = f32[2]{0} negate(p), control-predecessors={a}"),
        "{out}"
    );
    // Nor is an unordered twin merged into `a`, which orders `b`; two
    // unordered twins still merge.
    assert!(out.contains("c = f32[2]{0} negate(p)"), "{out}");
    let out = run(
        &["cse", "dce"],
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  a = f32[2] negate(p)\n  c = f32[2] negate(p)\n  ROOT r = f32[2] add(a, c)\n}\n",
    );
    assert!(out.contains("ROOT r = f32[2]{0} add(a, a)"), "{out}");
}

#[test]
fn dce_hands_a_removed_instructions_order_on() {
    let out = run(
        &["dce"],
        "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  w = f32[2] abs(p)\n  x = f32[2] negate(p), control-predecessors={w}\n  y = f32[2] exponential(p), control-predecessors={x}\n  ROOT r = f32[2] add(w, y)\n}\n",
    );
    assert!(!out.contains("x = "), "{out}");
    assert!(
        out.contains("y = f32[2]{0} exponential(p), control-predecessors={w}"),
        "{out}"
    );
}
