//! The activations a stage's forward slot keeps for its backward slot.
//!
//! A tick's two slots run different micro-batches, so the backward slot
//! cannot read the forward values of its own micro-batch where they were
//! computed: they were computed ticks earlier. The tick program builds
//! the stage's layers in the backward slot over the kept stage input, as
//! a recomputation would, and takes the gradient over them; then every
//! value of those layers that the backward reads, and that the remat
//! policy does not recompute, is read instead from a ring the forward
//! slot filled ([`super::ring`]), and the recomputation of it is left
//! with no reader (dead code the passes remove). What the policy
//! recomputes ([`RematPolicy::region`]: each layer's core attention under
//! `core-attention`, everything but each layer's output under
//! `full-layer`, the whole stage under `stage`) stays in the backward
//! slot, reading kept values.
//!
//! The values are matched across slots and programs by their place in the
//! order the layers built them: the layers are the same code over another
//! input, and value numbering ([`Builder::add`]) shares only what does
//! not depend on the input, so the values that do are built afresh each
//! time, in the same order. [`LayerCall::kept_counterpart`] checks each
//! match (op, shape and operands) and refuses one that is not.

use crate::train_step::StepError;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::scope;
use hlatc_compiler::{ElementType, InstrId};
use hlatc_models::{ForwardParts, LayerRouting};
use hlatc_passes::RematPolicy;
use std::collections::{HashMap, HashSet};

/// The values one call of a stage's layers computed from its input, in
/// the order built.
pub(super) struct LayerCall {
    input: InstrId,
    pub(super) output: InstrId,
    dependent: Vec<InstrId>,
    /// What this call's routers did (a mixture of experts), counted from
    /// nothing: each call's values are built alike.
    pub(super) routing: LayerRouting,
}

impl LayerCall {
    /// The stage's layers over `x`, recorded.
    pub(super) fn build(parts: &mut ForwardParts, x: InstrId) -> Result<LayerCall, BuildError> {
        let from = parts.builder().computation().id_bound();
        let output = parts.layers(x)?;
        let routing = parts.take_routing();
        let c = parts.builder().computation();
        let mut on_input: HashSet<InstrId> = HashSet::from([x]);
        let mut dependent = Vec::new();
        // Ids are handed out in order and the builder removes nothing, so
        // the ids from `from` on are this call's, operands first.
        for id in c.ids().filter(|id| id.index() >= from) {
            if c.operand_ids(id).iter().any(|o| on_input.contains(o)) {
                on_input.insert(id);
                dependent.push(id);
            }
        }
        Ok(LayerCall {
            input: x,
            output,
            dependent,
            routing,
        })
    }

    /// This call's value at `place` checked against `other`'s at the same
    /// place (`places` maps `other`'s values to their places): the same op
    /// and shape over the same operands, each the call's own at the same
    /// place or else the very same value.
    fn kept_counterpart(
        &self,
        b: &Builder,
        place: usize,
        other: &LayerCall,
        places: &HashMap<InstrId, usize>,
    ) -> Result<InstrId, StepError> {
        let mismatch = || StepError::StageLayersDiffer {
            place,
            value: other
                .dependent
                .get(place)
                .map(|&id| b.computation().instr(id).name.clone())
                .unwrap_or_default(),
        };
        let (Some(&mine), Some(&theirs)) = (self.dependent.get(place), other.dependent.get(place))
        else {
            return Err(mismatch());
        };
        let c = b.computation();
        let (i, j) = (c.instr(mine), c.instr(theirs));
        let (ours, others) = (c.operand_ids(mine), c.operand_ids(theirs));
        if i.op != j.op || i.shape != j.shape || ours.len() != others.len() {
            return Err(mismatch());
        }
        let operands_match = ours
            .iter()
            .zip(others)
            .all(|(&o, &p)| match places.get(&p) {
                Some(&k) => self.dependent.get(k) == Some(&o),
                None if p == other.input => o == self.input,
                None => o == p,
            });
        match operands_match {
            true => Ok(mine),
            false => Err(mismatch()),
        }
    }
}

