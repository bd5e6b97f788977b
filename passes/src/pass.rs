//! What a pass is, and how one fails.

use crate::annotate_rounding::RoundingLoweringError;
use crate::context::PassContext;
use crate::rewriter::RewriteError;
use hlatc_compiler::{Module, VerifyError};

/// A transformation of a module. Like XLA's HloPassInterface: it has a name
/// and reports whether it changed anything. It must keep the program's
/// meaning: the same numbers on XLA CPU with the pass on and off.
pub trait Pass {
    fn name(&self) -> &str;
    fn run(&self, module: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError>;
    /// The registry name that makes this pass again (a fixpoint wrapper
    /// gives its pass's), for recording a pipeline so it can be rebuilt.
    fn registered_name(&self) -> &str {
        self.name()
    }
    /// Whether the pass keeps dynamic dimensions as they are: it builds no
    /// shape from inference (which gives bounds, not which dimensions are
    /// dynamic), or leaves dynamic instructions alone. A pipeline of such
    /// passes runs over a module with dynamic dimensions; any other
    /// refuses one.
    fn keeps_dynamic_dimensions(&self) -> bool {
        false
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PassError {
    #[error("unknown pass '{name}' (known passes: {known})")]
    UnknownPass { name: String, known: String },
    /// The module fails `checker` before any pass ran (blamed on the
    /// entry, `entry`, since no pass is to blame).
    #[error("the module does not verify before the first pass: computation '{entry}': {checker}: {source}")]
    InvalidInput {
        entry: String,
        checker: &'static str,
        #[source]
        source: Box<VerifyError>,
    },
    #[error("pass '{pass}' produced a module that breaks invariant '{checker}': {source}")]
    BrokeModule {
        pass: String,
        checker: &'static str,
        #[source]
        source: Box<VerifyError>,
    },
    #[error("pass '{pass}' did not reach a fixpoint in {iterations} iterations")]
    NoFixpoint { pass: String, iterations: usize },
    #[error("pass '{pass}': {source}")]
    Rewrite {
        pass: String,
        #[source]
        source: Box<RewriteError>,
    },
    /// `annotate-rounding` could not lower stochastic rounding for cpu.
    #[error("pass '{pass}': {source}")]
    RoundingLowering {
        pass: String,
        #[source]
        source: Box<RoundingLoweringError>,
    },
    #[error("pass '{pass}': {message}")]
    Failed { pass: String, message: String },
    #[error(
        "passes do not track dynamic dimensions yet: computation '{computation}', instruction '{instruction}' is {shape}"
    )]
    DynamicDimensions {
        computation: String,
        instruction: String,
        shape: String,
    },
}

impl PassError {
    pub fn rewrite(pass: &str) -> impl FnOnce(RewriteError) -> PassError + '_ {
        move |source| PassError::Rewrite {
            pass: pass.to_string(),
            source: Box::new(source),
        }
    }
}
