//! The hlatc compiler core: an HLO-like IR held in a petgraph `StableGraph`,
//! shape inference, a verifier, XLA's HLO text format and `HloModuleProto`.
//!
//! ```
//! use hlatc_compiler::{formats::text, verify};
//! let m = text::parse_module("HloModule m\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }").unwrap();
//! verify(&m).unwrap();
//! assert!(text::print_module(&m).contains("negate(p)"));
//! ```

pub mod analysis;
pub mod formats;
pub mod graph;
pub mod ir;
pub mod util;

pub use analysis::shape_inference::{infer_shape, CalleeSignature, ShapeError};
pub use analysis::verifier::{verify, VerifyError};
pub use ir::computation::{Computation, IdList, InstrId};
pub use ir::computation_id::ComputationId;
pub use ir::instruction::Instruction;
pub use ir::literal::{Literal, LiteralError, Scalar};
pub use ir::metadata::Metadata;
pub use ir::module::{AliasKind, BufferDonor, IoAlias, Module};
pub use ir::op::{Op, Opcode};
pub use ir::shape::{
    ArrayShape, ElementType, PhysicalLayout, Shape, SplitConfig, COMBINE_DIMENSION,
};
pub use ir::sharding::{Sharding, ShardingError};
