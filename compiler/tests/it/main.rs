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
mod device_groups;
mod dynamic_dims;
mod errors;
mod filetests;
mod fuzz;
mod input_file;
mod layering;
mod layouts;
mod literals;
mod minifloat;
mod module_header;
mod op_families;
mod op_table;
mod proto_fields;
mod proto_messages;
mod round_trip;
mod scopes;
mod shape_errors;
mod shapes;
mod sharding;
mod text_positions;
mod util;
mod verifier_rules;
mod windows;
