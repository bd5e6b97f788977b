//! The passes every target runs, each reading the target from the context
//! where the form it writes differs (`fuse-softmax`, `annotate-rounding`):
//! simplification, dead and common code, the causal mask, coalesced
//! matmuls, mixed precision and its rounding, narrower gathers,
//! rematerialization; and `bound_loops`, which bounds loops for runs on
//! inputs a module was not written for. `fuse-softmax` writes Neuron's
//! softmax calls by their contract, `targets::neuron::softmax_math`: the one
//! arrow from here to a target.

mod amp;
mod annotate_rounding;
mod bound_loops;
mod coalesce_linear;
mod cse;
mod dce;
mod fold_causal_mask;
mod fuse_softmax;
mod narrow_gathers;
mod remat;
mod simplify;

pub use amp::Amp;
pub use annotate_rounding::{rounding_counts, AnnotateRounding, RNG_STATE_NAME, ROUNDING_CALLEE};
pub use bound_loops::bound_loops;
pub use coalesce_linear::CoalesceLinear;
pub use cse::Cse;
pub use dce::Dce;
pub use fold_causal_mask::FoldCausalMask;
pub use fuse_softmax::FuseSoftmax;
pub use narrow_gathers::NarrowGathers;
pub use remat::Remat;
pub use simplify::Simplify;
