//! Every op of the IR, run on XLA CPU through PJRT, against values worked
//! out by hand (or, for transcendental functions, by Rust's libm in f64).

use crate::common::*;
use hlatc_compiler::formats::text;
use hlatc_compiler::ElementType::*;

fn unary(op: &str, ty: &str, out_ty: &str, x: &[f64], expected: &[f64], rel: f64) {
    let n = x.len();
    let hlo = entry(&format!(
        "  x = {ty}[{n}] parameter(0)\n  ROOT r = {out_ty}[{n}] {op}(x)"
    ));
    let t = hlatc_compiler::ElementType::from_name(ty).unwrap();
    let out = run(&hlo, &[lit(t, &[n as i64], x)]);
    assert_values(&out[0], expected, rel);
}

#[test]
fn unary_float_ops() {
    let x = [-1.5, -0.5, 0.25, 2.0];
    let each = |f: fn(f64) -> f64| x.iter().map(|&v| f(v)).collect::<Vec<_>>();
    unary("abs", "f32", "f32", &x, &[1.5, 0.5, 0.25, 2.0], 0.0);
    unary("negate", "f32", "f32", &x, &[1.5, 0.5, -0.25, -2.0], 0.0);
    unary("exponential", "f32", "f32", &x, &each(f64::exp), 1e-6);
    unary(
        "exponential-minus-one",
        "f32",
        "f32",
        &x,
        &each(f64::exp_m1),
        1e-6,
    );
    unary("sine", "f32", "f32", &x, &each(f64::sin), 1e-6);
    unary("cosine", "f32", "f32", &x, &each(f64::cos), 1e-6);
    unary("tanh", "f32", "f32", &x, &each(f64::tanh), 1e-6);
    unary(
        "logistic",
        "f32",
        "f32",
        &x,
        &each(|v| 1.0 / (1.0 + (-v).exp())),
        1e-6,
    );
    unary("floor", "f32", "f32", &x, &[-2.0, -1.0, 0.0, 2.0], 0.0);
    unary("ceil", "f32", "f32", &x, &[-1.0, -0.0, 1.0, 2.0], 0.0);
    unary(
        "round-nearest-even",
        "f32",
        "f32",
        &[-1.5, -0.5, 2.5, 0.75],
        &[-2.0, -0.0, 2.0, 1.0],
        0.0,
    );
    unary("sign", "f32", "f32", &x, &[-1.0, -1.0, 1.0, 1.0], 0.0);
    unary("copy", "f32", "f32", &x, &x, 0.0);
    let pos = [0.25, 1.0, 4.0, 9.0];
    let each_pos = |f: fn(f64) -> f64| pos.iter().map(|&v| f(v)).collect::<Vec<_>>();
    unary("log", "f32", "f32", &pos, &each_pos(f64::ln), 1e-6);
    unary(
        "log-plus-one",
        "f32",
        "f32",
        &pos,
        &each_pos(f64::ln_1p),
        1e-6,
    );
    unary("sqrt", "f32", "f32", &pos, &[0.5, 1.0, 2.0, 3.0], 1e-7);
    unary(
        "rsqrt",
        "f32",
        "f32",
        &pos,
        &[2.0, 1.0, 0.5, 1.0 / 3.0],
        1e-6,
    );
    unary(
        "is-finite",
        "f32",
        "pred",
        &[1.0, f64::INFINITY, f64::NAN, -3.0],
        &[1.0, 0.0, 0.0, 1.0],
        0.0,
    );
    unary("tan", "f32", "f32", &x, &each(f64::tan), 1e-6);
    unary(
        "cbrt",
        "f32",
        "f32",
        &[-8.0, 0.125, 2.0, 27.0],
        &[-2.0, 0.5, 2f64.cbrt(), 3.0],
        1e-6,
    );
    // erf has no std implementation; values from Abramowitz & Stegun's table.
    unary(
        "erf",
        "f32",
        "f32",
        &[-1.5, 0.0, 0.5, 1.0],
        &[-0.966_105_146_5, 0.0, 0.520_499_877_8, 0.842_700_792_9],
        1e-6,
    );
}

#[test]
fn unary_integer_and_bool_ops() {
    unary("not", "pred", "pred", &[1.0, 0.0], &[0.0, 1.0], 0.0);
    unary(
        "not",
        "s32",
        "s32",
        &[0.0, 5.0, -1.0],
        &[-1.0, -6.0, 0.0],
        0.0,
    );
    unary("abs", "s32", "s32", &[-7.0, 3.0], &[7.0, 3.0], 0.0);
    unary("negate", "s32", "s32", &[-7.0, 3.0], &[7.0, -3.0], 0.0);
    // Two's complement: -1 has every bit set.
    unary(
        "popcnt",
        "s32",
        "s32",
        &[0.0, 7.0, -1.0, 256.0],
        &[0.0, 3.0, 32.0, 1.0],
        0.0,
    );
    unary("popcnt", "u8", "u8", &[255.0, 170.0], &[8.0, 4.0], 0.0);
}

fn binary(op: &str, ty: &str, x: &[f64], y: &[f64], expected: &[f64], rel: f64) {
    let n = x.len();
    let hlo = entry(&format!(
        "  x = {ty}[{n}] parameter(0)\n  y = {ty}[{n}] parameter(1)\n  ROOT r = {ty}[{n}] {op}(x, y)"
    ));
    let t = hlatc_compiler::ElementType::from_name(ty).unwrap();
    let out = run(&hlo, &[lit(t, &[n as i64], x), lit(t, &[n as i64], y)]);
    assert_values(&out[0], expected, rel);
}

#[test]
fn binary_ops() {
    let x = [6.0, -3.0, 2.5, 0.5];
    let y = [4.0, 2.0, -0.5, 2.0];
    binary("add", "f32", &x, &y, &[10.0, -1.0, 2.0, 2.5], 0.0);
    binary("subtract", "f32", &x, &y, &[2.0, -5.0, 3.0, -1.5], 0.0);
    binary("multiply", "f32", &x, &y, &[24.0, -6.0, -1.25, 1.0], 0.0);
    binary("divide", "f32", &x, &y, &[1.5, -1.5, -5.0, 0.25], 0.0);
    binary("remainder", "f32", &x, &y, &[2.0, -1.0, 0.0, 0.5], 0.0);
    binary("maximum", "f32", &x, &y, &[6.0, 2.0, 2.5, 2.0], 0.0);
    binary("minimum", "f32", &x, &y, &[4.0, -3.0, -0.5, 0.5], 0.0);
    binary(
        "power",
        "f32",
        &[2.0, 9.0, 4.0],
        &[3.0, 0.5, -1.0],
        &[8.0, 3.0, 0.25],
        1e-6,
    );
    binary(
        "atan2",
        "f32",
        &[1.0, -1.0],
        &[1.0, 0.0],
        &[std::f64::consts::FRAC_PI_4, -std::f64::consts::FRAC_PI_2],
        1e-6,
    );
    binary(
        "divide",
        "s32",
        &[7.0, -7.0],
        &[2.0, 2.0],
        &[3.0, -3.0],
        0.0,
    );
    binary(
        "remainder",
        "s32",
        &[7.0, -7.0],
        &[3.0, 3.0],
        &[1.0, -1.0],
        0.0,
    );
    binary(
        "and",
        "pred",
        &[1.0, 1.0, 0.0, 0.0],
        &[1.0, 0.0, 1.0, 0.0],
        &[1.0, 0.0, 0.0, 0.0],
        0.0,
    );
    binary(
        "or",
        "pred",
        &[1.0, 1.0, 0.0, 0.0],
        &[1.0, 0.0, 1.0, 0.0],
        &[1.0, 1.0, 1.0, 0.0],
        0.0,
    );
    binary(
        "xor",
        "pred",
        &[1.0, 1.0, 0.0, 0.0],
        &[1.0, 0.0, 1.0, 0.0],
        &[0.0, 1.0, 1.0, 0.0],
        0.0,
    );
    binary("and", "u32", &[12.0], &[10.0], &[8.0], 0.0);
    binary("or", "u32", &[12.0], &[10.0], &[14.0], 0.0);
    binary("xor", "u32", &[12.0], &[10.0], &[6.0], 0.0);
    binary(
        "shift-left",
        "u32",
        &[1.0, 3.0],
        &[4.0, 1.0],
        &[16.0, 6.0],
        0.0,
    );
    binary(
        "shift-right-logical",
        "u32",
        &[4294967295.0, 256.0],
        &[16.0, 4.0],
        &[65535.0, 16.0],
        0.0,
    );
    binary(
        "shift-right-arithmetic",
        "s32",
        &[-16.0, 16.0],
        &[2.0, 2.0],
        &[-4.0, 4.0],
        0.0,
    );
}

