//! Integration tests of the compiler crate: the IR, its text and proto
//! formats, shape inference and the verifier. One binary, one module per
//! topic (each test binary links separately, so they are kept together).

mod annotations;
mod arity;
mod autodiff;
mod buffers;
mod collectives;
mod computation;
mod control_flow;
mod dynamic_dims;
mod errors;
mod filetests;
mod fuzz;
mod layering;
mod layouts;
mod module_header;
mod op_families;
mod proto_fields;
mod round_trip;
mod sharding;
mod verifier_rules;
