//! One description of each op: its opcode, its operand count, its traits,
//! and for 46 ops each attribute's text key, text form and proto field.
//! The text printer and parser, proto emission and import, and shape
//! inference's operand count all read the description, so
//! adding such an op is one row here (and its shape rule); Cranelift's
//! codegen-meta is the model. Each kind of value (an integer list, a
//! window, replica groups, dot dimension numbers, ...) has one codec per
//! reader and writer (`text::described`, `proto::described`), shared by
//! every op that holds one.
//!
//! The ops whose attributes depend on more than themselves (a
//! conditional's branch form on its selector's type, an outfeed's shape
//! on its operand) or that are families under one variant (the batch
//! norms, transfers, async steps), custom calls, parameters, constants and
//! domains still spell their attributes by hand in each of those places;
//! their opcodes are rows of the same table.

use std::borrow::Cow;

use crate::ir::collective::Collective;
use crate::ir::computation_id::ComputationId;
use crate::ir::op::{
    AsyncCollective, ComparisonDirection, ComparisonType, DotAlgorithm, DotDims, FftType,
    FusionKind, GatherDims, Op, OperandAlias, PadDim, Precision, RaggedDims, RngAlgorithm,
    RngDistribution, ScatterDims, SliceDim, TransposeA,
};
use crate::ir::window::{ConvDims, Window};

pub use super::row_traits::{Arity, OpTraits};

/// How an attribute is written in text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `key=7`.
    Int,
    /// `key={1,2}`, written always.
    List,
    /// `key={1,2}`, written always; left out, it is empty.
    ListOrEmpty,
    /// `key={1,2}`, left out when empty (as XLA leaves it out).
    ListIfAny,
    /// `key={3}`: a list of exactly one dimension.
    OneDimension,
    /// `key=true`, left out when false.
    Flag,
    /// `key=true` or `key=false`, written always; left out, it is true.
    FlagDefaultTrue,
    /// `key=name`: a called computation or an enum's spelling.
    Word,
    /// `window={size=3 stride=2}`, written always; left out, it slides
    /// over no dimensions.
    Window,
    /// `output_to_operand_aliasing={{0}: (1, {})}`, left out when empty.
    Aliasing,
    /// A collective's `replica_groups=`, `channel_id=`,
    /// `use_global_device_ids=` and `constrain_layout=`.
    Collective,
    /// `key=3`, left out when 1 (a convolution's group counts).
    IntUnlessOne,
    /// `window={...}`, left out when it slides over no dimensions.
    WindowIfAny,
    /// `slice={[0:2], [1:9:2]}`.
    Slices,
    /// `padding=0_0x1_2_1`.
    Padding,
    /// A gather's `offset_dims=`, `collapsed_slice_dims=`,
    /// `start_index_map=`, batching dims and `index_vector_dim=`.
    GatherDims,
    /// A scatter's `update_window_dims=`, `inserted_window_dims=`,
    /// `scatter_dims_to_operand_dims=`, batching dims and
    /// `index_vector_dim=`.
    ScatterDims,
    /// A dot's `lhs_batch_dims=`, `lhs_contracting_dims=`,
    /// `rhs_batch_dims=` and `rhs_contracting_dims=`.
    DotDims,
    /// A ragged dot's `lhs_ragged_dims=` and `rhs_group_dims=`.
    RaggedDims,
    /// `dim_labels=b01f_01io->b01f`.
    DimLabels,
    /// `operand_precision={high,default}`, left out when empty.
    Precision,
    /// `channel_id=N`, left out when none; a non-positive one reads as
    /// none, as XLA reads it (its proto cannot tell 0 from none).
    ChannelId,
    /// `source_target_pairs={{0,1},{1,0}}`, written always.
    Pairs,
    /// An in-place permute's `slice_sizes={{1,8},{1,8}}`, left out when
    /// none.
    SliceSizes,
    /// `key="text"`, left out when empty.
    QuotedIfAny,
}

/// The `HloInstructionProto` field an attribute is carried in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtoField {
    Dimensions,
    DynamicSliceSizes,
    TupleIndex,
    IsStable,
    IsComposite,
    ComparisonDirection,
    ComparisonType,
    Distribution,
    RngAlgorithm,
    FftType,
    FftLength,
    Delta,
    K,
    Largest,
    ExponentBits,
    MantissaBits,
    CholeskyLower,
    TriangularLeftSide,
    TriangularLower,
    TriangularUnitDiagonal,
    TriangularTransposeA,
    Window,
    OutputOperandAliasing,
    /// The replica groups in any of their fields (49, 87, 92, 93) and
    /// `use_global_device_ids`; the channel id and `constrain_layout`
    /// beside them are shared with other ops.
    Collective,
    FusionKind,
    SliceDimensions,
    PaddingConfig,
    GatherDimensionNumbers,
    GatherSliceSizes,
    IndicesAreSorted,
    UniqueIndices,
    ScatterDimensionNumbers,
    DotDimensionNumbers,
    /// A ragged dot's dot dimension numbers, inside field 90.
    RaggedDotDimensions,
    /// A ragged dot's ragged and group dimensions, inside field 90.
    RaggedDims,
    /// `precision_config.operand_precision`.
    OperandPrecision,
    /// `precision_config.algorithm`.
    DotAlgorithm,
    ConvolutionDimensionNumbers,
    FeatureGroupCount,
    BatchGroupCount,
    ChannelId,
    SourceTargetPairs,
    /// An in-place permute's slice sizes, flattened into
    /// `dynamic_slice_sizes`.
    PermuteSliceSizes,
    InfeedConfig,
    CrossProgramPrefetchIndex,
    /// The n-th of `called_computation_ids`.
    Called(usize),
}