#[test]
fn compare_every_direction() {
    let cases = [
        ("EQ", [0.0, 1.0, 0.0]),
        ("NE", [1.0, 0.0, 1.0]),
        ("LT", [1.0, 0.0, 0.0]),
        ("LE", [1.0, 1.0, 0.0]),
        ("GT", [0.0, 0.0, 1.0]),
        ("GE", [0.0, 1.0, 1.0]),
    ];
    for (dir, expected) in cases {
        let hlo = entry(&format!(
            "  x = f32[3] parameter(0)\n  y = f32[3] parameter(1)\n  ROOT r = pred[3] compare(x, y), direction={dir}"
        ));
        let out = run(
            &hlo,
            &[f32s(&[3], &[1.0, 2.0, 3.0]), f32s(&[3], &[2.0, 2.0, 2.0])],
        );
        assert_values(&out[0], &expected, 0.0);
    }
    // A total order puts NaN above +inf.
    let hlo = entry("  x = f32[2] parameter(0)\n  y = f32[2] parameter(1)\n  ROOT r = pred[2] compare(x, y), direction=GT, type=TOTALORDER");
    let out = run(
        &hlo,
        &[
            f32s(&[2], &[f32::NAN, 1.0]),
            f32s(&[2], &[f32::INFINITY, 2.0]),
        ],
    );
    assert_values(&out[0], &[1.0, 0.0], 0.0);
}

#[test]
fn select_clamp_convert_bitcast() {
    let hlo = entry(
        "  p = pred[3] parameter(0)\n  x = f32[3] parameter(1)\n  y = f32[3] parameter(2)\n  ROOT r = f32[3] select(p, x, y)",
    );
    let out = run(
        &hlo,
        &[
            lit(Pred, &[3], &[1.0, 0.0, 1.0]),
            f32s(&[3], &[1.0, 2.0, 3.0]),
            f32s(&[3], &[-1.0, -2.0, -3.0]),
        ],
    );
    assert_values(&out[0], &[1.0, -2.0, 3.0], 0.0);

    // Bounds of the operand's shape, and scalar ones (HLO broadcasts them).
    let hlo = entry("  lo = f32[] constant(-1)\n  hi = f32[] constant(1)\n  l = f32[4] broadcast(lo), dimensions={}\n  h = f32[4] broadcast(hi), dimensions={}\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] clamp(l, x, h)");
    let out = run(&hlo, &[f32s(&[4], &[-3.0, -0.5, 0.5, 3.0])]);
    assert_values(&out[0], &[-1.0, -0.5, 0.5, 1.0], 0.0);
    let hlo = entry("  lo = f32[] constant(-1)\n  hi = f32[] constant(1)\n  x = f32[4] parameter(0)\n  ROOT r = f32[4] clamp(lo, x, hi)");
    let m = text::parse_module(&hlo).unwrap();
    match runtime().compile(&m) {
        Ok(p) => {
            let out = p.run(&[f32s(&[4], &[-3.0, -0.5, 0.5, 3.0])]).unwrap();
            assert_values(&out[0], &[-1.0, -0.5, 0.5, 1.0], 0.0);
        }
        // jaxlib 0.11's XLA (its fusion emitters) refuses a clamp of scalar
        // bounds, cleanly: an error, never an abort (docs/src/runtime.md,
        // "Which plugin"). The older plugin computes it.
        Err(e) => {
            let no_legacy = runtime()
                .options_left_out()
                .contains(&hlatc_runtime::xla_cpu_flags::FUSION_EMITTERS_FLAG);
            assert!(no_legacy && e.to_string().contains("clamp"), "{e}");
        }
    }

    // f32 -> bf16 rounds to nearest even; -> s32 truncates toward zero.
    let hlo = entry("  x = f32[3] parameter(0)\n  ROOT r = bf16[3] convert(x)");
    // Exact ties between neighbouring bf16 values: 1 + 2^-8 and 1 + 3 * 2^-8.
    let out = run(
        &hlo,
        &[f32s(&[3], &[1.0 + 1.0 / 256.0, 1.0 + 3.0 / 256.0, -2.5])],
    );
    assert_eq!(out[0].ty(), Bf16);
    assert_values(&out[0], &[1.0, 1.015625, -2.5], 0.0);
    let hlo = entry("  x = f32[3] parameter(0)\n  ROOT r = s32[3] convert(x)");
    assert_values(
        &run(&hlo, &[f32s(&[3], &[2.7, -2.7, 0.2])])[0],
        &[2.0, -2.0, 0.0],
        0.0,
    );
    let hlo = entry("  x = bf16[2] parameter(0)\n  ROOT r = f16[2] convert(x)");
    assert_values(
        &run(&hlo, &[lit(Bf16, &[2], &[0.5, -3.0])])[0],
        &[0.5, -3.0],
        0.0,
    );

    let hlo = entry("  x = f32[2] parameter(0)\n  ROOT r = u32[2] bitcast-convert(x)");
    let out = run(&hlo, &[f32s(&[2], &[1.0, -2.0])]);
    assert_values(
        &out[0],
        &[0x3f80_0000u32 as f64, 0xc000_0000u32 as f64],
        0.0,
    );
}

