//! The operations of the IR and their attributes.
//!
//! Each variant carries exactly the attributes XLA gives that opcode, so the
//! text printer, the parser and proto emission agree by construction.

use crate::collective::Collective;
use crate::literal::{Literal, LiteralTree};
use crate::op_description::{Arity, OpTraits};
use crate::types::Shape;
use crate::window::{ConvDims, Window};

/// An attribute enum as text spells it and the proto numbers it: one row
/// per variant gives both, and the lookups both ways come from the rows.
macro_rules! spelled_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = ($text:literal, $number:literal)),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// XLA's text spelling.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }

            pub fn from_name(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.name() == s)
            }

            /// XLA's proto enum number.
            pub fn proto(self) -> i32 {
                match self {
                    $($name::$variant => $number),*
                }
            }

            pub fn from_proto(v: i32) -> Option<Self> {
                Self::ALL.iter().copied().find(|x| x.proto() == v)
            }
        }
    };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Abs,
    Negate,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Sin,
    Cos,
    Tanh,
    Tan,
    Cbrt,
    Erf,
    Logistic,
    Floor,
    Ceil,
    RoundNearestEven,
    Sign,
    Not,
    IsFinite,
    Copy,
    /// `popcnt`: the number of set bits of each integer.
    PopulationCount,
    /// A complex value's real part (a float's own value).
    Real,
    /// A complex value's imaginary part (zero for a float).
    Imag,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Remainder,
    Maximum,
    Minimum,
    Power,
    Atan2,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRightLogical,
    ShiftRightArithmetic,
    /// `complex(re, im)`: f32 or f64 parts to c64 or c128.
    Complex,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonDirection {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl ComparisonDirection {
    pub const ALL: [ComparisonDirection; 6] = [
        ComparisonDirection::Eq,
        ComparisonDirection::Ne,
        ComparisonDirection::Lt,
        ComparisonDirection::Le,
        ComparisonDirection::Gt,
        ComparisonDirection::Ge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ComparisonDirection::Eq => "EQ",
            ComparisonDirection::Ne => "NE",
            ComparisonDirection::Lt => "LT",
            ComparisonDirection::Le => "LE",
            ComparisonDirection::Gt => "GT",
            ComparisonDirection::Ge => "GE",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// XLA's comparison type (`type=` in text); absent means the default for the
/// element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonType {
    Float,
    TotalOrder,
    Signed,
    Unsigned,
}

impl ComparisonType {
    pub const ALL: [ComparisonType; 4] = [
        ComparisonType::Float,
        ComparisonType::TotalOrder,
        ComparisonType::Signed,
        ComparisonType::Unsigned,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ComparisonType::Float => "FLOAT",
            ComparisonType::TotalOrder => "TOTALORDER",
            ComparisonType::Signed => "SIGNED",
            ComparisonType::Unsigned => "UNSIGNED",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == s)
    }
}

spelled_enum! {
    /// An operand's precision (`operand_precision={high,default}`).
    pub enum Precision {
        Default = ("default", 0),
        High = ("high", 1),
        Highest = ("highest", 2),
    }
}

/// How a dot is evaluated (`algorithm=dot_bf16_bf16_f32`, XLA's
/// `PrecisionConfig.Algorithm`): the types its operands are rounded to, the
/// accumulation type, and how many passes. `Unset` leaves it to the
/// operand precisions, and is not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum DotAlgorithm {
    #[default]
    Unset,
    AnyF8AnyF8F32,
    AnyF8AnyF8F32FastAccum,
    F16F16F16,
    F16F16F32,
    Bf16Bf16Bf16,
    Bf16Bf16F32,
    Bf16Bf16F32X3,
    Bf16Bf16F32X6,
    Tf32Tf32F32,
    Tf32Tf32F32X3,
    F32F32F32,
    F64F64F64,
    Bf16Bf16F32X9,
}

/// Text spelling, in proto order (the index is the proto number).
const DOT_ALGORITHMS: [(DotAlgorithm, &str); 14] = [
    (DotAlgorithm::Unset, "unset"),
    (DotAlgorithm::AnyF8AnyF8F32, "dot_any_f8_any_f8_f32"),
    (
        DotAlgorithm::AnyF8AnyF8F32FastAccum,
        "dot_any_f8_any_f8_f32_fast_accum",
    ),
    (DotAlgorithm::F16F16F16, "dot_f16_f16_f16"),
    (DotAlgorithm::F16F16F32, "dot_f16_f16_f32"),
    (DotAlgorithm::Bf16Bf16Bf16, "dot_bf16_bf16_bf16"),
    (DotAlgorithm::Bf16Bf16F32, "dot_bf16_bf16_f32"),
    (DotAlgorithm::Bf16Bf16F32X3, "dot_bf16_bf16_f32_x3"),
    (DotAlgorithm::Bf16Bf16F32X6, "dot_bf16_bf16_f32_x6"),
    (DotAlgorithm::Tf32Tf32F32, "dot_tf32_tf32_f32"),
    (DotAlgorithm::Tf32Tf32F32X3, "dot_tf32_tf32_f32_x3"),
    (DotAlgorithm::F32F32F32, "dot_f32_f32_f32"),
    (DotAlgorithm::F64F64F64, "dot_f64_f64_f64"),
    (DotAlgorithm::Bf16Bf16F32X9, "dot_bf16_bf16_f32_x9"),
];

