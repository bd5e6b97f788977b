//! The syntax tree: one type per production of the grammar (see
//! [`super`]), each holding exactly what the production writes, so the
//! parser matches on what was read instead of checking it again.
//!
//! Tokens the grammar reads whole (names, integers, numbers, element
//! types, dims, layouts, raw values) are spans of the input; the parser
//! gives them meaning and says where they are out of range.

use super::span::{Int, Name, Span};
use crate::ir::module::AliasKind;

/// `HloModule name, attr=..., ...` and its computations, callees first.
pub(crate) struct Module<'i> {
    pub name: Name<'i>,
    pub attributes: Vec<ModuleAttribute<'i>>,
    /// At least one: the grammar reads `computation+`.
    pub computations: Vec<Computation<'i>>,
}

/// One of the module header's attributes.
pub(crate) enum ModuleAttribute<'i> {
    /// `input_output_alias={ {0}: (0, {}, may-alias), ... }`
    InputOutputAlias(Vec<AliasEntry<'i>>),
    /// `buffer_donor={ (0, {}), ... }`
    BufferDonor(Vec<DonorEntry<'i>>),
    /// `entry_computation_layout={(f32[2]{0})->f32[2]{0}}`, where its
    /// shapes read as shapes; others fall to [`ModuleAttribute::Other`].
    EntryComputationLayout {
        at: Span<'i>,
        program: ProgramShape<'i>,
    },
    Other(Attribute<'i>),
}

/// `{0}: (1, {}, must-alias)`: an output aliasing a parameter.
pub(crate) struct AliasEntry<'i> {
    pub output_index: Vec<Int<'i>>,
    pub parameter: Int<'i>,
    pub parameter_index: Vec<Int<'i>>,
    /// As written; none when left out.
    pub kind: Option<AliasKind>,
}

/// `(0, {1})`: a parameter's buffer the program may reuse.
pub(crate) struct DonorEntry<'i> {
    pub parameter: Int<'i>,
    pub parameter_index: Vec<Int<'i>>,
}

/// `(params)->result`.
pub(crate) struct ProgramShape<'i> {
    pub parameters: Vec<Shape<'i>>,
    pub result: Shape<'i>,
}

/// `ENTRY name (signature) { instructions }, attr=...`. The signature is
/// read but not kept: the parameters' instructions say the same.
pub(crate) struct Computation<'i> {
    pub at: Span<'i>,
    pub is_entry: bool,
    pub name: Name<'i>,
    pub instructions: Vec<Instruction<'i>>,
    /// After the closing brace (`}, execution_thread="host"`).
    pub attributes: Vec<Attribute<'i>>,
}

/// `ROOT name = shape body, attr=...`.
pub(crate) struct Instruction<'i> {
    pub at: Span<'i>,
    pub is_root: bool,
    pub name: Name<'i>,
    /// None when left out, to be inferred from the operands.
    pub shape: Option<Shape<'i>>,
    pub body: Body<'i>,
    pub attributes: Vec<Attribute<'i>>,
}

/// What an instruction computes: a constant, a parameter, or an op of
/// its operands.
pub(crate) enum Body<'i> {
    Constant {
        at: Span<'i>,
        value: ConstantValue<'i>,
    },
    Parameter {
        at: Span<'i>,
        number: Int<'i>,
    },
    Op {
        opcode: Span<'i>,
        operands: Vec<Operand<'i>>,
    },
}

/// A constant's value, or `{...}` where a dump left it out.
pub(crate) enum ConstantValue<'i> {
    Elided(Span<'i>),
    Literal(Literal<'i>),
}

/// An operand: a name, or an instruction written in its place.
pub(crate) enum Operand<'i> {
    /// `x`, or `f32[2] x`: a shape written before a name is read and
    /// dropped, as XLA's reader drops it.
    Named(Name<'i>),
    /// `add(f32[10] parameter(0), multiply(p, q))`: boxed, as rare as it
    /// is large.
    Nested(Box<NestedInstruction<'i>>),
}

/// An instruction written in place of an operand: no name, no attributes.
pub(crate) struct NestedInstruction<'i> {
    pub at: Span<'i>,
    pub shape: Option<Shape<'i>>,
    pub body: Body<'i>,
}

/// `key=value`.
pub(crate) struct Attribute<'i> {
    pub at: Span<'i>,
    pub key: Span<'i>,
    pub value: Value<'i>,
}

/// An attribute's value as the grammar tells it apart, before the key
/// gives it meaning.
pub(crate) struct Value<'i> {
    /// The whole value as written (a string's quotes included).
    pub at: Span<'i>,
    pub form: ValueForm<'i>,
}

