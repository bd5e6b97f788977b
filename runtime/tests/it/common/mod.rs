//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

use hlatc_compiler::{formats::text, verify, ElementType, Literal, Scalar};
use hlatc_runtime::Runtime;

/// The process-wide runtime; a missing plugin fails loudly with the fetch hint.
pub fn runtime() -> Runtime {
    Runtime::shared().unwrap_or_else(|e| panic!("{e}"))
}

/// Parses, verifies, compiles and runs HLO text.
pub fn run(hlo: &str, inputs: &[Literal]) -> Vec<Literal> {
    let m = text::parse_module(hlo).unwrap_or_else(|e| panic!("parse: {e}\n{hlo}"));
    verify(&m).unwrap_or_else(|e| panic!("verify: {e}\n{hlo}"));
    let p = runtime()
        .compile(&m)
        .unwrap_or_else(|e| panic!("compile: {e}\n{hlo}"));
    p.run(inputs).unwrap_or_else(|e| panic!("run: {e}\n{hlo}"))
}

/// A one-computation module whose entry body is `body`.
pub fn entry(body: &str) -> String {
    format!("HloModule test\n\nENTRY main {{\n{body}\n}}\n")
}

pub fn f32s(dims: &[i64], v: &[f32]) -> Literal {
    Literal::from_f32(dims.to_vec(), v).unwrap()
}

pub fn s32s(dims: &[i64], v: &[i32]) -> Literal {
    Literal::from_s32(dims.to_vec(), v).unwrap()
}

pub fn lit(ty: ElementType, dims: &[i64], v: &[f64]) -> Literal {
    let s: Vec<Scalar> = v
        .iter()
        .map(|&x| {
            if ty.is_float() {
                Scalar::Float(x)
            } else if ty == ElementType::Pred {
                Scalar::Bool(x != 0.0)
            } else {
                Scalar::Int(x as i64)
            }
        })
        .collect();
    Literal::from_scalars(ty, dims.to_vec(), &s).unwrap()
}

/// Asserts values equal `expected` within `rel` relative error (exact for 0).
pub fn assert_values(got: &Literal, expected: &[f64], rel: f64) {
    let g = got.to_f64_vec();
    assert_eq!(g.len(), expected.len(), "element count of {}", got.shape);
    for (i, (a, e)) in g.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan()) || a == e || (a - e).abs() <= rel * e.abs();
        assert!(ok, "element {i}: got {a}, expected {e} (all: {g:?})");
    }
}

/// The printed text reads back to itself, and the proto carries it
/// unchanged.
pub fn round_trips(hlo: &str) {
    let printed = text::print_module(&text::parse_module(hlo).unwrap());
    let m = text::parse_module(&printed).unwrap();
    assert_eq!(text::print_module(&m), printed);
    let back = hlatc_compiler::formats::proto::decode_module(
        &hlatc_compiler::formats::proto::encode_module(&m),
    )
    .unwrap();
    assert_eq!(text::print_module(&back), printed);
}
