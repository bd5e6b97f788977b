//! The IR: a module of computations, each a graph of instructions whose
//! operations ([`op::Op`]) carry exactly the attributes XLA gives them,
//! over shapes and element types ([`shape`]) and literals. The attribute
//! types (shardings, windows, replica groups, annotations) live beside the
//! ops that carry them. Nothing here reads or writes a format or infers a
//! shape: see [`crate::analysis`] and [`crate::formats`].

pub mod async_ops;
pub mod collective;
pub mod computation;
pub mod computation_id;
pub mod device_assignment;
pub mod instruction;
pub mod iota;
pub mod literal;
pub mod mesh_groups;
pub mod metadata;
pub mod module;
pub mod op;
pub mod original_value;
pub mod result_accuracy;
pub mod shape;
pub mod sharding;
pub mod stack_frames;
pub mod statistics;
pub mod window;
