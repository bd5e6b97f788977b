//! What a shape rule refuses, as data: [`ShapeError`] says which kind of
//! contract broke (an element type, the operands' shapes, a dimension
//! number, an attribute, a split, a callee, the declared result, an
//! operand's form), and each kind's own enum says which rule, with the
//! opcode, types, shapes, dimensions and counts it was checked on. The
//! messages are the ones the golden filetests hold, word for word.
//!
//! Kinds that carry shapes or lists are boxed, so that a shape rule's
//! `Result` is not the size of its largest error.

use crate::ir::collective::ReplicaGroupsError;
use crate::ir::computation::CalleeSignature;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::{
    ComparisonDirection, ComparisonType, DotDims, FftType, Opcode, OperandAlias, RngAlgorithm,
    RngDistribution,
};
use crate::ir::shape::{ArrayShape, ElementType, Shape};
use crate::ir::window::{DimLabelsError, WindowError};

/// How many operands an op takes, as its rule states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandRule {
    Exactly(usize),
    AtLeastOne,
    /// A ragged all-to-all: input, output and the two offset lists.
    RaggedAllToAll,
    /// A conditional: the selector and `branches` operands.
    SelectorAndBranches {
        branches: usize,
    },
    /// A dynamic reshape of a rank not yet known.
    OneSizePerDimension,
    /// A dynamic reshape to `rank` dimensions.
    OneSizePerDimensionOf {
        rank: usize,
    },
    /// A scatter: inputs, indices, updates.
    ScatterOperands,
    /// A dynamic slice of a rank not yet known.
    OnePlusRank,
    /// A dynamic update slice of a rank not yet known.
    TwoPlusRank,
    /// A dynamic (update) slice: `fixed` operands then a start index per
    /// dimension of `rank`.
    StartIndices {
        fixed: usize,
        rank: usize,
    },
    /// A variadic reduce: inputs, then as many inits.
    InputsThenInits,
}

impl std::fmt::Display for OperandRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            OperandRule::Exactly(n) => write!(f, "{n}"),
            OperandRule::AtLeastOne => f.write_str("at least 1"),
            OperandRule::RaggedAllToAll => {
                f.write_str("4 (input, output, input offsets, output offsets) in place")
            }
            OperandRule::SelectorAndBranches { branches } => {
                write!(f, "{} (the selector and one per branch)", branches + 1)
            }
            OperandRule::OneSizePerDimension => f.write_str("1 + one size per result dimension"),
            OperandRule::OneSizePerDimensionOf { rank } => {
                write!(f, "{} (1 + one size per result dimension)", 1 + rank)
            }
            OperandRule::ScatterOperands => {
                f.write_str("an odd number, at least 3 (inputs, indices, updates)")
            }
            OperandRule::OnePlusRank => f.write_str("1 + rank"),
            OperandRule::TwoPlusRank => f.write_str("2 + rank"),
            OperandRule::StartIndices { fixed, rank } => {
                write!(
                    f,
                    "{} ({fixed} + one start index per dimension)",
                    fixed + rank
                )
            }
            OperandRule::InputsThenInits => f.write_str("an even number (inputs, then inits)"),
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ShapeError {
    #[error("expects {expected} operand(s), got {got}")]
    OperandCount { expected: OperandRule, got: usize },
    /// Boxed: every shape rule's result should not be the size of a shape.
    #[error("operand {index} must be an array, got {shape}")]
    TupleOperand { index: usize, shape: Box<Shape> },
    /// A collective's groups are malformed. Boxed: every shape rule's
    /// result should not be the size of its largest error.
    #[error(transparent)]
    ReplicaGroups(Box<ReplicaGroupsError>),
    #[error("needs an explicit result shape")]
    NeedsResultShape,
    /// Only a module built in code can call an id it does not hold: the
    /// readers resolve every name they read.
    #[error("calls unknown computation {}", .0.describe())]
    UnknownComputation(ComputationId),
    /// An unbounded dimension (`?`) on an op that has no rule over one.
    #[error("{0} has an unbounded dimension (?), which hlatc reads on parameters, custom calls, tuples and get-tuple-element only: no other op has a shape rule over one")]
    Unbounded(Box<Shape>),
    /// An element type an op does not accept, or types that must agree
    /// and do not.
    #[error(transparent)]
    Type(TypeError),
    /// Operand (or operand and result) dimensions that differ or do not
    /// fit together.
    #[error(transparent)]
    Shapes(Box<ShapesError>),
    /// A dimension number out of range, repeated, unsorted, or in two
    /// lists that must be disjoint.
    #[error(transparent)]
    Dimension(Box<DimensionError>),
    /// An attribute with the wrong number of entries or a value out of
    /// its range.
    #[error(transparent)]
    Attribute(Box<AttributeError>),
    /// A size that does not split into the pieces an op makes of it.
    #[error(transparent)]
    Split(Box<SplitError>),
    /// A called computation whose signature is not the one the op needs.
    #[error(transparent)]
    Callee(Box<CalleeError>),
    /// A declared result shape that is not of the form the op gives.
    #[error(transparent)]
    Declared(Box<DeclaredError>),
    /// An operand that is not of the form the op takes (a tuple, a token,
    /// a transfer in flight, an index, ...).
    #[error(transparent)]
    Operand(Box<OperandError>),
    /// A window that does not fit its input.
    #[error(transparent)]
    Window(Box<WindowError>),
    /// A custom call's `dim_labels` that cannot spell its dimension
    /// numbers.
    #[error("dim_labels: {0}")]
    DimLabels(Box<DimLabelsError>),
}

