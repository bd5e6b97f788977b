//! What the tests of passes run on XLA CPU and the conformance sweep
//! share (and the train crate's tests, which include this file): the fast
//! tier's switch, reading a fixture's module, and comparing two runs'
//! outputs (`skip_slow_tests` is a copy of the root crate's test helper).
#![allow(dead_code)]

use hlatc_compiler::{formats::text, verify, Literal, Module};
use std::path::Path;

/// Whether to skip a slow test, as rust-analyzer's `skip_slow_tests`
/// does: the fast tier (`scripts/test-fast.sh`, or `cargo test` alone)
/// leaves out the tests that take seconds each, and `RUN_SLOW_TESTS=1`
/// (what `scripts/test.sh` and CI set) runs them. A skipped test passes,
/// and says so on standard error.
pub fn skip_slow_tests() -> bool {
    let skip = std::env::var_os("RUN_SLOW_TESTS").is_none_or(|v| v == "0");
    if skip {
        eprintln!("skipped: a slow test, which RUN_SLOW_TESTS=1 runs");
    }
    skip
}

/// Asserts two runs gave the same outputs bit for bit: types, dims and
/// bytes.
pub fn assert_identical(what: &str, got: &[Literal], want: &[Literal]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.ty(), w.ty(), "{what}: output {i}");
        assert_eq!(g.dims(), w.dims(), "{what}: output {i}");
        assert!(g.bytes() == w.bytes(), "{what}: output {i} differs");
    }
}

/// Asserts `got` is `want` within `rtol` of `want`'s largest magnitude,
/// element by element (of any types: both are read as f64).
pub fn assert_close(what: &str, got: &Literal, want: &Literal, rtol: f64) {
    assert_eq!(got.dims(), want.dims(), "{what}: dims");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = w.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert!(
            (a - b).abs() <= rtol * scale,
            "{what}[{i}]: {a} vs {b} (largest magnitude {scale})"
        );
    }
}

/// `inputs` as `m`'s entry takes them: each float input converted to its
/// parameter's float type where they differ (rounded to nearest even).
/// For a module whose pass changed its signature, as `narrow-f64` does
/// with torch-xla's f64 scalars, fed what the original took.
pub fn fed_as(m: &Module, inputs: &[Literal]) -> Vec<Literal> {
    let params = m.entry_parameter_shapes();
    inputs
        .iter()
        .zip(
            params
                .iter()
                .map(|s| s.as_array().map(|a| a.ty))
                .chain(std::iter::repeat(None)),
        )
        .map(|(l, ty)| match ty {
            Some(ty) if ty != l.ty() && ty.is_float() && l.ty().is_float() => {
                l.clone().converted(ty).unwrap()
            }
            _ => l.clone(),
        })
        .collect()
}

/// The HLO text module in `path`, read and verified as the root crate's
/// `hlatc::load_module` reads a text file.
pub fn read_module(path: &Path) -> Module {
    let src = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m = text::parse_module(&src).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
    verify(&m).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    m
}