pub(crate) enum ValueForm<'i> {
    /// `"..."`: the text between the quotes, escapes not yet read.
    String(Span<'i>),
    Number(Span<'i>),
    Word(Name<'i>),
    /// `{1, 2}`: the text between the braces.
    Ints(Span<'i>),
    /// `{a, b}`
    Words(Vec<Name<'i>>),
    /// `{k=v, ...}`: each value a string, number, word or raw value.
    Map(Vec<(Span<'i>, Value<'i>)>),
    /// `{[0:2], [1:9:2]}`
    Slices(Vec<Slice<'i>>),
    /// `0_0x1_2_1`
    Padding(Vec<Pad<'i>>),
    /// `{f32[2], s32[]}`
    Shapes(Vec<Shape<'i>>),
    /// A shape, and a value of it where one follows (`s32[2]{0} {1, 2}`,
    /// a custom call's `literal=`). Boxed: rare, and every attribute
    /// would pay for its size.
    Shape(Box<ShapedValue<'i>>),
    /// Text with a syntax of its own, read by whoever its key says
    /// (braced groups, iota lists, mesh groups, `a->b`).
    Raw(Span<'i>),
}

/// A shape as an attribute's value, and a value of it if written.
pub(crate) struct ShapedValue<'i> {
    pub shape: Shape<'i>,
    pub literal: Option<Literal<'i>>,
}

/// `[start:limit:stride]`.
pub(crate) struct Slice<'i> {
    pub start: Int<'i>,
    pub limit: Int<'i>,
    pub stride: Option<Int<'i>>,
}

/// `low_high_interior` of one dimension's padding.
pub(crate) struct Pad<'i> {
    pub at: Span<'i>,
    pub low: Int<'i>,
    pub high: Int<'i>,
    pub interior: Option<Int<'i>>,
}

/// A shape as written.
pub(crate) enum Shape<'i> {
    /// `(s0, s1, ...)`
    Tuple {
        at: Span<'i>,
        elements: Vec<Shape<'i>>,
    },
    /// `b(f32[16])`: an array held as a buffer.
    Buffer {
        at: Span<'i>,
        held: Box<Shape<'i>>,
    },
    Array(ArrayShape<'i>),
}

impl<'i> Shape<'i> {
    pub(crate) fn at(&self) -> Span<'i> {
        match self {
            Shape::Tuple { at, .. } | Shape::Buffer { at, .. } => *at,
            Shape::Array(a) => a.element_type,
        }
    }
}

/// `f32[2,<=3,?]{1,0:T(8)}`
pub(crate) struct ArrayShape<'i> {
    pub element_type: Span<'i>,
    /// The text between the brackets: integers, bounds (`<=8`) and `?`.
    pub dims: Span<'i>,
    pub layout: Option<Layout<'i>>,
}

/// `{1,0:T(8,128)}`
pub(crate) struct Layout<'i> {
    pub at: Span<'i>,
    /// The integers before the `:` (or the closing brace).
    pub minor_to_major: Span<'i>,
    /// After the `:`: tiles, memory space and the rest, up to the brace.
    pub tail: Option<Span<'i>>,
}

/// A constant's value as written, before its shape gives it a meaning.
/// Every form but a scalar is boxed: a constant's values are the items of
/// its lists, up to 10^8 of them, each as large as the largest form (32
/// bytes, where unboxed lists made it 56: 2.8 GB for the 5 × 10^7 zeros of
/// one of XLA's test modules).
pub(crate) enum Literal<'i> {
    /// `{a, b, ...}`
    List(Box<LiteralItems<'i>>),
    /// `1`, `-inf`, `nan(0x1)`, `true`
    Scalar(Span<'i>),
    /// `(re, im)`: a complex value, or a tuple constant of two scalars.
    Pair(Box<ScalarPair<'i>>),
    /// `(a, b, ...)`: a tuple constant's elements.
    Tuple(Box<LiteralItems<'i>>),
}

const _: () = assert!(std::mem::size_of::<Literal<'static>>() <= 32);

impl<'i> Literal<'i> {
    pub(crate) fn at(&self) -> Span<'i> {
        match self {
            Literal::List(l) | Literal::Tuple(l) => l.at,
            Literal::Scalar(at) => *at,
            Literal::Pair(p) => p.at,
        }
    }
}

/// A list's or a tuple's items, and where the whole is written.
pub(crate) struct LiteralItems<'i> {
    pub at: Span<'i>,
    pub items: Vec<Literal<'i>>,
}

/// `(a, b)`, both scalars.
pub(crate) struct ScalarPair<'i> {
    pub at: Span<'i>,
    pub first: Span<'i>,
    pub second: Span<'i>,
}
