//! The hlatc compiler core: an HLO-like IR held in a petgraph `StableGraph`,
//! shape inference, a verifier, XLA's HLO text format and `HloModuleProto`.
//!
//! ```
//! use hlatc_compiler::{text, verify};
//! let m = text::parse_module("HloModule m\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }").unwrap();
//! verify(&m).unwrap();
//! assert!(text::print_module(&m).contains("negate(p)"));
//! ```

pub mod async_ops;
pub mod autodiff;
pub mod builder;
pub mod canonical;
pub mod collective;
pub mod computation;
pub mod device_assignment;
pub mod fx;
pub mod instruction;
pub mod iota;
pub mod literal;
pub mod mesh_groups;
pub mod minifloat;
pub mod module;
pub mod op;
pub mod op_description;
pub mod optimizer;
pub mod original_value;
pub mod proto;
pub mod result_accuracy;
pub mod scope;
pub mod shape_inference;
pub mod sharding;
pub mod stack_frames;
pub mod statistics;
pub mod text;
pub mod types;
pub mod verifier;
pub mod window;

pub use computation::{Computation, IdList, InstrId};
pub use instruction::{Instruction, Metadata};
pub use literal::{Literal, LiteralError, Scalar};
pub use module::{AliasKind, BufferDonor, IoAlias, Module};
pub use op::Op;
pub use shape_inference::{infer_shape, CalleeSignature, ShapeError};
pub use sharding::Sharding;
pub use types::{ArrayShape, ElementType, PhysicalLayout, Shape, SplitConfig, COMBINE_DIMENSION};
pub use verifier::{verify, VerifyError};
