//! Numeric comparison of outputs: the verification harness's yardstick.

use hlatc_compiler::Literal;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("shape differs: expected {expected}, got {actual}")]
    Shape { expected: String, actual: String },
    #[error("{count} of {total} elements differ; worst at flat index {index}: expected {expected}, got {actual} (abs err {abs_err:.3e}, tolerance {tol:.3e})")]
    Values {
        count: usize,
        total: usize,
        index: usize,
        expected: f64,
        actual: f64,
        abs_err: f64,
        tol: f64,
    },
}

/// Error statistics of `actual` against `expected`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrorStats {
    pub max_abs: f64,
    pub max_rel: f64,
}

/// The largest finite magnitude in `l` (0 for none): the scale that
/// tolerances relative to a whole output are taken against.
pub fn max_abs(l: &Literal) -> f64 {
    l.to_f64_vec()
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f64, |m, x| m.max(x.abs()))
}

/// Checks |a - e| <= atol + rtol * |e| elementwise (NaN equals NaN, infinities
/// must match exactly), like numpy's `allclose`.
pub fn assert_close(
    expected: &Literal,
    actual: &Literal,
    rtol: f64,
    atol: f64,
) -> Result<ErrorStats, Mismatch> {
    if expected.shape.ty != actual.shape.ty || expected.dims() != actual.dims() {
        return Err(Mismatch::Shape {
            expected: expected.shape.to_string(),
            actual: actual.shape.to_string(),
        });
    }
    let (e, a) = (expected.to_f64_vec(), actual.to_f64_vec());
    let mut stats = ErrorStats {
        max_abs: 0.0,
        max_rel: 0.0,
    };
    let mut bad = 0usize;
    let mut worst: Option<(usize, f64, f64)> = None;
    for (i, (&x, &y)) in e.iter().zip(&a).enumerate() {
        let same_special = (x.is_nan() && y.is_nan()) || (x.is_infinite() && x == y);
        if same_special {
            continue;
        }
        let err = (x - y).abs();
        let tol = atol + rtol * x.abs();
        if err.is_finite() {
            stats.max_abs = stats.max_abs.max(err);
            if x != 0.0 {
                stats.max_rel = stats.max_rel.max(err / x.abs());
            }
        }
        let within = err <= tol; // false for NaN errors too
        if !within {
            bad += 1;
            let excess = if err.is_nan() {
                f64::INFINITY
            } else {
                err - tol
            };
            if worst.is_none_or(|(_, _, w)| excess > w) {
                worst = Some((i, tol, excess));
            }
        }
    }
    match worst {
        None => Ok(stats),
        Some((i, tol, _)) => Err(Mismatch::Values {
            count: bad,
            total: e.len(),
            index: i,
            expected: e[i],
            actual: a[i],
            abs_err: (e[i] - a[i]).abs(),
            tol,
        }),
    }
}
