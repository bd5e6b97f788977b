//! `sort`, `map` and `rng` take callees and operands of the shapes their
//! definitions need; anything else is refused by name.

use hlatc_compiler::{formats::text, verify};

fn refused(callees: &str, entry: &str) -> String {
    let src =
        format!("HloModule m\n\n{callees}\nENTRY e {{\n  x = f32[4] parameter(0)\n{entry}\n}}\n");
    let m = match text::parse_module(&src) {
        Ok(m) => m,
        Err(e) => return e.to_string(),
    };
    verify(&m)
        .expect_err("hlatc must refuse this module")
        .to_string()
}

const LT: &str = "lt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n";
const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\n";

#[test]
fn sort_needs_a_comparator_over_every_operand() {
    let e = refused(LT, "  i = s32[4] convert(x)\n  ROOT s = (f32[4], s32[4]) sort(x, i), dimensions={0}, to_apply=lt");
    assert!(
        e.contains("'lt' has signature (f32[], f32[]) -> pred[] but (f32[], f32[], s32[], s32[]) -> pred[] is required"),
        "{e}"
    );
    let e = refused(LT, "  ROOT s = f32[4] sort(x), dimensions={1}, to_apply=lt");
    assert!(
        e.contains("sort dimension 1 out of range for f32[4]{0}"),
        "{e}"
    );
    let e = refused(
        ADD,
        "  ROOT s = f32[4] sort(x), dimensions={0}, to_apply=add",
    );
    assert!(e.contains("-> pred[] is required"), "{e}");
}

#[test]
fn map_needs_a_scalar_computation_and_every_dimension() {
    let e = refused(
        ADD,
        "  ROOT m = f32[4] map(x, x), dimensions={1}, to_apply=add",
    );
    assert!(
        e.contains("map dimensions must be every dimension in order (0..1), got [1]"),
        "{e}"
    );
    let e = refused(ADD, "  ROOT m = f32[4] map(x), to_apply=add");
    assert!(
        e.contains("'add' has signature (f32[], f32[]) -> f32[] but (f32[]) -> f32[] is required"),
        "{e}"
    );
}

#[test]
fn rng_takes_two_scalars_of_its_type() {
    let e = refused("", "  lo = s32[] constant(0)\n  hi = s32[] constant(1)\n  ROOT r = f32[4] rng(lo, hi), distribution=rng_uniform");
    assert!(
        e.contains("rng parameters must be two f32 scalars, got s32[] and s32[]"),
        "{e}"
    );
    let e = refused("", "  lo = s32[] constant(0)\n  hi = s32[] constant(1)\n  ROOT r = s32[4] rng(lo, hi), distribution=rng_normal");
    assert!(e.contains("rng_normal cannot produce s32"), "{e}");
    let e = refused(
        "",
        "  lo = f32[] constant(0)\n  ROOT r = f32[4] rng(lo, lo), distribution=rng_poisson",
    );
    assert!(
        e.contains("unknown distribution 'rng_poisson' (expected one of rng_uniform, rng_normal)"),
        "{e}"
    );
}
