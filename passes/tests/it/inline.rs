//! Inlining a called computation: its body is copied into the caller under
//! fresh names, reading the call's arguments, and a call site of another
//! arity or shape is refused.

use hlatc_compiler::formats::text;
use hlatc_passes::inline::{inline, InlineError};
use hlatc_passes::rewriter::Names;

#[test]
fn a_body_is_copied_under_fresh_names_reading_the_arguments() {
    let mut m = text::parse_module(
        "HloModule m\n\nbody {\n  p = f32[2] parameter(0)\n  n = f32[2] negate(p)\n  ROOT a = f32[2] add(n, p)\n}\n\nENTRY e {\n  x = f32[2] parameter(0)\n  ex = f32[2] exponential(x)\n  ROOT c = f32[2] call(ex), to_apply=body\n}\n",
    )
    .unwrap();
    let mut names = Names::of_module(&m);
    let callee = m.computation_named("body").unwrap().clone();
    let entry = m.entry_mut();
    let arg = entry.find("ex").unwrap();
    let root = inline(entry, &callee, &[arg], &mut names).unwrap();
    entry.set_root(root);
    let text = text::print_module(&m);
    assert!(text.contains("n.1 = f32[2]{0} negate(ex)"), "{text}");
    assert!(text.contains("ROOT a.1 = f32[2]{0} add(n.1, ex)"), "{text}");
}

#[test]
fn a_call_site_of_another_shape_is_refused() {
    let m = text::parse_module(
        "HloModule m\n\nbody {\n  ROOT p = f32[2] parameter(0)\n}\n\nENTRY e {\n  x = f32[3] parameter(0)\n  ROOT c = f32[3] negate(x)\n}\n",
    )
    .unwrap();
    let mut names = Names::of_module(&m);
    let callee = m.computation_named("body").unwrap().clone();
    let mut entry = m.entry().clone();
    let x = entry.find("x").unwrap();
    let err = inline(&mut entry, &callee, &[x], &mut names).unwrap_err();
    assert!(matches!(err, InlineError::Shape { number: 0, .. }), "{err}");
    let err = inline(&mut entry, &callee, &[], &mut names).unwrap_err();
    assert!(
        matches!(
            err,
            InlineError::Arity {
                params: 1,
                args: 0,
                ..
            }
        ),
        "{err}"
    );
}
