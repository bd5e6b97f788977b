//! Each target's own place: what only it needs of a module. `cpu` is what
//! XLA CPU needs before it compiles one; `neuron` the passes only Neuron's
//! pipeline runs, its custom calls' contracts and its pre-flight. A target
//! imports the infrastructure and its own files, never a transform or the
//! other target.

pub mod cpu;
pub mod neuron;
