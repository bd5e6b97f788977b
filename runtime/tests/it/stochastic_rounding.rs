//! `Builder::stochastic_round_bf16` on XLA CPU: unbiased, always one of the
//! two neighbouring bf16 values, rounding up as often as the distance says,
//! across the bf16 range (negatives and subnormals included); NaN and
//! infinities pass through and the largest finite values never round into
//! infinity.

use crate::common::*;
use hlatc_compiler::graph::builder::Builder;
use hlatc_compiler::ir::op::{Op, RngAlgorithm};
use hlatc_compiler::{ElementType, Literal, Shape};

const SAMPLES: usize = 100_000;

/// SR(x) for `SAMPLES` copies of each of `xs`, widened back to f64: one run
/// of a module drawing its random bits with `rng-bit-generator`.
fn stochastic_rounds(xs: &[f32], seed: u64) -> Vec<Vec<f64>> {
    let n = (xs.len() * SAMPLES) as i64;
    let mut b = Builder::new("main");
    let x = b.parameter("x", Shape::array(ElementType::F32, [n]));
    let state = b.parameter("state", Shape::array(ElementType::U64, [2]));
    let drawn = b
        .add(
            Op::RngBitGenerator {
                algorithm: RngAlgorithm::Default,
            },
            &[state],
            Some(Shape::Tuple(vec![
                Shape::array(ElementType::U64, [2]),
                Shape::array(ElementType::U32, [n]),
            ])),
        )
        .unwrap();
    let bits = b
        .add(Op::GetTupleElement { index: 1 }, &[drawn], None)
        .unwrap();
    let rounded = b.stochastic_round_bf16(x, bits).unwrap();
    let wide = b.convert(rounded, ElementType::F32).unwrap();
    let m = b.into_module("sr", wide);
    let values: Vec<f32> = xs
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, SAMPLES))
        .collect();
    let inputs = [
        Literal::from_f32(vec![n], &values).unwrap(),
        lit(ElementType::U64, &[2], &[seed as f64, 7.0]),
    ];
    let out = runtime().compile(&m).unwrap().run(&inputs).unwrap();
    out[0]
        .to_f64_vec()
        .chunks(SAMPLES)
        .map(<[f64]>::to_vec)
        .collect()
}

/// The bf16 values just below and above `x` (equal when `x` is one).
fn neighbours(x: f32) -> (f64, f64) {
    let bits = x.to_bits();
    let down = f32::from_bits(bits & 0xFFFF_0000);
    let up = if bits & 0xFFFF == 0 {
        down
    } else {
        f32::from_bits((bits & 0xFFFF_0000) + 0x1_0000)
    };
    (down as f64, up as f64)
}

#[test]
fn stochastic_rounding_is_unbiased_across_the_range() {
    let xs: Vec<f32> = vec![
        1.0 + 0.3 * 2f32.powi(-7),
        -(1.0 + 0.7 * 2f32.powi(-7)),
        std::f32::consts::PI,
        1.234e-3,
        -5.6789e4,
        3.0e30,
        // Subnormal in f32 and in bf16.
        f32::from_bits(0x0000_4321),
        -f32::from_bits(0x0001_8765),
        // Exactly representable: never moves.
        1.5,
    ];
    for (x, samples) in xs.iter().zip(stochastic_rounds(&xs, 11)) {
        let (down, up) = neighbours(*x);
        assert!(
            samples.iter().all(|&s| s == down || s == up),
            "{x}: a result is neither {down} nor {up}"
        );
        if down == up {
            continue;
        }
        let p = (*x as f64 - down) / (up - down);
        let ups = samples.iter().filter(|&&s| s == up).count() as f64;
        let n = SAMPLES as f64;
        let sigma_p = (p * (1.0 - p) / n).sqrt();
        assert!(
            (ups / n - p).abs() <= 4.0 * sigma_p,
            "{x}: rounds up {:.5} of the time, the distance says {p:.5}",
            ups / n
        );
        let mean = samples.iter().sum::<f64>() / n;
        let sigma_mean = (up - down).abs() * sigma_p;
        assert!(
            (mean - *x as f64).abs() <= 4.0 * sigma_mean,
            "{x}: mean {mean} is more than 4 sigma ({sigma_mean}) away"
        );
    }
}

#[test]
fn nan_and_infinities_pass_and_the_largest_values_do_not_overflow() {
    let xs = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -f32::MAX,
        f32::from_bits(0x7F7F_8000),
    ];
    let out = stochastic_rounds(&xs, 3);
    assert!(out[0].iter().all(|v| v.is_nan()), "NaN stays NaN");
    assert!(out[1].iter().all(|&v| v == f64::INFINITY));
    assert!(out[2].iter().all(|&v| v == f64::NEG_INFINITY));
    // bf16's largest finite value: what f32's largest values truncate to.
    let bf16_max = f32::from_bits(0x7F7F_0000) as f64;
    for (x, samples) in xs[3..].iter().zip(&out[3..]) {
        assert!(
            samples
                .iter()
                .all(|&v| v.is_finite() && v.abs() == bf16_max),
            "{x} rounded into infinity"
        );
    }
}
