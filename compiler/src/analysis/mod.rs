//! What is derived from the IR without changing it: each op's result shape
//! ([`shape_inference`]), whether a module is well formed ([`verifier`]),
//! and the canonical forms both formats write ([`canonical`]).

pub mod canonical;
pub mod shape_inference;
pub mod verifier;
