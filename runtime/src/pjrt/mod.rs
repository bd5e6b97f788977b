//! PJRT through its C API: load a plugin, create a client, compile
//! `HloModuleProto`s, move host tensors in and out, execute.
//!
//! This module is the only place in hlatc with `unsafe` code.

mod client;
mod ffi;
mod ffi_layouts;

pub(crate) use client::file_identity;
pub use client::{Buffer, BufferArg, Client, CompiledMemoryStats, LoadedExecutable, PjrtError};