#[test]
fn shape_ops() {
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let cases: [(&str, &[f64]); 8] = [
        (
            "ROOT r = f32[3,2] transpose(x), dimensions={1,0}",
            &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        ),
        (
            "ROOT r = f32[3,2] reshape(x)",
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
        (
            "ROOT r = f32[2,3] reverse(x), dimensions={1}",
            &[3.0, 2.0, 1.0, 6.0, 5.0, 4.0],
        ),
        (
            "ROOT r = f32[1,2] slice(x), slice={[1:2], [0:3:2]}",
            &[4.0, 6.0],
        ),
        (
            "ROOT r = f32[2,2,3] broadcast(x), dimensions={0,2}",
            &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0],
        ),
        (
            "ROOT r = f32[4,3] concatenate(x, x), dimensions={0}",
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
        (
            "z = f32[] constant(0)\n  ROOT r = f32[3,4] pad(x, z), padding=1_0x0_1",
            &[0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0],
        ),
        (
            "z = f32[] constant(9)\n  ROOT r = f32[2,5] pad(x, z), padding=0_0x0_0_1",
            &[1.0, 9.0, 2.0, 9.0, 3.0, 4.0, 9.0, 5.0, 9.0, 6.0],
        ),
    ];
    for (body, expected) in cases {
        let hlo = entry(&format!("  x = f32[2,3] parameter(0)\n  {body}"));
        assert_values(&run(&hlo, std::slice::from_ref(&x))[0], expected, 0.0);
    }
}

#[test]
fn iota_constant_and_tuples() {
    let hlo = entry("  ROOT r = s32[2,3] iota(), iota_dimension=1");
    assert_values(&run(&hlo, &[])[0], &[0.0, 1.0, 2.0, 0.0, 1.0, 2.0], 0.0);
    let hlo = entry("  ROOT r = f32[2,2] constant({{1.5, -2}, {inf, 0.125}})");
    assert_values(&run(&hlo, &[])[0], &[1.5, -2.0, f64::INFINITY, 0.125], 0.0);
    let hlo = entry(
        "  x = f32[2] parameter(0)\n  y = s32[] parameter(1)\n  t = (f32[2], s32[]) tuple(x, y)\n  a = f32[2] get-tuple-element(t), index=0\n  b = s32[] get-tuple-element(t), index=1\n  ROOT r = (s32[], f32[2]) tuple(b, a)",
    );
    let out = run(&hlo, &[f32s(&[2], &[1.0, 2.0]), s32s(&[], &[7])]);
    assert_values(&out[0], &[7.0], 0.0);
    assert_values(&out[1], &[1.0, 2.0], 0.0);
}

#[test]
fn dynamic_slices() {
    let hlo = entry(
        "  x = f32[4] parameter(0)\n  i = s32[] parameter(1)\n  ROOT r = f32[2] dynamic-slice(x, i), dynamic_slice_sizes={2}",
    );
    let x = f32s(&[4], &[10.0, 11.0, 12.0, 13.0]);
    assert_values(
        &run(&hlo, &[x.clone(), s32s(&[], &[1])])[0],
        &[11.0, 12.0],
        0.0,
    );
    // Out-of-range starts are clamped so the slice stays in bounds.
    assert_values(
        &run(&hlo, &[x.clone(), s32s(&[], &[5])])[0],
        &[12.0, 13.0],
        0.0,
    );
    let hlo = entry(
        "  x = f32[4] parameter(0)\n  u = f32[2] parameter(1)\n  i = s32[] parameter(2)\n  ROOT r = f32[4] dynamic-update-slice(x, u, i)",
    );
    let out = run(&hlo, &[x, f32s(&[2], &[-1.0, -2.0]), s32s(&[], &[2])]);
    assert_values(&out[0], &[10.0, 11.0, -1.0, -2.0], 0.0);
}

#[test]
fn dot_general() {
    // Matrix product [2,3] x [3,2].
    let hlo = entry(
        "  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n  ROOT r = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let a = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f32s(&[3, 2], &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    assert_values(&run(&hlo, &[a, b])[0], &[58.0, 64.0, 139.0, 154.0], 0.0);
    // Batched, contracting the last dims of both (q @ k^T per batch).
    let hlo = entry(
        "  q = f32[2,1,2] parameter(0)\n  k = f32[2,2,2] parameter(1)\n  ROOT r = f32[2,1,2] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}, operand_precision={highest,highest}",
    );
    let q = f32s(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]);
    let k = f32s(&[2, 2, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, -1.0]);
    assert_values(&run(&hlo, &[q, k])[0], &[1.0, 2.0, 7.0, 2.0], 0.0);
    // bf16 inputs accumulated into f32 (preferred element type).
    let hlo = entry(
        "  a = bf16[1,2] parameter(0)\n  b = bf16[2,1] parameter(1)\n  ROOT r = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    assert_values(
        &run(
            &hlo,
            &[
                lit(Bf16, &[1, 2], &[1.5, 2.0]),
                lit(Bf16, &[2, 1], &[4.0, 0.25]),
            ],
        )[0],
        &[6.5],
        0.0,
    );
}

const ADD_F32: &str = "add_f32 {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n";

#[test]
fn reduce_and_call() {
    let hlo = format!(
        "HloModule test\n\n{ADD_F32}max_f32 {{\n  ma = f32[] parameter(0)\n  mb = f32[] parameter(1)\n  ROOT m = f32[] maximum(ma, mb)\n}}\n\nENTRY main {{\n  x = f32[2,3] parameter(0)\n  z = f32[] constant(0)\n  ninf = f32[] constant(-inf)\n  rows = f32[2] reduce(x, z), dimensions={{1}}, to_apply=add_f32\n  cols = f32[3] reduce(x, ninf), dimensions={{0}}, to_apply=max_f32\n  all = f32[] reduce(x, z), dimensions={{0,1}}, to_apply=add_f32\n  ROOT t = (f32[2], f32[3], f32[]) tuple(rows, cols, all)\n}}\n"
    );
    let out = run(&hlo, &[f32s(&[2, 3], &[1.0, 5.0, 3.0, 4.0, 2.0, 6.0])]);
    assert_values(&out[0], &[9.0, 12.0], 0.0);
    assert_values(&out[1], &[4.0, 5.0, 6.0], 0.0);
    assert_values(&out[2], &[21.0], 0.0);

    let hlo = format!(
        "HloModule test\n\n{ADD_F32}ENTRY main {{\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = f32[] call(x, y), to_apply=add_f32\n}}\n"
    );
    assert_values(
        &run(&hlo, &[f32s(&[], &[2.0]), f32s(&[], &[0.5])])[0],
        &[2.5],
        0.0,
    );
}

#[test]
fn gather_and_scatter() {
    // Embedding lookup: rows 2, 0, 2 of a [3,2] table.
    let hlo = entry(
        "  t = f32[3,2] parameter(0)\n  i = s32[3,1] parameter(1)\n  ROOT r = f32[3,2] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}",
    );
    let table = f32s(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(&hlo, &[table, s32s(&[3, 1], &[2, 0, 2])]);
    assert_values(&out[0], &[5.0, 6.0, 1.0, 2.0, 5.0, 6.0], 0.0);
    // Its gradient: scatter-add of rows into zeros; row 2 receives twice.
    let hlo = format!(
        "HloModule test\n\n{ADD_F32}ENTRY main {{\n  z = f32[3,2] parameter(0)\n  i = s32[3,1] parameter(1)\n  u = f32[3,2] parameter(2)\n  ROOT r = f32[3,2] scatter(z, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add_f32\n}}\n"
    );
    let out = run(
        &hlo,
        &[
            f32s(&[3, 2], &[0.0; 6]),
            s32s(&[3, 1], &[2, 0, 2]),
            f32s(&[3, 2], &[1.0, 1.0, 10.0, 20.0, 100.0, 200.0]),
        ],
    );
    assert_values(&out[0], &[10.0, 20.0, 0.0, 0.0, 101.0, 201.0], 0.0);
    // Variadic: the same rows summed into one input and their largest
    // count kept in the other, by one reducer over both.
    let hlo = "HloModule test\n\nboth {\n  a = f32[] parameter(0)\n  b = s32[] parameter(1)\n  c = f32[] parameter(2)\n  d = s32[] parameter(3)\n  x = f32[] add(a, c)\n  y = s32[] maximum(b, d)\n  ROOT t = (f32[], s32[]) tuple(x, y)\n}\n\nENTRY main {\n  z = f32[3,2] parameter(0)\n  k = s32[3,2] parameter(1)\n  i = s32[3,1] parameter(2)\n  u = f32[3,2] parameter(3)\n  n = s32[3,2] parameter(4)\n  ROOT r = (f32[3,2], s32[3,2]) scatter(z, k, i, u, n), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=both\n}\n";
    let out = run(
        hlo,
        &[
            f32s(&[3, 2], &[0.0; 6]),
            s32s(&[3, 2], &[0; 6]),
            s32s(&[3, 1], &[2, 0, 2]),
            f32s(&[3, 2], &[1.0, 1.0, 10.0, 20.0, 100.0, 200.0]),
            s32s(&[3, 2], &[7, 1, 3, 4, 5, 9]),
        ],
    );
    assert_values(&out[0], &[10.0, 20.0, 0.0, 0.0, 101.0, 201.0], 0.0);
    assert_values(&out[1], &[3.0, 4.0, 0.0, 0.0, 7.0, 9.0], 0.0);
}

#[test]
fn rng_bit_generator_is_deterministic_and_advances_state() {
    let hlo = entry(
        "  s = u64[2] parameter(0)\n  r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_default\n  ROOT o = u32[4] get-tuple-element(r), index=1",
    );
    let state = lit(U64, &[2], &[1.0, 2.0]);
    let a = run(&hlo, std::slice::from_ref(&state));
    let b = run(&hlo, std::slice::from_ref(&state));
    assert_eq!(a[0], b[0], "same state, same bits");
    let c = run(&hlo, &[lit(U64, &[2], &[3.0, 2.0])]);
    assert_ne!(a[0], c[0], "a different state gives different bits");
    let v = a[0].to_i64_vec();
    assert!(
        v.iter().any(|&x| x != v[0]),
        "four equal words are not random: {v:?}"
    );
}

/// Builder reductions and scalars work for integer types: the identity of a
/// max-reduction is the type's lowest value (it used to panic on s32), and
/// out-of-range scalars clamp to the type.
#[test]
fn builder_integer_reductions_and_scalars() {
    use hlatc_compiler::graph::builder::Builder;
    use hlatc_compiler::{ElementType, Shape};
    let mut b = Builder::new("int_max");
    let x = b.parameter("x", Shape::array(ElementType::S32, [2, 3]));
    let max = b.reduce_max(x, &[1]).unwrap();
    let big = b.scalar(ElementType::U8, 1e9);
    let low = b.scalar(ElementType::S8, f64::NEG_INFINITY);
    let root = b
        .add(hlatc_compiler::Op::Tuple, &[max, big, low], None)
        .unwrap();
    let m = b.into_module("int_max", root);
    let p = runtime().compile(&m).unwrap();
    let out = p
        .run(&[s32s(&[2, 3], &[-7, -9, -8, i32::MIN, i32::MIN, i32::MIN])])
        .unwrap();
    assert_eq!(out[0].to_i64_vec(), vec![-7, i32::MIN as i64]);
    assert_eq!(out[1].to_i64_vec(), vec![255]);
    assert_eq!(out[2].to_i64_vec(), vec![-128]);
}

/// The 2- and 4-bit integers and 8-bit floats go to XLA CPU and come back
/// a byte per element, and compute as XLA does: `s4` addition wraps, an
/// f8 product rounds to the nearest f8, and converts are exact widenings.
#[test]
fn narrow_types_cross_to_the_device_and_back() {
    let hlo = entry(
        "  p0 = s4[3] parameter(0)
  p1 = f8e4m3fn[2] parameter(1)
  p2 = u2[2] parameter(2)
  p3 = f8e5m2fnuz[2] parameter(3)
  c = s4[3] constant({-8, -1, 7})
  scale = f8e4m3fn[2] constant({448, 0.1015625})
  sum = s4[3] add(p0, c)
  scaled = f8e4m3fn[2] multiply(p1, scale)
  wide = f32[2] convert(scaled)
  narrow = f8e5m2fnuz[2] convert(wide)
  ROOT out = (s4[3], f8e4m3fn[2], f32[2], u2[2], f8e5m2fnuz[2], f8e5m2fnuz[2]) tuple(sum, scaled, wide, p2, narrow, p3)",
    );
    let out = run(
        &hlo,
        &[
            lit(S4, &[3], &[7, 4, 7].map(f64::from)),
            lit(F8E4M3FN, &[2], &[0.9375, -0.875]),
            lit(U2, &[2], &[3.0, 1.0]),
            lit(F8E5M2FNUZ, &[2], &[-0.0, f64::NAN]),
        ],
    );
    assert_eq!(
        out[0].to_i64_vec(),
        vec![-1, 3, -2],
        "7 + 7 wraps to -2 in s4"
    );
    assert_eq!(out[0].bytes(), &[0x0f, 0x03, 0x0e]);
    // 0.9375 * 448 = 420 rounds to 416; -0.875 * 0.1015625 = -0.0888671875
    // rounds to -0.0859375 (f8e4m3fn has 3 mantissa bits).
    assert_values(&out[1], &[416.0, -0.0859375], 0.0);
    assert_values(&out[2], &[416.0, -0.0859375], 0.0);
    assert_eq!(out[3].to_i64_vec(), vec![3, 1]);
    // Both are ties in f8e5m2fnuz (2 mantissa bits): 416 lies halfway
    // between 384 and 448, 0.0859375 between 0.078125 and 0.09375; each
    // goes to the even code, as hlatc's own rounding says.
    assert_values(&out[4], &[384.0, -0.09375], 0.0);
    let fnuz = F8E5M2FNUZ.minifloat().unwrap();
    assert_eq!(
        [416.0, -0.0859375].map(|v| fnuz.decode(fnuz.encode(v).unwrap())),
        [384.0, -0.09375]
    );
    // FNUZ has one zero: -0.0 is stored as 0, and NaN is the code 0x80.
    assert_eq!(out[5].bytes(), &[0x00, 0x80]);
}

/// `convolution` against sums worked out by hand: a 1-D edge filter over
/// zero padding, and a grouped 2-D convolution in NCHW where each group
/// sees only its own channel.
#[test]
fn convolution_slides_its_kernel_over_the_padded_input() {
    let hlo = entry(
        "  x = f32[1,5,1] parameter(0)
  k = f32[3,1,1] parameter(1)
  ROOT y = f32[1,5,1] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f",
    );
    let out = run(
        &hlo,
        &[
            f32s(&[1, 5, 1], &[1.0, 2.0, 3.0, 4.0, 5.0]),
            f32s(&[3, 1, 1], &[1.0, 0.0, -1.0]),
        ],
    );
    // y[i] = x[i-1] - x[i+1], zero outside.
    assert_values(&out[0], &[-2.0, -2.0, -2.0, -2.0, 4.0], 0.0);

    let hlo = entry(
        "  x = f32[1,2,3,3] parameter(0)
  k = f32[2,1,2,2] parameter(1)
  ROOT y = f32[1,2,1,2] convolution(x, k), window={size=2x2 stride=2x1}, dim_labels=bf01_oi01->bf01, feature_group_count=2",
    );
    let x: Vec<f32> = (0..18)
        .map(|i| if i < 9 { 1.0 } else { i as f32 })
        .collect();
    let out = run(
        &hlo,
        &[f32s(&[1, 2, 3, 3], &x), f32s(&[2, 1, 2, 2], &[1.0; 8])],
    );
    // Channel 0 is all ones: each 2x2 window sums to 4. Channel 1 holds
    // 9..17 row-major; rows 0-1, columns 0-1 and 1-2: 9+10+12+13, 10+11+13+14.
    assert_values(&out[0], &[4.0, 4.0, 44.0, 48.0], 0.0);
}

/// `reduce-window` as max pooling (stride 2) and as the running sum
/// Hugging Face's Llama lowers `cumsum` to (window the whole length,
/// padded before).
#[test]
fn reduce_window_pools_and_accumulates() {
    let hlo = "HloModule test

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  lowest = f32[] constant(-inf)
  pooled = f32[2] reduce-window(x, lowest), window={size=2 stride=2}, to_apply=max
  i = s32[4] parameter(1)
  zero = s32[] constant(0)
  running = s32[4] reduce-window(i, zero), window={size=4 pad=3_0}, to_apply=add
  ROOT out = (f32[2], s32[4]) tuple(pooled, running)
}
";
    let out = run(
        hlo,
        &[
            f32s(&[4], &[3.0, -1.0, 0.5, 7.0]),
            s32s(&[4], &[1, 2, 3, 4]),
        ],
    );
    assert_values(&out[0], &[3.0, 7.0], 0.0);
    assert_eq!(out[1].to_i64_vec(), vec![1, 3, 6, 10]);
}

/// Tokens order side effects and carry no data: `add-dependency` passes its
/// value through, whatever tokens it waits on.
#[test]
fn tokens_order_without_changing_values() {
    let hlo = entry(
        "  x = f32[3] parameter(0)\n  t0 = token[] after-all()\n  t1 = token[] after-all(t0, t0)\n  d = f32[3] add-dependency(x, t1)\n  ROOT r = f32[3] multiply(d, d)",
    );
    let out = run(&hlo, &[f32s(&[3], &[1.5, -2.0, 3.0])]);
    assert_values(&out[0], &[2.25, 4.0, 9.0], 0.0);
}

/// A copy of a tuple is a tuple of copies, as XLA's inference allows.
#[test]
fn a_tuple_copies_whole() {
    let hlo = entry(
        "  p = f32[3] parameter(0)\n  q = f32[3] negate(p)\n  t = (f32[3], f32[3]) tuple(p, q)\n  c = (f32[3], f32[3]) copy(t)\n  a = f32[3] get-tuple-element(c), index=0\n  b = f32[3] get-tuple-element(c), index=1\n  ROOT r = f32[3] multiply(a, b)",
    );
    let out = run(&hlo, &[f32s(&[3], &[1.0, -2.0, 3.0])]);
    assert_values(&out[0], &[-1.0, -4.0, -9.0], 0.0);
}

/// A scatter may combine in another float type than its operands' (an f32
/// `add` over bf16 values), as XLA's checks allow; the result keeps the
/// operands' type.
#[test]
fn a_scatter_combines_in_its_reducers_float_type() {
    let hlo = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  p = bf16[4] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = bf16[2] parameter(2)\n  ROOT r = bf16[4] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n";
    let out = run(
        hlo,
        &[
            lit(Bf16, &[4], &[1.0, 2.0, 3.0, 4.0]),
            s32s(&[2, 1], &[1, 3]),
            lit(Bf16, &[2], &[0.5, 0.25]),
        ],
    );
    assert_values(&out[0], &[1.0, 2.5, 3.0, 4.25], 0.0);
}

/// A reducer may return its one value as a one-element tuple, as XLA
/// allows: the reduce's result is then a one-element tuple too.
#[test]
fn a_reducer_returning_a_one_element_tuple() {
    let hlo = "HloModule m\n\nfn {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  s = f32[] add(a, b)\n  ROOT t = (f32[]) tuple(s)\n}\n\nENTRY main {\n  p = f32[2,3] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = (f32[2]) reduce(p, z), dimensions={1}, to_apply=fn\n}\n";
    let out = run(hlo, &[f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]);
    assert_values(&out[0], &[6.0, 15.0], 0.0);
}

/// `reduce-precision` rounds to the nearest value of a narrower format,
/// ties to even, in the operand's own type: to bf16's 8 exponent and 7
/// mantissa bits, 1 + 2^-8 (a tie) stays 1 and 1 + 3 * 2^-9 becomes
/// 1 + 2^-7.
#[test]
fn reduce_precision_rounds_to_the_narrower_format() {
    let hlo = entry(
        "  p = f32[4] parameter(0)\n  ROOT r = f32[4] reduce-precision(p), exponent_bits=8, mantissa_bits=7",
    );
    let x = [
        1.0 + 2f64.powi(-8),
        1.0 + 3.0 * 2f64.powi(-9),
        1.0 + 2f64.powi(-9),
        -3.0,
    ];
    let out = run(&hlo, &[lit(F32, &[4], &x)]);
    assert_values(&out[0], &[1.0, 1.0 + 2f64.powi(-7), 1.0, -3.0], 0.0);
}

/// `stochastic-convert` to an integer rounds away from zero exactly when
/// the random bits are below the fraction's share of their range: 1.25
/// (fraction 1/4, threshold 2^30) rounds up with bits 0 and down with all
/// bits set; -2.75 (threshold 3 * 2^30) goes to -3 with 2^30; 2.5 stays 2
/// with 3 * 2^30.
#[test]
fn stochastic_convert_rounds_by_its_random_bits() {
    let hlo = entry(
        "  p = f32[4] parameter(0)\n  r = u32[4] parameter(1)\n  ROOT c = s32[4] stochastic-convert(p, r)",
    );
    let out = run(
        &hlo,
        &[
            lit(F32, &[4], &[1.25, 1.25, -2.75, 2.5]),
            lit(U32, &[4], &[0.0, 4294967295.0, 1073741824.0, 3221225472.0]),
        ],
    );
    assert_values(&out[0], &[2.0, 1.0, -3.0, 2.0], 0.0);
}

/// `topk` along the last dimension, largest or smallest first, with the
/// indices of the values it picked.
#[test]
fn topk_picks_along_the_last_dimension() {
    let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0];
    for (largest, values, indices) in [
        ("true", [5.0, 4.0, 9.0, 6.0], [4.0, 2.0, 0.0, 2.0]),
        ("false", [1.0, 1.0, 2.0, 3.0], [1.0, 3.0, 1.0, 4.0]),
    ] {
        let hlo = entry(&format!(
            "  p = f32[2,5] parameter(0)\n  ROOT t = (f32[2,2], s32[2,2]) topk(p), k=2, largest={largest}"
        ));
        let out = run(&hlo, &[lit(F32, &[2, 5], &x)]);
        assert_values(&out[0], &values, 0.0);
        assert_values(&out[1], &indices, 0.0);
    }
}