impl DotAlgorithm {
    pub fn name(self) -> &'static str {
        DOT_ALGORITHMS[self as usize].1
    }

    pub fn from_name(s: &str) -> Option<Self> {
        DOT_ALGORITHMS
            .iter()
            .find(|(_, n)| *n == s)
            .map(|(a, _)| *a)
    }

    pub fn proto(self) -> i32 {
        self as i32
    }

    pub fn from_proto(v: i32) -> Option<Self> {
        DOT_ALGORITHMS
            .get(usize::try_from(v).ok()?)
            .map(|(a, _)| *a)
    }

    /// Every spelling but `unset`, for error messages.
    pub fn names() -> Vec<&'static str> {
        DOT_ALGORITHMS[1..].iter().map(|(_, n)| *n).collect()
    }
}

spelled_enum! {
    /// `rng-bit-generator`'s algorithm (`algorithm=rng_three_fry`).
    pub enum RngAlgorithm {
        Default = ("rng_default", 0),
        ThreeFry = ("rng_three_fry", 1),
        Philox = ("rng_philox", 2),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDims {
    pub lhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

/// An f32 attribute kept by its bits (`epsilon=0.001`), so ops stay `Eq`
/// and `Hash` and the value comes back exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct F32Bits(pub u32);

impl F32Bits {
    pub fn new(v: f32) -> Self {
        F32Bits(v.to_bits())
    }

    pub fn get(self) -> f32 {
        f32::from_bits(self.0)
    }
}

impl std::fmt::Display for F32Bits {
    /// The shortest decimal that reads back to the same f32.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// An f64 attribute kept by its bits (a tolerance, a statistic), so
/// annotations stay `Eq` and `Hash` and the value comes back exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct F64Bits(pub u64);

impl F64Bits {
    pub fn new(v: f64) -> Self {
        F64Bits(v.to_bits())
    }

    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl std::fmt::Display for F64Bits {
    /// The shortest decimal that reads back to the same f64, with an
    /// exponent outside the usual range. (XLA prints these with six
    /// digits, and loses the rest.)
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        crate::literal::write_float(f, self.get(), self.get())
    }
}

/// Which batch normalization: `batch-norm-training(x, scale, offset)`
/// gives (normalized, mean, variance) over every dimension but the
/// feature one; `batch-norm-inference(x, scale, offset, mean, variance)`
/// normalizes by the given statistics; `batch-norm-grad(x, scale, mean,
/// variance, grad)` gives (d x, d scale, d offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchNormKind {
    Training,
    Inference,
    Grad,
}

impl BatchNormKind {
    pub const ALL: [BatchNormKind; 3] = [
        BatchNormKind::Training,
        BatchNormKind::Inference,
        BatchNormKind::Grad,
    ];

    /// The operand, scale and offset; inference adds the mean and
    /// variance, grad the mean, variance and output gradient.
    pub fn arity(self) -> Arity {
        match self {
            BatchNormKind::Training => Arity::Exactly(3),
            BatchNormKind::Inference | BatchNormKind::Grad => Arity::Exactly(5),
        }
    }

    pub fn opcode(self) -> &'static str {
        match self {
            BatchNormKind::Training => "batch-norm-training",
            BatchNormKind::Inference => "batch-norm-inference",
            BatchNormKind::Grad => "batch-norm-grad",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.opcode() == s)
    }
}

/// What makes a `ragged-dot` ragged: the lhs dimension split into groups
/// by the group sizes operand, and, when that dimension is not contracted
/// or a batch dimension, the rhs dimension that picks each group's matrix.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RaggedDims {
    pub lhs_ragged: Vec<i64>,
    pub rhs_group: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GatherDims {
    pub offset_dims: Vec<i64>,
    pub collapsed_slice_dims: Vec<i64>,
    pub start_index_map: Vec<i64>,
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
    pub index_vector_dim: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScatterDims {
    pub update_window_dims: Vec<i64>,
    pub inserted_window_dims: Vec<i64>,
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
    pub index_vector_dim: i64,
}

spelled_enum! {
    /// `custom_call_api_version` (hlo.proto `CustomCallApiVersion`).
    /// XLA's text parser assumes `Original` when `api_version` is absent
    /// (and its compiler rejects `Unspecified`), so that is the default
    /// here too.
    #[derive(Default)]
    pub enum CustomCallApiVersion {
        Unspecified = ("API_VERSION_UNSPECIFIED", 0),
        #[default]
        Original = ("API_VERSION_ORIGINAL", 1),
        StatusReturning = ("API_VERSION_STATUS_RETURNING", 2),
        StatusReturningUnified = ("API_VERSION_STATUS_RETURNING_UNIFIED", 3),
        TypedFfi = ("API_VERSION_TYPED_FFI", 4),
    }
}

/// Which asynchronous collective a `-done` completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncCollective {
    AllReduce,
    AllGather,
    CollectivePermute,
}

/// Which step of a point-to-point transfer: `send` and `recv` start one
/// (their value is the data, a u32 context and a token), `send-done` and
/// `recv-done` wait for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferStep {
    Send,
    SendDone,
    Recv,
    RecvDone,
}

impl TransferStep {
    const ALL: [TransferStep; 4] = [
        TransferStep::Send,
        TransferStep::SendDone,
        TransferStep::Recv,
        TransferStep::RecvDone,
    ];

    pub fn opcode(self) -> &'static str {
        match self {
            TransferStep::Send => "send",
            TransferStep::SendDone => "send-done",
            TransferStep::Recv => "recv",
            TransferStep::RecvDone => "recv-done",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.opcode() == s)
    }

    /// A send takes its data and a token, a recv a token, and each done
    /// the transfer in flight.
    pub fn arity(self) -> Arity {
        match self {
            TransferStep::Send => Arity::Exactly(2),
            TransferStep::SendDone | TransferStep::Recv | TransferStep::RecvDone => {
                Arity::Exactly(1)
            }
        }
    }
}

