//! Optimization passes over the hlatc IR, the rewriting machinery they
//! share (a rewriter, a pattern matcher, a context that carries the target)
//! and pipelines that run them, checking invariants after every pass.
//!
//! ```
//! use hlatc_compiler::formats::text;
//! use hlatc_passes::{pipeline_from_names, PassContext, Target};
//! let mut m = text::parse_module("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  dead = f32[2] negate(p)\n  ROOT r = f32[2] abs(p)\n}\n").unwrap();
//! let mut ctx = PassContext::new(Target::Cpu);
//! let report = pipeline_from_names("example", &["dce"]).unwrap().run_module(&mut m, &mut ctx).unwrap();
//! assert!(report.changed());
//! assert_eq!(m.entry().len(), 2);
//! ```

mod amp;
mod annotate_rounding;
mod async_to_sync;
pub mod bind;
mod bitcast_to_reshape;
mod bound_loops;
mod cast_policy;
mod coalesce_linear;
mod conditional_to_select;
mod context;
mod cse;
mod dce;
mod fold_causal_mask;
mod fuse_softmax;
pub mod inline;
mod integer_dot_to_f32;
mod intervals;
mod lower_neuron_calls;
mod narrow_64_bit;
mod narrow_f64;
mod narrow_gathers;
pub mod neuron_check;
pub mod neuron_topk;
mod pass;
pub mod pattern;
mod pipeline;
mod registry;
mod remat;
pub mod rewriter;
mod rounding;
mod simplify;
pub mod softmax_math;
mod sort_to_topk;
mod widen_mixed_dots;

pub use amp::Amp;
pub use annotate_rounding::{
    rounding_counts, AnnotateRounding, RoundingLoweringError, RNG_STATE_NAME, ROUNDING_CALLEE,
};
pub use async_to_sync::AsyncToSync;
pub use bitcast_to_reshape::BitcastToReshape;
pub use bound_loops::bound_loops;
pub use cast_policy::{CastPolicy, CastRule, ScopeMatcher};
pub use coalesce_linear::CoalesceLinear;
pub use conditional_to_select::{ConditionalFailure, ConditionalToSelect, MAX_BRANCH_INSTRUCTIONS};
pub use context::{AddedState, PassContext, RematPolicy, Target};
pub use cse::Cse;
pub use dce::Dce;
pub use fold_causal_mask::FoldCausalMask;
pub use fuse_softmax::FuseSoftmax;
pub use integer_dot_to_f32::IntegerDotToF32;
pub use lower_neuron_calls::LowerNeuronCalls;
pub use narrow_64_bit::Narrow64BitIntegers;
pub use narrow_f64::{F64ConstantProblem, NarrowF64};
pub use narrow_gathers::NarrowGathers;
pub use pass::{Pass, PassError};
pub use pipeline::{CheckPolicy, Checker, Fixpoint, PassRun, Pipeline, PipelineReport};
pub use registry::{
    default_pass_names, default_pipeline, markdown_table, pipeline_from_names, registry, PassInfo,
};
pub use remat::Remat;
pub use rounding::{Rounding, RoundingChooser, RoundingPolicy, ROUNDING_ATTRIBUTE, STOCHASTIC};
pub use simplify::Simplify;
pub use sort_to_topk::SortToTopK;
pub use widen_mixed_dots::WidenMixedDots;