/// A sharding `domain` marks a boundary and passes its operand through.
#[test]
fn a_domain_passes_its_operand_through() {
    let hlo = entry(
        "  p = f32[3] parameter(0)\n  d = f32[3] domain(p), domain={kind=\"sharding\", entry={}, exit={maximal device=0}}\n  ROOT r = f32[3] negate(d)",
    );
    let out = run(&hlo, &[f32s(&[3], &[1.0, -2.0, 0.5])]);
    assert_values(&out[0], &[-1.0, 2.0, -0.5], 0.0);
}

/// `triangular-solve` from the left with a lower matrix: 2 x1 = 2 and
/// x1 + x2 = 3 give (1, 2); `cholesky` of [[4, 2], [2, 3]] has the lower
/// factor [[2, 0], [1, sqrt 2]] (its other triangle is unspecified).
#[test]
fn triangular_solve_and_cholesky() {
    let hlo = entry(
        "  a = f32[2,2] parameter(0)\n  b = f32[2,1] parameter(1)\n  ROOT x = f32[2,1] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE",
    );
    let out = run(
        &hlo,
        &[
            f32s(&[2, 2], &[2.0, 0.0, 1.0, 1.0]),
            f32s(&[2, 1], &[2.0, 3.0]),
        ],
    );
    assert_values(&out[0], &[1.0, 2.0], 1e-6);
    let hlo = entry("  a = f32[2,2] parameter(0)\n  ROOT l = f32[2,2] cholesky(a), lower=true");
    let out = run(&hlo, &[f32s(&[2, 2], &[4.0, 2.0, 2.0, 3.0])]);
    let l = out[0].to_f64_vec();
    for (got, want) in [(l[0], 2.0), (l[2], 1.0), (l[3], 2f64.sqrt())] {
        assert!((got - want).abs() < 1e-6, "{l:?}");
    }
}