/// Which of the three async ops: `async-start` begins running its wrapped
/// computation, `async-update` passes the running bundle on, `async-done`
/// waits for the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncStep {
    Start,
    Update,
    Done,
}

impl AsyncStep {
    pub const ALL: [AsyncStep; 3] = [AsyncStep::Start, AsyncStep::Update, AsyncStep::Done];

    /// A start takes its computation's operands; an update or done the
    /// bundle before it.
    pub fn arity(self) -> Arity {
        match self {
            AsyncStep::Start => Arity::Variadic,
            AsyncStep::Update | AsyncStep::Done => Arity::Exactly(1),
        }
    }

    pub fn opcode(self) -> &'static str {
        match self {
            AsyncStep::Start => "async-start",
            AsyncStep::Update => "async-update",
            AsyncStep::Done => "async-done",
        }
    }

    /// The suffix of XLA's short form (`call-start`, `negate-done`): the
    /// wrapped op's opcode, then this.
    pub fn suffix(self) -> &'static str {
        match self {
            AsyncStep::Start => "-start",
            AsyncStep::Update => "-update",
            AsyncStep::Done => "-done",
        }
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.opcode() == s)
    }
}

/// A `send`, `recv` or their `-done`: the four share their attributes.
/// `channel_id` pairs a send with its recv (XLA's text may leave it out);
/// `is_host_transfer` says the other end is the host, not a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transfer {
    pub step: TransferStep,
    pub channel_id: Option<i64>,
    pub is_host_transfer: bool,
}

spelled_enum! {
    /// How `triangular-solve` uses its matrix (`transpose_a=`, XLA's
    /// `TriangularSolveOptions.Transpose`).
    pub enum TransposeA {
        NoTranspose = ("NO_TRANSPOSE", 1),
        Transpose = ("TRANSPOSE", 2),
        Adjoint = ("ADJOINT", 3),
    }
}

spelled_enum! {
    /// Which transform `fft` computes (`fft_type=`, XLA's `FftType`).
    pub enum FftType {
        /// Complex to complex, forward.
        Fft = ("FFT", 0),
        /// Complex to complex, inverse.
        Ifft = ("IFFT", 1),
        /// Real to complex: the non-negative frequencies only.
        Rfft = ("RFFT", 2),
        /// Complex (non-negative frequencies) to real.
        Irfft = ("IRFFT", 3),
    }
}

spelled_enum! {
    /// `rng`'s distribution (`distribution=` in text, `RandomDistribution`
    /// in the proto).
    pub enum RngDistribution {
        Uniform = ("rng_uniform", 1),
        Normal = ("rng_normal", 2),
    }
}

/// A fusion's kind (`kind=` in text, `fusion_kind` in the proto): how XLA's
/// backend would emit the fused computation. hlatc keeps it as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FusionKind {
    Loop,
    Input,
    Output,
    Custom,
}

impl FusionKind {
    pub const ALL: [FusionKind; 4] = [
        FusionKind::Loop,
        FusionKind::Input,
        FusionKind::Output,
        FusionKind::Custom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FusionKind::Loop => "kLoop",
            FusionKind::Input => "kInput",
            FusionKind::Output => "kOutput",
            FusionKind::Custom => "kCustom",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct CustomCall {
    pub target: String,
    pub api_version: CustomCallApiVersion,
    pub has_side_effect: bool,
    /// The convolution attributes a call may carry (cuDNN's convolutions
    /// do), kept for the target to read; `None` when none is written.
    pub convolution: Option<Box<CallConvolution>>,
    /// `operand_layout_constraints`: the layout each operand must arrive
    /// in (XLA's layout-constrained custom call); `None` when free.
    pub operand_layouts: Option<Vec<Shape>>,
    pub aliasing: Vec<OperandAlias>,
    /// `called_computations={a, b}`: computations the target may run.
    pub called: Vec<String>,
    /// `schedule=`: where a scheduler should place the call.
    pub schedule: CustomCallSchedule,
    /// `padding_type=`: how a convolution target pads (TensorFlow's
    /// `VALID` and `SAME`, for the dynamic-shape convolutions).
    pub padding_type: PaddingType,
    /// `literal=s32[2]{0} {1, 2}`: a constant the target reads. Boxed:
    /// rare.
    pub literal: Option<Box<Literal>>,
}

spelled_enum! {
    /// How a custom call's convolution pads (`padding_type=`, XLA's
    /// `PaddingType`): not said, no padding, or to keep the size.
    #[derive(Default)]
    pub enum PaddingType {
        #[default]
        Invalid = ("PADDING_INVALID", 0),
        Valid = ("PADDING_VALID", 1),
        Same = ("PADDING_SAME", 2),
    }
}

spelled_enum! {
    /// Where a scheduler should place a custom call (`schedule=`, XLA's
    /// `CustomCallSchedule`): anywhere, as late or as early as it can.
    #[derive(Default)]
    pub enum CustomCallSchedule {
        #[default]
        None = ("SCHEDULE_NONE", 0),
        Latest = ("SCHEDULE_LATEST", 1),
        Earliest = ("SCHEDULE_EARLIEST", 2),
    }
}

/// One entry of `output_to_operand_aliasing={{0}: (1, {})}`: the output at
/// `output_index` reuses the buffer of operand `operand` at `operand_index`
/// (custom calls and fusions that update in place).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperandAlias {
    pub output_index: Vec<i64>,
    pub operand: i64,
    pub operand_index: Vec<i64>,
}

impl OperandAlias {
    /// Reads XLA's text, the braces included:
    /// `{{}: (0, {}), {1}: (2, {0,1})}`.
    pub fn parse_list(text: &str) -> Result<Vec<OperandAlias>, String> {
        let bad = || {
            format!("output_to_operand_aliasing '{text}' is not {{{{index}}: (operand, {{index}}), ...}}")
        };
        let inner = text
            .trim()
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .ok_or_else(bad)?;
        let index = |s: &str| -> Result<Vec<i64>, String> {
            let s = s
                .trim()
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .ok_or_else(bad)?;
            s.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(|x| x.parse().map_err(|_| bad()))
                .collect()
        };
        let mut out = Vec::new();
        let mut rest = inner.trim();
        while !rest.is_empty() {
            let (output, after) = rest.split_once(':').ok_or_else(bad)?;
            let after = after.trim_start().strip_prefix('(').ok_or_else(bad)?;
            let (inside, tail) = after.split_once(')').ok_or_else(bad)?;
            let (operand, operand_index) = inside.split_once(',').ok_or_else(bad)?;
            out.push(OperandAlias {
                output_index: index(output)?,
                operand: operand.trim().parse().map_err(|_| bad())?,
                operand_index: index(operand_index)?,
            });
            rest = tail.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        Ok(out)
    }
}

impl std::fmt::Display for OperandAlias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let index = |v: &[i64]| {
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        write!(
            f,
            "{{{}}}: ({}, {{{}}})",
            index(&self.output_index),
            self.operand,
            index(&self.operand_index)
        )
    }
}

/// A custom call's `window`, `dim_labels`, group counts and operand
/// precision: what `convolution` has, each optional here.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallConvolution {
    /// Written even when empty (`window={}`), as XLA keeps it.
    pub window: Option<Window>,
    pub dims: Option<ConvDims>,
    pub feature_group_count: i64,
    pub batch_group_count: i64,
    pub precision: Vec<Precision>,
}

