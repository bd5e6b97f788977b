//! Literals: printed as XLA prints them, built from scalars one at a time
//! or as a slice alike, and their bytes and integer ranges checked.

use hlatc_compiler::ir::literal::LiteralEncoder;
use hlatc_compiler::{ElementType, Literal, Scalar};

#[test]
fn a_run_of_equal_values_prints_each_as_written() {
    // Equal bytes share a spelling; -0 and 0, or NaNs of other
    // payloads, are other bytes and spelled anew.
    let mut l = Literal::from_f32(
        vec![2, 4],
        &[0.0, 0.0, -0.0, -0.0, 1.5, 1.5, f32::NAN, f32::NAN],
    )
    .unwrap();
    l.set_nan(7, false, Some(1)).unwrap();
    assert_eq!(
        l.to_string(),
        "{{0, 0, -0.0, -0.0}, {1.5, 1.5, nan, nan(0x1)}}"
    );
    let c = Literal::from_scalars(
        ElementType::C64,
        vec![3],
        &[
            Scalar::Complex(1.0, 2.0),
            Scalar::Complex(1.0, 2.0),
            Scalar::Complex(1.0, -2.0),
        ],
    )
    .unwrap();
    assert_eq!(c.to_string(), "{(1, 2), (1, 2), (1, -2)}");
}

#[test]
fn scalars_made_one_at_a_time_encode_as_a_slice_of_them() {
    let values = [Scalar::Float(0.1), Scalar::Float(-3.0), Scalar::Float(1e-9)];
    let from_slice = Literal::from_scalars(ElementType::Bf16, vec![3], &values).unwrap();
    let from_iter =
        Literal::from_scalar_iter(ElementType::Bf16, vec![3], values.iter().copied()).unwrap();
    assert_eq!(from_iter, from_slice);
    let e =
        Literal::from_scalar_iter(ElementType::U8, vec![2], [1, 256].map(Scalar::Int)).unwrap_err();
    assert_eq!(e.to_string(), from_scalars_error());
}

#[test]
fn an_encoder_fills_with_the_values_encoding() {
    let mut e = LiteralEncoder::new(ElementType::F32);
    e.push(Scalar::Float(2.0)).unwrap();
    assert!(e.fill_to(3, Scalar::Float(0.0)).unwrap());
    assert_eq!(e.finish(vec![3]).unwrap().to_f32_vec(), [2.0, 0.0, 0.0]);
    // A value whose code is not the all-zero byte is repeated as
    // encoded (f8e8m0fnu has no zero at all).
    let one = Literal::from_scalars(ElementType::F8E8M0FNU, vec![], &[Scalar::Float(0.5)])
        .unwrap()
        .bytes()
        .to_vec();
    assert_ne!(one, [0]);
    let mut e = LiteralEncoder::new(ElementType::F8E8M0FNU);
    assert!(e.fill_to(2, Scalar::Float(0.5)).unwrap());
    assert_eq!(e.finish(vec![2]).unwrap().bytes(), [one[0], one[0]]);
    let mut e = LiteralEncoder::new(ElementType::F64);
    assert!(!e.fill_to(usize::MAX, Scalar::Float(0.0)).unwrap());
    assert!(e.is_empty());
    let mut e = LiteralEncoder::new(ElementType::U8);
    assert!(e.fill_to(1, Scalar::Int(-1)).is_err());
}

fn from_scalars_error() -> String {
    Literal::from_scalars(
        ElementType::U8,
        vec![2],
        &[Scalar::Int(1), Scalar::Int(256)],
    )
    .unwrap_err()
    .to_string()
}

#[test]
fn prints_nested_braces() {
    let l = Literal::from_s32(vec![2, 2], &[1, 2, 3, -4]).unwrap();
    assert_eq!(l.to_string(), "{{1, 2}, {3, -4}}");
    assert_eq!(Literal::scalar_f32(0.1).to_string(), "0.1");
    assert_eq!(Literal::scalar_f32(f32::NEG_INFINITY).to_string(), "-inf");
    assert_eq!(Literal::scalar_f32(1e-8).to_string(), "1e-8");
    assert_eq!(Literal::scalar_f32(3.4e38).to_string(), "3.4e38");
}

#[test]
fn byte_count_is_checked() {
    let e = Literal::from_bytes(ElementType::F32, vec![3], vec![0; 8]).unwrap_err();
    assert_eq!(e.to_string(), "f32[3] needs 12 bytes, got 8");
}

#[test]
fn integers_are_range_checked() {
    assert!(Literal::from_scalars(ElementType::U8, vec![], &[Scalar::Int(256)]).is_err());
    assert!(Literal::from_scalars(ElementType::S8, vec![], &[Scalar::Int(-128)]).is_ok());
    let bf = Literal::from_scalars(ElementType::Bf16, vec![], &[Scalar::Float(1.0 / 3.0)]).unwrap();
    assert_eq!(bf.get(0), Scalar::Float(0.333984375));
}
