//! Why a window or a convolution's dimension numbers are refused: as text
//! (`window={...}`, `dim_labels=...`) or for what they would compute.
//! Each variant keeps what was written; the text parser adds where.

/// What is wrong with a `window={...}` as written, or with a window over
/// an input of a given size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// A window that would not move, or move backwards.
    #[error("window size {size} and stride {stride} must be positive")]
    NotPositive { size: i64, stride: i64 },
    /// A dilation of 0 would stack every element on one place.
    #[error(
        "window dilations must be at least 1, got lhs_dilate {base_dilation} and rhs_dilate {window_dilation}"
    )]
    Dilation {
        base_dilation: i64,
        window_dilation: i64,
    },
    /// The dilated, padded input or window overflows an `i64`.
    #[error("window over {base} elements is too large")]
    TooLarge { base: i64 },
    /// Negative padding that takes away more than the dilated input has.
    #[error("padding {low}_{high} leaves fewer than no elements of {base}")]
    Overpadded { low: i64, high: i64, base: i64 },
    #[error("window item '{0}' is not key=value")]
    NotKeyValue(String),
    #[error("window gives '{0}' twice")]
    Twice(String),
    /// Something is written, but not how large the window is.
    #[error("window needs 'size='")]
    NoSize,
    /// An item gives a different number of dimensions than `size=`.
    #[error("window '{key}' has {entries} entries, 'size' has {sizes}")]
    EntryCount {
        key: String,
        entries: usize,
        sizes: usize,
    },
    #[error("window {key} '{written}' is not an integer")]
    NotInteger { key: &'static str, written: String },
    #[error("window rhs_reversal '{0}' must be 0 or 1")]
    Reversal(String),
    #[error("window pad '{0}' is not low_high")]
    Pad(String),
    #[error("unknown window item '{0}' (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal)")]
    UnknownItem(String),
}

/// What is wrong with a `dim_labels=` as written, or with dimension
/// numbers it could not spell. `operand` is `input`, `kernel` or
/// `output`; `labels` is that operand's part of the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DimLabelsError {
    #[error("dim_labels '{0}' needs '->'")]
    NoArrow(String),
    #[error("dim_labels '{0}' needs '_' between input and kernel")]
    NoUnderscore(String),
    /// A convolution slides over the same dimensions of all three.
    #[error(
        "dim_labels '{0}' give input, kernel and output different numbers of spatial dimensions"
    )]
    SpatialCounts(String),
    /// Fewer labels (not counting `?`) than the operand's two roles.
    #[error("{operand} labels '{labels}' need at least the two roles {roles:?}")]
    TooFew {
        operand: &'static str,
        labels: String,
        roles: [char; 2],
    },
    /// A label that is neither role nor a digit below the number of
    /// spatial dimensions the labels leave room for.
    #[error(
        "{operand} labels '{labels}': '{label}' is neither {} nor {} nor a spatial dimension below {spatial}",
        .roles[0],
        .roles[1]
    )]
    Unknown {
        operand: &'static str,
        labels: String,
        label: char,
        roles: [char; 2],
        spatial: usize,
    },
    #[error("{operand} labels '{labels}' name '{label}' twice")]
    Twice {
        operand: &'static str,
        labels: String,
        label: char,
    },
    /// A role no label names. Like [`DimLabelsError::MissingSpatial`],
    /// it cannot follow once the labels pass the checks above (as many
    /// labels as roles and spatial dimensions, none unknown or twice);
    /// said rather than assumed, so a slip there is an error, not a panic.
    #[error("{operand} labels '{labels}' have no '{label}'")]
    MissingRole {
        operand: &'static str,
        labels: String,
        label: char,
    },
    /// A spatial dimension no digit names.
    #[error("{operand} labels '{labels}' have no '{spatial}'")]
    MissingSpatial {
        operand: &'static str,
        labels: String,
        spatial: usize,
    },
    /// Only digits spell spatial dimensions.
    #[error("{operand} has {count} spatial dimensions; dim_labels spells at most 10")]
    TooManySpatial { operand: &'static str, count: usize },
    #[error("{operand} dimension {dim} is out of range for rank {rank} or named twice")]
    Misplaced {
        operand: &'static str,
        dim: i64,
        rank: usize,
    },
}