impl CallConvolution {
    /// Whether it says nothing a call without it would not: such a call is
    /// kept as one without, so text and proto read back the same.
    pub fn is_empty(&self) -> bool {
        self.window.is_none()
            && self.dims.is_none()
            && self.feature_group_count == 1
            && self.batch_group_count == 1
            && self.precision.is_empty()
    }
}

/// An operation with its attributes. Called computations are referenced by
/// name; the module resolves them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Parameter(i64),
    Constant(Literal),
    /// A constant of tuple shape, its elements' values (as XLA's
    /// `constant((a, b))`); printed and carried in the proto's
    /// `tuple_literals`.
    TupleConstant(Vec<LiteralTree>),
    Iota {
        dimension: i64,
    },
    Unary(UnaryOp),
    Binary(BinaryOp),
    Compare {
        direction: ComparisonDirection,
        kind: Option<ComparisonType>,
    },
    Select,
    Clamp,
    Convert,
    /// `stochastic-convert`: a float operand converted to the declared type,
    /// rounding up or down by its second operand's random bits (unsigned,
    /// as wide as the operand's type) instead of to nearest.
    StochasticConvert,
    /// `reduce-precision`: each float rounded to the nearest value with
    /// `exponent_bits` and `mantissa_bits`, kept in its own type.
    ReducePrecision {
        exponent_bits: i32,
        mantissa_bits: i32,
    },
    BitcastConvert,
    /// `bitcast`: the operand's bytes read as the declared shape (which may
    /// differ in dimensions, layout or element type, not in byte size).
    Bitcast,
    Broadcast {
        dimensions: Vec<i64>,
    },
    /// `reshape`: the operand's elements in the declared shape.
    /// `inferred_dimension` names the result dimension a frontend left to
    /// be inferred (a dynamic one); XLA keeps it in the proto's
    /// `dimensions`.
    Reshape {
        inferred_dimension: Option<i64>,
    },
    Transpose {
        permutation: Vec<i64>,
    },
    Reverse {
        dimensions: Vec<i64>,
    },
    Slice {
        slices: Vec<SliceDim>,
    },
    DynamicSlice {
        sizes: Vec<i64>,
    },
    DynamicUpdateSlice,
    /// `set-dimension-size(operand, size)`: the operand, its dimension
    /// `dimension` made dynamic, holding `size` (an s32 scalar) elements at
    /// run time, at most the dimension's bound.
    SetDimensionSize {
        dimension: i64,
    },
    /// `get-dimension-size(operand)`: how many elements dimension
    /// `dimension` holds at run time, as `s32[]`.
    GetDimensionSize {
        dimension: i64,
    },
    /// `dynamic-reshape(operand, sizes...)`: a reshape to the declared
    /// shape, whose dimensions hold the s32 scalars `sizes` at run time.
    DynamicReshape,
    Concatenate {
        dimension: i64,
    },
    Pad {
        config: Vec<PadDim>,
    },
    Dot {
        dims: DotDims,
        precision: Vec<Precision>,
        algorithm: DotAlgorithm,
    },
    /// `ragged-dot(lhs, rhs, group_sizes)`: a dot whose lhs dimension
    /// `ragged.lhs_ragged` is cut into consecutive groups of the sizes the
    /// third operand gives (a mixture of experts' tokens per expert). Not
    /// contracted, each group meets its own rhs matrix (`rhs_group`);
    /// contracted, each group's partial product is its own result row.
    RaggedDot {
        dims: DotDims,
        /// Boxed: every op is as large as the largest, and ragged dots
        /// are rare.
        ragged: Box<RaggedDims>,
        precision: Vec<Precision>,
        algorithm: DotAlgorithm,
    },
    Reduce {
        dimensions: Vec<i64>,
        to_apply: String,
    },
    /// A window slid over the input (`lhs`), each position contracted with
    /// the kernel (`rhs`); features split into groups by the two counts.
    Convolution {
        window: Window,
        /// Boxed: inline, it would make every `Op` larger.
        dims: Box<ConvDims>,
        feature_group_count: i64,
        batch_group_count: i64,
        precision: Vec<Precision>,
    },
    /// `to_apply` folded over each position of a window (inputs, then one
    /// init per input, as `reduce`).
    ReduceWindow {
        window: Window,
        to_apply: String,
    },
    /// `select-and-scatter(operand, source, init)`: in each window of the
    /// operand, `select` picks one element (a max pool's argmax, say), and
    /// the source value of that window is combined by `scatter` into that
    /// position of a result that starts as `init` everywhere: the gradient
    /// of a max pool.
    SelectAndScatter {
        window: Window,
        select: String,
        scatter: String,
    },
    Tuple,
    /// `opt-barrier`: its result is its (tuple) operand, but no optimization
    /// moves work across it or merges values through it. Remat routes a
    /// recomputation's inputs through one so XLA's CSE cannot fold the
    /// recomputed values back into the saved ones.
    OptBarrier,
    GetTupleElement {
        index: i64,
    },
    /// `call`: `to_apply` on the operands. A composite call
    /// (`is_composite=true`) stands for the op its frontend attributes
    /// name (`composite.name`), `to_apply` being its decomposition.
    Call {
        to_apply: String,
        is_composite: bool,
    },
    /// `while`: runs `body` on its (one) operand while `condition` of it is
    /// true; the result is the last value.
    While {
        condition: String,
        body: String,
    },
    /// `conditional`: runs one branch on its operand. A pred selector
    /// picks the first branch (`true_computation`) when true; an s32 index
    /// picks that branch, or the last when out of range.
    Conditional {
        branches: Vec<String>,
    },
    /// `fusion`: a call whose callee XLA's backend emits as one kernel.
    Fusion {
        kind: FusionKind,
        calls: String,
        aliasing: Vec<OperandAlias>,
    },
    /// `sort`: sorts its operands together along `dimension`, ordered by
    /// `comparator` over the elements of every operand.
    Sort {
        dimension: i64,
        is_stable: bool,
        comparator: String,
    },
    /// `map`: applies the scalar computation `to_apply` to each element of
    /// its operands (`dimensions` lists every dimension, in order, or none).
    Map {
        dimensions: Vec<i64>,
        to_apply: String,
    },
    /// `rng`: random values of the declared shape, between (uniform) or
    /// around (normal) its two scalar operands.
    Rng {
        distribution: RngDistribution,
    },
    /// `rng-get-and-update-state`: the device's RNG state as `u64[2]`,
    /// then advanced by `delta` (XLA's lowering of `rng` writes it).
    RngGetAndUpdateState {
        delta: i64,
    },
    /// `all-reduce`: every participant gets the reduction (by `to_apply`)
    /// of all participants' operands.
    AllReduce {
        collective: Collective,
        to_apply: String,
    },
    /// `all-gather`: the participants' operands concatenated along
    /// `dimension`.
    AllGather {
        collective: Collective,
        dimension: i64,
    },
    /// `reduce-scatter`: reduced as by all-reduce, then split along
    /// `dimension`, one piece per participant.
    ReduceScatter {
        collective: Collective,
        dimension: i64,
        to_apply: String,
    },
    /// `all-to-all`: with a `dimension`, the operand is split along it and
    /// piece i goes to participant i; without, operand i does.
    AllToAll {
        collective: Collective,
        dimension: Option<i64>,
    },
    /// The batch normalizations (see [`BatchNormKind`]): `epsilon` is
    /// added to the variance, `feature_index` is the dimension whose
    /// entries keep their own statistics.
    BatchNorm {
        kind: BatchNormKind,
        epsilon: F32Bits,
        feature_index: i64,
    },
    /// `ragged-all-to-all(input, output, input_offsets, send_sizes,
    /// output_offsets, recv_sizes)`: each participant sends a run of its
    /// input's rows to every other, of sizes and at offsets the four index
    /// operands give; its value is `output` with the received runs written
    /// in.
    RaggedAllToAll {
        collective: Collective,
    },
    /// `domain`: its operand, marking where one sharding domain ends and
    /// another begins (`domain={kind="sharding", entry=..., exit=...}`).
    /// XLA keeps `exit` on the operand's side (proto field 54,
    /// `domain_entry_sharding`) and `entry` on the users' (55).
    Domain {
        entry: Box<crate::sharding::Sharding>,
        exit: Box<crate::sharding::Sharding>,
    },
    /// `triangular-solve`: solves `a x = b` (or `x a = b` unless
    /// `left_side`) for a triangular `a`, over leading batch dimensions.
    /// `transpose_a` is `None` where it is not written (XLA's
    /// `TRANSPOSE_INVALID`, which it prints as nothing).
    TriangularSolve {
        left_side: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose_a: Option<TransposeA>,
    },
    /// `cholesky`: the lower (or upper) triangular factor of a symmetric
    /// positive definite matrix; the other triangle is unspecified.
    Cholesky {
        lower: bool,
    },
    /// `fft`: a discrete Fourier transform over the last
    /// `fft_length.len()` (1 to 3) dimensions.
    Fft {
        fft_type: FftType,
        fft_length: Vec<i64>,
    },
    /// `collective-broadcast`: every participant of a group gets the
    /// operand of the group's first participant.
    CollectiveBroadcast {
        collective: Collective,
    },
    /// `topk`: the `k` largest (or, with `largest` false, smallest) values
    /// along the last dimension, and their indices as s32.
    TopK {
        k: i64,
        largest: bool,
    },
    /// `collective-permute`: each source sends its operands to its target;
    /// a participant nobody sends to gets zeros.
    CollectivePermute {
        channel_id: Option<i64>,
        pairs: Vec<(i64, i64)>,
        /// Empty unless in place: then the operands are `(input, output,
        /// input_offsets, output_offsets)`, each transfer writes a slice of
        /// these sizes into `output` (XLA's `slice_sizes`, flattened into
        /// `dynamic_slice_sizes` in the proto), and the result is `output`.
        slice_sizes: Vec<Vec<i64>>,
    },
    /// `all-reduce-start`: an all-reduce begun; its value (the same as the
    /// all-reduce's) is read through `all-reduce-done`.
    AllReduceStart {
        collective: Collective,
        to_apply: String,
    },
    /// `all-gather-start`: an all-gather begun; its value is the tuple
    /// (operands, results), and `all-gather-done` gives the results.
    AllGatherStart {
        collective: Collective,
        dimension: i64,
    },
    /// `collective-permute-start`: the tuple (operand, result) or (operand,
    /// result, u32[], u32[]) with the transfer's context;
    /// `collective-permute-done` gives the result.
    CollectivePermuteStart {
        channel_id: Option<i64>,
        pairs: Vec<(i64, i64)>,
        /// As `CollectivePermute`'s; in place, the start holds `(input,
        /// output, u32[], u32[])`.
        slice_sizes: Vec<Vec<i64>>,
    },
    /// `all-reduce-done`, `all-gather-done`, `collective-permute-done`.
    CollectiveDone(AsyncCollective),
    /// `replica-id`: this device's replica number, `u32[]`.
    ReplicaId,
    /// `partition-id`: this device's partition number, `u32[]`.
    PartitionId,
    Gather {
        dims: GatherDims,
        slice_sizes: Vec<i64>,
        indices_are_sorted: bool,
    },
    Scatter {
        dims: ScatterDims,
        to_apply: String,
        indices_are_sorted: bool,
        unique_indices: bool,
    },
    RngBitGenerator {
        algorithm: RngAlgorithm,
    },
    CustomCall(CustomCall),
    /// `after-all`: a token ordered after every operand token (none: a
    /// fresh token).
    AfterAll,
    /// `add-dependency`: its first operand's value, ordered after the token
    /// that is its second.
    AddDependency,
    /// `send`, `send-done`, `recv`, `recv-done`.
    Transfer(Transfer),
    /// `async-start`, `async-update`, `async-done`: `calls` (a computation
    /// whose root is the one instruction run asynchronously) on `thread`
    /// (`async_execution_thread`; `None` is the main thread). An
    /// async-start's value is ((operands), result, context...), which the
    /// update passes on and from which the done takes the result.
    Async {
        step: AsyncStep,
        calls: String,
        thread: Option<String>,
    },
    /// `copy-start`: a copy begun, usually between memory spaces; its value
    /// is (destination, source, u32[] context), the destination's layout
    /// its own. `cross_program_prefetch_index` marks XLA's prefetch of a
    /// parameter across program runs.
    CopyStart {
        cross_program_prefetch_index: Option<i32>,
    },
    /// `copy-done`: the destination of the copy its operand began.
    CopyDone,
    /// `infeed`: reads the declared data from the host, after the token;
    /// its value is (data, token). `config` is for the host side, as written.
    Infeed {
        config: String,
    },
    /// `outfeed`: writes its operand to the host, after the token; its
    /// value is a token. `shape` is what the host is told to expect
    /// (`outfeed_shape`), `None` meaning the operand's own shape.
    Outfeed {
        config: String,
        shape: Option<Box<Shape>>,
    },
}

