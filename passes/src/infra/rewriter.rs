//! The one way passes change a computation: add instructions with their
//! shapes inferred and checked, give them names unique across the module,
//! point uses at replacements and sweep what died.

use crate::infra::context::PassContext;
use hlatc_compiler::analysis::verifier::CalleeSignatures;
use hlatc_compiler::util::fx::FxHashMap as HashMap;
use hlatc_compiler::{
    infer_shape, Computation, ComputationId, ElementType, InstrId, Instruction, Metadata, Module,
    Op, Shape, ShapeError,
};
use std::collections::BTreeMap;

/// Names are the module's, in their own file; the rewriter hands them on.
pub use crate::infra::names::Names;

/// A rewrite that would break the module, caught where it is made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RewriteError {
    #[error("computation '{computation}': {opcode} over ({operands}): {source}")]
    Shape {
        computation: String,
        opcode: &'static str,
        operands: String,
        #[source]
        source: ShapeError,
    },
    #[error(
        "computation '{computation}': cannot replace '{old}' ({old_shape}) with '{new}' ({new_shape}): shapes differ"
    )]
    ShapeChange {
        computation: String,
        old: String,
        old_shape: String,
        new: String,
        new_shape: String,
    },
    #[error(
        "computation '{computation}': '{instr}' would be {declared}, but {opcode} over its new operands gives {inferred}"
    )]
    Declared {
        computation: String,
        instr: String,
        opcode: &'static str,
        declared: String,
        inferred: String,
    },
}

/// A float array shape moved to `to`; any other shape as it is.
fn retype(shape: &mut Shape, to: ElementType) {
    if let Shape::Array(a) = shape {
        if a.ty.is_float() {
            a.ty = to;
        }
    }
}

/// Module-wide state for rewriting its computations one at a time.
pub struct ModuleRewriter {
    pub names: Names,
    pub callees: CalleeSignatures,
}

impl ModuleRewriter {
    pub fn new(m: &Module) -> Self {
        Self::with_names(m, Names::of_module(m))
    }

    fn with_names(m: &Module, names: Names) -> Self {
        ModuleRewriter {
            names,
            callees: CalleeSignatures::of(m),
        }
    }

    /// Module-wide state for a pass: the name index an earlier pass handed
    /// on through `ctx` (or a new one), to be handed on again with
    /// [`ModuleRewriter::finish`]. A pass that takes it must add names to
    /// the module only through it.
    pub fn for_pass(m: &Module, ctx: &mut PassContext) -> Self {
        ctx.names_lent = true;
        let names = ctx.names.take().unwrap_or_else(|| Names::of_module(m));
        Self::with_names(m, names)
    }

    /// Hands the name index on to the passes after this one.
    pub fn finish(self, ctx: &mut PassContext) {
        ctx.names = Some(self.names);
    }

    /// [`ModuleRewriter::finish`] for one made on demand, if it was made.
    pub fn finish_on_demand(slot: Option<ModuleRewriter>, ctx: &mut PassContext) {
        if let Some(mr) = slot {
            mr.finish(ctx);
        }
    }

    /// A rewriter over `c`, which must belong to the module this was made
    /// from (its names are already counted).
    pub fn on<'a>(&'a mut self, c: &'a mut Computation) -> Rewriter<'a> {
        Rewriter {
            comp: c,
            names: &mut self.names,
            callees: &self.callees,
            values: None,
            provenance: Provenance::Given(Metadata::default()),
            frontend_attributes: BTreeMap::new(),
            backend_config: String::new(),
            orphans: Vec::new(),
        }
    }