impl From<TypeError> for ShapeError {
    fn from(e: TypeError) -> Self {
        ShapeError::Type(e)
    }
}

macro_rules! boxed_kind {
    ($($kind:ident => $variant:ident),* $(,)?) => {
        $(
            impl From<$kind> for ShapeError {
                fn from(e: $kind) -> Self {
                    ShapeError::$variant(Box::new(e))
                }
            }
        )*
    };
}

boxed_kind! {
    ShapesError => Shapes,
    DimensionError => Dimension,
    AttributeError => Attribute,
    SplitError => Split,
    CalleeError => Callee,
    DeclaredError => Declared,
    OperandError => Operand,
    WindowError => Window,
    DimLabelsError => DimLabels,
}

/// Element types: one an op does not accept, or two that must agree.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum TypeError {
    /// The op's own list of types leaves this one out.
    #[error("{opcode} does not accept {ty}")]
    NotAccepted { opcode: Opcode, ty: ElementType },
    /// Two operands that must share an element type.
    #[error("{opcode}: element types differ ({lhs} vs {rhs})")]
    Differ {
        opcode: Opcode,
        lhs: ElementType,
        rhs: ElementType,
    },
    /// A collective's operands, which its one reducer combines.
    #[error("{opcode} operands must share one element type (the reducer's), got {ty} and {other}")]
    CollectiveOperands {
        opcode: Opcode,
        ty: ElementType,
        other: ElementType,
    },
    /// A dot or convolution of two types, whose result type is unwritten.
    #[error("a {opcode} of {lhs} and {rhs} needs its result type written")]
    Unwritten {
        opcode: Opcode,
        lhs: ElementType,
        rhs: ElementType,
    },
    /// A `compare`'s `type=` that does not apply to its operands.
    #[error("comparison type {} does not apply to {ty}", .kind.name())]
    Comparison {
        kind: ComparisonType,
        ty: ElementType,
    },
    /// Complex values have no order: only EQ and NE compare them.
    #[error("compare of {ty} values can only be EQ or NE, got {}", .direction.name())]
    UnorderedComplex {
        ty: ElementType,
        direction: ComparisonDirection,
    },
    /// `select`'s predicate, which is pred.
    #[error("select predicate must be pred, got {0}")]
    Predicate(ElementType),
    /// `stochastic-convert` of anything but a float.
    #[error("stochastic-convert converts floats, got {0}")]
    StochasticConvert(ElementType),
    /// `stochastic-convert`'s random bits: unsigned, of the value's width.
    #[error("stochastic-convert of {ty} takes random bits as u{}, got {bits}", .ty.bit_width())]
    RandomBits { ty: ElementType, bits: ElementType },
    /// `reduce-precision` of anything but a float.
    #[error("reduce-precision rounds floats, got {0}")]
    ReducePrecision(ElementType),
    /// A `convert` from complex to real.
    #[error("convert from {from} to {to} would drop the imaginary part; use real or imag")]
    DropsImaginary { from: ElementType, to: ElementType },
    /// A `bitcast-convert` between a complex and a real type.
    #[error("bitcast-convert between complex and real types ({from} to {to})")]
    BitcastComplexReal { from: ElementType, to: ElementType },
    /// A `bitcast-convert` between complex types of two widths.
    #[error("bitcast-convert between complex types of different widths ({from} to {to})")]
    BitcastComplexWidths { from: ElementType, to: ElementType },
    /// A `bitcast` from or to pred, but not both.
    #[error("bitcast between pred and another type")]
    BitcastPred { from: ElementType, to: ElementType },
    /// An `iota` of pred.
    #[error("iota cannot produce pred")]
    IotaPred,
    /// An `rng` distribution that cannot give the declared type.
    #[error("{} cannot produce {ty}", .distribution.name())]
    Rng {
        distribution: RngDistribution,
        ty: ElementType,
    },
    /// Gather's and scatter's indices, which are integers.
    #[error("{opcode} indices must be integers, got {ty}")]
    Indices { opcode: Opcode, ty: ElementType },
    /// Start indices of two types.
    #[error("start indices must all have one type: index 0 is {first}, index {index} is {ty}")]
    StartIndices {
        first: ElementType,
        index: usize,
        ty: ElementType,
    },
    /// A complex transform (FFT, IFFT, IRFFT) of real values.
    #[error("{} transforms complex values, got {ty}", .fft_type.name())]
    FftComplex { fft_type: FftType, ty: ElementType },
    /// An RFFT of anything but f32 or f64.
    #[error("RFFT transforms f32 or f64, got {0}")]
    Rfft(ElementType),
    /// A batch normalization of anything but floats.
    #[error("{opcode} normalizes floats, got {operand}")]
    BatchNorm {
        opcode: Opcode,
        operand: Box<ArrayShape>,
    },
    /// A `dynamic-reshape` to another element type.
    #[error("dynamic-reshape of {operand} cannot give {ty}")]
    DynamicReshape {
        operand: Box<ArrayShape>,
        ty: ElementType,
    },
}

