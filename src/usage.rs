//! What kind of mistake a usage error is: options, inputs or files that
//! the caller gave and hlatc refuses, by category, as polars-error sorts
//! its errors. The message says what and where; the category lets a
//! caller (and a test) tell a value out of range from two options that do
//! not fit together without reading the sentence. Python raises each as
//! `UsageError` with `category` set to [`UsageKind::name`].

/// A usage error's category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageKind {
    /// A value outside the range its option or input takes.
    OutOfRange,
    /// Options, or an option and what it is given, that do not fit
    /// together.
    Conflict,
    /// Something hlatc does not do (on this target, or yet).
    Unsupported,
    /// A name, tensor or program asked for that is not there.
    NotFound,
    /// Input that is not what it should be: a shape, a file that is not
    /// the kind it should be, a malformed argument.
    Invalid,
}

impl UsageKind {
    pub const ALL: [UsageKind; 5] = [
        UsageKind::OutOfRange,
        UsageKind::Conflict,
        UsageKind::Unsupported,
        UsageKind::NotFound,
        UsageKind::Invalid,
    ];

    /// Its name as Python's `UsageError.category` gives it.
    pub fn name(self) -> &'static str {
        match self {
            UsageKind::OutOfRange => "out_of_range",
            UsageKind::Conflict => "conflict",
            UsageKind::Unsupported => "unsupported",
            UsageKind::NotFound => "not_found",
            UsageKind::Invalid => "invalid",
        }
    }
}

/// A usage error: its category and its message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Usage {
    pub kind: UsageKind,
    pub message: String,
}
