//! Converting a value to another element type with its dimensions and
//! order kept: what `widen-mixed-dots` (XLA CPU's dots) and
//! `integer-dot-to-f32` (Neuron's) both write before a dot.

use crate::infra::names::Names;
use hlatc_compiler::{
    ArrayShape, Computation, ElementType, InstrId, Instruction, Metadata, Op, Shape,
};

/// `x` (of shape `from`) converted to `wide`, with the dimensions, dynamic
/// ones too, and order of `from`; its tiles and memory space stay its own.
/// Named `X.TYPE`, with `metadata`. `integer-dot-to-f32` converts its
/// operands the same way.
pub(crate) fn widen(
    c: &mut Computation,
    names: &mut Names,
    x: InstrId,
    from: ArrayShape,
    wide: ElementType,
    metadata: Metadata,
) -> InstrId {
    let stem = format!("{}.{wide}", c.instr(x).name);
    let mut convert = Instruction::new(names.fresh(&stem), retyped(from, wide), Op::Convert);
    convert.metadata = metadata;
    c.add(convert, &[x])
}

/// An array shape of `from`'s dimensions and order in type `ty`, without
/// `from`'s tiles and memory space.
pub(crate) fn retyped(from: ArrayShape, ty: ElementType) -> Shape {
    Shape::Array(ArrayShape {
        ty,
        physical: None,
        ..from
    })
}