/// Operand (or operand and result) shapes that differ where the op needs
/// them alike, or do not fit together as it combines them.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum ShapesError {
    /// An elementwise op's two operands.
    #[error("operand dimensions differ: {lhs} vs {rhs}")]
    OperandDims {
        opcode: Opcode,
        lhs: ArrayShape,
        rhs: ArrayShape,
    },
    /// Operands of one shape (`what`: `inputs` of a reduction, `operands`
    /// of a map or sort), two of them as the message orders them.
    #[error("{opcode} {what} differ in dimensions: {lhs} vs {rhs}")]
    Differ {
        opcode: Opcode,
        what: &'static str,
        lhs: ArrayShape,
        rhs: ArrayShape,
    },
    #[error("select branches differ: {on_true} vs {on_false}")]
    SelectBranches {
        on_true: ArrayShape,
        on_false: ArrayShape,
    },
    /// A predicate neither scalar nor of the branches' dimensions.
    #[error("select predicate {predicate} does not match branches {branches}")]
    SelectPredicate {
        predicate: ArrayShape,
        branches: ArrayShape,
    },
    /// A bound (`min` or `max`) neither scalar nor of the operand's
    /// dimensions.
    #[error("clamp {bound} {shape} does not match operand {operand}")]
    ClampBound {
        bound: &'static str,
        shape: ArrayShape,
        operand: ArrayShape,
    },
    #[error("concatenate operand {index} {operand} does not match {first}")]
    Concatenate {
        index: usize,
        operand: ArrayShape,
        first: ArrayShape,
    },
    #[error("convert changes dimensions: {operand} to {result}")]
    Convert {
        operand: ArrayShape,
        result: ArrayShape,
    },
    #[error("stochastic-convert of {operand} needs random bits and a result of its dimensions, got {random} and {result}")]
    StochasticConvert {
        operand: ArrayShape,
        random: ArrayShape,
        result: ArrayShape,
    },
    /// A narrowing `bitcast-convert`, whose last dimension is the ratio
    /// of the widths.
    #[error("bitcast-convert from {operand} to {to} needs a last dimension of {size}")]
    BitcastConvert {
        operand: ArrayShape,
        to: ElementType,
        size: usize,
    },
    #[error("bitcast from {operand} ({operand_bytes} bytes) to {result} ({result_bytes} bytes) changes the byte size")]
    BitcastBytes {
        operand: ArrayShape,
        operand_bytes: i64,
        result: ArrayShape,
        result_bytes: i64,
    },
    #[error("reshape changes the element count: {operand} to {result}")]
    ReshapeCount {
        operand: ArrayShape,
        result: ArrayShape,
    },
    #[error("broadcast operand dimension {operand_dim} (size {operand_size}) does not match result dimension {result_dim} (size {result_size})")]
    Broadcast {
        operand_dim: usize,
        operand_size: i64,
        result_dim: i64,
        result_size: i64,
    },
    /// A `dynamic-update-slice` update of another rank or larger than the
    /// operand.
    #[error("update {update} does not fit in {operand}")]
    Update {
        update: ArrayShape,
        operand: ArrayShape,
    },
    #[error("padding value must be a scalar, got {0}")]
    PaddingValue(ArrayShape),
    /// An op that needs a dimension to work along (`topk`,
    /// `select-and-scatter`) given a scalar.
    #[error("{opcode} needs an operand of rank 1 or more, got {operand}")]
    Scalar { opcode: Opcode, operand: ArrayShape },
    #[error(
        "{opcode} needs float or complex square matrices in the last two dimensions, got {operand}"
    )]
    SquareMatrices { opcode: Opcode, operand: ArrayShape },
    #[error(
        "triangular-solve of {a} needs a right-hand side of its type and batch dimensions, got {b}"
    )]
    TriangularSolveBatch { a: ArrayShape, b: ArrayShape },
    #[error("triangular-solve of {a} from the {} needs {size} there in {b}", side(*.left_side))]
    TriangularSolveSide {
        a: ArrayShape,
        b: ArrayShape,
        left_side: bool,
        size: i64,
    },
    /// A batch or contracting dimension of two sizes.
    #[error("dot dimension sizes differ: lhs dim {lhs_dim} is {lhs_size}, rhs dim {rhs_dim} is {rhs_size}")]
    DotSizes {
        lhs_dim: i64,
        lhs_size: i64,
        rhs_dim: i64,
        rhs_size: i64,
    },
    #[error("ragged-dot has {groups} groups in {group_sizes}, but rhs dimension {dimension} of {rhs} holds {held}")]
    RaggedGroups {
        groups: i64,
        group_sizes: ArrayShape,
        dimension: i64,
        rhs: ArrayShape,
        held: i64,
    },
    #[error(
        "convolution window size {size} in spatial dimension {dimension}, the kernel has {kernel}"
    )]
    ConvolutionWindow {
        size: i64,
        dimension: usize,
        kernel: i64,
    },
    #[error(
        "select-and-scatter's source must have one value per window, {expected}, got {source_operand}"
    )]
    SelectAndScatterSource {
        expected: Shape,
        source_operand: ArrayShape,
    },
    #[error("scatter inputs and updates each share one shape: {input} and {update} beside {first_input} and {first_update}")]
    Scatter {
        input: ArrayShape,
        update: ArrayShape,
        first_input: ArrayShape,
        first_update: ArrayShape,
    },
    #[error("updates {updates} have rank {}, but {scatter} scatter and {window} window dimensions are needed", .updates.rank())]
    UpdatesRank {
        updates: ArrayShape,
        scatter: usize,
        window: usize,
    },
    #[error("update window dimension {update_dim} ({update_size}) is larger than operand dimension {operand_dim} ({operand_size})")]
    UpdateWindow {
        update_dim: i64,
        update_size: i64,
        operand_dim: i64,
        operand_size: i64,
    },
    #[error("the scatter dimensions of updates {updates} do not match indices {indices}")]
    ScatterIndices {
        updates: ArrayShape,
        indices: ArrayShape,
    },
    #[error(
        "ragged-all-to-all moves rows of one shape and type, got input {input} and output {output}"
    )]
    RaggedRows {
        input: ArrayShape,
        output: ArrayShape,
    },
    #[error(
        "get-dimension-size of dimension {dimension} of {operand}: its size does not fit in s32"
    )]
    DimensionSize {
        dimension: usize,
        operand: ArrayShape,
    },
    #[error("{} of {rank} dimensions needs an operand of rank {rank} or more, got {operand}", .fft_type.name())]
    FftRank {
        fft_type: FftType,
        rank: usize,
        operand: ArrayShape,
    },
    /// The innermost dimensions an FFT transforms, which `fft_length`
    /// gives.
    #[error("{} with fft_length={fft_length:?} needs those innermost dimensions, got {operand}", .fft_type.name())]
    FftLength {
        fft_type: FftType,
        fft_length: Vec<i64>,
        operand: ArrayShape,
    },
    #[error("IRFFT of length {length} needs {frequencies} frequencies in the last dimension of {operand}")]
    IrfftFrequencies {
        length: i64,
        frequencies: i64,
        operand: ArrayShape,
    },
    /// A per-feature operand (scale, offset, mean, ...) that is not a
    /// vector of the feature count.
    #[error(
        "{opcode} operand {index} must be {ty}[{features}], one entry per feature, got {operand}"
    )]
    PerFeature {
        opcode: Opcode,
        index: usize,
        ty: ElementType,
        features: i64,
        operand: ArrayShape,
    },
    #[error("{opcode}'s output gradient must have the operand's shape {operand}, got {gradient}")]
    OutputGradient {
        opcode: Opcode,
        operand: ArrayShape,
        gradient: ArrayShape,
    },
}

