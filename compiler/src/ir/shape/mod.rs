//! Element types and shapes, with XLA's spelling and proto numbering.

use std::fmt;

use crate::util::join::{push_joined, write_joined};

pub mod minifloat;

/// The element types the IR supports. The proto numbers are XLA's `PrimitiveType`.
///
/// The 2- and 4-bit integers and the 8-bit floats take one byte per element
/// in a [`crate::Literal`] and in a proto literal, as in XLA's own literals;
/// how densely a device packs them is its layout's `element_size_in_bits`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElementType {
    Pred,
    S2,
    S4,
    S8,
    S16,
    S32,
    S64,
    U2,
    U4,
    U8,
    U16,
    U32,
    U64,
    F8E5M2,
    F8E4M3,
    F8E4M3FN,
    F8E4M3B11FNUZ,
    F8E3M4,
    F8E5M2FNUZ,
    F8E4M3FNUZ,
    /// The MX formats' 4-bit element: 1 sign, 2 exponent, 1 mantissa bits.
    F4E2M1FN,
    /// The MX formats' scale: an unsigned power of two.
    F8E8M0FNU,
    F16,
    Bf16,
    F32,
    F64,
    /// A pair of f32 (real, imaginary), interleaved in memory.
    C64,
    /// A pair of f64 (real, imaginary), interleaved in memory.
    C128,
}

/// The narrow float types (the 8-bit ones and `f4e2m1fn`), as a pattern
/// (one list for every match that names them).
macro_rules! f8_types {
    () => {
        ElementType::F8E5M2
            | ElementType::F8E4M3
            | ElementType::F8E4M3FN
            | ElementType::F8E4M3B11FNUZ
            | ElementType::F8E3M4
            | ElementType::F8E5M2FNUZ
            | ElementType::F8E4M3FNUZ
            | ElementType::F4E2M1FN
            | ElementType::F8E8M0FNU
    };
}
pub(crate) use f8_types;

/// One row per type: text spelling, `PrimitiveType`, bits per element.
const TABLE: [(ElementType, &str, i32, usize); 28] = [
    (ElementType::Pred, "pred", 1, 8),
    (ElementType::S2, "s2", 26, 2),
    (ElementType::S4, "s4", 21, 4),
    (ElementType::S8, "s8", 2, 8),
    (ElementType::S16, "s16", 3, 16),
    (ElementType::S32, "s32", 4, 32),
    (ElementType::S64, "s64", 5, 64),
    (ElementType::U2, "u2", 27, 2),
    (ElementType::U4, "u4", 22, 4),
    (ElementType::U8, "u8", 6, 8),
    (ElementType::U16, "u16", 7, 16),
    (ElementType::U32, "u32", 8, 32),
    (ElementType::U64, "u64", 9, 64),
    (ElementType::F8E5M2, "f8e5m2", 19, 8),
    (ElementType::F8E4M3, "f8e4m3", 28, 8),
    (ElementType::F8E4M3FN, "f8e4m3fn", 20, 8),
    (ElementType::F8E4M3B11FNUZ, "f8e4m3b11fnuz", 23, 8),
    (ElementType::F8E3M4, "f8e3m4", 29, 8),
    (ElementType::F8E5M2FNUZ, "f8e5m2fnuz", 24, 8),
    (ElementType::F8E4M3FNUZ, "f8e4m3fnuz", 25, 8),
    (ElementType::F4E2M1FN, "f4e2m1fn", 32, 4),
    (ElementType::F8E8M0FNU, "f8e8m0fnu", 33, 8),
    (ElementType::F16, "f16", 10, 16),
    (ElementType::Bf16, "bf16", 16, 16),
    (ElementType::F32, "f32", 11, 32),
    (ElementType::F64, "f64", 12, 64),
    (ElementType::C64, "c64", 15, 64),
    (ElementType::C128, "c128", 18, 128),
];

/// A name of at most 16 bytes as one integer, zero padded (no type name
/// holds a NUL).
const fn pack_name(s: &[u8]) -> u128 {
    let mut v = 0u128;
    let mut i = 0;
    while i < s.len() {
        v |= (s[i] as u128) << (8 * i);
        i += 1;
    }
    v
}

const PACKED_NAMES: [u128; TABLE.len()] = {
    let mut out = [0u128; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        out[i] = pack_name(TABLE[i].1.as_bytes());
        i += 1;
    }
    out
};

impl ElementType {
    pub const ALL: [ElementType; 28] = {
        let mut all = [ElementType::Pred; 28];
        let mut i = 0;
        while i < TABLE.len() {
            all[i] = TABLE[i].0;
            i += 1;
        }
        all
    };

