//! Integration tests of the runtime: HLO run on XLA CPU through the PJRT
//! plugin (`scripts/fetch-xla-cpu-plugin.sh` fetches it). One binary.

mod autodiff_fd;
mod collectives;
mod common;
mod control_flow;
mod device_buffers;
mod errors;
mod executable_cache;
mod fuzz_xla;
mod jax_parity;
mod ops;
mod replicas;
mod sort_map_rng;
mod stochastic_rounding;
