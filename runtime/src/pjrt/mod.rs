//! PJRT through its C API: load a plugin, create a client, compile
//! `HloModuleProto`s, move host tensors in and out, execute.
//!
//! This module is the only place in hlatc with `unsafe` code.

mod client;
// `pub` for the crate root's re-export, which the crate's tests read.
pub mod ffi;

pub(crate) use client::file_identity;
pub use client::{Buffer, BufferArg, Client, CompiledMemoryStats, LoadedExecutable, PjrtError};
