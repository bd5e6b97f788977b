//! Attributes of dots and ragged dots (dimension numbers, precision,
//! algorithm; the precisions are also convolutions' and custom calls') and of
//! triangular solves.

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

#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDims {
    pub lhs_batch: Vec<i64>,
    pub lhs_contracting: Vec<i64>,
    pub rhs_batch: Vec<i64>,
    pub rhs_contracting: Vec<i64>,
}

/// What makes a `ragged-dot` ragged: the lhs dimension split into groups
/// by the group sizes operand, and, when that dimension is not contracted
/// or a batch dimension, the rhs dimension that picks each group's matrix.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RaggedDims {
    pub lhs_ragged: Vec<i64>,
    pub rhs_group: Vec<i64>,
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