/// One value the forward slot keeps: its place among the layers' values
/// that depend on the stage input, and its type and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KeptValue {
    pub place: usize,
    pub ty: ElementType,
    pub dims: Vec<i64>,
}

/// What the backward slot reads of `call` (its layers, built for the
/// gradient) under `policy`: each value kept, with the instructions that
/// read it and are to read the kept copy instead.
pub(super) struct BackwardReads {
    pub kept: Vec<KeptValue>,
    readers: Vec<(InstrId, Vec<InstrId>)>,
}

impl BackwardReads {
    /// Call once the gradient is built: the readers are what reads the
    /// layers' values from outside them (the backward, the loss) and what
    /// the policy recomputes.
    pub(super) fn of(b: &Builder, call: &LayerCall, policy: RematPolicy) -> BackwardReads {
        let c = b.computation();
        let layers: HashSet<InstrId> = call.dependent.iter().copied().collect();
        let region = |id: InstrId| policy.region(&c.instr(id).metadata.op_name);
        let recomputed: HashSet<InstrId> = call
            .dependent
            .iter()
            .copied()
            .filter(|&v| {
                if policy == RematPolicy::Stage || c.instr(v).shape.as_array().is_none() {
                    return true;
                }
                let Some(r) = region(v) else { return false };
                // A region's outputs to the rest of the forward pass are
                // kept, as the remat pass keeps them.
                let output = r.keeps_outputs
                    && c.users(v).into_iter().any(|u| {
                        !scope::is_backward(&c.instr(u).metadata.op_name)
                            && (!layers.contains(&u) || region(u).map(|o| o.key) != Some(r.key))
                    });
                !output
            })
            .collect();
        let mut kept = Vec::new();
        let mut readers = Vec::new();
        for (place, &v) in call.dependent.iter().enumerate() {
            if recomputed.contains(&v) {
                continue;
            }
            let mut users: Vec<InstrId> = c
                .users(v)
                .into_iter()
                .filter(|u| !layers.contains(u) || recomputed.contains(u))
                .collect();
            users.sort_unstable();
            users.dedup();
            if users.is_empty() {
                continue;
            }
            // Not an array: a tuple, recomputed above.
            let Some(a) = c.instr(v).shape.as_array() else {
                continue;
            };
            kept.push(KeptValue {
                place,
                ty: a.ty,
                dims: a.dims.to_vec(),
            });
            readers.push((v, users));
        }
        BackwardReads { kept, readers }
    }

    /// Points every reader of a kept value at `read(k)`, the `k`-th kept
    /// value as the ring holds it.
    pub(super) fn redirect(
        &self,
        b: &mut Builder,
        mut read: impl FnMut(&mut Builder, usize) -> Result<InstrId, BuildError>,
    ) -> Result<(), BuildError> {
        for (k, (value, users)) in self.readers.iter().enumerate() {
            let copy = read(b, k)?;
            for &u in users {
                b.replace_uses_in(u, *value, copy);
            }
        }
        Ok(())
    }
}

/// The value the forward slot's `call` keeps for each of `kept`, checked
/// against the backward slot's `reference` call where the program has one,
/// and against the kept value's type and shape everywhere.
pub(super) fn forward_values(
    b: &Builder,
    call: &LayerCall,
    kept: &[KeptValue],
    reference: Option<&LayerCall>,
) -> Result<Vec<InstrId>, StepError> {
    let places: HashMap<InstrId, usize> = reference
        .map(|other| {
            other
                .dependent
                .iter()
                .enumerate()
                .map(|(k, &id)| (id, k))
                .collect()
        })
        .unwrap_or_default();
    kept.iter()
        .map(|k| {
            let differs = || StepError::StageLayersDiffer {
                place: k.place,
                value: String::new(),
            };
            let id = match reference {
                Some(other) => call.kept_counterpart(b, k.place, other, &places)?,
                None => *call.dependent.get(k.place).ok_or_else(differs)?,
            };
            match b.computation().instr(id).shape.as_array() {
                Some(a) if a.ty == k.ty && a.dims.as_slice() == k.dims.as_slice() => Ok(id),
                _ => Err(differs()),
            }
        })
        .collect()
}