/// c64 values from (re, im) pairs.
fn c64s(dims: &[i64], v: &[(f64, f64)]) -> hlatc_compiler::Literal {
    let s: Vec<_> = v
        .iter()
        .map(|&(re, im)| hlatc_compiler::Scalar::Complex(re, im))
        .collect();
    hlatc_compiler::Literal::from_scalars(C64, dims.to_vec(), &s).unwrap()
}

/// `got`'s values (a complex value as re, im) within `tol` of `want`.
fn assert_near(got: &hlatc_compiler::Literal, want: &[f64], tol: f64) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), want.len(), "{}", got.shape);
    for (i, (a, e)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - e).abs() <= tol,
            "part {i}: got {a}, expected {e} (all: {g:?})"
        );
    }
}

/// Complex arithmetic by hand: (1+2i)(3-i) = 5+5i, |3+4i| = 5, the parts
/// of complex(x, y), a f32 converted to c64 with a zero imaginary part,
/// and a c64 constant passed through.
#[test]
fn complex_values_and_their_parts() {
    let hlo = entry(
        "  a = c64[2] parameter(0)\n  b = c64[2] parameter(1)\n  x = f32[2] parameter(2)\n  m = c64[2] multiply(a, b)\n  n = f32[2] abs(b)\n  z = c64[2] complex(x, n)\n  re = f32[2] real(z)\n  im = f32[2] imag(z)\n  k = c64[2] convert(x)\n  c = c64[2] constant({(0.5, -0.25), (-1, 2)})\n  s = c64[2] add(k, c)\n  ROOT t = (c64[2], f32[2], f32[2], f32[2], c64[2]) tuple(m, n, re, im, s)",
    );
    let out = run(
        &hlo,
        &[
            c64s(&[2], &[(1.0, 2.0), (0.0, 1.0)]),
            c64s(&[2], &[(3.0, -1.0), (3.0, 4.0)]),
            f32s(&[2], &[1.5, -2.0]),
        ],
    );
    // (0+i)(3+4i) = -4+3i.
    assert_near(&out[0], &[5.0, 5.0, -4.0, 3.0], 1e-6);
    assert_near(&out[1], &[10f64.sqrt(), 5.0], 1e-6);
    assert_near(&out[2], &[1.5, -2.0], 0.0);
    assert_near(&out[3], &[10f64.sqrt(), 5.0], 1e-6);
    assert_near(&out[4], &[2.0, -0.25, -3.0, 2.0], 0.0);
}