    /// A rewriter over computation `ci` of `m`, with the module-wide state
    /// made on first use and kept in `slot` for the next: a pass that
    /// searches every computation and finds nothing to rewrite (the last
    /// round of every fixpoint) then never pays for indexing the names.
    pub fn on_demand<'a>(
        slot: &'a mut Option<ModuleRewriter>,
        m: &'a mut Module,
        ci: usize,
        ctx: &mut PassContext,
    ) -> Rewriter<'a> {
        slot.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx))
            .on(&mut m.computations[ci])
    }

    /// Adds `c` to `m` as a callee, under a module-unique name, and makes
    /// it callable from rewriters made afterwards; returns its id.
    pub fn add_computation(&mut self, m: &mut Module, mut c: Computation) -> ComputationId {
        c.name = self.names.fresh(&c.name);
        let id = m.add_computation(c);
        self.callees.insert(id, m.computation(id));
        id
    }
}

type ValueKey = (Op, Vec<InstrId>, Shape);

/// Where the metadata of added instructions comes from.
enum Provenance {
    Given(Metadata),
    Of(InstrId),
}

pub struct Rewriter<'a> {
    comp: &'a mut Computation,
    names: &'a mut Names,
    callees: &'a CalleeSignatures,
    /// Opt-in value numbering: `add` returns an existing instruction that
    /// computes the same pure value. Off by default, because a
    /// rematerialized value must stay apart from the one it recomputes.
    values: Option<HashMap<ValueKey, InstrId>>,
    provenance: Provenance,
    frontend_attributes: BTreeMap<String, String>,
    /// XLA's `backend_config` for everything added next.
    backend_config: String,
    /// What a rewrite stopped reading, for [`Rewriter::remove_orphans`].
    orphans: Vec<InstrId>,
}