    fn row(self) -> &'static (ElementType, &'static str, i32, usize) {
        // The table lists the variants in declaration order.
        &TABLE[self as usize]
    }

    /// XLA's text spelling (`f32`, `bf16`, `pred`, ...).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// Compared as one packed integer per name: the reader asks for every
    /// shape, and string compares (a `memcmp` call each) were 2% of
    /// parsing a JAX dump.
    pub fn from_name(name: &str) -> Option<Self> {
        let b = name.as_bytes();
        if b.len() > 16 {
            return None;
        }
        let key = pack_name(b);
        PACKED_NAMES
            .iter()
            .position(|&p| p == key)
            .map(|i| TABLE[i].0)
    }

    /// `PrimitiveType` in xla_data.proto.
    pub fn primitive_type(self) -> i32 {
        self.row().2
    }

    pub fn from_primitive_type(value: i32) -> Option<Self> {
        TABLE.iter().find(|r| r.2 == value).map(|r| r.0)
    }

    /// The lowest and highest value of an integer or pred type.
    pub fn integer_range(self) -> Option<(i128, i128)> {
        let bits = self.bit_width() as u32;
        if self == ElementType::Pred {
            Some((0, 1))
        } else if self.is_signed_int() {
            Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1))
        } else if self.is_unsigned_int() {
            Some((0, (1i128 << bits) - 1))
        } else {
            None
        }
    }

    /// Bytes per element in a literal (a sub-byte integer takes a byte).
    pub fn byte_size(self) -> usize {
        self.bit_width().div_ceil(8)
    }

    /// Every float type (asked for every instruction in several passes, so
    /// a plain match rather than through [`ElementType::minifloat`]).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            f8_types!()
                | ElementType::F16
                | ElementType::Bf16
                | ElementType::F32
                | ElementType::F64
        )
    }

    /// `c64` and `c128`: not floats (no order, no float conversions), but
    /// most float arithmetic applies to them.
    pub fn is_complex(self) -> bool {
        matches!(self, ElementType::C64 | ElementType::C128)
    }

    /// A complex type's real and imaginary part type (f32 for c64); `None`
    /// for every other type.
    pub fn complex_component(self) -> Option<ElementType> {
        match self {
            ElementType::C64 => Some(ElementType::F32),
            ElementType::C128 => Some(ElementType::F64),
            _ => None,
        }
    }

    /// The complex type whose parts are `self` (c64 for f32); only f32 and
    /// f64 have one, as XLA's `complex` requires.
    pub fn complex_of(self) -> Option<ElementType> {
        match self {
            ElementType::F32 => Some(ElementType::C64),
            ElementType::F64 => Some(ElementType::C128),
            _ => None,
        }
    }

    /// The narrow float formats' encoding; `None` for every other type.
    pub fn minifloat(self) -> Option<crate::ir::shape::minifloat::Format> {
        crate::ir::shape::minifloat::Format::of(self)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(
            self,
            ElementType::S2
                | ElementType::S4
                | ElementType::S8
                | ElementType::S16
                | ElementType::S32
                | ElementType::S64
        )
    }

    pub fn is_unsigned_int(self) -> bool {
        matches!(
            self,
            ElementType::U2
                | ElementType::U4
                | ElementType::U8
                | ElementType::U16
                | ElementType::U32
                | ElementType::U64
        )
    }

    pub fn is_integer(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// Number of bits of a value, for shifts and bitcast-convert (4 for
    /// `s4`, whatever it takes in memory).
    pub fn bit_width(self) -> usize {
        self.row().3
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dense array: element type, dimensions and a layout (`minor_to_major`).
///
/// The layout is always present so that text, proto and the runtime agree on
/// it; shapes written without one get XLA's default (row-major).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    pub ty: ElementType,
    pub dims: Vec<i64>,
    pub minor_to_major: Vec<i64>,
    /// What the layout says beyond the order of dimensions (tiles, memory
    /// space, ...); `None` when it says nothing more, as in every shape
    /// hlatc builds.
    pub physical: Option<Box<PhysicalLayout>>,
    /// Which dimensions are dynamic (`f32[<=8]`), one bit per dimension,
    /// dimension 0 the lowest: the array holds at most `dims[i]` there,
    /// and how many it holds is known only when the program runs. XLA's
    /// `is_dynamic_dimension`. Kept through text and proto; shape checks
    /// compare bounds and ignore it, as XLA's `ShapeUtil::Compatible` does.
    /// 32 bits keep the shape as small as before it had them (every
    /// instruction holds one); readers refuse a dynamic dimension past
    /// [`MAX_DYNAMIC_DIMENSION`].
    pub dynamic: u32,
}

/// The last dimension that may be dynamic (`ArrayShape::dynamic` has a bit
/// for each dimension up to it).
pub const MAX_DYNAMIC_DIMENSION: usize = 31;

/// The size of an unbounded dynamic dimension (`f32[?]`), as XLA holds it
/// (`Shape::kUnboundedSize`, in a proto's `dimensions` too): a dynamic
/// dimension with no bound. Such a shape has no element count.
pub const UNBOUNDED: i64 = i64::MIN;

impl ArrayShape {
    pub fn new(ty: ElementType, dims: Vec<i64>) -> Self {
        let minor_to_major = default_layout(dims.len());
        ArrayShape {
            ty,
            dims,
            minor_to_major,
            physical: None,
            dynamic: 0,
        }
    }

    /// Whether dimension `i` is dynamic, bounded by `dims[i]`.
    pub fn is_dynamic(&self, i: usize) -> bool {
        i <= MAX_DYNAMIC_DIMENSION && self.dynamic >> i & 1 == 1
    }

    /// Marks dimension `i` dynamic or static; a dimension past
    /// [`MAX_DYNAMIC_DIMENSION`] is always static.
    pub fn set_dynamic(&mut self, i: usize, dynamic: bool) {
        let bit = 1u32.checked_shl(i as u32).unwrap_or(0);
        if dynamic {
            self.dynamic |= bit;
        } else {
            self.dynamic &= !bit;
        }
    }

    pub fn scalar(ty: ElementType) -> Self {
        ArrayShape::new(ty, Vec::new())
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Whether dimension `i` is dynamic with no bound (`?`).
    pub fn is_unbounded(&self, i: usize) -> bool {
        self.dims.get(i) == Some(&UNBOUNDED) && self.is_dynamic(i)
    }

    /// Whether any dimension is unbounded.
    pub fn has_unbounded(&self) -> bool {
        (0..self.rank()).any(|i| self.is_unbounded(i))
    }

    /// Product of the dimensions; `None` if it does not fit in an i64, or
    /// a dimension is unbounded.
    pub fn checked_element_count(&self) -> Option<i64> {
        self.dims.iter().try_fold(
            1i64,
            |acc, &d| if d < 0 { None } else { acc.checked_mul(d) },
        )
    }

    /// Product of the dimensions, saturating at `i64::MAX` (the verifier
    /// rejects shapes that large).
    pub fn element_count(&self) -> i64 {
        self.checked_element_count().unwrap_or(i64::MAX)
    }

    pub fn has_default_layout(&self) -> bool {
        self.minor_to_major == default_layout(self.dims.len())
    }

    /// Same element type and dimensions; layouts may differ.
    pub fn same_dims_and_type(&self, other: &ArrayShape) -> bool {
        self.ty == other.ty && self.dims == other.dims
    }
}

/// A tile dimension that combines the dimensions it covers (`*` in text).
pub const COMBINE_DIMENSION: i64 = i64::MIN;

/// The parts of an XLA layout after the `:` of `{1,0:T(8,128)(2,1)S(1)}`,
/// which place an array in a device's memory rather than order its
/// dimensions: tiles (`T`), the tail padding alignment in elements (`L`),
/// the element size in bits (`E`), the memory space (`S`) and split
/// configs (`SC`). Kept as written and carried through text and proto;
/// shape inference gives none, and no pass reads them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PhysicalLayout {
    /// Each tile's dimensions, outermost tile first; a dimension may be
    /// [`COMBINE_DIMENSION`].
    pub tiles: Vec<Vec<i64>>,
    /// 1 unless written.
    pub tail_padding_alignment_in_elements: i64,
    /// 0 (the element type's own size) unless written.
    pub element_size_in_bits: i64,
    /// 0 (device memory) unless written.
    pub memory_space: i64,
    pub split_configs: Vec<SplitConfig>,
}

/// `SC(dimension:index,index)`: where a dimension is split in memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SplitConfig {
    pub dimension: i64,
    pub split_indices: Vec<i64>,
}