fn side(left_side: bool) -> &'static str {
    if left_side {
        "left"
    } else {
        "right"
    }
}

/// Dimension numbers: out of range, repeated, unsorted, or shared by two
/// lists that must be disjoint.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum DimensionError {
    /// `what` names the list (`broadcast`, `lhs`, `collapsed_slice`, ...).
    #[error("{what} dimension {dimension} out of range for rank {rank}")]
    OutOfRange {
        what: &'static str,
        dimension: i64,
        rank: usize,
    },
    #[error("{what} dimension {dimension} repeated")]
    Repeated { what: &'static str, dimension: i64 },
    /// An op's one dimension, against the operand it indexes.
    #[error("{opcode} dimension {dimension} out of range for {operand}")]
    OutOfRangeOf {
        opcode: Opcode,
        dimension: i64,
        operand: ArrayShape,
    },
    #[error("iota_dimension {dimension} out of range for rank {rank}")]
    Iota { dimension: i64, rank: usize },
    /// A dimension attribute (`inferred_dimension`, `feature_index`)
    /// that the shape does not have.
    #[error("{opcode}'s {attribute} {dimension} is not a dimension of {shape}")]
    NotADimension {
        opcode: Opcode,
        attribute: &'static str,
        dimension: i64,
        shape: ArrayShape,
    },
    #[error("{what} dims {dims:?} must be sorted ascending")]
    Unsorted { what: &'static str, dims: Vec<i64> },
    /// `lists` names the two lists.
    #[error("dimension {dimension} is in both {lists}")]
    InBoth { dimension: i64, lists: &'static str },
    #[error("{opcode} index_vector_dim {dimension} out of range for indices {indices}")]
    IndexVector {
        opcode: Opcode,
        dimension: i64,
        indices: ArrayShape,
    },
    #[error("{what} includes index_vector_dim {dimension}")]
    BatchingIndexVector { what: &'static str, dimension: i64 },
    #[error(
        "ragged-dot's rhs group dimension {dimension} is also a batch or contracting dimension"
    )]
    RaggedGroup { dimension: i64 },
    /// A convolution's label (`what`: input, kernel or output) out of
    /// range or named twice.
    #[error("convolution {what} dimension {dimension} is out of range or named twice")]
    ConvolutionLabel { what: &'static str, dimension: i64 },
    #[error("convolution output dimension {dimension} is out of range")]
    ConvolutionOutput { dimension: i64 },
}

/// An attribute with the wrong number of entries, or a value out of its
/// range.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AttributeError {
    #[error("parameter number {0} is negative")]
    NegativeParameter(i64),
    #[error(
        "broadcast dimensions {dimensions:?} must have one entry per operand dimension ({rank})"
    )]
    BroadcastDims { dimensions: Vec<i64>, rank: usize },
    #[error("transpose permutation {permutation:?} does not match rank {rank}")]
    Permutation { permutation: Vec<i64>, rank: usize },
    #[error("slice has {ranges} ranges for rank {rank}")]
    SliceRanges { ranges: usize, rank: usize },
    #[error(
        "slice range [{start}:{limit}:{stride}] invalid for dimension {dimension} of size {size}"
    )]
    SliceRange {
        start: i64,
        limit: i64,
        stride: i64,
        dimension: usize,
        size: i64,
    },
    #[error("slice stride {stride} of dimension {dimension} is too large")]
    SliceStride { stride: i64, dimension: usize },
    /// `dynamic_slice_sizes` or gather's `slice_sizes`: one per operand
    /// dimension, each within it.
    #[error("{attribute} {sizes:?} invalid for {operand}")]
    SliceSizes {
        attribute: &'static str,
        sizes: Vec<i64>,
        operand: ArrayShape,
    },
    #[error("padding has {entries} dimensions for rank {rank}")]
    PaddingDims { entries: usize, rank: usize },
    #[error("interior padding must be non-negative")]
    NegativeInterior { interior: i64 },
    #[error("padding {low}_{high}_{interior} makes dimension of size {size} negative")]
    NegativePadding {
        low: i64,
        high: i64,
        interior: i64,
        size: i64,
    },
    #[error("topk k={k} must be between 0 and the last dimension of {operand}")]
    TopK { k: i64, operand: ArrayShape },
    #[error("reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0, got {exponent_bits} and {mantissa_bits}")]
    PrecisionBits {
        exponent_bits: i32,
        mantissa_bits: i32,
    },
    #[error("operand_precision needs one entry per operand")]
    OperandPrecision { entries: usize },
    #[error("dot needs as many lhs as rhs batch and contracting dimensions")]
    DotDims(DotDims),
    #[error("ragged-dot needs one lhs_ragged_dims, got {0:?}")]
    LhsRagged(Vec<i64>),
    #[error("a ragged-dot whose ragged dimension is contracted or a batch dimension takes no rhs_group_dims")]
    UnusedRhsGroup(Vec<i64>),
    #[error(
        "a ragged-dot whose ragged dimension is not contracted needs one rhs_group_dims, got {0:?}"
    )]
    RhsGroup(Vec<i64>),
    /// The convolution's labels of one operand (`what`), one per
    /// dimension.
    #[error("convolution {what} labels name {labels} dimensions, {operand} has {}", .operand.rank())]
    ConvolutionLabels {
        what: &'static str,
        labels: usize,
        operand: ArrayShape,
    },
    #[error("convolution dimension numbers give input, kernel and output {input}, {kernel} and {output} spatial dimensions")]
    SpatialCounts {
        input: usize,
        kernel: usize,
        output: usize,
    },
    #[error("convolution window has {window} dimensions, the labels {spatial} spatial ones")]
    ConvolutionWindow { window: usize, spatial: usize },
    #[error("feature_group_count {feature_groups} and batch_group_count {batch_groups} must be positive")]
    GroupCounts {
        feature_groups: i64,
        batch_groups: i64,
    },
    #[error("reduce-window window has {window} dimensions, its input {input} {}", .input.rank())]
    ReduceWindow { window: usize, input: ArrayShape },
    /// `start_index_map` or `scatter_dims_to_operand_dims`: one entry per
    /// index.
    #[error("{attribute} has {entries} entries but the index vector has {index_len}")]
    IndexMap {
        attribute: &'static str,
        entries: usize,
        index_len: i64,
    },
    #[error("{what}: {indices} batching dims on the indices but {operand} on the operand")]
    BatchingDims {
        what: &'static str,
        indices: usize,
        operand: usize,
    },
    #[error("dimension {dimension} is collapsed or batching, so its slice size must be 0 or 1, got {size}")]
    CollapsedSliceSize { dimension: i64, size: i64 },
    #[error("gather has {offset_dims} offset_dims but {slice_dims} uncollapsed slice dimensions")]
    OffsetDims {
        offset_dims: usize,
        slice_dims: usize,
    },
    #[error("scatter window, inserted and batching dims cover {covered} dimensions of rank-{rank} operand")]
    ScatterCover { covered: usize, rank: usize },
    #[error("map dimensions must be every dimension in order (0..{rank}), got {dimensions:?}")]
    MapDimensions { dimensions: Vec<i64>, rank: i64 },
    #[error("fft transforms 1 to 3 dimensions, fft_length has {0}")]
    FftLength(usize),
    #[error("use_global_device_ids=true needs a (positive) channel_id")]
    GlobalDeviceIds,
    /// `what`: `source` or `target`.
    #[error("collective-permute {what} {id} is negative")]
    NegativeDevice { what: &'static str, id: i64 },
    /// A device that sends or receives more than `allowed` times.
    #[error("collective-permute names {what} {id} {}", often(*.allowed))]
    RepeatedDevice {
        what: &'static str,
        id: i64,
        allowed: usize,
    },
    #[error("operand_layout_constraints lists {layouts} shapes for {operands} operands")]
    OperandLayouts { layouts: usize, operands: usize },
    #[error("operand_layout_constraints gives operand {index} as {layout}, but it is {operand}")]
    OperandLayout {
        index: usize,
        layout: Shape,
        operand: Shape,
    },
    #[error(
        "output_to_operand_aliasing {0} does not name an output and an operand part of one shape"
    )]
    Aliasing(OperandAlias),
    #[error("outfeed_shape {outfeed_shape} is not the shape of the data sent, {sent}")]
    OutfeedShape { outfeed_shape: Shape, sent: Shape },
}

