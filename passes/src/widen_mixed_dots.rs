//! `widen-mixed-dots`: a `dot` over narrower floats than its result (bf16
//! operands accumulating into f32, as `amp` writes them for Neuron) as the
//! same dot over its operands converted to the result's type. The values
//! are the same: a bf16 (or f16, or 8-bit float) value converts to f32
//! exactly, the product of two of them is exact in f32, and the dot
//! accumulates in f32 either way. XLA CPU needs it: some shapes of such a
//! dot reach its `DotThunk`, which has no kernel for them and fails the run
//! ("Unsupported element type for DotThunk::Execute: BF16 x BF16 = F32",
//! measured with tiny's step at batch 2). `run` and `--verify` apply it to
//! what XLA CPU is handed, never to a bundle.

use crate::context::PassContext;
use crate::pass::{Pass, PassError};
use crate::rewriter::ModuleRewriter;
use hlatc_compiler::{ElementType, InstrId, Module, Op, Shape};

pub struct WidenMixedDots;

impl Pass for WidenMixedDots {
    fn name(&self) -> &str {
        "widen-mixed-dots"
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut slot: Option<ModuleRewriter> = None;
        let mut changed = false;
        for ci in 0..m.computations.len() {
            let c = &m.computations[ci];
            let mixed: Vec<(InstrId, ElementType)> = c
                .ids()
                .filter(|&id| matches!(c.instr(id).op, Op::Dot { .. }))
                .filter_map(|id| {
                    let wide = c.instr(id).shape.as_array()?.ty;
                    let narrower = |&x: &InstrId| {
                        c.instr(x)
                            .shape
                            .as_array()
                            .is_some_and(|a| narrower_float(a.ty, wide))
                    };
                    c.operand_ids(id).iter().any(narrower).then_some((id, wide))
                })
                .collect();
            if mixed.is_empty() {
                continue;
            }
            let mut r = ModuleRewriter::on_demand(&mut slot, m, ci, ctx);
            for (dot, wide) in mixed {
                r.provenance_of(dot);
                let operands = r.comp().operand_ids(dot).to_vec();
                let widened = operands
                    .iter()
                    .map(|&x| match r.shape(x).as_array() {
                        Some(a) if narrower_float(a.ty, wide) => {
                            let shape = Shape::array(wide, a.dims.clone());
                            r.add(Op::Convert, &[x], Some(shape))
                        }
                        _ => Ok(x),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(PassError::rewrite(self.name()))?;
                let op = r.comp().instr(dot).op.clone();
                let shape = r.shape(dot).clone();
                let new = r
                    .add(op, &widened, Some(shape))
                    .map_err(PassError::rewrite(self.name()))?;
                r.replace(dot, new)
                    .map_err(PassError::rewrite(self.name()))?;
            }
            r.remove_dead();
            changed = true;
        }
        ModuleRewriter::finish_on_demand(slot, ctx);
        Ok(changed)
    }
}

/// A float type that converts exactly into the wider float `wide`.
fn narrower_float(ty: ElementType, wide: ElementType) -> bool {
    ty != wide && ty.is_float() && wide.is_float() && ty.byte_size() < wide.byte_size()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Target;
    use hlatc_compiler::{formats::text, verify};

    #[test]
    fn bf16_operands_of_an_f32_dot_are_converted_first() {
        let mut m = text::parse_module(
            "HloModule m\nENTRY e {\n a = bf16[2,3] parameter(0)\n b = bf16[3,4] parameter(1)\n \
             ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
        )
        .unwrap();
        let mut ctx = PassContext::new(Target::Cpu);
        assert!(WidenMixedDots.run(&mut m, &mut ctx).unwrap());
        verify(&m).unwrap();
        let printed = text::print_module(&m);
        assert!(printed.contains("f32[2,3]{1,0} convert(a)"), "{printed}");
        assert!(printed.contains("f32[3,4]{1,0} convert(b)"), "{printed}");
        // A dot over its own type, or over integers, is left alone.
        let mut same = text::parse_module(
            "HloModule m\nENTRY e {\n a = f32[2,3] parameter(0)\n b = f32[3,4] parameter(1)\n \
             ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}",
        )
        .unwrap();
        assert!(!WidenMixedDots.run(&mut same, &mut ctx).unwrap());
    }
}