/// One table for the opcode spelling of the simple elementwise ops, used by
/// printer, parser and proto in both directions.
const UNARY_NAMES: [(UnaryOp, &str); 25] = [
    (UnaryOp::Abs, "abs"),
    (UnaryOp::Negate, "negate"),
    (UnaryOp::Exp, "exponential"),
    (UnaryOp::Expm1, "exponential-minus-one"),
    (UnaryOp::Log, "log"),
    (UnaryOp::Log1p, "log-plus-one"),
    (UnaryOp::Sqrt, "sqrt"),
    (UnaryOp::Rsqrt, "rsqrt"),
    (UnaryOp::Sin, "sine"),
    (UnaryOp::Cos, "cosine"),
    (UnaryOp::Tanh, "tanh"),
    (UnaryOp::Tan, "tan"),
    (UnaryOp::Cbrt, "cbrt"),
    (UnaryOp::Erf, "erf"),
    (UnaryOp::Logistic, "logistic"),
    (UnaryOp::Floor, "floor"),
    (UnaryOp::Ceil, "ceil"),
    (UnaryOp::RoundNearestEven, "round-nearest-even"),
    (UnaryOp::Sign, "sign"),
    (UnaryOp::Not, "not"),
    (UnaryOp::IsFinite, "is-finite"),
    (UnaryOp::Copy, "copy"),
    (UnaryOp::PopulationCount, "popcnt"),
    (UnaryOp::Real, "real"),
    (UnaryOp::Imag, "imag"),
];

