//! `sort`, `map` and `rng` run on XLA CPU with the values their definitions
//! give, through hlatc's text and proto.

use crate::common::*;

const SORT_PAIRS: &str = "HloModule test

by_key {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY main {
  k = f32[5] parameter(0)
  v = s32[5] parameter(1)
  ROOT s = (f32[5], s32[5]) sort(k, v), dimensions={0}, is_stable=true, to_apply=by_key
}
";

const MAP: &str = "HloModule test

fma {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  xy = f32[] multiply(x, y)
  ROOT r = f32[] add(xy, x)
}

ENTRY main {
  a = f32[2,2] parameter(0)
  b = f32[2,2] parameter(1)
  ROOT m = f32[2,2] map(a, b), dimensions={0,1}, to_apply=fma
}
";

const UNIFORM: &str = "HloModule test

ENTRY main {
  lo = f32[] constant(2)
  hi = f32[] constant(3)
  ROOT r = f32[1000] rng(lo, hi), distribution=rng_uniform
}
";

#[test]
fn sort_orders_every_operand_by_the_comparator() {
    round_trips(SORT_PAIRS);
    let out = run(
        SORT_PAIRS,
        &[
            f32s(&[5], &[3.0, -1.0, 2.5, -1.0, 0.0]),
            lit(
                hlatc_compiler::ElementType::S32,
                &[5],
                &[0.0, 1.0, 2.0, 3.0, 4.0],
            ),
        ],
    );
    assert_values(&out[0], &[-1.0, -1.0, 0.0, 2.5, 3.0], 0.0);
    // Stable: the two -1 keep their order.
    assert_values(&out[1], &[1.0, 3.0, 4.0, 2.0, 0.0], 0.0);
}

#[test]
fn map_applies_its_computation_to_each_element() {
    round_trips(MAP);
    let out = run(
        MAP,
        &[
            f32s(&[2, 2], &[1.0, 2.0, -3.0, 0.5]),
            f32s(&[2, 2], &[4.0, 0.0, 2.0, 2.0]),
        ],
    );
    assert_values(&out[0], &[5.0, 2.0, -9.0, 1.5], 0.0);
}

#[test]
fn rng_draws_inside_its_range() {
    round_trips(UNIFORM);
    let v = run(UNIFORM, &[])[0].to_f64_vec();
    assert_eq!(v.len(), 1000);
    assert!(v.iter().all(|&x| (2.0..3.0).contains(&x)), "{v:?}");
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    // Uniform on [2, 3): mean 2.5, sd of the mean 0.29 / sqrt(1000).
    assert!((mean - 2.5).abs() < 0.04, "mean {mean}");
}

/// `rng-get-and-update-state` hands out the RNG state and moves it on by
/// `delta`. XLA CPU keeps one state per instruction, so a second run of
/// the compiled program reads the first's state plus its delta.
#[test]
fn rng_state_advances_by_its_delta() {
    let hlo = entry("  ROOT a = u64[2] rng-get-and-update-state(), delta=10");
    round_trips(&hlo);
    let m = hlatc_compiler::formats::text::parse_module(&hlo).unwrap();
    let p = runtime().compile(&m).unwrap();
    let first = p.run(&[]).unwrap()[0].to_f64_vec();
    let second = p.run(&[]).unwrap()[0].to_f64_vec();
    assert_eq!(second[0] - first[0], 10.0, "{first:?} {second:?}");
    assert_eq!((first[1], second[1]), (0.0, 0.0));
}