impl ProtoField {
    /// The field as the proto names and numbers it, for messages.
    pub fn name(self) -> &'static str {
        match self {
            ProtoField::Dimensions => "dimensions (14)",
            ProtoField::DynamicSliceSizes => "dynamic_slice_sizes (20)",
            ProtoField::TupleIndex => "tuple_index (13)",
            ProtoField::IsStable => "is_stable (60)",
            ProtoField::IsComposite => "is_composite (89)",
            ProtoField::ComparisonDirection => "comparison_direction (63)",
            ProtoField::ComparisonType => "comparison_type (72)",
            ProtoField::Distribution => "distribution (23)",
            ProtoField::RngAlgorithm => "rng_algorithm (70)",
            ProtoField::FftType => "fft_type (31)",
            ProtoField::FftLength => "fft_length (32)",
            ProtoField::Delta => "delta (66)",
            ProtoField::K => "k (81)",
            ProtoField::Largest => "largest (85)",
            ProtoField::ExponentBits => "exponent_bits (18)",
            ProtoField::MantissaBits => "mantissa_bits (19)",
            ProtoField::CholeskyLower => "cholesky_options (62)",
            ProtoField::TriangularLeftSide
            | ProtoField::TriangularLower
            | ProtoField::TriangularUnitDiagonal
            | ProtoField::TriangularTransposeA => "triangular_solve_options (59)",
            ProtoField::Window => "window (15)",
            ProtoField::OutputOperandAliasing => "output_operand_aliasing (74)",
            ProtoField::Collective => "replica_groups (49)",
            ProtoField::FusionKind => "fusion_kind (9)",
            ProtoField::SliceDimensions => "slice_dimensions (17)",
            ProtoField::PaddingConfig => "padding_config (21)",
            ProtoField::GatherDimensionNumbers => "gather_dimension_numbers (33)",
            ProtoField::GatherSliceSizes => "gather_slice_sizes (34)",
            ProtoField::IndicesAreSorted => "indices_are_sorted (67)",
            ProtoField::UniqueIndices => "unique_indices (69)",
            ProtoField::ScatterDimensionNumbers => "scatter_dimension_numbers (48)",
            ProtoField::DotDimensionNumbers => "dot_dimension_numbers (30)",
            ProtoField::RaggedDotDimensions | ProtoField::RaggedDims => {
                "ragged_dot_dimension_numbers (90)"
            }
            ProtoField::OperandPrecision => "precision_config (51)",
            ProtoField::DotAlgorithm => "precision_config.algorithm (51.2)",
            ProtoField::ConvolutionDimensionNumbers => "convolution_dimension_numbers (16)",
            ProtoField::FeatureGroupCount => "feature_group_count (50)",
            ProtoField::BatchGroupCount => "batch_group_count (58)",
            ProtoField::ChannelId => "channel_id (26)",
            ProtoField::SourceTargetPairs => "source_target_pairs (52)",
            ProtoField::PermuteSliceSizes => "dynamic_slice_sizes (20)",
            ProtoField::InfeedConfig => "infeed_config (27)",
            ProtoField::CrossProgramPrefetchIndex => "cross_program_prefetch_index (80)",
            ProtoField::Called(_) => "called_computation_ids (38)",
        }
    }

    /// The ops that carry the field beside the rows that name it: a custom
    /// call's aliasing and convolution attributes, a transfer's channel,
    /// `dynamic_slice_sizes` read two ways.
    pub fn also_on(self) -> &'static [&'static str] {
        match self {
            // One field, read two ways.
            ProtoField::DynamicSliceSizes => &["collective-permute", "collective-permute-start"],
            ProtoField::PermuteSliceSizes => &["dynamic-slice"],
            // The replica-grouped collectives write theirs with their
            // groups; transfers with their own fields.
            ProtoField::ChannelId => &[
                "all-gather",
                "all-gather-start",
                "all-reduce",
                "all-reduce-start",
                "all-to-all",
                "collective-broadcast",
                "ragged-all-to-all",
                "recv",
                "recv-done",
                "reduce-scatter",
                "send",
                "send-done",
            ],
            ProtoField::Window
            | ProtoField::OutputOperandAliasing
            | ProtoField::ConvolutionDimensionNumbers
            | ProtoField::FeatureGroupCount
            | ProtoField::BatchGroupCount
            | ProtoField::OperandPrecision => &["custom-call"],
            _ => &[],
        }
    }
}

/// One attribute of a described op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribute {
    /// The text key: `iota_dimension` in `iota_dimension=0`.
    pub key: &'static str,
    pub form: Form,
    pub proto: ProtoField,
}

/// An op's opcode and its attributes in XLA's printing order.
#[derive(Clone, Copy, Debug)]
pub struct Description {
    pub opcode: &'static str,
    pub arity: Arity,
    pub attributes: &'static [Attribute],
}

