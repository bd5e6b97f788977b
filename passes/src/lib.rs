//! Optimization passes over the hlatc IR, the rewriting machinery they
//! share (a rewriter, a pattern matcher, a context that carries the target)
//! and pipelines that run them, checking invariants after every pass.
//!
//! The crate is laid out by what depends on what: `infra/` (the pass
//! trait, pipelines, the context, the rewriter and the other shared
//! machinery), [`targets`] (each target's own place: `targets::cpu`, what
//! XLA CPU needs, and `targets::neuron`, what only Neuron does and its
//! pre-flight), `transforms/` (the passes every target runs) and the
//! registry over all of them. Everything is re-exported here by the names
//! it always had.
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

mod infra;
mod registry;
pub mod targets;
mod transforms;

pub use infra::cast_policy::{CastPolicy, CastRule, MxPolicy, ScopeMatcher, MX_KEPT_SCOPES};
pub use infra::context::{AddedState, PassContext, RematPolicy, RematRegion, Target};
pub use infra::mx_blocks::MxFormat;
pub use infra::pass::{
    ConditionalFailure, F64ConstantProblem, FlashShapesError, MxCallProblem, MxConfigError,
    NativeKernelProblem, Pass, PassError, RoundingLoweringError,
};
pub use infra::pipeline::{CheckPolicy, Checker, Fixpoint, Pipeline};
pub use infra::report::{PassRun, PipelineReport};
pub use infra::rounding::{
    Rounding, RoundingChooser, RoundingPolicy, ROUNDING_ATTRIBUTE, STOCHASTIC,
};
pub use infra::{bind, inline, pattern, rewriter};
pub use registry::{
    default_pass_names, default_pipeline, markdown_table, pipeline_from_names, registry, PassInfo,
};
pub use targets::cpu::{AsyncToSync, BitcastToReshape, OrientDots, WidenMixedDots};
pub use targets::neuron::preflight as neuron_check;
pub use targets::neuron::{
    mx_calls, native_kernel, neuron_topk, nki_flash_reference, softmax_math, ConditionalToSelect,
    IntegerDotToF32, LowerNeuronCalls, Narrow64BitIntegers, NarrowF64, SortToTopK,
    MAX_BRANCH_INSTRUCTIONS,
};
pub use transforms::{
    bound_loops, rounding_counts, Amp, AnnotateRounding, CoalesceLinear, Cse, Dce, FoldCausalMask,
    FuseSoftmax, NarrowGathers, Remat, Simplify, RNG_STATE_NAME, ROUNDING_CALLEE,
};
