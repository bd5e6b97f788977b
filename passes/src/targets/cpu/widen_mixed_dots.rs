//! `widen-mixed-dots`: a `dot` over narrower floats than its result (bf16
//! operands accumulating into f32, as `amp` writes them for Neuron) as the
//! same dot over its operands converted to the result's type: the rewrite
//! XLA's own `OperandUpcaster` makes. The values are the same: each
//! operand value converts to the result's type exactly, and the dot
//! multiplies and accumulates in that type either way (for bf16 or f16
//! into f32 each product is exact too). XLA CPU needs it: some shapes of
//! such a dot (a batched one, as attention's) reach its `DotThunk`, which
//! has no kernel for them and fails the run ("Unsupported element type for
//! DotThunk::Execute: BF16 x BF16 = F32", measured with tiny's step at
//! batch 2). `run` and `--verify` apply it to what XLA CPU is handed, never
//! to a bundle.
//!
//! A dot over its result's own type, over integers, or into a narrower or
//! equally wide type (bf16 into f16) or into an 8-bit float is left alone,
//! as is an operand that would not convert exactly (`f8e8m0fnu`, whose
//! exponents reach 2^127, into f16). A dot's `algorithm` is kept: its
//! operands hold the same values, and XLA CPU runs the bf16, f16, tf32 and
//! 8-bit algorithms over f32 operands alike.

use crate::infra::context::PassContext;
use crate::infra::convert::widen;
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{Computation, ElementType, InstrId, Module, Op};
use std::collections::HashMap;

pub struct WidenMixedDots;

impl WidenMixedDots {
    /// Whether `id` is a dot this pass rewrites: one with an operand of a
    /// float type narrower than its result's that converts into it
    /// exactly. The runtime asks it to know whether a module needs the
    /// pass at all.
    pub fn widens(c: &Computation, id: InstrId) -> bool {
        Self::wide_type(c, id).is_some()
    }

    /// The result type of a dot this pass rewrites.
    fn wide_type(c: &Computation, id: InstrId) -> Option<ElementType> {
        if !matches!(c.instr(id).op, Op::Dot { .. }) {
            return None;
        }
        let wide = c.instr(id).shape.as_array()?.ty;
        c.operand_ids(id)
            .iter()
            .any(|&x| {
                c.instr(x)
                    .shape
                    .as_array()
                    .is_some_and(|a| widens_exactly(a.ty, wide))
            })
            .then_some(wide)
    }
}

impl WidenMixedDots {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "widen-mixed-dots";
}

impl Pass for WidenMixedDots {
    fn name(&self) -> &str {
        Self::NAME
    }

    /// Its converts keep their operands' dimensions, dynamic ones too, and
    /// the dot its own shape.
    fn keeps_dynamic_dimensions(&self) -> bool {
        true
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        rewrite_matches(
            m,
            ctx,
            Sweep::Nothing,
            // One match a computation, all its mixed dots: they share the
            // conversions of their operands.
            |_, c| {
                let mixed: Vec<(InstrId, ElementType)> = c
                    .ids()
                    .filter_map(|id| Some((id, Self::wide_type(c, id)?)))
                    .collect();
                (!mixed.is_empty()).then_some(mixed)
            },
            |r, _, mixed| {
                let (c, names) = r.parts();
                // One conversion of each operand to each type, however
                // many dots read it.
                let mut converted: HashMap<(InstrId, ElementType), InstrId> = HashMap::new();
                for (dot, wide) in mixed {
                    let operands = c.operand_ids(dot).to_vec();
                    let metadata = &c.instr(dot).metadata.clone();
                    let mut widened = Vec::with_capacity(operands.len());
                    for x in operands {
                        let narrow = c
                            .instr(x)
                            .shape
                            .as_array()
                            .filter(|a| widens_exactly(a.ty, wide))
                            .cloned();
                        widened.push(match narrow {
                            Some(a) => *converted
                                .entry((x, wide))
                                .or_insert_with(|| widen(c, names, x, a, wide, metadata.clone())),
                            None => x,
                        });
                    }
                    // The dot itself stays: its name, shape, attributes
                    // and place in the order are the same, over the new
                    // operands.
                    c.set_operands(dot, &widened);
                }
                Ok(true)
            },
        )
    }
}

/// Whether `ty` is a float type narrower than `wide` (f16, bf16, f32 or
/// f64) whose every value `wide` holds exactly: every such pair does but
/// `f8e8m0fnu` (exponents from 2^-127 to 2^127) into f16. A dot into an
/// 8-bit float is left alone.
pub fn widens_exactly(ty: ElementType, wide: ElementType) -> bool {
    use ElementType::{Bf16, F16, F32, F64, F8E8M0FNU};
    ty.is_float()
        && matches!(wide, F16 | Bf16 | F32 | F64)
        && ty.bit_width() < wide.bit_width()
        && !(ty == F8E8M0FNU && wide == F16)
}
