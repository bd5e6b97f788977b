//! Comparing results: the worst element is reported, and NaN is a
//! mismatch unless expected.

use hlatc_compiler::Literal;
use hlatc_runtime::{assert_close, Mismatch};

#[test]
fn reports_the_worst_element() {
    let e = Literal::from_f32(vec![3], &[1.0, 2.0, 3.0]).unwrap();
    let a = Literal::from_f32(vec![3], &[1.0, 2.5, 3.0001]).unwrap();
    let err = assert_close(&e, &a, 1e-3, 0.0).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("1 of 3 elements differ; worst at flat index 1"),
        "{err}"
    );
    let ok = assert_close(&e, &a, 0.3, 0.0).unwrap();
    assert!((ok.max_abs - 0.5).abs() < 1e-12);
}

#[test]
fn nan_is_a_mismatch_unless_expected() {
    let e = Literal::from_f32(vec![2], &[f32::NAN, 1.0]).unwrap();
    let a = Literal::from_f32(vec![2], &[f32::NAN, f32::NAN]).unwrap();
    assert!(matches!(
        assert_close(&e, &a, 1e-5, 0.0),
        Err(Mismatch::Values {
            count: 1,
            index: 1,
            ..
        })
    ));
}