const BINARY_NAMES: [(BinaryOp, &str); 16] = [
    (BinaryOp::Add, "add"),
    (BinaryOp::Subtract, "subtract"),
    (BinaryOp::Multiply, "multiply"),
    (BinaryOp::Divide, "divide"),
    (BinaryOp::Remainder, "remainder"),
    (BinaryOp::Maximum, "maximum"),
    (BinaryOp::Minimum, "minimum"),
    (BinaryOp::Power, "power"),
    (BinaryOp::Atan2, "atan2"),
    (BinaryOp::And, "and"),
    (BinaryOp::Or, "or"),
    (BinaryOp::Xor, "xor"),
    (BinaryOp::ShiftLeft, "shift-left"),
    (BinaryOp::ShiftRightLogical, "shift-right-logical"),
    (BinaryOp::ShiftRightArithmetic, "shift-right-arithmetic"),
    (BinaryOp::Complex, "complex"),
];

impl UnaryOp {
    /// A bit count or a logical not computes on integers; the rest carry
    /// a float operand's type through.
    pub fn traits(self) -> OpTraits {
        match self {
            UnaryOp::Not | UnaryOp::PopulationCount => OpTraits::NONE,
            _ => OpTraits::CARRIES_FLOAT_TYPE,
        }
    }

    pub fn opcode(self) -> &'static str {
        UNARY_NAMES
            .iter()
            .find(|(o, _)| *o == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        UNARY_NAMES.iter().find(|(_, n)| *n == s).map(|(o, _)| *o)
    }