impl Description {
    /// The description of the op `opcode` names, if its attributes are
    /// described.
    pub fn of(opcode: &str) -> Option<&'static Description> {
        DESCRIPTIONS.iter().find(|d| d.opcode == opcode)
    }

    /// Its called computations' keys, in `called_computation_ids` order.
    pub fn callees(&self) -> Vec<&'static str> {
        let mut slots: Vec<(usize, &str)> = self
            .attributes
            .iter()
            .filter_map(|a| match a.proto {
                ProtoField::Called(i) => Some((i, a.key)),
                _ => None,
            })
            .collect();
        slots.sort_unstable();
        slots.into_iter().map(|(_, k)| k).collect()
    }

    /// The opcodes that carry `field`, described or not, sorted.
    pub fn carriers(field: ProtoField) -> Vec<&'static str> {
        let mut v: Vec<&str> = DESCRIPTIONS
            .iter()
            .filter(|d| d.attributes.iter().any(|a| a.proto == field))
            .map(|d| d.opcode)
            .chain(field.also_on().iter().copied())
            .collect();
        v.sort_unstable();
        v
    }
}

/// An attribute's value between an op and a reader or writer of text or
/// proto. Readers give what they find; each field's type says what it
/// accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttrValue<'a> {
    Absent,
    Int(i64),
    Ints(Cow<'a, [i64]>),
    Flag(bool),
    /// An enum's text spelling, or a name (a config's).
    Word(Cow<'a, str>),
    /// A called computation: readers resolve the name or proto id they
    /// read, writers spell it as theirs.
    Callee(ComputationId),
    /// An enum the proto numbers: its spelling and its number.
    Enum {
        name: &'static str,
        number: i32,
    },
    Window(Cow<'a, Window>),
    Aliasing(Cow<'a, [OperandAlias]>),
    Collective(Cow<'a, Collective>),
    Slices(Cow<'a, [SliceDim]>),
    Padding(Cow<'a, [PadDim]>),
    GatherDims(Cow<'a, GatherDims>),
    ScatterDims(Cow<'a, ScatterDims>),
    DotDims(Cow<'a, DotDims>),
    RaggedDims(Cow<'a, RaggedDims>),
    ConvDims(Cow<'a, ConvDims>),
    Precision(Cow<'a, [Precision]>),
    Pairs(Cow<'a, [(i64, i64)]>),
    /// Lists of integers: an in-place permute's slice sizes.
    IntLists(Cow<'a, [Vec<i64>]>),
}

impl AttrValue<'_> {
    /// The value as one integer: a single-element list counts.
    pub fn int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(n) => Some(*n),
            AttrValue::Enum { number, .. } => Some(i64::from(*number)),
            AttrValue::Ints(v) if v.len() == 1 => Some(v[0]),
            AttrValue::Flag(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The value as a list: a single integer is a list of one.
    pub fn ints(&self) -> Option<Cow<'_, [i64]>> {
        match self {
            AttrValue::Ints(v) => Some(Cow::Borrowed(v)),
            AttrValue::Int(n) => Some(Cow::Owned(vec![*n])),
            _ => None,
        }
    }

    pub fn flag(&self) -> bool {
        matches!(self, AttrValue::Flag(true))
    }

    /// The text spelling of a word or enum.
    pub fn word(&self) -> Option<&str> {
        match self {
            AttrValue::Word(w) => Some(w),
            AttrValue::Enum { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Why a value read does not fit its field; each reader words it for its
/// own input, with its own position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldError {
    Missing,
    NotOneDimension(Vec<i64>),
    /// An enum spelling or number that names no variant, and the
    /// spellings that do.
    Unknown {
        written: String,
        choices: String,
    },
    OutOfRange(i64),
    /// The reader gave a kind of value the field does not hold.
    WrongKind(&'static str),
}

/// A Rust type an op's described attribute is held in.
pub trait AttrField: Sized {
    fn to_value(&self) -> AttrValue<'_>;
    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError>;

    /// Whether `v` says "not set" for an optional field of this type.
    fn is_unset(v: &AttrValue<'_>) -> bool {
        match v {
            AttrValue::Absent => true,
            AttrValue::Ints(v) => v.is_empty(),
            AttrValue::Word(w) => w.is_empty(),
            _ => false,
        }
    }
}

impl AttrField for i64 {
    fn to_value(&self) -> AttrValue<'_> {
        AttrValue::Int(*self)
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        match v {
            AttrValue::Absent => Err(FieldError::Missing),
            AttrValue::Int(n) => Ok(n),
            AttrValue::Ints(v) => match v[..] {
                [d] => Ok(d),
                _ => Err(FieldError::NotOneDimension(v.into_owned())),
            },
            _ => Err(FieldError::WrongKind("an integer")),
        }
    }
}

impl AttrField for i32 {
    fn to_value(&self) -> AttrValue<'_> {
        AttrValue::Int(i64::from(*self))
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        let n = i64::from_value(v)?;
        i32::try_from(n).map_err(|_| FieldError::OutOfRange(n))
    }
}

impl AttrField for bool {
    fn to_value(&self) -> AttrValue<'_> {
        AttrValue::Flag(*self)
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        match v {
            AttrValue::Absent => Ok(false),
            AttrValue::Flag(b) => Ok(b),
            _ => Err(FieldError::WrongKind("true or false")),
        }
    }
}

/// The values held whole in one [`AttrValue`] variant: integer lists,
/// names (a quoted config), and the values with a
/// syntax of their own, for each of which each reader and writer has one
/// codec, shared by every op that holds one. Unwritten, a value is its
/// default (no window, no aliasing, no groups, no precisions) or, where
/// the op cannot go without it, missing.
macro_rules! structured_fields {
    ($($ty:ty => $variant:ident, $kind:literal, $unwritten:ident;)*) => {$(
        impl AttrField for $ty {
            fn to_value(&self) -> AttrValue<'_> {
                AttrValue::$variant(Cow::Borrowed(self))
            }

            fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
                match v {
                    AttrValue::Absent => structured_fields!(@unwritten $unwritten),
                    AttrValue::$variant(x) => Ok(x.into_owned()),
                    _ => Err(FieldError::WrongKind($kind)),
                }
            }
        }
    )*};
    (@unwritten default) => { Ok(Default::default()) };
    (@unwritten required) => { Err(FieldError::Missing) };
}

structured_fields! {
    Vec<i64> => Ints, "an integer list", required;
    String => Word, "a name", required;
    Window => Window, "a window", default;
    Vec<OperandAlias> => Aliasing, "an aliasing list", default;
    Collective => Collective, "replica groups", default;
    Vec<Precision> => Precision, "operand precisions", default;
    Vec<(i64, i64)> => Pairs, "source-target pairs", default;
    Vec<Vec<i64>> => IntLists, "lists of sizes", default;
    Vec<SliceDim> => Slices, "slice ranges", required;
    Vec<PadDim> => Padding, "a padding", required;
    GatherDims => GatherDims, "gather dimension numbers", required;
    ScatterDims => ScatterDims, "scatter dimension numbers", required;
    DotDims => DotDims, "dot dimension numbers", required;
    RaggedDims => RaggedDims, "ragged dimensions", required;
    ConvDims => ConvDims, "dimension labels", required;
}

impl<T: AttrField> AttrField for Box<T> {
    fn to_value(&self) -> AttrValue<'_> {
        (**self).to_value()
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        T::from_value(v).map(Box::new)
    }
}

impl AttrField for ComputationId {
    fn to_value(&self) -> AttrValue<'_> {
        AttrValue::Callee(*self)
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        match v {
            AttrValue::Absent => Err(FieldError::Missing),
            AttrValue::Callee(id) => Ok(id),
            _ => Err(FieldError::WrongKind("a computation")),
        }
    }
}

/// `Unset` is no algorithm written.
impl AttrField for DotAlgorithm {
    fn to_value(&self) -> AttrValue<'_> {
        match self {
            DotAlgorithm::Unset => AttrValue::Absent,
            a => AttrValue::Enum {
                name: a.name(),
                number: a.proto(),
            },
        }
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        let unknown = |written: String| FieldError::Unknown {
            written,
            choices: DotAlgorithm::names().join(", "),
        };
        match v {
            AttrValue::Absent => Ok(DotAlgorithm::Unset),
            AttrValue::Word(w) => {
                DotAlgorithm::from_name(&w).ok_or_else(|| unknown(w.into_owned()))
            }
            AttrValue::Int(n) => i32::try_from(n)
                .ok()
                .and_then(DotAlgorithm::from_proto)
                .ok_or_else(|| unknown(n.to_string())),
            _ => Err(FieldError::WrongKind("a name")),
        }
    }
}

impl<T: AttrField> AttrField for Option<T> {
    fn to_value(&self) -> AttrValue<'_> {
        self.as_ref().map_or(AttrValue::Absent, T::to_value)
    }

    fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
        if T::is_unset(&v) {
            return Ok(None);
        }
        T::from_value(v).map(Some)
    }
}

fn choices<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// Enums that text and proto both spell by name.
macro_rules! named_enum_fields {
    ($($ty:ty),*) => {$(
        impl AttrField for $ty {
            fn to_value(&self) -> AttrValue<'_> {
                AttrValue::Word(Cow::Borrowed(self.name()))
            }

            fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
                match v {
                    AttrValue::Absent => Err(FieldError::Missing),
                    AttrValue::Word(w) => <$ty>::from_name(&w).ok_or_else(|| FieldError::Unknown {
                        written: w.into_owned(),
                        choices: choices(<$ty>::ALL.iter().map(|v| v.name())),
                    }),
                    _ => Err(FieldError::WrongKind("a name")),
                }
            }
        }
    )*};
}

/// Enums that text spells and the proto numbers.
macro_rules! numbered_enum_fields {
    ($($ty:ty),*) => {$(
        impl AttrField for $ty {
            fn to_value(&self) -> AttrValue<'_> {
                AttrValue::Enum { name: self.name(), number: self.proto() }
            }

            fn from_value(v: AttrValue<'_>) -> Result<Self, FieldError> {
                let unknown = |written: String| FieldError::Unknown {
                    written,
                    choices: choices(<$ty>::ALL.iter().map(|v| v.name())),
                };
                match v {
                    AttrValue::Absent => Err(FieldError::Missing),
                    AttrValue::Word(w) => <$ty>::from_name(&w).ok_or_else(|| unknown(w.into_owned())),
                    AttrValue::Int(n) => i32::try_from(n)
                        .ok()
                        .and_then(<$ty>::from_proto)
                        .ok_or_else(|| unknown(n.to_string())),
                    _ => Err(FieldError::WrongKind("a name")),
                }
            }

            /// The proto's 0, when it names no variant, is the field unset.
            fn is_unset(v: &AttrValue<'_>) -> bool {
                match v {
                    AttrValue::Int(0) => <$ty>::from_proto(0).is_none(),
                    AttrValue::Absent => true,
                    _ => false,
                }
            }
        }
    )*};
}

named_enum_fields!(ComparisonDirection, ComparisonType, FusionKind);
numbered_enum_fields!(RngDistribution, RngAlgorithm, FftType, TransposeA);

/// What writes an op's described attributes: the text printer, proto
/// emission.
pub trait AttrWriter {
    fn write(&mut self, attribute: &'static Attribute, value: AttrValue<'_>);
}

/// What reads them: the text parser, proto import. `read` gives what is
/// written (or `Absent`); `invalid` words a value that does not fit.
pub trait AttrReader {
    type Error;
    fn read(&mut self, attribute: &'static Attribute) -> Result<AttrValue<'static>, Self::Error>;
    fn invalid(&mut self, attribute: &'static Attribute, error: FieldError) -> Self::Error;
}

fn read_field<T: AttrField, R: AttrReader>(
    r: &mut R,
    attribute: &'static Attribute,
) -> Result<T, R::Error> {
    let v = r.read(attribute)?;
    T::from_value(v).map_err(|e| r.invalid(attribute, e))
}

/// The families ops are grouped in, one name for every place that holds
/// something per op: a family's attribute types live in `ir/op/<name>.rs`,
/// its shape rules in `analysis/shape_inference/<name>.rs`, its backward
/// rules in `graph/autodiff/rules/<name>.rs` (a place with nothing for a
/// family has no file for it). Each op's family is its row's (see
/// [`Op::family`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpFamily {
    /// Values given or regrouped, not computed: `parameter`, `constant`,
    /// `iota`, `tuple`, `get-tuple-element`, and the ops whose value is
    /// their operand's (`opt-barrier`, `domain`).
    Values,
    /// Arithmetic on each element on its own: the unary and binary ops,
    /// `compare`, `select`, `clamp`, the conversions between element types
    /// (`convert`, `bitcast-convert`, `stochastic-convert`,
    /// `reduce-precision`), and `map` (a scalar computation per element).
    Elementwise,
    /// Elements moved or regrouped without computing on them:
    /// `broadcast`, `reshape`, `bitcast`, `transpose`, `reverse`,
    /// `concatenate`, `pad`, the orderings (`sort`, `topk`), and the copies
    /// between memory spaces (`copy-start`, `copy-done`).
    DataMovement,
    /// Dynamic dimensions (`f32[<=8]`): `set-dimension-size`,
    /// `get-dimension-size`, `dynamic-reshape`.
    DynamicDims,
    /// Parts of an array read or written by position: `slice`,
    /// `dynamic-slice`, `dynamic-update-slice`, `gather`, `scatter`.
    Indexing,
    /// Contractions and matrix factorizations: `dot`, `ragged-dot`,
    /// `triangular-solve`, `cholesky`.
    LinearAlgebra,
    /// Reductions over dimensions: `reduce`, and the batch normalizations
    /// (statistics over every dimension but the feature one).
    Reduction,
    /// A window slid over the input: `convolution`, `reduce-window` and
    /// its gradient `select-and-scatter`.
    Windowed,
    /// Fourier transforms: `fft`.
    Fft,
    /// Data exchanged between devices: the replica-grouped collectives,
    /// `collective-permute`, their async starts and dones, and the device's
    /// own number (`replica-id`, `partition-id`).
    Collective,
    /// Ops that run whole computations: `call`, `while`, `conditional`,
    /// `fusion` and the async ops (`async-start`, `-update`, `-done`).
    ControlFlow,
    /// `custom-call`: a target outside XLA, its contract its own.
    CustomCall,
    /// Random numbers: `rng`, `rng-bit-generator`,
    /// `rng-get-and-update-state`.
    Random,
    /// Ops ordered by tokens: `after-all`, `add-dependency`, the
    /// point-to-point transfers (`send`, `recv` and their dones) and the
    /// host feeds (`infeed`, `outfeed`).
    Token,
}

impl OpFamily {
    pub const ALL: [OpFamily; 14] = [
        OpFamily::Values,
        OpFamily::Elementwise,
        OpFamily::DataMovement,
        OpFamily::DynamicDims,
        OpFamily::Indexing,
        OpFamily::LinearAlgebra,
        OpFamily::Reduction,
        OpFamily::Windowed,
        OpFamily::Fft,
        OpFamily::Collective,
        OpFamily::ControlFlow,
        OpFamily::CustomCall,
        OpFamily::Random,
        OpFamily::Token,
    ];

    /// The name of the family's modules (`data_movement` for
    /// `ir/op/data_movement.rs`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            OpFamily::Values => "values",
            OpFamily::Elementwise => "elementwise",
            OpFamily::DataMovement => "data_movement",
            OpFamily::DynamicDims => "dynamic_dims",
            OpFamily::Indexing => "indexing",
            OpFamily::LinearAlgebra => "linear_algebra",
            OpFamily::Reduction => "reduction",
            OpFamily::Windowed => "windowed",
            OpFamily::Fft => "fft",
            OpFamily::Collective => "collective",
            OpFamily::ControlFlow => "control_flow",
            OpFamily::CustomCall => "custom_call",
            OpFamily::Random => "random",
            OpFamily::Token => "token",
        }
    }
}

/// A row's operand count: a number, or `N` where it depends on the
/// attributes or the operands (a reduce's 2k, a dynamic-slice's 1 + rank),
/// which the op's shape rule checks.
macro_rules! arity {
    (N) => {
        Arity::Variadic
    };
    ($n:literal) => {
        Arity::Exactly($n)
    };
}

/// Declares each op's opcode once. The described rows give their
/// attributes too (`field: Form("key") @ ProtoField`, in XLA's printing
/// order); the spelled rows are ops whose attributes are spelled by hand.
/// A row's `(arity)` is its [`Arity`], the name after it its
/// [`OpFamily`], its `[TRAITS]` its [`OpTraits`].
/// `Op::opcode` matches on both exhaustively, so a new op without a row
/// does not compile, nor does a row that leaves out one of its variant's
/// fields. The families that spell their own opcodes (elementwise ops,
/// batch norms, transfers, async steps) give theirs through their enums.
macro_rules! op_table {
    (
        described {
            $($opcode:literal ($arity:tt) $family:ident $([$($dtrait:ident),*])? => $variant:ident {
                $($field:ident : $form:ident ($key:literal) @ $proto:ident $(($slot:literal))?),* $(,)?
            },)*
        }
        spelled {
            $($pat:pat => $name:literal ($sarity:tt) $sfamily:ident $([$($strait:ident),*])?,)*
        }
    ) => {
        /// The opcodes the table spells.
        pub(crate) const TABLE_OPCODES: &[&str] = &[$($opcode,)* $($name,)*];

        /// A pattern of every described op, for a match that writes or
        /// reads the others by hand: with it in place of `_`, the match
        /// stays exhaustive, so an op added to [`Op`] without a row here
        /// fails to compile in every such match.
        macro_rules! described_ops {
            () => { $(Op::$variant { .. })|* };
        }
        pub(crate) use described_ops;

        /// The described ops.
        pub static DESCRIPTIONS: &[Description] = &[$(Description {
            opcode: $opcode,
            arity: arity!($arity),
            attributes: &[$(Attribute {
                key: $key,
                form: Form::$form,
                proto: ProtoField::$proto $(($slot))?,
            }),*],
        }),*];

        impl Op {
            /// XLA's opcode spelling.
            pub fn opcode(&self) -> &'static str {
                match self {
                    Op::Unary(u) => u.opcode(),
                    Op::Binary(b) => b.opcode(),
                    Op::BatchNorm { kind, .. } => kind.opcode(),
                    Op::Transfer(t) => t.step.opcode(),
                    Op::Async { step, .. } => step.opcode(),
                    $(Op::$variant { .. } => $opcode,)*
                    $($pat => $name,)*
                }
            }

            /// How many operands the op takes; shape inference checks a
            /// fixed count before the op's own rule runs.
            pub fn arity(&self) -> Arity {
                match self {
                    Op::Unary(_) => Arity::Exactly(1),
                    Op::Binary(_) => Arity::Exactly(2),
                    Op::BatchNorm { kind, .. } => kind.arity(),
                    Op::Transfer(t) => t.step.arity(),
                    Op::Async { step, .. } => step.arity(),
                    $(Op::$variant { .. } => arity!($arity),)*
                    $($pat => arity!($sarity),)*
                }
            }

            /// What the op is, beyond its attributes: whether it may be
            /// merged, exchanges data, acts on the world, or carries its
            /// float type through.
            pub fn traits(&self) -> OpTraits {
                match self {
                    Op::Unary(u) => u.traits(),
                    Op::Binary(b) => b.traits(),
                    Op::BatchNorm { .. } => OpTraits::NONE,
                    Op::Transfer(_) => OpTraits::SIDE_EFFECT,
                    // Runs a computation as a whole, which hlatc does not
                    // look into for draws or side effects.
                    Op::Async { .. } => OpTraits::IMPURE,
                    $(Op::$variant { .. } => OpTraits::NONE $($(.with(OpTraits::$dtrait))*)?,)*
                    $($pat => OpTraits::NONE $($(.with(OpTraits::$strait))*)?,)*
                }
            }

            /// The family the op belongs to: the file its attributes, its
            /// shape rule and its backward rule live in.
            pub fn family(&self) -> OpFamily {
                match self {
                    Op::Unary(_) | Op::Binary(_) => OpFamily::Elementwise,
                    Op::BatchNorm { .. } => OpFamily::Reduction,
                    Op::Transfer(_) => OpFamily::Token,
                    Op::Async { .. } => OpFamily::ControlFlow,
                    $(Op::$variant { .. } => OpFamily::$family,)*
                    $($pat => OpFamily::$sfamily,)*
                }
            }

            /// Writes a described op's attributes in order; false for an
            /// op whose attributes are spelled by hand.
            pub fn write_described(&self, w: &mut impl AttrWriter) -> bool {
                match self {
                    $(Op::$variant { $($field),* } => {
                        $(w.write(
                            &Attribute {
                                key: $key,
                                form: Form::$form,
                                proto: ProtoField::$proto $(($slot))?,
                            },
                            AttrField::to_value($field),
                        );)*
                        true
                    })*
                    _ => false,
                }
            }

            /// Builds the described op `opcode` names from what `r` reads;
            /// `None` when its attributes are not described.
            pub fn read_described<R: AttrReader>(
                opcode: &str,
                r: &mut R,
            ) -> Result<Option<Op>, R::Error> {
                Ok(Some(match opcode {
                    $($opcode => Op::$variant {
                        $($field: read_field(r, &Attribute {
                            key: $key,
                            form: Form::$form,
                            proto: ProtoField::$proto $(($slot))?,
                        })?,)*
                    },)*
                    _ => return Ok(None),
                }))
            }
        }
    };
}

op_table! {
    described {
        "iota" (0) Values => Iota { dimension: Int("iota_dimension") @ Dimensions },
        "compare" (2) Elementwise [CARRIES_FLOAT_TYPE] => Compare {
            direction: Word("direction") @ ComparisonDirection,
            kind: Word("type") @ ComparisonType,
        },
        // XLA's parser lets a scalar's broadcast leave out its (empty)
        // dimensions; over any other operand, inference then reports the
        // missing ones.
        "broadcast" (1) DataMovement [CARRIES_FLOAT_TYPE] => Broadcast { dimensions: ListOrEmpty("dimensions") @ Dimensions },
        "transpose" (1) DataMovement [CARRIES_FLOAT_TYPE] => Transpose { permutation: List("dimensions") @ Dimensions },
        "reverse" (1) DataMovement [CARRIES_FLOAT_TYPE] => Reverse { dimensions: List("dimensions") @ Dimensions },
        "concatenate" (N) DataMovement [CARRIES_FLOAT_TYPE] => Concatenate { dimension: OneDimension("dimensions") @ Dimensions },
        "set-dimension-size" (2) DynamicDims => SetDimensionSize {
            dimension: OneDimension("dimensions") @ Dimensions,
        },
        "get-dimension-size" (1) DynamicDims => GetDimensionSize {
            dimension: OneDimension("dimensions") @ Dimensions,
        },
        "dynamic-slice" (N) Indexing [CARRIES_FLOAT_TYPE] => DynamicSlice { sizes: List("dynamic_slice_sizes") @ DynamicSliceSizes },
        "reduce" (N) Reduction => Reduce {
            dimensions: List("dimensions") @ Dimensions,
            to_apply: Word("to_apply") @ Called(0),
        },
        "get-tuple-element" (1) Values => GetTupleElement { index: Int("index") @ TupleIndex },
        "call" (N) ControlFlow => Call {
            to_apply: Word("to_apply") @ Called(0),
            is_composite: Flag("is_composite") @ IsComposite,
        },
        "sort" (N) DataMovement => Sort {
            dimension: OneDimension("dimensions") @ Dimensions,
            is_stable: Flag("is_stable") @ IsStable,
            comparator: Word("to_apply") @ Called(0),
        },
        "map" (N) Elementwise => Map {
            dimensions: ListIfAny("dimensions") @ Dimensions,
            to_apply: Word("to_apply") @ Called(0),
        },
        "rng" (2) Random [IMPURE] => Rng { distribution: Word("distribution") @ Distribution },
        // XLA lists a while's body before its condition.
        "while" (1) ControlFlow [IMPURE] => While {
            condition: Word("condition") @ Called(1),
            body: Word("body") @ Called(0),
        },
        "triangular-solve" (2) LinearAlgebra => TriangularSolve {
            left_side: Flag("left_side") @ TriangularLeftSide,
            lower: Flag("lower") @ TriangularLower,
            unit_diagonal: Flag("unit_diagonal") @ TriangularUnitDiagonal,
            transpose_a: Word("transpose_a") @ TriangularTransposeA,
        },
        "cholesky" (1) LinearAlgebra => Cholesky { lower: Flag("lower") @ CholeskyLower },
        "fft" (1) Fft => Fft {
            fft_type: Word("fft_type") @ FftType,
            fft_length: List("fft_length") @ FftLength,
        },
        "reshape" (1) DataMovement [CARRIES_FLOAT_TYPE] => Reshape { inferred_dimension: Int("inferred_dimension") @ Dimensions },
        "rng-get-and-update-state" (0) Random [IMPURE] => RngGetAndUpdateState { delta: Int("delta") @ Delta },
        // XLA's parser takes the largest when `largest` is not written.
        "topk" (1) DataMovement => TopK {
            k: Int("k") @ K,
            largest: FlagDefaultTrue("largest") @ Largest,
        },
        "rng-bit-generator" (1) Random [IMPURE] => RngBitGenerator { algorithm: Word("algorithm") @ RngAlgorithm },
        "reduce-window" (N) Windowed => ReduceWindow {
            window: Window("window") @ Window,
            to_apply: Word("to_apply") @ Called(0),
        },
        "select-and-scatter" (3) Windowed => SelectAndScatter {
            window: Window("window") @ Window,
            select: Word("select") @ Called(0),
            scatter: Word("scatter") @ Called(1),
        },
        "fusion" (N) ControlFlow [IMPURE] => Fusion {
            kind: Word("kind") @ FusionKind,
            calls: Word("calls") @ Called(0),
            aliasing: Aliasing("output_to_operand_aliasing") @ OutputOperandAliasing,
        },
        "all-reduce" (N) Collective [COLLECTIVE] => AllReduce {
            collective: Collective("replica_groups") @ Collective,
            to_apply: Word("to_apply") @ Called(0),
        },
        "all-reduce-start" (N) Collective [COLLECTIVE] => AllReduceStart {
            collective: Collective("replica_groups") @ Collective,
            to_apply: Word("to_apply") @ Called(0),
        },
        "all-gather" (N) Collective [COLLECTIVE] => AllGather {
            collective: Collective("replica_groups") @ Collective,
            dimension: OneDimension("dimensions") @ Dimensions,
        },
        "all-gather-start" (N) Collective [COLLECTIVE] => AllGatherStart {
            collective: Collective("replica_groups") @ Collective,
            dimension: OneDimension("dimensions") @ Dimensions,
        },
        "reduce-scatter" (N) Collective [COLLECTIVE] => ReduceScatter {
            collective: Collective("replica_groups") @ Collective,
            dimension: OneDimension("dimensions") @ Dimensions,
            to_apply: Word("to_apply") @ Called(0),
        },
        // XLA's all-to-all splits along one dimension, or (none written)
        // exchanges the elements of a tuple.
        "all-to-all" (N) Collective [COLLECTIVE] => AllToAll {
            collective: Collective("replica_groups") @ Collective,
            dimension: OneDimension("dimensions") @ Dimensions,
        },
        "ragged-all-to-all" (6) Collective [COLLECTIVE] => RaggedAllToAll { collective: Collective("replica_groups") @ Collective },
        "collective-broadcast" (1) Collective [COLLECTIVE] => CollectiveBroadcast {
            collective: Collective("replica_groups") @ Collective,
        },
        "slice" (1) Indexing [CARRIES_FLOAT_TYPE] => Slice { slices: Slices("slice") @ SliceDimensions },
        "pad" (2) DataMovement [CARRIES_FLOAT_TYPE] => Pad { config: Padding("padding") @ PaddingConfig },
        "gather" (2) Indexing [CARRIES_FLOAT_TYPE] => Gather {
            dims: GatherDims("offset_dims") @ GatherDimensionNumbers,
            slice_sizes: List("slice_sizes") @ GatherSliceSizes,
            indices_are_sorted: Flag("indices_are_sorted") @ IndicesAreSorted,
        },
        "scatter" (N) Indexing => Scatter {
            dims: ScatterDims("update_window_dims") @ ScatterDimensionNumbers,
            indices_are_sorted: Flag("indices_are_sorted") @ IndicesAreSorted,
            unique_indices: Flag("unique_indices") @ UniqueIndices,
            to_apply: Word("to_apply") @ Called(0),
        },
        "dot" (2) LinearAlgebra => Dot {
            dims: DotDims("lhs_contracting_dims") @ DotDimensionNumbers,
            precision: Precision("operand_precision") @ OperandPrecision,
            algorithm: Word("algorithm") @ DotAlgorithm,
        },
        // The ragged and group dimensions print after the contracting ones.
        "ragged-dot" (3) LinearAlgebra => RaggedDot {
            dims: DotDims("lhs_contracting_dims") @ RaggedDotDimensions,
            ragged: RaggedDims("lhs_ragged_dims") @ RaggedDims,
            precision: Precision("operand_precision") @ OperandPrecision,
            algorithm: Word("algorithm") @ DotAlgorithm,
        },
        "convolution" (2) Windowed => Convolution {
            window: WindowIfAny("window") @ Window,
            dims: DimLabels("dim_labels") @ ConvolutionDimensionNumbers,
            feature_group_count: IntUnlessOne("feature_group_count") @ FeatureGroupCount,
            batch_group_count: IntUnlessOne("batch_group_count") @ BatchGroupCount,
            precision: Precision("operand_precision") @ OperandPrecision,
        },
        "collective-permute" (N) Collective [COLLECTIVE] => CollectivePermute {
            pairs: Pairs("source_target_pairs") @ SourceTargetPairs,
            channel_id: ChannelId("channel_id") @ ChannelId,
            slice_sizes: SliceSizes("slice_sizes") @ PermuteSliceSizes,
        },
        "collective-permute-start" (N) Collective [COLLECTIVE] => CollectivePermuteStart {
            pairs: Pairs("source_target_pairs") @ SourceTargetPairs,
            channel_id: ChannelId("channel_id") @ ChannelId,
            slice_sizes: SliceSizes("slice_sizes") @ PermuteSliceSizes,
        },
        "infeed" (1) Token [SIDE_EFFECT] => Infeed { config: QuotedIfAny("infeed_config") @ InfeedConfig },
        "copy-start" (1) DataMovement => CopyStart {
            cross_program_prefetch_index: Int("cross_program_prefetch_index") @ CrossProgramPrefetchIndex,
        },
        "reduce-precision" (1) Elementwise => ReducePrecision {
            exponent_bits: Int("exponent_bits") @ ExponentBits,
            mantissa_bits: Int("mantissa_bits") @ MantissaBits,
        },
    }
    spelled {
        Op::Parameter(_) => "parameter" (0) Values [IMPURE],
        Op::Constant(_) | Op::TupleConstant(_) => "constant" (0) Values,
        Op::Select => "select" (3) Elementwise [CARRIES_FLOAT_TYPE],
        Op::Clamp => "clamp" (3) Elementwise [CARRIES_FLOAT_TYPE],
        Op::Convert => "convert" (1) Elementwise,
        Op::StochasticConvert => "stochastic-convert" (2) Elementwise,
        Op::BitcastConvert => "bitcast-convert" (1) Elementwise,
        Op::Bitcast => "bitcast" (1) DataMovement,
        Op::DynamicUpdateSlice => "dynamic-update-slice" (N) Indexing [CARRIES_FLOAT_TYPE],
        Op::DynamicReshape => "dynamic-reshape" (N) DynamicDims,
        Op::Tuple => "tuple" (N) Values,
        Op::OptBarrier => "opt-barrier" (1) Values [IMPURE],
        Op::Conditional { .. } => "conditional" (N) ControlFlow [IMPURE],
        Op::Domain { .. } => "domain" (1) Values [IMPURE],
        Op::CollectiveDone(AsyncCollective::AllReduce) => "all-reduce-done" (1) Collective [COLLECTIVE],
        Op::CollectiveDone(AsyncCollective::AllGather) => "all-gather-done" (1) Collective [COLLECTIVE],
        Op::CollectiveDone(AsyncCollective::CollectivePermute) => "collective-permute-done" (1) Collective [COLLECTIVE],
        Op::ReplicaId => "replica-id" (0) Collective,
        Op::PartitionId => "partition-id" (0) Collective,
        Op::CustomCall(_) => "custom-call" (N) CustomCall,
        Op::CopyDone => "copy-done" (1) DataMovement,
        Op::AfterAll => "after-all" (N) Token,
        Op::AddDependency => "add-dependency" (2) Token,
        Op::Outfeed { .. } => "outfeed" (2) Token [SIDE_EFFECT],
    }
}