impl Default for PhysicalLayout {
    fn default() -> Self {
        PhysicalLayout {
            tiles: Vec::new(),
            tail_padding_alignment_in_elements: 1,
            element_size_in_bits: 0,
            memory_space: 0,
            split_configs: Vec::new(),
        }
    }
}

impl PhysicalLayout {
    /// `None` for a layout that says nothing beyond the dimension order, so
    /// that an `ArrayShape` has one spelling of "nothing more".
    pub fn boxed_unless_default(self) -> Option<Box<PhysicalLayout>> {
        (self != PhysicalLayout::default()).then(|| Box::new(self))
    }
}

/// XLA's spelling, in XLA's order: `T(8,128)(2,1)L(2)E(4)S(1)SC(0:10)`.
impl fmt::Display for PhysicalLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.tiles.is_empty() {
            f.write_str("T")?;
            for tile in &self.tiles {
                f.write_str("(")?;
                for (i, &d) in tile.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if d == COMBINE_DIMENSION {
                        f.write_str("*")?;
                    } else {
                        write!(f, "{d}")?;
                    }
                }
                f.write_str(")")?;
            }
        }
        if self.tail_padding_alignment_in_elements != 1 {
            write!(f, "L({})", self.tail_padding_alignment_in_elements)?;
        }
        if self.element_size_in_bits != 0 {
            write!(f, "E({})", self.element_size_in_bits)?;
        }
        if self.memory_space != 0 {
            write!(f, "S({})", self.memory_space)?;
        }
        for sc in &self.split_configs {
            write!(f, "SC({}:", sc.dimension)?;
            write_joined(f, &sc.split_indices)?;
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Row-major `minor_to_major`: `{rank-1, ..., 0}`.
pub fn default_layout(rank: usize) -> Vec<i64> {
    (0..rank as i64).rev().collect()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    Array(ArrayShape),
    Tuple(Vec<Shape>),
    /// `token[]`: no data, only an order between side effects (`after-all`,
    /// `send`, `infeed`, ...). XLA's `PrimitiveType` `TOKEN`.
    Token,
    /// `b(f32[16])`: an array held as a buffer that is not copied, only
    /// passed on (pinned by a custom call, threaded through a loop,
    /// updated in place by aliasing custom calls). XLA's `PrimitiveType`
    /// `BUFFER`. (Unboxed: no larger than `Array`.)
    Buffer(ArrayShape),
}

/// `PrimitiveType` `TOKEN` in xla_data.proto.
pub const TOKEN_PRIMITIVE_TYPE: i32 = 17;

/// `PrimitiveType` `BUFFER` in xla_data.proto: a shape whose one
/// `tuple_shapes` entry is the array it holds.
pub const BUFFER_PRIMITIVE_TYPE: i32 = 34;

impl Shape {
    pub fn array(ty: ElementType, dims: impl Into<Vec<i64>>) -> Shape {
        Shape::Array(ArrayShape::new(ty, dims.into()))
    }

    pub fn scalar(ty: ElementType) -> Shape {
        Shape::Array(ArrayShape::scalar(ty))
    }

    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            Shape::Tuple(_) | Shape::Token | Shape::Buffer(_) => None,
        }
    }

    pub fn is_token(&self) -> bool {
        matches!(self, Shape::Token)
    }

    /// Whether `f` holds for one of its leaves (itself, if not a tuple).
    pub fn any_leaf(&self, f: &impl Fn(&Shape) -> bool) -> bool {
        match self {
            Shape::Tuple(t) => t.iter().any(|s| s.any_leaf(f)),
            leaf => f(leaf),
        }
    }

    /// Whether an unbounded dimension (`?`) occurs anywhere in it.
    pub fn has_unbounded(&self) -> bool {
        self.any_leaf(&|s| match s {
            Shape::Array(a) | Shape::Buffer(a) => a.dynamic != 0 && a.has_unbounded(),
            _ => false,
        })
    }

    /// Whether a buffer shape occurs anywhere in it.
    pub fn has_buffer(&self) -> bool {
        self.any_leaf(&|s| matches!(s, Shape::Buffer(_)))
    }

    /// Whether no array in the shape has a dynamic dimension.
    pub fn is_static(&self) -> bool {
        match self {
            Shape::Array(a) => a.dynamic == 0,
            Shape::Buffer(a) => a.dynamic == 0,
            Shape::Tuple(t) => t.iter().all(Shape::is_static),
            Shape::Token => true,
        }
    }

    /// Whether this is a scalar (rank-0 array) of `ty`.
    pub fn is_scalar_of(&self, ty: ElementType) -> bool {
        self.as_array()
            .is_some_and(|a| a.ty == ty && a.dims.is_empty())
    }

    /// How many arrays the shape holds: 1 for an array, the sum over its
    /// elements for a tuple.
    pub fn leaf_count(&self) -> usize {
        match self {
            Shape::Array(_) | Shape::Token | Shape::Buffer(_) => 1,
            Shape::Tuple(t) => t.iter().map(Shape::leaf_count).sum(),
        }
    }

    /// The bytes its arrays take in a row-major host buffer (a tuple: all
    /// its elements; a token: none), saturating where that would not fit in
    /// a u64.
    pub fn byte_size(&self) -> u64 {
        match self {
            Shape::Array(a) | Shape::Buffer(a) => u64::try_from(a.element_count())
                .unwrap_or(u64::MAX)
                .saturating_mul(a.ty.byte_size() as u64),
            Shape::Tuple(elems) => elems
                .iter()
                .fold(0u64, |acc, s| acc.saturating_add(s.byte_size())),
            Shape::Token => 0,
        }
    }

    /// An array's dimensions; empty for a tuple.
    pub fn array_dims(&self) -> Vec<i64> {
        self.as_array().map(|a| a.dims.clone()).unwrap_or_default()
    }

    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }

    /// Equal up to layouts, recursively.
    pub fn compatible(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) | (Shape::Buffer(a), Shape::Buffer(b)) => {
                a.same_dims_and_type(b)
            }
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.compatible(y))
            }
            (Shape::Token, Shape::Token) => true,
            _ => false,
        }
    }

    /// Equal up to layouts and up to which float type an array holds
    /// (XLA's `CompatibleIgnoringFpPrecision`, what its reducer checks
    /// ask): `bf16[]` against `f32[]` passes, `s32[]` against `f32[]` not.
    pub fn compatible_ignoring_fp_precision(&self, other: &Shape) -> bool {
        match (self, other) {
            (Shape::Array(a), Shape::Array(b)) | (Shape::Buffer(a), Shape::Buffer(b)) => {
                a.dims == b.dims && (a.ty == b.ty || (a.ty.is_float() && b.ty.is_float()))
            }
            (Shape::Tuple(a), Shape::Tuple(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| x.compatible_ignoring_fp_precision(y))
            }
            (Shape::Token, Shape::Token) => true,
            _ => false,
        }
    }

    /// The sub-shape at a tuple index path (`{}` is the shape itself).
    pub fn subshape(&self, index: &[i64]) -> Option<&Shape> {
        let mut s = self;
        for &i in index {
            match s {
                Shape::Tuple(elems) => s = elems.get(usize::try_from(i).ok()?)?,
                Shape::Array(_) | Shape::Token | Shape::Buffer(_) => return None,
            }
        }
        Some(s)
    }
}

