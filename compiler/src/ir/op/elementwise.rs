//! The elementwise families: unary and binary ops, and comparisons.

use super::row_traits::OpTraits;

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

/// One table for the opcode spelling of the simple elementwise ops, used by
/// printer, parser and proto in both directions.
pub(super) const UNARY_NAMES: [(UnaryOp, &str); 25] = [
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

pub(super) const BINARY_NAMES: [(BinaryOp, &str); 16] = [
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
