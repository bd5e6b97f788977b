//! Forward values a backward rule recomputes instead of reading: what the
//! forward pass keeps for the backward is then only the values they are
//! recomputed from.
//!
//! The forward builder names them in `GradHints::recompute`: values that
//! cost little to compute again from values the backward keeps anyway.
//! hlatc's Llama names SwiGLU's logistic, SiLU and product (from the gate
//! and up projections), an RMSNorm's broadcasts, normalized input and
//! output (from the input, its `[N]` scale and the weight), and a
//! sequence-parallel gather (from the rank's run). A value is recomputed
//! from its operands, those named recomputed too, so the forward keeps
//! only the others.
//!
//! Not every broadcast is recomputed: XLA fuses a broadcast into its
//! readers anyway, and one behind a barrier (an attention mask's, read by
//! the backward of the `select`) measured more XLA CPU temporaries, not
//! fewer.
//!
//! A recomputation runs the forward's own ops, in the forward's order, on
//! the same values, so the gradient is the chain rule's to the bit. Each
//! copy is named [`RECOMPUTED`]`.n`: `cse` never merges one into the
//! forward value it copies (which would keep that value alive again), and
//! the `remat` pass, after the cast policy has given every value its type,
//! puts the forward values a copy reads behind an `opt-barrier` that
//! waits for the backward pass, as it does for its own recomputations, so
//! that XLA cannot merge them either nor run them early.

use super::AutodiffError;
use crate::graph::builder::Builder;
use crate::graph::scope;
use crate::ir::computation::InstrId;
use std::collections::{HashMap, HashSet};

/// The stem of the name of each copy autodiff makes of a forward value it
/// recomputes (`recomputed.3`), for a reader of the HLO: passes know a
/// copy by [`crate::Instruction::recomputed`], never by its name.
pub const RECOMPUTED: &str = "recomputed";

/// The recomputations of one backward pass, each made once.
pub(super) struct Recompute {
    hinted: HashSet<InstrId>,
    /// Forward value -> its recomputation.
    copies: HashMap<InstrId, InstrId>,
}

impl Recompute {
    pub(super) fn new(hinted: &[InstrId]) -> Recompute {
        Recompute {
            hinted: hinted.iter().copied().collect(),
            copies: HashMap::new(),
        }
    }

    /// Whether a rule reading `v` reads a recomputation of it instead.
    fn recomputed(&self, b: &Builder, v: InstrId) -> bool {
        self.hinted.contains(&v) && !b.computation().operands(v).is_empty()
    }

    /// The value a backward rule reads for the forward value `v`: `v`
    /// itself, or its recomputation.
    pub(super) fn read(&mut self, b: &mut Builder, v: InstrId) -> Result<InstrId, AutodiffError> {
        if let Some(&copy) = self.copies.get(&v) {
            return Ok(copy);
        }
        if !self.recomputed(b, v) {
            return Ok(v);
        }
        // What to recompute, operands first.
        let mut order = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![(v, false)];
        while let Some((id, expanded)) = stack.pop() {
            if expanded {
                order.push(id);
                continue;
            }
            if !seen.insert(id) || self.copies.contains_key(&id) {
                continue;
            }
            if id != v && !self.recomputed(b, id) {
                continue;
            }
            stack.push((id, true));
            for o in b.computation().operands(id).into_iter().rev() {
                stack.push((o, false));
            }
        }
        // Each copy carries its forward op's provenance under `backward/`,
        // as remat's clones do, so scope-driven policies (the cast policy)
        // treat it as they treat the forward op.
        let outer = b.scope().to_string();
        for id in order {
            let operands: Vec<InstrId> = b
                .computation()
                .operands(id)
                .into_iter()
                .map(|o| self.copies.get(&o).copied().unwrap_or(o))
                .collect();
            b.set_scope(scope::backward(&b.computation().instr(id).metadata.op_name));
            let copy = b.recompute(RECOMPUTED, id, &operands);
            b.set_scope(outer.clone());
            self.copies.insert(id, copy?);
        }
        Ok(self.copies[&v])
    }
}