fn often(allowed: usize) -> String {
    match allowed {
        1 => "twice".to_string(),
        n => format!("more than {n} times, once per transfer"),
    }
}

/// A size that does not split into the pieces an op makes of it.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SplitError {
    #[error("convolution input has {features} features in {groups} groups, the kernel takes {kernel} per group")]
    InputFeatures {
        features: i64,
        groups: i64,
        kernel: i64,
    },
    #[error("kernel's {features} output features do not split into {groups} feature groups")]
    KernelFeatures { features: i64, groups: i64 },
    #[error("batch {batch} and kernel's {features} output features must both split into {groups} batch groups")]
    BatchGroups {
        batch: i64,
        features: i64,
        groups: i64,
    },
    #[error("all-to-all splits dimension {dimension} of {operand} into {pieces} pieces, which does not divide it")]
    AllToAll {
        dimension: i64,
        operand: ArrayShape,
        pieces: i64,
    },
    /// An all-gather (`grow`) or reduce-scatter whose result is not the
    /// operand with one dimension multiplied (divided) by the group size,
    /// or by a multiple of it where the groups span partitions.
    #[error(
        "{opcode} of {operand} along dimension {dimension} cannot give {result}: dimension {dimension} is {} by {}, the rest stays",
        how(*.grow),
        by(*.group_size, *.spans_partitions)
    )]
    Resized {
        opcode: Opcode,
        operand: ArrayShape,
        dimension: usize,
        result: ArrayShape,
        grow: bool,
        group_size: Option<i64>,
        spans_partitions: bool,
    },
}

