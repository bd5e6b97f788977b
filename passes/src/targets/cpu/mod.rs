//! XLA CPU: everything it needs of a module before it compiles one, and
//! what the `cpu` default pipeline does for its speed alone
//! (`orient-dots`). The rewrites it could not compile as written (`async-to-sync`,
//! `bitcast-to-reshape`, `widen-mixed-dots`) and the entry's tuples as
//! their leaves (`flat_entry`), picked by [`lower`], which no default
//! pipeline runs: the runtime and `--verify` apply them to what XLA CPU is
//! handed, never to a bundle; and the [`preflight`], what XLA CPU would
//! abort or hang on, refused first, for the emitters [`xla_cpu_flags`]
//! reads from `XLA_FLAGS`.

mod async_to_sync;
mod bitcast_to_reshape;
mod flat_entry;
mod lower;
mod orient_dots;
pub mod preflight;
mod widen_mixed_dots;
pub mod xla_cpu_flags;

pub use async_to_sync::AsyncToSync;
pub use bitcast_to_reshape::BitcastToReshape;
pub use lower::{lower, Lowered, Rewrite};
pub use orient_dots::OrientDots;
pub use widen_mixed_dots::WidenMixedDots;
// Public for the crate's tests (tests/it/cpu_rewrites.rs).
#[doc(hidden)]
pub use widen_mixed_dots::widens_exactly;
pub use xla_cpu_flags::Emitters;
