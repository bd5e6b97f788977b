//! Neuron (AWS Trainium through `neuronx-cc`): the passes only its default
//! pipeline runs, rewriting what neuronx-cc refuses or handles badly (f64,
//! conditionals, whole sorts for a top k, 64-bit integers, integer dots);
//! the contracts of its custom calls (`softmax_math`, `neuron_topk`,
//! `mx_calls`, `native_kernel` with NKI's flash attention in
//! `nki_flash_reference`) and
//! their lowering back to plain HLO (`lower-neuron-calls`, so a Neuron
//! module runs on XLA CPU); and the pre-flight (`preflight`, what
//! `hlatc check` and every `compile --target neuron` run).

mod conditional_to_select;
mod integer_dot_to_f32;
mod lower_neuron_calls;
pub mod mx_calls;
mod narrow_64_bit;
mod narrow_f64;
pub mod native_kernel;
pub mod neuron_topk;
pub mod nki_flash_reference;
pub mod preflight;
pub mod softmax_math;
mod sort_to_topk;

pub use conditional_to_select::{ConditionalToSelect, MAX_BRANCH_INSTRUCTIONS};
pub use integer_dot_to_f32::IntegerDotToF32;
pub use lower_neuron_calls::LowerNeuronCalls;
pub use narrow_64_bit::Narrow64BitIntegers;
pub use narrow_f64::NarrowF64;
pub use sort_to_topk::SortToTopK;