fn how(grow: bool) -> &'static str {
    if grow {
        "multiplied"
    } else {
        "divided"
    }
}

fn by(group_size: Option<i64>, spans_partitions: bool) -> String {
    match group_size {
        Some(g) if spans_partitions => format!("a multiple of {g}"),
        Some(g) => g.to_string(),
        None => "the group size".to_string(),
    }
}

/// A called computation whose signature is not the one the op needs.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CalleeError {
    /// The general rule: a reducer, comparator, mapped or scattered
    /// computation against the signature the op needs.
    #[error("'{callee}' has signature {} but {} is required", .found.text(), .required.text())]
    Signature {
        callee: String,
        found: CalleeSignature,
        required: CalleeSignature,
    },
    /// A `call`, `fusion` or `async-start` operand that is not its
    /// parameter's shape.
    #[error("{opcode} operand {index} is {operand} but '{callee}' expects {parameter}")]
    Operand {
        opcode: Opcode,
        index: usize,
        operand: Shape,
        callee: String,
        parameter: Shape,
    },
    #[error("while body '{callee}' must map the loop state {state} to itself, has signature {}", .signature.text())]
    WhileBody {
        callee: String,
        state: Shape,
        signature: CalleeSignature,
    },
    #[error("while condition '{callee}' must map the loop state {state} to pred[], has signature {}", .signature.text())]
    WhileCondition {
        callee: String,
        state: Shape,
        signature: CalleeSignature,
    },
    #[error("conditional needs at least one branch computation")]
    NoBranches,
    #[error("a conditional on a pred[] needs 2 branches, got {0}")]
    PredBranches(usize),
    #[error("conditional branch {index} '{callee}' must take its operand {operand}, has signature {}", .signature.text())]
    BranchParameter {
        index: usize,
        callee: String,
        operand: Shape,
        signature: CalleeSignature,
    },
    #[error("conditional branch {index} '{callee}' returns {result} but branch 0 '{first}' returns {first_result}")]
    BranchResult {
        index: usize,
        callee: String,
        result: Shape,
        first: String,
        first_result: Shape,
    },
    #[error("map computation '{callee}' must return a scalar, returns {result}")]
    MapResult { callee: String, result: Shape },
    #[error("scatter's reducer '{callee}' returns a one-element tuple; hlatc reads that only for reduce and reduce-window")]
    TupledScatterReducer { callee: String },
    /// An async op's bundle holds another result than its callee's.
    #[error("{opcode}'s bundle holds the result {held}, but '{callee}' returns {result}")]
    AsyncResult {
        opcode: Opcode,
        held: Shape,
        callee: String,
        result: Shape,
    },
}

