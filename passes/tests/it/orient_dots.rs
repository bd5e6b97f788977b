//! `orient-dots`: a large operand XLA CPU would transpose before a dot is
//! read in the orientation it lies in, the small result transposed back.

use hlatc_compiler::{formats::text, verify};
use hlatc_passes::{OrientDots, Pass, PassContext, Target};

/// Attention's backward at toy size: `ds` feeds dQ as it lies and dK
/// contracted over its middle dimension.
const ATTENTION: &str = "HloModule m\nENTRY e {\n \
    ds = f32[2,64,64] parameter(0)\n q = f32[2,64,4] parameter(1)\n k = f32[2,64,4] parameter(2)\n \
    dq = f32[2,64,4] dot(ds, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n \
    dk = f32[2,64,4] dot(ds, q), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n \
    ROOT t = (f32[2,64,4], f32[2,64,4]) tuple(dq, dk)\n}";

fn run(hlo: &str) -> (bool, String) {
    let mut m = text::parse_module(hlo).unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    let changed = OrientDots.run(&mut m, &mut ctx).unwrap();
    verify(&m).unwrap();
    (changed, text::print_module(&m))
}

#[test]
fn the_key_gradient_reads_the_score_gradient_as_an_rhs() {
    let (changed, printed) = run(ATTENTION);
    assert!(changed);
    // dK^T = Q^T . dS, then the small result is transposed back.
    assert!(
        printed.contains(
            "f32[2,4,64]{2,1,0} dot(q, ds), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}"
        ),
        "{printed}"
    );
    assert!(
        printed.contains("f32[2,64,4]{2,1,0} transpose(") && printed.contains("dimensions={0,2,1}"),
        "{printed}"
    );
    // dQ already reads dS as an lhs [b, q, k]: left alone.
    assert!(
        printed.contains("dq = f32[2,64,4]{2,1,0} dot(ds, k)"),
        "{printed}"
    );
}

#[test]
fn the_small_operand_may_hold_its_batch_dimensions_anywhere() {
    // hlatc's own form: q as [b, s, h, d], the score gradient as
    // [b, h, q, k].
    let (changed, printed) = run(
        "HloModule m\nENTRY e {\n ds = f32[1,2,64,64] parameter(0)\n q = f32[1,64,2,4] parameter(1)\n \
         k = f32[1,64,2,4] parameter(2)\n \
         dq = f32[1,2,64,4] dot(ds, k), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={1}\n \
         dk = f32[1,2,64,4] dot(ds, q), lhs_batch_dims={0,1}, lhs_contracting_dims={2}, rhs_batch_dims={0,2}, rhs_contracting_dims={1}\n \
         ROOT t = (f32[1,2,64,4], f32[1,2,64,4]) tuple(dq, dk)\n}",
    );
    assert!(changed, "{printed}");
    assert!(
        printed.contains(
            "f32[1,2,4,64]{3,2,1,0} dot(q, ds), lhs_batch_dims={0,2}, lhs_contracting_dims={1}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}"
        ),
        "{printed}"
    );
    assert!(printed.contains("dimensions={0,1,3,2}"), "{printed}");
}

#[test]
fn a_large_operand_read_only_by_the_dot_is_left_to_xla() {
    let alone = ATTENTION
        .replace(" dq = f32[2,64,4] dot(ds, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n", "")
        .replace("tuple(dq, dk)", "tuple(k, dk)");
    let (changed, printed) = run(&alone);
    assert!(!changed, "{printed}");
}

#[test]
fn a_small_misoriented_operand_is_left_alone() {
    // The lhs is read contracting-first, but the result is larger than
    // both operands: a transposed copy of the lhs is the cheaper side.
    let (changed, _) = run(
        "HloModule m\nENTRY e {\n a = f32[2,4,64] parameter(0)\n b = f32[2,4,64] parameter(1)\n \
         n = f32[2,4,64] negate(a)\n \
         d = f32[2,64,64] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}\n \
         ROOT t = (f32[2,64,64], f32[2,4,64]) tuple(d, n)\n}",
    );
    assert!(!changed);
}

#[test]
fn a_large_rhs_read_contracting_last_becomes_the_lhs() {
    // out[b, m, n] = sum_k w[b, m, k] * x[b, n, k]: x is the big rhs,
    // laid out as an lhs wants; the swapped dot reads it so.
    let (changed, printed) = run(
        "HloModule m\nENTRY e {\n w = f32[1,2,64] parameter(0)\n x = f32[1,128,64] parameter(1)\n \
         n = f32[1,128,64] negate(x)\n \
         d = f32[1,2,128] dot(w, x), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n \
         ROOT t = (f32[1,2,128], f32[1,128,64]) tuple(d, n)\n}",
    );
    assert!(changed, "{printed}");
    assert!(
        printed.contains("f32[1,128,2]{2,1,0} dot(x, w)"),
        "{printed}"
    );
}
