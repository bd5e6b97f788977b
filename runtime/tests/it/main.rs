//! Integration tests of the runtime: HLO run on XLA CPU through the PJRT
//! plugin (`scripts/fetch-xla-cpu-plugin.sh` fetches it), the passes'
//! rewrites run on it (narrowing, the Neuron rewrites), conformance with
//! XLA's reader over XLA's own test modules, and what needs
//! no plugin (compile options, cache files, atomic writes, the PJRT
//! structs' layouts). One binary.

mod atomic_files;
mod autodiff_fd;
mod cache_files;
mod collectives;
mod common;
mod compare;
mod compile_options;
mod conformance;
mod control_flow;
mod device_buffers;
mod errors;
mod executable_cache;
mod fuzz_xla;
mod host_memory;
mod jax_parity;
mod narrow_on_xla;
mod neuron_rewrites_on_xla;
mod ops;
mod plugins;
mod rank_seeds;
mod replicas;
mod sort_map_rng;
mod stochastic_rounding;
mod support;
