//! `bitcast-to-reshape`: a `bitcast` reinterprets its operand's buffer as
//! the result's, so what it computes depends on both layouts. XLA's own
//! passes write them after layout assignment, and its dumps after
//! optimization are full of them; XLA CPU compiles a module from before
//! layout assignment and refuses or mangles them there ("Unexpected bitcast
//! operation seen during layout assignment", or a `minor_to_major` of the
//! wrong rank). The same values come from ops that do not depend on
//! layout: a transpose of the operand into its physical order, a reshape to
//! the result's physical dimensions, and a transpose back into the result's
//! logical order (each left out where it would not move anything).
//!
//! Bitcasts that change the element type, or whose layouts say more than
//! an order of dimensions (tiles, memory spaces) or hold dynamic
//! dimensions, are left alone.

use crate::infra::context::PassContext;
use crate::infra::match_rewrite::{rewrite_matches, Sweep};
use crate::infra::names::Names;
use crate::infra::pass::{Pass, PassError};
use hlatc_compiler::{ArrayShape, Computation, InstrId, Instruction, Module, Op, Shape};

pub struct BitcastToReshape;

impl BitcastToReshape {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "bitcast-to-reshape";
}

impl Pass for BitcastToReshape {
    fn name(&self) -> &str {
        Self::NAME
    }

    /// It leaves a dynamic bitcast as it is, and builds its shapes itself.
    fn keeps_dynamic_dimensions(&self) -> bool {
        true
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        rewrite_matches(
            m,
            ctx,
            Sweep::Nothing,
            |_, c| -> Vec<(InstrId, ArrayShape, ArrayShape)> {
                c.ids()
                    .filter(|&id| matches!(c.instr(id).op, Op::Bitcast))
                    .filter_map(|id| {
                        let operand = c.operand_ids(id).first()?;
                        let from = c.instr(*operand).shape.as_array()?;
                        let to = c.instr(id).shape.as_array()?;
                        order_only(from, to).then(|| (id, from.clone(), to.clone()))
                    })
                    .collect()
            },
            |r, _, (id, from, to)| {
                let (c, names) = r.parts();
                let reshaped = by_physical_order(c, names, id, &from, &to);
                c.replace_all_uses(id, reshaped);
                if c.has_control_dependencies() {
                    c.copy_control_dependencies(id, reshaped);
                }
                c.remove(id);
                Ok(true)
            },
        )
    }
}

/// Both layouts say only an order of dimensions, over one element type and
/// static dimensions: what the ops here can reproduce.
fn order_only(from: &ArrayShape, to: &ArrayShape) -> bool {
    from.ty == to.ty
        && from.physical.is_none()
        && to.physical.is_none()
        && from.dynamic == 0
        && to.dynamic == 0
        && from.minor_to_major.len() == from.rank()
        && to.minor_to_major.len() == to.rank()
}

/// The bitcast `id` from `from` to `to` as layout-free ops; the last one's
/// id, which has the bitcast's own shape.
fn by_physical_order(
    c: &mut Computation,
    names: &mut Names,
    id: InstrId,
    from: &ArrayShape,
    to: &ArrayShape,
) -> InstrId {
    let bitcast = c.instr(id);
    let stem = bitcast.name.clone();
    let metadata = bitcast.metadata.clone();
    let mut current = c.operand_ids(id)[0];
    let mut add = |c: &mut Computation, op: Op, shape: ArrayShape, operand: InstrId| {
        let mut instr = Instruction::new(names.fresh(&stem), Shape::Array(shape), op);
        instr.metadata = metadata.clone();
        c.add(instr, &[operand])
    };
    // Major to minor: the order the buffer holds the dimensions in.
    let from_major: Vec<i64> = from.minor_to_major.iter().rev().copied().collect();
    let to_major: Vec<i64> = to.minor_to_major.iter().rev().copied().collect();
    if !is_identity(&from_major) {
        let dims = from_major.iter().map(|&d| from.dims[d as usize]).collect();
        let op = Op::Transpose {
            permutation: from_major,
        };
        current = add(c, op, ArrayShape::new(from.ty, dims), current);
    }
    let reshape = Op::Reshape {
        inferred_dimension: None,
    };
    if is_identity(&to_major) {
        return add(c, reshape, to.clone(), current);
    }
    let physical = to_major.iter().map(|&d| to.dims[d as usize]).collect();
    current = add(c, reshape, ArrayShape::new(to.ty, physical), current);
    // The result's dimension k is the physical order's position of k.
    let mut back = vec![0; to_major.len()];
    for (position, &d) in to_major.iter().enumerate() {
        back[d as usize] = position as i64;
    }
    add(c, Op::Transpose { permutation: back }, to.clone(), current)
}

fn is_identity(order: &[i64]) -> bool {
    order.iter().enumerate().all(|(i, &d)| d == i as i64)
}