impl Rewriter<'_> {
    pub fn comp(&self) -> &Computation {
        self.comp
    }

    /// The computation and the module's names, for a rewrite that builds
    /// whole instructions itself (shapes it works out, names it takes from
    /// the index) rather than through [`Rewriter::add`]. Nothing it does
    /// there is inferred or checked, and [`Rewriter::remove_orphans`] and
    /// value numbering do not see it.
    pub(crate) fn parts(&mut self) -> (&mut Computation, &mut Names) {
        (self.comp, self.names)
    }

    /// Turns on value numbering over what the computation holds now.
    pub fn share_values(&mut self) -> &mut Self {
        let mut values = HashMap::default();
        for id in self.comp.ids() {
            let i = self.comp.instr(id);
            if i.op.is_pure() && i.is_unannotated() {
                values
                    .entry((i.op.clone(), self.comp.operands(id), i.shape.clone()))
                    .or_insert(id);
            }
        }
        self.values = Some(values);
        self
    }

    /// Provenance for what is added next: a rewrite inherits the metadata
    /// of what it replaces, so a dump still names the layer and op.
    pub fn set_metadata(&mut self, m: Metadata) -> &mut Self {
        self.provenance = Provenance::Given(m);
        self
    }

    /// What is added next has `id`'s metadata (read when it is added, so
    /// it is copied once per instruction, not once more on the way).
    pub fn provenance_of(&mut self, id: InstrId) -> &mut Self {
        self.provenance = Provenance::Of(id);
        self
    }

    /// The metadata of `id`, for [`Rewriter::set_metadata`].
    pub fn metadata_of(&self, id: InstrId) -> Metadata {
        self.comp.instr(id).metadata.clone()
    }

    fn provenance(&self) -> Metadata {
        match &self.provenance {
            Provenance::Given(m) => m.clone(),
            Provenance::Of(id) if self.comp.contains(*id) => self.metadata_of(*id),
            Provenance::Of(_) => Metadata::default(),
        }
    }

    /// Frontend attributes given to everything added next (for example a
    /// remat tag, so value numbering and cse keep clones apart).
    pub fn set_frontend_attributes(&mut self, attrs: BTreeMap<String, String>) -> &mut Self {
        self.frontend_attributes = attrs;
        self
    }

    /// XLA's opaque `backend_config` (a custom call's argument) for
    /// everything added next; value numbering never shares an instruction
    /// added with one.
    pub fn set_backend_config(&mut self, config: String) -> &mut Self {
        self.backend_config = config;
        self
    }

    /// Gives `to` the sharding, `backend_config` and recomputed mark of
    /// `from`, for a copy that computes the same value (a rematerialized
    /// clone: a clone of autodiff's recomputation is one too).
    pub fn copy_value_annotations(&mut self, from: InstrId, to: InstrId) {
        let (sharding, config, recomputed) = {
            let f = self.comp.instr(from);
            (f.sharding.clone(), f.backend_config.clone(), f.recomputed)
        };
        let t = self.comp.instr_mut(to);
        t.sharding = sharding;
        t.backend_config = config;
        t.recomputed = recomputed;
    }

    pub fn shape(&self, id: InstrId) -> &Shape {
        &self.comp.instr(id).shape
    }

    /// Adds `op` over `operands`; `shape` is needed only for ops whose
    /// result shape is (partly) their own attribute. The name is derived
    /// from the opcode and unique in the module.
    pub fn add(
        &mut self,
        op: Op,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<InstrId, RewriteError> {
        let stem = op.opcode();
        self.add_named(stem, op, operands, shape)
    }

    /// [`Rewriter::add`] with a name stem (made unique in the module).
    pub fn add_named(
        &mut self,
        stem: &str,
        op: Op,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<InstrId, RewriteError> {
        let shape = self.infer(&op, operands, shape.as_ref())?;
        let shareable = self.values.is_some()
            && op.is_pure()
            && self.frontend_attributes.is_empty()
            && self.backend_config.is_empty();
        let key = shareable.then(|| (op.clone(), operands.to_vec(), shape.clone()));
        if let (Some(k), Some(values)) = (&key, &self.values) {
            if let Some(&id) = values.get(k) {
                return Ok(id);
            }
        }
        let mut instr = Instruction::new(self.names.fresh(stem), shape, op);
        instr.metadata = self.provenance();
        instr.frontend_attributes = self.frontend_attributes.clone();
        instr.backend_config = self.backend_config.clone();
        let id = self.comp.add(instr, operands);
        if let (Some(k), Some(v)) = (key, self.values.as_mut()) {
            v.insert(k, id);
        }
        Ok(id)
    }

    fn infer(
        &self,
        op: &Op,
        operands: &[InstrId],
        declared: Option<&Shape>,
    ) -> Result<Shape, RewriteError> {
        let shapes: Vec<&Shape> = operands.iter().map(|&o| self.shape(o)).collect();
        let callees = self.callees;
        infer_shape(op, &shapes, declared, &|id| callees.get(id)).map_err(|source| {
            RewriteError::Shape {
                computation: self.comp.name.clone(),
                opcode: op.opcode(),
                operands: shapes
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                source,
            }
        })
    }

    /// Points every use of `old` (and the root) at `new`, which must have
    /// the same shape. `old` stays until [`Rewriter::remove_dead`].
    pub fn replace(&mut self, old: InstrId, new: InstrId) -> Result<(), RewriteError> {
        if old == new {
            return Ok(());
        }
        self.check_same_shape(old, new)?;
        self.comp.replace_all_uses(old, new);
        // The replacement runs where the original had to.
        if self.comp.has_control_dependencies() {
            self.comp.copy_control_dependencies(old, new);
        }
        self.orphans.push(old);
        Ok(())
    }

    /// Points `user`'s reads of `old` at `new` (same shape), leaving the
    /// other users of `old` alone.
    pub fn replace_in(
        &mut self,
        user: InstrId,
        old: InstrId,
        new: InstrId,
    ) -> Result<(), RewriteError> {
        self.check_same_shape(old, new)?;
        self.comp.replace_uses_in(user, old, new);
        self.orphans.push(old);
        Ok(())
    }

    /// Rewrites `user` in place to read `operands` (one per operand it
    /// has, in order) and to have `shape` (its own when `None`), checked by
    /// inference: the op over the new operands must give that shape. For a
    /// pass that changes types in place, as `amp` does: a user may read a
    /// retyped operand until it is rewritten in turn, and the verifier
    /// after the pass checks the result. What `user` stops reading is
    /// looked at by [`Rewriter::remove_orphans`].
    pub fn rewrite_in_place(
        &mut self,
        user: InstrId,
        operands: &[InstrId],
        shape: Option<Shape>,
    ) -> Result<(), RewriteError> {
        let instr = self.comp.instr(user);
        let declared = shape.as_ref().unwrap_or(&instr.shape);
        // A dot moved to bf16 operands keeps its f32 result: for an op
        // whose result type is its own, only the operands' dims decide the
        // shape, and those did not move (inference of each dot `amp`
        // lowers showed in its profile).
        if *declared == instr.shape
            && instr.op.result_ignores_float_operand_types()
            && self.only_float_types_move(user, operands, None)
        {
            self.set_operands(user, operands);
            return Ok(());
        }
        let shape = self.infer(&instr.op, operands, Some(declared))?;
        if !shape.compatible(declared) {
            return Err(RewriteError::Declared {
                computation: self.comp.name.clone(),
                instr: instr.name.clone(),
                opcode: instr.op.opcode(),
                declared: declared.to_string(),
                inferred: shape.to_string(),
            });
        }
        self.set_operands(user, operands);
        self.comp.instr_mut(user).shape = shape;
        Ok(())
    }

    /// [`Rewriter::rewrite_in_place`] for a retyping: `user` reads
    /// `operands`, each of the dims of the operand it replaces, every float
    /// one now of type `to`, and its float result becomes `to` too. For an
    /// op that carries its float type through ([`Op::carries_float_type`])
    /// that rule is the check: shape inference (which showed in `amp`'s
    /// profile, run for every op it moves to bf16) would only say the same
    /// of an instruction that was valid before. Any other op, or operands
    /// that break the rule, are checked by inference.
    pub fn retype_in_place(
        &mut self,
        user: InstrId,
        operands: &[InstrId],
        to: ElementType,
    ) -> Result<(), RewriteError> {
        let instr = self.comp.instr(user);
        let by_rule = to.is_float()
            && instr.op.carries_float_type()
            && self.only_float_types_move(user, operands, Some(to));
        if !by_rule {
            let mut shape = instr.shape.clone();
            retype(&mut shape, to);
            return self.rewrite_in_place(user, operands, Some(shape));
        }
        self.set_operands(user, operands);
        // Only the element type moves: no new shape is built.
        retype(&mut self.comp.instr_mut(user).shape, to);
        Ok(())
    }

    /// Points `user` at `operands`; what it stops reading is looked at by
    /// [`Rewriter::remove_orphans`]. A list that is already `user`'s is
    /// left alone (a retyping that keeps its operands moves nothing).
    /// Whether `operands`, one for each of `user`'s, each have the dims of
    /// the operand they replace, with a float type where it had one (`to`
    /// when given) and the same type otherwise: all that moves between the
    /// two lists is which float type each operand carries.
    fn only_float_types_move(
        &self,
        user: InstrId,
        operands: &[InstrId],
        to: Option<ElementType>,
    ) -> bool {
        let old = self.comp.operand_ids(user);
        old.len() == operands.len()
            && old
                .iter()
                .zip(operands)
                .all(|(&o, &n)| match (self.shape(o), self.shape(n)) {
                    (Shape::Array(a), Shape::Array(b)) if a.dims == b.dims => {
                        if b.ty.is_float() {
                            a.ty.is_float() && to.is_none_or(|t| b.ty == t)
                        } else {
                            a.ty == b.ty
                        }
                    }
                    _ => false,
                })
    }

    fn set_operands(&mut self, user: InstrId, operands: &[InstrId]) {
        if !self.comp.reads_exactly(user, operands) {
            let before = self.comp.set_operands(user, operands);
            self.orphans.extend(before);
        }
    }

    /// A replacement must compute a value of the replaced one's shape.
    fn check_same_shape(&self, old: InstrId, new: InstrId) -> Result<(), RewriteError> {
        let (o, n) = (self.comp.instr(old), self.comp.instr(new));
        if o.shape == n.shape {
            return Ok(());
        }
        Err(RewriteError::ShapeChange {
            computation: self.comp.name.clone(),
            old: o.name.clone(),
            old_shape: o.shape.to_string(),
            new: n.name.clone(),
            new_shape: n.shape.to_string(),
        })
    }

    /// Makes `id` the root. Only a pass that changes the entry signature
    /// on purpose (and says so in the context) may give the root another
    /// shape.
    pub fn set_root(&mut self, id: InstrId) {
        self.orphans.extend(self.comp.root());
        self.comp.set_root(id);
    }

    /// Copies the provenance out of the instruction it names, before that
    /// instruction may be removed: a removed id's slot may be reused by the
    /// next instruction added.
    fn hold_provenance(&mut self) {
        if let Provenance::Of(_) = self.provenance {
            self.provenance = Provenance::Given(self.provenance());
        }
    }

    /// Removes what this rewriter's rewiring, replacing and re-rooting
    /// left unread (and what only those read); returns how many went.
    /// Unlike [`Rewriter::remove_dead`] it leaves alone what was dead
    /// before, and looks at the instructions rewired away from, not at
    /// every instruction.
    pub fn remove_orphans(&mut self) -> usize {
        self.hold_provenance();
        let seeds = std::mem::take(&mut self.orphans);
        remove_dead_from(self.comp, seeds)
    }

    /// Removes every instruction nothing reads that is neither the root, a
    /// parameter nor side-effecting; returns how many went.
    pub fn remove_dead(&mut self) -> usize {
        self.hold_provenance();
        remove_dead(self.comp)
    }
}

/// Removes unread instructions (not the root, parameters or side effects),
/// following operands so whole dead chains go in one call.
pub fn remove_dead(c: &mut Computation) -> usize {
    let seeds: Vec<InstrId> = c.ids().filter(|&id| removable(c, id)).collect();
    remove_dead_from(c, seeds)
}

/// Whether nothing needs `id`: it is unread and neither the root, a
/// parameter nor a side effect.
fn removable(c: &Computation, id: InstrId) -> bool {
    Some(id) != c.root()
        && !c.has_users(id)
        && !matches!(c.instr(id).op, Op::Parameter(_))
        && !c.instr(id).op.has_side_effect()
}

/// Removes each of `seeds` that nothing needs, then what only the removed
/// read.
fn remove_dead_from(c: &mut Computation, mut stack: Vec<InstrId>) -> usize {
    let mut removed = 0;
    while let Some(id) = stack.pop() {
        if !c.contains(id) || !removable(c, id) {
            continue;
        }
        let operands = c.operands(id);
        c.remove(id);
        removed += 1;
        stack.extend(operands);
    }
    removed
}

impl ModuleRewriter {
    /// Moves every computation of `part` into `m` under module-unique names
    /// (instructions renamed too), and returns the id of `part`'s
    /// entry. Lets a pass build a callee with the [`Builder`] and its
    /// reducers, then call it.
    ///
    /// [`Builder`]: hlatc_compiler::graph::builder::Builder
    pub fn graft(&mut self, m: &mut Module, mut part: Module) -> ComputationId {
        for c in &mut part.computations {
            c.name = self.names.fresh(&c.name);
            let ids: Vec<InstrId> = c.ids().collect();
            for id in ids {
                let i = c.instr_mut(id);
                i.name = self.names.fresh(&i.name);
            }
        }
        let first = m.computations.len();
        let entry = m.absorb(part);
        for k in first..m.computations.len() {
            let id = ComputationId::new(k);
            self.callees.insert(id, m.computation(id));
        }
        entry
    }
}