/// A declared result shape that is not of the form the op gives.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum DeclaredError {
    #[error("result must be an array, declared {0}")]
    NotArray(Shape),
    #[error("{opcode} results must be arrays, declared {declared}")]
    NotArrays { opcode: Opcode, declared: Shape },
    #[error("{opcode} of {count} operands must declare {count} results, got {declared}")]
    ResultCount {
        opcode: Opcode,
        count: usize,
        declared: usize,
    },
    #[error("copy-start of {operand} gives (destination, source, u32[]), both {operand} up to layout; declared {declared}")]
    CopyStart { operand: Shape, declared: Shape },
    #[error("rng-bit-generator result must be (state, bits), got {0}")]
    RngBitGenerator(Shape),
    #[error("rng-bit-generator state result {result} must match {state}")]
    RngState { result: Shape, state: ArrayShape },
    #[error("rng-bit-generator output must be a u32 or u64 array, got {0}")]
    RngOutput(Shape),
    #[error("infeed's result must be (data, token[]), got {0}")]
    Infeed(Shape),
    /// An async collective start declared as anything but a tuple.
    #[error("an async collective start is the tuple (operands, results, ...); declare it")]
    CollectiveStart(Option<Shape>),
    #[error("an async collective start is the tuple (operands, results) or (operand, result, u32[], u32[]), declared {0} elements")]
    CollectiveStartParts(usize),
    #[error("an async collective start holds its operands {operands} first, declared {declared}")]
    CollectiveStartOperands { operands: Shape, declared: Shape },
    #[error("the collective gives {results} but its start declares {declared}")]
    CollectiveStartResults { results: Shape, declared: Shape },
    #[error("async-start's bundle begins with {declared}, but its operands are {operands}")]
    AsyncStartOperands { declared: Shape, operands: Shape },
}

