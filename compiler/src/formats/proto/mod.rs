//! `HloModuleProto`: the binary form `neuronx-cc` and PJRT consume.
//!
//! The messages are declared once, in `messages.rs`, as prost structs and
//! the schemas the wire walk checks incoming protos against (field numbers
//! from xla/service/hlo.proto and xla/xla_data.proto), so no protoc is
//! needed.

mod annotations;
mod attr_fields;
mod collective;
mod described;
mod emit;
mod error;
mod import;
mod instruction;
mod listed_group;
mod literal;
pub mod messages;
mod schema;
mod shape;
mod sharding;
mod sized_once;
mod window;
mod wire;

pub use annotations::AnnotationError;
pub use collective::CollectiveProtoError;
pub use emit::{encode_module, module_to_proto};
pub use error::{ImportError, InstructionError, ProtoError};
pub use import::{decode_module, decode_module_noted, module_from_proto};
pub use literal::LiteralProtoError;
pub use shape::ShapeProtoError;
pub use sharding::ShardingProtoError;
pub use wire::WireError;