impl ArrayShape {
    /// Appends the shape as XLA writes it (`f32[2,3]{1,0}`) to `out`. The
    /// printer writes one per instruction, and through `write!` each cost
    /// about 1,700 machine instructions (a tenth of the 7B step's print).
    pub fn push_text(&self, out: &mut String) {
        out.push_str(self.ty.name());
        out.push('[');
        if self.dynamic == 0 {
            push_joined(out, &self.dims);
        } else {
            for (i, d) in self.dims.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if self.is_unbounded(i) {
                    out.push('?');
                    continue;
                }
                if self.is_dynamic(i) {
                    out.push_str("<=");
                }
                push_joined(out, &[*d]);
            }
        }
        out.push(']');
        if !self.dims.is_empty() || self.physical.is_some() {
            out.push('{');
            push_joined(out, &self.minor_to_major);
            if let Some(p) = &self.physical {
                use fmt::Write;
                let _ = write!(out, ":{p}");
            }
            out.push('}');
        }
    }
}

impl fmt::Display for ArrayShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_pushed(f, |text| self.push_text(text))
    }
}

/// Writes what `push` appends: the one spelling of a shape is its
/// `push_text`, and `Display` borrows it.
fn write_pushed(f: &mut fmt::Formatter<'_>, push: impl FnOnce(&mut String)) -> fmt::Result {
    let mut text = String::with_capacity(32);
    push(&mut text);
    f.write_str(&text)
}

impl Shape {
    /// Appends the shape as XLA writes it to `out` (see
    /// [`ArrayShape::push_text`]).
    pub fn push_text(&self, out: &mut String) {
        match self {
            Shape::Array(a) => a.push_text(out),
            Shape::Token => out.push_str("token[]"),
            Shape::Buffer(a) => {
                out.push_str("b(");
                a.push_text(out);
                out.push(')');
            }
            Shape::Tuple(elems) => {
                out.push('(');
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    e.push_text(out);
                }
                out.push(')');
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_pushed(f, |text| self.push_text(text))
    }
}

/// Writes `a,b,c` (XLA's spelling for dimension lists).
/// `(a, b, ...)`, as XLA writes a tuple's shape or value.
pub(crate) fn write_parenthesized<T: fmt::Display>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
) -> fmt::Result {
    f.write_str("(")?;
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        x.fmt(f)?;
    }
    f.write_str(")")
}