/// An operand that is not of the form the op takes.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum OperandError {
    #[error("get-tuple-element needs a tuple operand, got {0}")]
    NotTuple(Shape),
    #[error("tuple index {index} out of range for {tuple}")]
    TupleIndex { index: i64, tuple: Shape },
    /// `what` says which operand (`send's operand 1`, ...).
    #[error("{what} must be a token, got {shape}")]
    NotToken { what: &'static str, shape: Shape },
    /// Data sent, received or fed (`what`) that holds a token.
    #[error("{what} cannot hold a token, got {shape}")]
    HoldsToken { what: &'static str, shape: Shape },
    /// A `-done` (or `recv`'s declared result, `what`) that is not a
    /// transfer in flight.
    #[error("{what} takes a transfer in flight, (data, u32[], token[]), got {shape}")]
    NotInFlight { what: &'static str, shape: Shape },
    #[error("copy-done takes a copy-start's (destination, source, u32[]), got {0}")]
    CopyDone(Shape),
    #[error("a collective done reads its start's tuple (operands, results), got {0}")]
    CollectiveDone(Shape),
    /// An async op's bundle (a start's declared one, an update's or
    /// done's operand) that is not `((operands), result, context...)`.
    #[error("{opcode} needs the async bundle ((operands), result, context...), got {bundle}")]
    AsyncBundle { opcode: Opcode, bundle: Shape },
    #[error(
        "a vector of start indices must be an integer array of the rank, {rank}, got {vector}"
    )]
    StartIndexVector { rank: usize, vector: ArrayShape },
    #[error("start index {index} must be an integer scalar, got {shape}")]
    StartIndex { index: usize, shape: ArrayShape },
    /// A reduction's init value, a scalar of its input's type.
    #[error("{opcode} init {init} must be a {ty} scalar")]
    Init {
        opcode: Opcode,
        init: ArrayShape,
        ty: ElementType,
    },
    #[error("select-and-scatter's init value must be {expected}, got {init}")]
    SelectAndScatterInit { expected: Shape, init: ArrayShape },
    #[error("ragged-dot's group sizes are an integer array, got {0}")]
    GroupSizes(ArrayShape),
    #[error("ragged-all-to-all's offsets and sizes are s32 or s64 arrays of rank 1 or 2 and one type, got {offsets} and operand {index} {operand}")]
    RaggedOffsets {
        offsets: ArrayShape,
        index: usize,
        operand: ArrayShape,
    },
    #[error("an all-to-all with a split dimension takes one operand, got {0}")]
    SplitAllToAll(usize),
    /// An in-place collective-permute's `what` (input or output) offsets,
    /// one per buffer.
    #[error("in-place collective-permute needs one {what} offset per {what} buffer, got {offset}")]
    InPlaceOffsets { what: &'static str, offset: Shape },
    #[error("in-place collective-permute needs input and output buffers of one kind, got {input} and {output}")]
    InPlaceBuffers { input: Shape, output: Shape },
    #[error("in-place collective-permute's {what} offset {offset} is not a tuple of {rank} indices, or a tuple of such tuples, for {buffer}")]
    InPlaceOffset {
        what: &'static str,
        offset: Shape,
        rank: usize,
        buffer: Shape,
    },
    #[error("conditional selector must be pred[] or s32[], got {0}")]
    Selector(Shape),
    #[error("set-dimension-size's size (operand 1) must be s32[], got {0}")]
    SetDimensionSize(Shape),
    #[error("dynamic-reshape's size {index} must be s32[], got {shape}")]
    DynamicReshapeSize { index: usize, shape: Shape },
    #[error("rng parameters must be two {ty} scalars, got {a} and {b}")]
    RngParameters {
        ty: ElementType,
        a: ArrayShape,
        b: ArrayShape,
    },
    #[error("rng-bit-generator state for {} must be u64[2]{}, got {state}", .algorithm.name(), or_three(*.algorithm))]
    RngState {
        algorithm: RngAlgorithm,
        state: ArrayShape,
    },
}

fn or_three(algorithm: RngAlgorithm) -> &'static str {
    if algorithm != RngAlgorithm::ThreeFry {
        " or u64[3]"
    } else {
        ""
    }
}