/// The transforms of [1, 2, 3, 4]: its DFT is [10, -2+2i, -2, -2-2i];
/// IFFT brings it back; RFFT keeps the first 3 frequencies and IRFFT
/// rebuilds the signal from them.
#[test]
fn fft_of_every_type() {
    let hlo = entry(
        "  x = f32[4] parameter(0)\n  z = f32[4] broadcast(f32[] constant(0)), dimensions={}\n  c = c64[4] complex(x, z)\n  f = c64[4] fft(c), fft_type=FFT, fft_length={4}\n  i = c64[4] fft(f), fft_type=IFFT, fft_length={4}\n  r = c64[3] fft(x), fft_type=RFFT, fft_length={4}\n  ir = f32[4] fft(r), fft_type=IRFFT, fft_length={4}\n  ROOT t = (c64[4], c64[4], c64[3], f32[4]) tuple(f, i, r, ir)",
    );
    let out = run(&hlo, &[f32s(&[4], &[1.0, 2.0, 3.0, 4.0])]);
    let spectrum = [10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0];
    assert_near(&out[0], &spectrum, 1e-5);
    assert_near(&out[1], &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0], 1e-5);
    assert_near(&out[2], &spectrum[..6], 1e-5);
    assert_near(&out[3], &[1.0, 2.0, 3.0, 4.0], 1e-5);
}