    /// Every unary op, in the opcode table's order.
    pub fn all() -> impl Iterator<Item = UnaryOp> {
        UNARY_NAMES.iter().map(|(o, _)| *o)
    }
}

impl BinaryOp {
    /// Arithmetic carries a float operand's type through; bitwise ops,
    /// shifts and `complex` do not.
    pub fn traits(self) -> OpTraits {
        match self {
            BinaryOp::Add
            | BinaryOp::Subtract
            | BinaryOp::Multiply
            | BinaryOp::Divide
            | BinaryOp::Remainder
            | BinaryOp::Maximum
            | BinaryOp::Minimum
            | BinaryOp::Power
            | BinaryOp::Atan2 => OpTraits::CARRIES_FLOAT_TYPE,
            _ => OpTraits::NONE,
        }
    }

    pub fn opcode(self) -> &'static str {
        BINARY_NAMES
            .iter()
            .find(|(o, _)| *o == self)
            .map(|(_, n)| *n)
            .unwrap_or("?")
    }

    pub fn from_opcode(s: &str) -> Option<Self> {
        BINARY_NAMES.iter().find(|(_, n)| *n == s).map(|(o, _)| *o)
    }

    /// Every binary op, in the opcode table's order.
    pub fn all() -> impl Iterator<Item = BinaryOp> {
        BINARY_NAMES.iter().map(|(o, _)| *o)
    }
}

/// The ops with no attribute besides the elementwise ones: their opcode is
/// all there is to read or write of them. The text parser and the proto
/// reader both build them from here, and spell them through [`Op::opcode`].
const WITHOUT_ATTRIBUTES: [Op; 18] = [
    Op::Select,
    Op::Clamp,
    Op::Convert,
    Op::StochasticConvert,
    Op::BitcastConvert,
    Op::Bitcast,
    Op::DynamicUpdateSlice,
    Op::DynamicReshape,
    Op::Tuple,
    Op::OptBarrier,
    Op::CollectiveDone(AsyncCollective::AllReduce),
    Op::CollectiveDone(AsyncCollective::AllGather),
    Op::CollectiveDone(AsyncCollective::CollectivePermute),
    Op::ReplicaId,
    Op::PartitionId,
    Op::CopyDone,
    Op::AfterAll,
    Op::AddDependency,
];

/// Every opcode spelling the IR accepts, for `--help` and error messages.
pub fn all_opcodes() -> Vec<&'static str> {
    let mut v: Vec<&str> = UNARY_NAMES.iter().map(|(_, n)| *n).collect();
    v.extend(BINARY_NAMES.iter().map(|(_, n)| *n));
    v.extend(crate::op_description::TABLE_OPCODES);
    v.extend(BatchNormKind::ALL.iter().map(|k| k.opcode()));
    v.extend(TransferStep::ALL.iter().map(|t| t.opcode()));
    v.extend(AsyncStep::ALL.iter().map(|a| a.opcode()));
    v.sort_unstable();
    v.dedup();
    v
}

/// The computations an op calls as (first, second, the rest), in XLA's
/// order; one match for shared and mutable access alike (match ergonomics
/// give `&` or `&mut` bindings), so the two cannot drift apart.
macro_rules! callee_slots {
    ($op:expr) => {
        match $op {
            Op::Reduce { to_apply, .. }
            | Op::ReduceWindow { to_apply, .. }
            | Op::Call { to_apply, .. }
            | Op::Scatter { to_apply, .. }
            | Op::AllReduce { to_apply, .. }
            | Op::AllReduceStart { to_apply, .. }
            | Op::ReduceScatter { to_apply, .. }
            | Op::Map { to_apply, .. }
            | Op::Sort {
                comparator: to_apply,
                ..
            }
            | Op::Fusion {
                calls: to_apply, ..
            }
            | Op::Async {
                calls: to_apply, ..
            } => (Some(to_apply), None, None),
            Op::While { condition, body } => (Some(body), Some(condition), None),
            Op::SelectAndScatter {
                select, scatter, ..
            } => (Some(select), Some(scatter), None),
            Op::Conditional { branches } => (None, None, Some(branches)),
            Op::CustomCall(CustomCall { called, .. }) => (None, None, Some(called)),
            _ => (None, None, None),
        }
    };
}

