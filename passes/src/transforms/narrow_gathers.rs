//! `narrow-gathers`: an `all-gather` whose every reader converts it to one
//! narrower float type gathers the converted values instead. Sequence
//! parallelism gathers each norm's output (f32: norms stay f32 under
//! `amp`) for the projections, which `amp` then converts to bf16; moved
//! before the gather, the convert halves the bytes each rank sends and
//! receives and the gathered buffer. The values are the same bit for bit:
//! a convert is elementwise and an all-gather only moves elements.
//!
//! Left alone: a gather read by anything but such a convert (the wide
//! values are needed), a convert that rounds stochastically (it carries a
//! frontend attribute, or was lowered to random bits: rounding each rank's
//! run draws other bits than rounding the gathered whole), a widening
//! convert, and non-float types.

use crate::infra::context::{human_bytes, PassContext};
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{
    ArrayShape, Computation, ElementType, InstrId, Instruction, Module, Op, Shape,
};

pub struct NarrowGathers;

impl NarrowGathers {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "narrow-gathers";
}

impl Pass for NarrowGathers {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut moved = 0usize;
        let mut saved_bytes = 0u64;
        rewrite_matches(
            m,
            ctx,
            Sweep::Nothing,
            |_, c| -> Vec<Narrowing> {
                if c.has_control_dependencies() {
                    return Vec::new();
                }
                c.ids().filter_map(|id| narrowing(c, id)).collect()
            },
            |r, _, n| -> Result<bool, PassError> {
                let (c, names) = r.parts();
                let old = c.instr(n.gather).clone();
                let mut convert = Instruction::new(
                    names.fresh(&format!("{}.{}", c.instr(n.operand).name, n.ty)),
                    narrowed(n.from, n.ty),
                    Op::Convert,
                );
                convert.metadata = c.instr(n.readers[0]).metadata.clone();
                // Part of autodiff's recomputation where what it reads is.
                convert.recomputed = c.instr(n.operand).recomputed;
                let convert = c.add(convert, &[n.operand]);
                let shape = narrowed(n.wide, n.ty);
                saved_bytes += old.shape.byte_size() - shape.byte_size();
                let mut narrow = Instruction::new(
                    names.fresh(&format!("{}.{}", old.name, n.ty)),
                    shape,
                    old.op,
                );
                narrow.metadata = old.metadata;
                narrow.frontend_attributes = old.frontend_attributes;
                narrow.recomputed = old.recomputed;
                let narrow = c.add(narrow, &[convert]);
                for reader in n.readers {
                    c.replace_all_uses(reader, narrow);
                    c.remove(reader);
                }
                c.remove(n.gather);
                moved += 1;
                Ok(true)
            },
        )?;
        if moved > 0 {
            let (plural, verb) = if moved == 1 {
                ("", "gathers")
            } else {
                ("s", "gather")
            };
            ctx.note(
                self.name(),
                format!(
                    "{moved} all-gather{plural} now {verb} the narrower type their readers convert to: {} less per rank",
                    human_bytes(saved_bytes)
                ),
            );
        }
        Ok(moved > 0)
    }
}

/// An all-gather to narrow: its one operand, the narrower float type its
/// every reader converts it to, and those readers.
struct Narrowing {
    gather: InstrId,
    operand: InstrId,
    ty: ElementType,
    readers: Vec<InstrId>,
    /// The operand's shape and the gather's.
    from: ArrayShape,
    wide: ArrayShape,
}

/// `id` as an all-gather to narrow, or `None` when it is not one.
fn narrowing(c: &Computation, id: InstrId) -> Option<Narrowing> {
    let i = c.instr(id);
    let [operand] = c.operand_ids(id)[..] else {
        return None;
    };
    if !matches!(i.op, Op::AllGather { .. }) {
        return None;
    }
    let wide = i.shape.as_array()?.clone();
    let from = c.instr(operand).shape.as_array()?.clone();
    let readers = c.users(id);
    let ty = c.instr(*readers.first()?).shape.as_array()?.ty;
    let narrows = wide.ty.is_float() && ty.is_float() && ty.bit_width() < wide.ty.bit_width();
    let plain_convert = |r: &InstrId| {
        let r = c.instr(*r);
        matches!(r.op, Op::Convert)
            && r.frontend_attributes.is_empty()
            && r.shape.as_array().is_some_and(|a| a.ty == ty)
    };
    (narrows && readers.iter().all(plain_convert)).then_some(Narrowing {
        gather: id,
        operand,
        ty,
        readers,
        from,
        wide,
    })
}

/// `shape` holding `ty`: the same dimensions, dynamic ones too, and order.
fn narrowed(shape: ArrayShape, ty: ElementType) -> Shape {
    Shape::Array(ArrayShape {
        ty,
        physical: None,
        ..shape
    })
}
