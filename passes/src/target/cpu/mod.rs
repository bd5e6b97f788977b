//! XLA CPU: the rewrites it needs of a module it could not compile as
//! written (`async-to-sync`, `bitcast-to-reshape`, `widen-mixed-dots`),
//! which no default pipeline runs: the runtime and `--verify` apply them to
//! what XLA CPU is handed, never to a bundle.

mod async_to_sync;
mod bitcast_to_reshape;
mod widen_mixed_dots;

pub use async_to_sync::AsyncToSync;
pub use bitcast_to_reshape::BitcastToReshape;
pub use widen_mixed_dots::WidenMixedDots;