impl Op {
    /// A reshape with no dimension left to infer.
    pub const RESHAPE: Op = Op::Reshape {
        inferred_dimension: None,
    };

    /// The op `opcode` names when it has no attributes to read: an
    /// elementwise unary or binary op, or one of [`WITHOUT_ATTRIBUTES`].
    pub fn without_attributes(opcode: &str) -> Option<Op> {
        if let Some(u) = UnaryOp::from_opcode(opcode) {
            return Some(Op::Unary(u));
        }
        if let Some(b) = BinaryOp::from_opcode(opcode) {
            return Some(Op::Binary(b));
        }
        WITHOUT_ATTRIBUTES
            .iter()
            .find(|op| op.opcode() == opcode)
            .cloned()
    }

    /// Whether the op carries its float operands' element type through to
    /// its result unchanged, whatever float type that is (elementwise
    /// arithmetic and data movement): over operands of the same dims whose
    /// float type moves from one float type to another, a valid instruction
    /// stays valid with its result's float type moved the same way.
    /// Comparisons and `is-finite` give pred either way. Not `convert`,
    /// dots, reductions or anything with a called computation.
    pub fn carries_float_type(&self) -> bool {
        self.traits().has(OpTraits::CARRIES_FLOAT_TYPE)
    }

    /// Whether the op's result type is its own (a dot's accumulation type,
    /// a convert's target) while its dims come from its operands' dims:
    /// over operands of the same dims whose float types move between float
    /// types, a valid instruction stays valid with the same result shape.
    pub fn result_ignores_float_operand_types(&self) -> bool {
        matches!(self, Op::Dot { .. } | Op::Convert)
    }

    /// Whether the op's effect is more than its value (a custom call marked
    /// `custom_call_has_side_effect`, a transfer, infeed or outfeed): such
    /// instructions are never removed or merged.
    pub fn has_side_effect(&self) -> bool {
        match self {
            Op::CustomCall(cc) => cc.has_side_effect,
            _ => self.traits().has(OpTraits::SIDE_EFFECT),
        }
    }

    /// Whether two instructions with this op and the same operands are the
    /// same value, so one can stand for both (value numbering, cse).
    /// Parameters are distinct inputs; each RNG draw is its own.
    /// Ops that run other computations as a whole (loops, branches,
    /// fusions, async ops) are never merged: hlatc does not look into
    /// their callees for draws or side effects, and a merged async-start
    /// would have two dones. Nor are collectives: each is a separate
    /// exchange between devices.
    pub fn is_pure(&self) -> bool {
        !self.traits().has(OpTraits::IMPURE) && !self.is_collective() && !self.has_side_effect()
    }

    /// Whether the op exchanges data between devices.
    pub fn is_collective(&self) -> bool {
        self.traits().has(OpTraits::COLLECTIVE)
    }

    /// The replica groups and channel of a replica-grouped collective.
    pub fn collective(&self) -> Option<&Collective> {
        match self {
            Op::AllReduce { collective, .. }
            | Op::AllGather { collective, .. }
            | Op::ReduceScatter { collective, .. }
            | Op::AllToAll { collective, .. }
            | Op::RaggedAllToAll { collective }
            | Op::CollectiveBroadcast { collective }
            | Op::AllReduceStart { collective, .. }
            | Op::AllGatherStart { collective, .. } => Some(collective),
            _ => None,
        }
    }

    /// Names of the computations this op calls, in XLA's order of
    /// `called_computation_ids` (a while's body before its condition),
    /// without allocating: every pass over a module asks this of every
    /// instruction.
    pub fn called_computations(&self) -> impl Iterator<Item = &str> {
        let (first, second, rest) = callee_slots!(self);
        first
            .into_iter()
            .chain(second)
            .chain(rest.into_iter().flatten())
            .map(String::as_str)
    }

    pub fn called_computations_mut(&mut self) -> Vec<&mut String> {
        let (first, second, rest) = callee_slots!(self);
        first
            .into_iter()
            .chain(second)
            .chain(rest.into_iter().flat_map(|v| v.iter_mut()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_tables_are_bijective() {
        let all = all_opcodes();
        let mut dedup = all.clone();
        dedup.dedup();
        assert_eq!(all, dedup, "an opcode is spelled twice");
        for (op, name) in UNARY_NAMES {
            assert_eq!(UnaryOp::from_opcode(name), Some(op));
            assert_eq!(op.opcode(), name);
        }
        for (op, name) in BINARY_NAMES {
            assert_eq!(BinaryOp::from_opcode(name), Some(op));
            assert_eq!(op.opcode(), name);
        }
        for op in WITHOUT_ATTRIBUTES {
            assert!(all.contains(&op.opcode()), "{}", op.opcode());
            assert_eq!(Op::without_attributes(op.opcode()), Some(op.clone()));
        }
        assert_eq!(
            Op::without_attributes("add"),
            Some(Op::Binary(BinaryOp::Add))
        );
        assert_eq!(Op::without_attributes("iota"), None);
    }
}
