//! The IR's two interchange forms: XLA's HLO text ([`text`]) and the
//! `HloModuleProto` ([`proto`]). Both read and write every op through the
//! op descriptions, so what one format keeps the other keeps.

pub mod proto;
mod read_by;
pub mod text;

pub(crate) use read_by::{read_by, ReadBy};
