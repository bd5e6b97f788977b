//! What every pass stands on, and no pass: the [`Pass`](pass::Pass) trait
//! and its errors, pipelines and their checkers, the context that carries
//! the target and the policies, the record of what passes did, and the
//! machinery passes share (the rewriter and the module's names, the
//! pattern matcher, the inliner, binding, value intervals, conversions,
//! the bounded search up a value's operands, the loop that rewrites every
//! match of every computation, and MX blocks in plain HLO, the arithmetic
//! of a cast policy's microscaled dots).
//! Nothing here imports a pass or a target's module.

pub mod bind;
pub(crate) mod cast_policy;
pub(crate) mod context;
pub(crate) mod convert;
pub mod inline;
pub(crate) mod intervals;
pub(crate) mod match_rewrite;
pub(crate) mod mx_blocks;
pub(crate) mod names;
pub(crate) mod pass;
pub mod pattern;
pub(crate) mod pipeline;
pub(crate) mod report;
pub mod rewriter;
pub(crate) mod rounding;
pub(crate) mod upstream;
