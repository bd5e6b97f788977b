//! An error's code: which error it is, as a path of names from the broadest
//! group to the case (`artifact.identity.changed`, `usage.out_of_range`,
//! `option.seq_len`). The CLI prints it in front of the message
//! (`error[artifact.identity.changed]: ...`), as rustc prints its codes, so
//! a script (and a test) tells one refusal from another without reading
//! the sentence, which may be reworded.
//!
//! Each name is a variant of the typed error that raised it, in snake
//! case: the path follows the wrappers down to the case. A usage error
//! ends in its [`UsageKind`](crate::usage::UsageKind) and an option's
//! refusal in the option's typed name (its Python keyword).
//!
//! [`every_code`](crate::every_error_code::every_code) lists every code
//! the walk can give, from the same names: `docs/src/cli.md` shows that
//! list, checked against it.

use crate::Error;
use std::fmt;

/// An error's code; see the module's comment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorCode(Vec<String>);

impl ErrorCode {
    /// Its names, from the broadest group to the case.
    pub fn parts(&self) -> &[String] {
        &self.0
    }

    fn push(&mut self, name: impl Into<String>) -> &mut Self {
        self.0.push(name.into());
        self
    }

    /// The variant `e` is, by its name (each error enum the code descends
    /// into derives `strum::IntoStaticStr` and `strum::VariantNames`, so
    /// [`every_code`](crate::every_error_code::every_code) lists the same
    /// names).
    fn variant<T>(&mut self, e: &T) -> &mut Self
    where
        for<'a> &'a T: Into<&'static str>,
    {
        let name: &'static str = e.into();
        self.push(snake_case(name))
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// `OutOfRange` as `out_of_range`: a variant's name as a code names it.
pub fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl Error {
    /// Which error this is; see [`ErrorCode`].
    pub fn code(&self) -> ErrorCode {
        let mut code = ErrorCode(Vec::new());
        facade(self, &mut code);
        code
    }
}

/// The code of a per-rank checkpoint's error (`hlatc.jax.Trainer`'s
/// checkpoints, which the Python API reads and writes and no command does,
/// so no [`Error`] wraps it): `sharded_checkpoint.` and the case, a tensor
/// file's under `tensors` (`sharded_checkpoint.tensors.io`).
pub fn sharded_checkpoint(
    e: &hlatc_artifacts::checkpoint::sharded::ShardedCheckpointError,
) -> ErrorCode {
    use hlatc_artifacts::checkpoint::sharded::ShardedCheckpointError as S;
    let mut code = ErrorCode(Vec::new());
    code.push("sharded_checkpoint").variant(e);
    if let S::Tensors(x) = e {
        code.variant(x);
    }
    code
}

fn facade(e: &Error, code: &mut ErrorCode) {
    match e {
        Error::Usage(u) => {
            code.push("usage").push(u.kind.name());
        }
        Error::Option(o) => {
            code.push("option").push(o.option.keyword());
        }
        Error::Artifact(a) => artifact(a, code.push("artifact")),
        Error::Train(t) => train(t, code),
        Error::NotWritten { source, .. } => train(source, code.push("not_written")),
        Error::RankInputs { source, .. } => artifact(source, code.push("rank_inputs")),
        Error::Plan(p) => plan(p, code.push("plan")),
        // A chip for a target that has none: two options that do not fit
        // together.
        Error::Chip(_) => {
            code.push("usage")
                .push(crate::usage::UsageKind::Conflict.name());
        }
        Error::Kernel(k) => {
            // A kernel file's error, by its case (`kernel.imported.json`).
            use hlatc_step::kernel_choice::KernelChoiceError as K;
            code.variant(e).variant(k);
            if let K::Imported(x) = k {
                code.variant(x);
            }
        }
        Error::RunCheckpoint(r) => {
            use crate::fit::checkpoints::RunCheckpointError as R;
            code.push("run_checkpoint").variant(r);
            match r {
                R::Dir(x) => code.variant(x),
                R::Lock(x) => code.variant(x),
                R::Identity(x) => code.variant(x),
                R::Metrics(x) => code.variant(x),
                _ => code,
            };
        }
        _ => {
            // A variant of the facade's own, and the case of the typed
            // error it wraps, if any.
            let case: Option<&'static str> = match e {
                Error::RunModule { source, .. } => Some(source.into()),
                Error::Metrics(x) => Some(x.into()),
                Error::StateLayout(x) => Some(x.into()),
                Error::Tensor { source, .. } => Some(source.into()),
                Error::Bind { source, .. } => Some(source.into()),
                Error::PassOn { source, .. } => Some(source.into()),
                Error::Plot { source, .. } => Some(source.into()),
                _ => None,
            };
            code.variant(e);
            if let Some(case) = case {
                code.push(snake_case(case));
            }
        }
    }
}

fn artifact(e: &hlatc_artifacts::Error, code: &mut ErrorCode) {
    use hlatc_artifacts::Error as A;
    code.variant(e);
    match e {
        A::Tensors(x) => code.variant(x),
        A::Config(x) => code.variant(x),
        A::Step(x) => code.variant(x),
        A::Pass(x) => code.variant(x),
        A::Batch(x) => code.variant(x),
        A::Checkpoint(x) => code.variant(x),
        A::State(x) => code.variant(x.as_ref()),
        A::Identity(x) => code.variant(x),
        A::Lock(x) => code.variant(x),
        A::StateMetadata(x) => code.variant(x),
        _ => code,
    };
}

fn train(e: &hlatc_train::Error, code: &mut ErrorCode) {
    use hlatc_train::Error as T;
    let case: &'static str = match e {
        T::Artifact(a) => return artifact(a, code.push("artifact")),
        T::Runtime(x) => x.into(),
        T::Loader(x) => x.into(),
        T::Verification(x) => x.into(),
        T::Run(x) => x.into(),
    };
    code.variant(e).push(snake_case(case));
}

fn plan(e: &crate::plan::PlanError, code: &mut ErrorCode) {
    use crate::plan::PlanError as P;
    code.variant(e);
    match e {
        P::Option { option, .. } => {
            code.push(option.keyword());
        }
        P::RunRefused { field, .. } => {
            code.push(*field);
        }
        P::Compile { source, .. } => facade(source, code),
        P::Chart(x) => {
            code.variant(x);
        }
        _ => {}
    }
}