/// Batch normalization of [[1, 2], [3, 4]] by its columns (feature 1,
/// epsilon 0): means (2, 3), variances (1, 1), normalized rows -1 and 1.
/// The inference op with those statistics, scale (2, 1) and offset
/// (0, 10) gives 2 x_hat and x_hat + 10; the grad of a constant output
/// gradient is 0 for x and scale, the batch size for offset.
#[test]
fn batch_norm_training_inference_and_grad() {
    let x = f32s(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let hlo = entry(
        "  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n  o = f32[2] parameter(2)\n  ROOT t = (f32[2,2], f32[2], f32[2]) batch-norm-training(x, s, o), epsilon=0, feature_index=1",
    );
    let out = run(
        &hlo,
        &[x.clone(), f32s(&[2], &[1.0, 1.0]), f32s(&[2], &[0.0, 0.0])],
    );
    assert_values(&out[0], &[-1.0, -1.0, 1.0, 1.0], 1e-6);
    assert_values(&out[1], &[2.0, 3.0], 1e-6);
    assert_values(&out[2], &[1.0, 1.0], 1e-6);
    let hlo = entry(
        "  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n  o = f32[2] parameter(2)\n  m = f32[2] parameter(3)\n  v = f32[2] parameter(4)\n  ROOT y = f32[2,2] batch-norm-inference(x, s, o, m, v), epsilon=0, feature_index=1",
    );
    let stats = [f32s(&[2], &[2.0, 3.0]), f32s(&[2], &[1.0, 1.0])];
    let out = run(
        &hlo,
        &[
            x.clone(),
            f32s(&[2], &[2.0, 1.0]),
            f32s(&[2], &[0.0, 10.0]),
            stats[0].clone(),
            stats[1].clone(),
        ],
    );
    assert_values(&out[0], &[-2.0, 9.0, 2.0, 11.0], 1e-6);
    let hlo = entry(
        "  x = f32[2,2] parameter(0)\n  s = f32[2] parameter(1)\n  m = f32[2] parameter(2)\n  v = f32[2] parameter(3)\n  g = f32[2,2] parameter(4)\n  ROOT t = (f32[2,2], f32[2], f32[2]) batch-norm-grad(x, s, m, v, g), epsilon=0, feature_index=1",
    );
    let out = run(
        &hlo,
        &[
            x,
            f32s(&[2], &[1.0, 1.0]),
            stats[0].clone(),
            stats[1].clone(),
            f32s(&[2, 2], &[1.0; 4]),
        ],
    );
    assert_values(&out[0], &[0.0; 4], 0.0);
    assert_values(&out[1], &[0.0, 0.0], 0.0);
    assert_values(&out[2], &[2.0, 2.0], 1e-6);
}

/// The gradient of a max pool: in windows [1, 5] and [3, 2] of (1, 5, 3,
/// 2), `select` (>=) picks 5 and 3, so source values 10 and 20 land there
/// and everything else keeps the init 0.
#[test]
fn select_and_scatter_routes_each_window_to_its_pick() {
    let hlo = "HloModule m\n\nge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  x = f32[4] parameter(0)\n  g = f32[2] parameter(1)\n  z = f32[] constant(0)\n  ROOT r = f32[4] select-and-scatter(x, g, z), window={size=2 stride=2}, select=ge, scatter=add\n}\n";
    let out = run(
        hlo,
        &[f32s(&[4], &[1.0, 5.0, 3.0, 2.0]), f32s(&[2], &[10.0, 20.0])],
    );
    assert_values(&out[0], &[0.0, 10.0, 20.0, 0.0], 0.0);
}

/// What XLA's verifier takes and hlatc now reads too, with the values XLA
/// CPU gives for it.
#[test]
fn forms_xla_accepts_beyond_the_usual_types() {
    // pred arithmetic on XLA CPU: add and maximum are or (true + true is
    // true, not a wrapped 1-bit add), multiply and minimum are and.
    let (x, y) = ([0.0, 0.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]);
    binary("add", "pred", &x, &y, &[0.0, 1.0, 1.0, 1.0], 0.0);
    binary("multiply", "pred", &x, &y, &[0.0, 0.0, 0.0, 1.0], 0.0);
    binary("maximum", "pred", &x, &y, &[0.0, 1.0, 1.0, 1.0], 0.0);
    binary("minimum", "pred", &x, &y, &[0.0, 0.0, 0.0, 1.0], 0.0);
    // A dot's written type is its accumulation type, whatever the
    // operands': s8 x s8 into bf16, and pred x pred into pred (or of ands).
    let hlo = entry(
        "  a = s8[1,2] parameter(0)\n  b = s8[2,1] parameter(1)\n  ROOT r = bf16[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let out = run(
        &hlo,
        &[
            lit(S8, &[1, 2], &[100.0, 100.0]),
            lit(S8, &[2, 1], &[100.0, 3.0]),
        ],
    );
    // 100*100 + 100*3 = 10300, far past s8, rounded once to bf16's step
    // of 64 there.
    assert_values(&out[0], &[10304.0], 0.0);
    let hlo = entry(
        "  a = pred[2,2] parameter(0)\n  b = pred[2,2] parameter(1)\n  ROOT r = pred[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    let out = run(
        &hlo,
        &[
            lit(Pred, &[2, 2], &[1.0, 0.0, 0.0, 0.0]),
            lit(Pred, &[2, 2], &[1.0, 1.0, 1.0, 1.0]),
        ],
    );
    assert_values(&out[0], &[1.0, 1.0, 0.0, 0.0], 0.0);
    // dynamic-slice's first form: all start indices in one vector.
    let hlo = entry(
        "  x = f32[2,3] parameter(0)\n  i = s32[2] parameter(1)\n  ROOT r = f32[1,2] dynamic-slice(x, i), dynamic_slice_sizes={1,2}",
    );
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_values(&run(&hlo, &[x, s32s(&[2], &[1, 1])])[0], &[5.0, 6.0], 0.0);
    // after-all orders work after a value, not only after tokens.
    let hlo = entry(
        "  x = f32[] parameter(0)\n  t = token[] after-all(x)\n  ROOT r = f32[] add-dependency(x, t)",
    );
    assert_values(&run(&hlo, &[f32s(&[], &[2.5])])[0], &[2.5], 0.0);
}

/// A dynamic dimension inside a module: XLA CPU pads it to its bound, and
/// a reduction over it sees only the elements its run-time size holds.
#[test]
fn dynamic_dimensions_bound_what_ops_see() {
    let hlo = "HloModule test\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY main {\n  x = f32[4] parameter(0)\n  n = s32[] parameter(1)\n  d = f32[<=4] set-dimension-size(x, n), dimensions={0}\n  z = f32[] constant(0)\n  s = f32[] reduce(d, z), dimensions={0}, to_apply=add\n  g = s32[] get-dimension-size(d), dimensions={0}\n  ROOT r = (f32[], s32[]) tuple(s, g)\n}\n";
    let x = f32s(&[4], &[1.0, 2.0, 4.0, 8.0]);
    for (n, sum) in [(4, 15.0), (2, 3.0), (0, 0.0)] {
        let out = run(hlo, &[x.clone(), s32s(&[], &[n])]);
        assert_values(&out[0], &[sum], 0.0);
        assert_values(&out[1], &[f64::from(n)], 0.0);
    }
    // With a bitcast beside them, which the runtime rewrites for XLA CPU
    // (`bitcast-to-reshape` keeps the dynamic dimensions as they are).
    let beside = hlo.replace(
        "  x = f32[4] parameter(0)\n",
        "  x2 = f32[2,2] parameter(0)\n  x = f32[4] bitcast(x2)\n",
    );
    let out = run(
        &beside,
        &[f32s(&[2, 2], &[1.0, 2.0, 4.0, 8.0]), s32s(&[], &[2])],
    );
    assert_values(&out[0], &[3.0], 0.0);
}

/// A constant of tuple shape (nested, and with a pair of scalars that
/// reads like a complex value's parts) runs with its elements' values.
#[test]
fn tuple_constants_hold_their_elements() {
    let hlo = entry("  c = ((f32[], s32[2]), (f32[], f32[])) constant(((1.5, {3, 4}), (7, 42)))\n  a = (f32[], s32[2]) get-tuple-element(c), index=0\n  b = s32[2] get-tuple-element(a), index=1\n  p = (f32[], f32[]) get-tuple-element(c), index=1\n  q = f32[] get-tuple-element(p), index=1\n  ROOT t = (s32[2], f32[]) tuple(b, q)");
    round_trips(&hlo);
    let out = run(&hlo, &[]);
    assert_values(&out[0], &[3.0, 4.0], 0.0);
    assert_values(&out[1], &[42.0], 0.0);
}

/// A bitcast reads its operand's buffer by the layouts: XLA CPU, compiling
/// from before layout assignment, refuses or mangles one, so `compile`
/// hands it the transposes and reshape that compute it
/// (`bitcast-to-reshape`).
#[test]
fn bitcasts_read_the_buffer_by_their_layouts() {
    let x = f32s(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // x column-major is 1 4 2 5 3 6 in memory.
    let hlo = entry("  x = f32[2,3]{1,0} parameter(0)\n  t = f32[2,3]{0,1} copy(x)\n  ROOT b = f32[6]{0} bitcast(t)");
    let m = hlatc_compiler::formats::text::parse_module(&hlo).unwrap();
    let compiled = runtime().compile(&m).unwrap();
    assert_eq!(
        compiled.rewrites(),
        [hlatc_runtime::Rewrite::BitcastToReshape]
    );
    assert_values(&run(&hlo, &[x])[0], &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], 0.0);
    // 1..6 read as a column-major [2,3]: rows 1 3 5 and 2 4 6.
    let hlo = entry("  v = f32[6]{0} parameter(0)\n  b = f32[2,3]{0,1} bitcast(v)\n  ROOT r = f32[2,3]{1,0} copy(b)");
    let v = f32s(&[6], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_values(&run(&hlo, &[v])[0], &[1.0, 3.0, 5.0, 2.0, 4.0, 6.0], 0.0);
    // A rank change under default layouts is a reshape (XLA's test 03349,
    // which XLA CPU refused as written).
    let hlo = "HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n  p = f32[8] parameter(0)\n  b = f32[2,2,2] bitcast(p)\n  z = f32[] constant(0)\n  ROOT r = f32[2,2] reduce(b, z), dimensions={1}, to_apply=add\n}\n";
    let p = f32s(&[8], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    assert_values(&run(hlo, &[p])[0], &[4.0, 6.0, 12.0, 14.0], 0.0);
}

/// Row-major strides of `dims` taken in `major_to_minor` order: the
/// buffer offset of each logical index under that layout.
fn buffer_offsets(dims: &[i64], minor_to_major: &[i64]) -> Vec<usize> {
    let count: i64 = dims.iter().product();
    let mut stride = vec![0i64; dims.len()];
    let mut s = 1;
    for &d in minor_to_major {
        stride[d as usize] = s;
        s *= dims[d as usize];
    }
    (0..count)
        .map(|flat| {
            // The logical (row-major) index of element `flat`.
            let (mut rest, mut offset) = (flat, 0);
            for k in (0..dims.len()).rev() {
                offset += (rest % dims[k]) * stride[k];
                rest /= dims[k];
            }
            offset as usize
        })
        .collect()
}

/// Random ranks, dimensions and layouts on both sides of a bitcast, run
/// on XLA CPU and checked against reading one buffer by two layouts here.
#[test]
fn bitcasts_agree_with_a_buffer_read_by_both_layouts() {
    let mut rng = hlatc_runtime::inputs::SplitMix64::new(11);
    let mut pick = |n: usize| (rng.next_u64() % n as u64) as usize;
    // Shapes of 24 elements each, and their layouts from permutations.
    let shapes: [&[i64]; 6] = [
        &[24],
        &[4, 6],
        &[2, 3, 4],
        &[3, 8],
        &[2, 2, 6],
        &[2, 3, 2, 2],
    ];
    for case in 0..24 {
        let from = shapes[pick(shapes.len())];
        let to = shapes[pick(shapes.len())];
        let mut layout = |rank: usize| {
            let mut order: Vec<i64> = (0..rank as i64).collect();
            for i in (1..rank).rev() {
                order.swap(i, pick(i + 1));
            }
            order
        };
        let (from_layout, to_layout) = (layout(from.len()), layout(to.len()));
        let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let hlo = entry(&format!(
            "  x = f32[{f}] parameter(0)\n  laid = f32[{f}]{{{fl}}} copy(x)\n  b = f32[{t}]{{{tl}}} bitcast(laid)\n  ROOT r = f32[{t}] copy(b)",
            f = list(from),
            fl = list(&from_layout),
            t = list(to),
            tl = list(&to_layout),
        ));
        let values: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let mut buffer = [0.0; 24];
        for (v, offset) in values.iter().zip(buffer_offsets(from, &from_layout)) {
            buffer[offset] = f64::from(*v);
        }
        let expected: Vec<f64> = buffer_offsets(to, &to_layout)
            .into_iter()
            .map(|offset| buffer[offset])
            .collect();
        let got = run(&hlo, &[f32s(from, &values)]);
        assert_eq!(got[0].to_f64_vec(), expected, "case {case}:\n{hlo}");
    }
}

/// `copy-start`/`copy-done` (XLA's split copy between memory spaces,
/// which XLA CPU's thunk emitter refuses) run as the copy they split.
#[test]
fn a_split_copy_runs_as_a_copy() {
    let hlo = entry("  x = f32[2] parameter(0)\n  cs = (f32[2], f32[2], u32[]) copy-start(x)\n  cd = f32[2] copy-done(cs)\n  ROOT n = f32[2] negate(cd)");
    assert_values(
        &run(&hlo, &[f32s(&[2], &[1.5, -2.0])])[0],
        &[-1.5, 2.0],
        0.0,
    );
}

/// A dot over bf16 operands accumulating into f32 (what `amp` writes for
/// Neuron): some shapes of it reach XLA CPU's `DotThunk`, which has no
/// such kernel and fails the run, so `compile` hands XLA CPU the dot over
/// its operands converted to f32 (`widen-mixed-dots`), which computes the
/// same values: the conversions and the products are exact in f32.
#[test]
fn bf16_dots_accumulating_in_f32_run_on_xla_cpu() {
    // The attention scores' dot of tiny's step at batch 2.
    let dims = "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}";
    let mixed = entry(&format!(
        "  q = bf16[2,16,4,8] parameter(0)\n  k = bf16[2,16,4,8] parameter(1)\n  ROOT s = f32[2,4,16,16] dot(q, k), {dims}"
    ));
    let wide = entry(&format!(
        "  q = f32[2,16,4,8] parameter(0)\n  k = f32[2,16,4,8] parameter(1)\n  ROOT s = f32[2,4,16,16] dot(q, k), {dims}"
    ));
    let values = |seed: usize| -> Vec<f32> {
        (0..2 * 16 * 4 * 8)
            .map(|i| ((i * 37 + seed * 11) % 23) as f32 / 8.0 - 1.375)
            .collect()
    };
    let (q, k) = (
        f32s(&[2, 16, 4, 8], &values(1)),
        f32s(&[2, 16, 4, 8], &values(2)),
    );
    let m = hlatc_compiler::formats::text::parse_module(&mixed).unwrap();
    let program = runtime().compile(&m).unwrap();
    assert_eq!(program.rewrites(), [hlatc_runtime::Rewrite::WidenMixedDots]);
    let narrow = [
        q.clone().converted(Bf16).unwrap(),
        k.clone().converted(Bf16).unwrap(),
    ];
    let got = program.run(&narrow).unwrap();
    // The values are multiples of 1/8 in [-1.375, 1.375]: exact in bf16.
    let expected = run(&wide, &[q, k]);
    assert_eq!(got[0].to_f32_vec(), expected[0].to_f32_vec());
    assert!(got[0].to_f32_vec().iter().any(|&x| x != 0.0));
}

/// Only the narrower float operand of a dot is converted (bf16 into an
/// f32 dot over an f32 operand: the same values as over both in f32),
/// and a dot the pass leaves alone (over integers, into its operands'
/// own type) is handed to XLA CPU as written, with no rewrite reported.
#[test]
fn only_dots_over_narrower_floats_are_widened() {
    let dims = "lhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_batch_dims={0,2}, rhs_contracting_dims={3}";
    let shape = [2, 16, 4, 8];
    let values = |seed: usize| -> Vec<f64> {
        (0..2 * 16 * 4 * 8)
            .map(|i| ((i * 29 + seed * 13) % 19) as f64 - 9.0)
            .collect()
    };
    let one_narrow = entry(&format!(
        "  q = bf16[2,16,4,8] parameter(0)\n  k = f32[2,16,4,8] parameter(1)\n  ROOT s = f32[2,4,16,16] dot(q, k), {dims}"
    ));
    let m = hlatc_compiler::formats::text::parse_module(&one_narrow).unwrap();
    let program = runtime().compile(&m).unwrap();
    assert_eq!(program.rewrites(), [hlatc_runtime::Rewrite::WidenMixedDots]);
    let got = program
        .run(&[lit(Bf16, &shape, &values(1)), lit(F32, &shape, &values(2))])
        .unwrap();
    let wide = entry(&format!(
        "  q = f32[2,16,4,8] parameter(0)\n  k = f32[2,16,4,8] parameter(1)\n  ROOT s = f32[2,4,16,16] dot(q, k), {dims}"
    ));
    let expected = run(
        &wide,
        &[lit(F32, &shape, &values(1)), lit(F32, &shape, &values(2))],
    );
    assert_eq!(got[0].to_f32_vec(), expected[0].to_f32_vec());
    // Integers accumulating in s32: XLA CPU runs the dot as it is.
    let ints = entry(&format!(
        "  q = s8[2,16,4,8] parameter(0)\n  k = s8[2,16,4,8] parameter(1)\n  ROOT s = s32[2,4,16,16] dot(q, k), {dims}"
    ));
    let m = hlatc_compiler::formats::text::parse_module(&ints).unwrap();
    let program = runtime().compile(&m).unwrap();
    assert!(program.rewrites().is_empty(), "{:?}", program.rewrites());
    let got = program
        .run(&[lit(S8, &shape, &values(1)), lit(S8, &shape, &values(2))])
        .unwrap();
    let as_f32: Vec<f64> = expected[0]
        .to_f32_vec()
        .iter()
        .map(|&x| f64::from(x))
        .collect();
    assert_values(&got[0], &as_f32, 0.0);
}
