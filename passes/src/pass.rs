//! What a pass is, and the registry that finds passes by name.

use hlatc_compiler::{Module, VerifyError};

/// A transformation of a module. Like XLA's HloPassInterface: it has a name
/// and reports whether it changed anything. It must keep the program's
/// meaning: the same numbers on XLA CPU with the pass on and off.
pub trait Pass {
    fn name(&self) -> &'static str;
    fn run(&self, module: &mut Module) -> Result<bool, PassError>;
}

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("unknown pass '{name}' (known passes: {known})")]
    UnknownPass { name: String, known: String },
    #[error("the module does not verify before the first pass: {0}")]
    InvalidInput(VerifyError),
    #[error("pass '{pass}' produced a module that does not verify: {error}")]
    BrokeModule {
        pass: &'static str,
        error: VerifyError,
    },
    #[error("pass '{pass}': {message}")]
    Failed { pass: &'static str, message: String },
}

/// A registered pass: its name, what it does, and how to make one.
pub struct PassInfo {
    pub name: &'static str,
    pub description: &'static str,
    pub make: fn() -> Box<dyn Pass>,
}

/// Every pass `--passes` can name, in a stable order.
pub fn registry() -> Vec<PassInfo> {
    vec![
        PassInfo {
            name: "cse",
            description: "common-subexpression elimination: merges instructions with the same op, attributes and operands",
            make: || Box::new(crate::Cse),
        },
        PassInfo {
            name: "dce",
            description: "dead-code elimination: removes instructions the root does not need and computations nothing calls",
            make: || Box::new(crate::Dce),
        },
    ]
}
