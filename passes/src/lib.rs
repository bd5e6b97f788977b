//! Optimization passes over the hlatc IR and the pass manager that runs
//! them, verifying the module after every pass.
//!
//! ```
//! use hlatc_compiler::text;
//! use hlatc_passes::PassManager;
//! let mut m = text::parse_module("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  dead = f32[2] negate(p)\n  ROOT r = f32[2] abs(p)\n}\n").unwrap();
//! let report = PassManager::from_names(&["dce"]).unwrap().run(&mut m).unwrap();
//! assert!(report.changed());
//! assert_eq!(m.entry().len(), 2);
//! ```

mod cse;
mod dce;
mod manager;
mod pass;

pub use cse::Cse;
pub use dce::Dce;
pub use manager::{PassManager, PassRun, PipelineReport};
pub use pass::{registry, Pass, PassError, PassInfo};
