//! `amp`: automatic mixed precision over the entry computation and the
//! bodies of its loops, by the
//! context's [`CastPolicy`]. Dots take low (bf16) operands and accumulate
//! in f32; ops that follow compute in the widest type their operands carry;
//! the rest compute as written. The entry signature does not change: every
//! output is delivered in its original type.
//!
//! Each value is tracked by its *semantic* type (what followers see) and
//! the representations already made of it, so a convert is added only
//! where a type really changes and at most once per value and type. A
//! dot's f32 accumulator is the f32 representation of its bf16 value (an
//! f32 reader gets it unrounded), and a widening convert of a bf16 value is
//! that value's f32 representation, so `bf16 -> f32 -> bf16` never appears.
//!
//! Under a policy with MX blocks (`mxfp8`), the low dots outside its kept
//! scopes then read each operand quantized along its contracting dimension
//! (`infra::mx_blocks`): a `call` of the blocks' plain HLO on `cpu`, one
//! callee per shape and dimension; on `neuron`, neuronx-cc's `QuantizeMX`
//! of each operand and `__op$block_scaled_dot` of the two in the dot's
//! place (`targets::neuron::mx_calls`). A dot whose contracting extent is not a
//! whole number of blocks stays a bf16 dot, and the pass's note counts it.

use crate::infra::cast_policy::{CastPolicy, CastRule, MxPolicy, ScopeMatcher};
use crate::infra::context::{PassContext, Target};
use crate::infra::mx_blocks::{qdq_module, MX_ATTRIBUTE};
use crate::infra::pass::{Pass, PassError};
use crate::infra::rewriter::{ModuleRewriter, Rewriter};
use crate::targets::neuron::mx_calls::write_scaled_dot;
use hlatc_compiler::util::fx::FxHashMap as HashMap;
use hlatc_compiler::{
    ArrayShape, ComputationId, ElementType, IdList, InstrId, Module, Op, Opcode, Shape,
};

pub struct Amp;

impl Amp {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "amp";
}

impl Pass for Amp {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let Some(policy) = ctx.cast.clone() else {
            ctx.note(self.name(), "precision fp32: nothing to cast");
            return Ok(false);
        };
        let mut mr = ModuleRewriter::for_pass(m, ctx);
        // The entry, and the bodies of its loops (looped attention's
        // tiles): each keeps its signature, so a body's state stays in the
        // types the loop carries.
        let mut computations = vec![m.entry];
        computations.extend(loop_bodies(m));
        let mut s = Stats::default();
        let mut mx_dots = Vec::new();
        for id in computations {
            let mut rw = mr.on(m.computation_mut(id));
            let mut cast = AutoCast {
                policy: &policy,
                scopes: policy.scope_matcher(),
                mx: policy.mx.as_ref().map(|mx| (mx, mx.scope_matcher())),
                last_scope: (String::new(), false),
                widen_low_dots: ctx.target == Target::Cpu,
                rounded_wide: HashMap::default(),
                values: Vec::new(),
                rules: HashMap::default(),
                mx_dots: Vec::new(),
                stats: Stats::default(),
            };
            cast.run(&mut rw).map_err(PassError::rewrite(self.name()))?;
            rw.remove_orphans();
            drop(rw);
            s.add(&cast.stats);
            mx_dots.extend(cast.mx_dots.into_iter().map(|d| (id, d)));
        }
        if let Some(mx) = &policy.mx {
            match ctx.target {
                Target::Cpu => quantize_operands(self.name(), m, &mut mr, mx, &mx_dots)?,
                Target::Neuron => scaled_dots(self.name(), m, &mut mr, mx, &mx_dots)?,
            }
        }
        mr.finish(ctx);
        let changed = s.low + s.followed + s.converts > 0;
        if changed {
            ctx.note(
                self.name(),
                format!(
                    "{} dots in {} with f32 accumulation, {} ops follow into {}, {} kept in their precision by scope, {} converts",
                    s.low, policy.low, s.followed, policy.low, s.kept_by_scope, s.converts
                ),
            );
        }
        if let Some(mx) = &policy.mx {
            ctx.note(
                self.name(),
                format!(
                    "{} of them with operands in MX blocks ({} in blocks of {}), {} kept in {} by scope ({}), {} whose contracting extent is not a whole number of blocks",
                    mx_dots.len(),
                    mx.format.element,
                    mx.format.block,
                    s.mx_kept_by_scope,
                    policy.low,
                    mx.keep_scopes.join(", "),
                    s.mx_unblocked
                ),
            );
        }
        Ok(changed)
    }
}

#[derive(Default)]
struct Stats {
    low: usize,
    followed: usize,
    kept_by_scope: usize,
    converts: usize,
    /// Low dots an MX policy leaves in the low type by scope.
    mx_kept_by_scope: usize,
    /// Low dots it cannot divide into whole blocks.
    mx_unblocked: usize,
}

impl Stats {
    fn add(&mut self, o: &Stats) {
        self.low += o.low;
        self.followed += o.followed;
        self.kept_by_scope += o.kept_by_scope;
        self.converts += o.converts;
        self.mx_kept_by_scope += o.mx_kept_by_scope;
        self.mx_unblocked += o.mx_unblocked;
    }
}

/// A low dot whose operands an MX policy quantizes: each operand's
/// contracting dimension, lhs then rhs.
struct MxDot {
    dot: InstrId,
    axes: [i64; 2],
}

/// Rewrites each recorded dot as neuronx-cc's block-scaled dot of its
/// operands quantized by `QuantizeMX` (`targets::neuron::mx_calls`).
fn scaled_dots(
    pass: &str,
    m: &mut Module,
    mr: &mut ModuleRewriter,
    mx: &MxPolicy,
    dots: &[(ComputationId, MxDot)],
) -> Result<(), PassError> {
    for (ci, d) in dots {
        let mut rw = mr.on(m.computation_mut(*ci));
        rw.provenance_of(d.dot);
        let scaled = write_scaled_dot(&mut rw, d.dot, d.axes, mx.format)
            .map_err(PassError::rewrite(pass))?;
        rw.replace(d.dot, scaled)
            .map_err(PassError::rewrite(pass))?;
        rw.remove_orphans();
    }
    Ok(())
}

/// Points each recorded dot's operands at their values in MX blocks: a
/// `call` of the blocks' plain HLO, one callee per operand shape and
/// dimension in the module.
fn quantize_operands(
    pass: &str,
    m: &mut Module,
    mr: &mut ModuleRewriter,
    mx: &MxPolicy,
    dots: &[(ComputationId, MxDot)],
) -> Result<(), PassError> {
    let mut callees: HashMap<(ArrayShape, i64), ComputationId> = HashMap::default();
    for (ci, d) in dots {
        let operands = IdList::from_slice(m.computation(*ci).operand_ids(d.dot));
        let mut quantized = IdList::new();
        for (&o, &axis) in operands.iter().zip(&d.axes) {
            let shape = m
                .computation(*ci)
                .instr(o)
                .shape
                .as_array()
                .cloned()
                .expect("a low dot's operands are arrays");
            let to_apply = match callees.get(&(shape.clone(), axis)) {
                Some(&c) => c,
                None => {
                    let part =
                        qdq_module(&shape, axis, mx.format).map_err(|e| PassError::Build {
                            pass: pass.to_string(),
                            source: Box::new(e),
                        })?;
                    let c = mr.graft(m, part);
                    callees.insert((shape.clone(), axis), c);
                    c
                }
            };
            let mut rw = mr.on(m.computation_mut(*ci));
            rw.provenance_of(d.dot)
                .set_frontend_attributes(std::collections::BTreeMap::from([(
                    MX_ATTRIBUTE.to_string(),
                    mx.format.attribute_value(),
                )]));
            let q = rw
                .add_named(
                    "mx_blocks",
                    Op::Call {
                        to_apply,
                        is_composite: false,
                    },
                    &[o],
                    Some(Shape::Array(shape)),
                )
                .map_err(PassError::rewrite(pass))?;
            quantized.push(q);
        }
        mr.on(m.computation_mut(*ci))
            .rewrite_in_place(d.dot, &quantized, None)
            .map_err(PassError::rewrite(pass))?;
    }
    Ok(())
}

/// The bodies of the entry's `while` loops, each once, in the order of
/// their ids.
fn loop_bodies(m: &Module) -> Vec<hlatc_compiler::ComputationId> {
    let entry = m.computation(m.entry);
    let mut bodies: Vec<_> = entry
        .ids()
        .filter_map(|id| match entry.instr(id).op {
            Op::While { body, .. } => Some(body),
            _ => None,
        })
        .filter(|&b| b != m.entry)
        .collect();
    bodies.sort();
    bodies.dedup();
    bodies
}

/// What the pass knows of one original instruction's value.
struct Value {
    /// The float type the module was written with; `None` for non-float
    /// values. The instruction itself may since have been retyped in place.
    written: Option<ElementType>,
    /// The float type followers compute in; `None` for non-float values.
    sem: Option<ElementType>,
    /// Computed from constants only: takes the type of what it meets.
    weak: bool,
    /// The instruction holding the value in each type made so far.
    reps: Reps,
}

/// A value's representations: the one it was made with, then any converts
/// made of it. Most values never get a second, so that one is not a `Vec`
/// (an allocation per instruction showed in profiles).
struct Reps {
    first: (ElementType, InstrId),
    more: Vec<(ElementType, InstrId)>,
}

impl Reps {
    fn one(ty: ElementType, id: InstrId) -> Reps {
        Reps {
            first: (ty, id),
            more: Vec::new(),
        }
    }

    fn two(a: (ElementType, InstrId), b: (ElementType, InstrId)) -> Reps {
        Reps {
            first: a,
            more: vec![b],
        }
    }

    fn push(&mut self, rep: (ElementType, InstrId)) {
        self.more.push(rep);
    }

    fn get(&self, ty: ElementType) -> Option<InstrId> {
        std::iter::once(&self.first)
            .chain(&self.more)
            .find(|(t, _)| *t == ty)
            .map(|&(_, id)| id)
    }
}

impl Value {
    fn single(
        written: Option<ElementType>,
        ty: Option<ElementType>,
        id: InstrId,
        weak: bool,
    ) -> Value {
        let ty_key = ty.unwrap_or(ElementType::Pred);
        Value {
            written,
            sem: ty,
            weak,
            reps: Reps::one(ty_key, id),
        }
    }

    /// A low value held only by its accumulator `id` of type `acc` (a
    /// dot's f32 result); the low copy is made when a reader wants it.
    fn accumulator(low: ElementType, acc: ElementType, id: InstrId) -> Value {
        Value {
            written: Some(acc),
            sem: Some(low),
            weak: false,
            reps: Reps::one(acc, id),
        }
    }

    fn rep(&self, ty: ElementType) -> Option<InstrId> {
        self.reps.get(ty)
    }

    /// The instruction carrying the value now, whatever its type.
    fn current(&self) -> InstrId {
        self.sem
            .and_then(|t| self.rep(t))
            .unwrap_or(self.reps.first.1)
    }
}

struct AutoCast<'p> {
    policy: &'p CastPolicy,
    scopes: ScopeMatcher<'p>,
    /// The policy's MX blocks, with the scopes they leave alone.
    mx: Option<(&'p MxPolicy, ScopeMatcher<'p>)>,
    /// The low dots whose operands go into MX blocks, once rewritten.
    mx_dots: Vec<MxDot>,
    /// The scope asked last, and its answer.
    last_scope: (String, bool),
    /// XLA CPU cannot run a dot of bf16 operands with an f32 result (its
    /// DotThunk refuses `BF16 x BF16 = F32`). The same numbers come from
    /// widening the rounded operands first: products of bf16 values are
    /// exact in f32, and the sum accumulates in f32 either way.
    widen_low_dots: bool,
    /// The low-rounded value widened back, per value: a dot operand on cpu.
    rounded_wide: HashMap<InstrId, InstrId>,
    /// Per original instruction, by index.
    values: Vec<Option<Value>>,
    rules: HashMap<(usize, usize), CastRule>,
    stats: Stats,
}

fn float_array_type(shape: &Shape) -> Option<ElementType> {
    match shape {
        Shape::Array(a) if a.ty.is_float() => Some(a.ty),
        _ => None,
    }
}

/// `a` holds every value of `b` exactly (bf16 and f16 are both narrower
/// than f32, but neither holds the other).
fn widens(b: ElementType, a: ElementType) -> bool {
    a == b || (a.byte_size() > b.byte_size() && !(b == ElementType::F16 && a == ElementType::Bf16))
}

impl AutoCast<'_> {
    fn run(&mut self, rw: &mut Rewriter<'_>) -> Result<(), crate::infra::rewriter::RewriteError> {
        let order = rw.comp().post_order();
        self.values.resize_with(rw.comp().id_bound(), || None);
        // Visiting an instruction rewires only its own operands, so each
        // is read as the module wrote it.
        for &id in &order {
            let operands = IdList::from_slice(rw.comp().operand_ids(id));
            let value = self.cast(rw, id, &operands)?;
            self.values[id.index()] = Some(value);
        }
        // The root is delivered in its original type, like every output.
        if let Some(root) = rw.comp().root() {
            let new = self.as_written(rw, &[root])?[0];
            if new != root {
                rw.set_root(new);
            }
        }
        Ok(())
    }

    fn value(&self, id: InstrId) -> &Value {
        self.values[id.index()]
            .as_ref()
            .expect("operands come before their users in post order")
    }

    fn value_mut(&mut self, id: InstrId) -> &mut Value {
        self.values[id.index()]
            .as_mut()
            .expect("operands come before their users in post order")
    }

    fn weak(&self, operands: &[InstrId]) -> bool {
        operands.iter().all(|&o| self.value(o).weak)
    }

    /// The policy's rule for an opcode, looked up once per opcode. Keyed
    /// by where the static name lies (equal keys are equal names), not by
    /// hashing it for every instruction.
    fn rule_of(&mut self, opcode: Opcode) -> CastRule {
        let policy = self.policy;
        let name = opcode.as_str();
        *self
            .rules
            .entry((name.as_ptr() as usize, name.len()))
            .or_insert_with(|| policy.rule_of(opcode))
    }

    fn cast(
        &mut self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        operands: &[InstrId],
    ) -> Result<Value, crate::infra::rewriter::RewriteError> {
        let instr = rw.comp().instr(id);
        let ty = float_array_type(&instr.shape);
        match instr.op {
            Op::Parameter(_) => return Ok(Value::single(ty, ty, id, false)),
            Op::Constant(_) | Op::Iota { .. } => return Ok(Value::single(ty, ty, id, true)),
            _ => {}
        }
        // Values made from constants alone stay as written.
        if !operands.is_empty() && self.weak(operands) && instr.op.is_pure() {
            return Ok(Value::single(ty, ty, id, true));
        }
        if matches!(instr.op, Op::Convert) {
            return self.convert(rw, id, operands[0]);
        }
        match self.rule_of(Opcode::of(&instr.op)) {
            CastRule::Low => self.low(rw, id, operands),
            CastRule::Follow => self.follow(rw, id, operands),
            CastRule::Never => self.keep(rw, id, operands),
        }
    }

    /// Whether `id`'s scope keeps it in its precision, asked only of an op
    /// about to change type: most instructions never would (the optimizer's
    /// f32 arithmetic), and the scope of each showed in profiles.
    fn kept_by_scope(&mut self, rw: &Rewriter<'_>, id: InstrId) -> bool {
        let scope = &rw.comp().instr(id).metadata.op_name;
        // Neighbours in post order mostly share a scope: comparing with the
        // last one is cheaper than splitting the path again.
        let kept = if self.last_scope.0 == *scope {
            self.last_scope.1
        } else {
            let kept = self.scopes.keeps(scope);
            self.last_scope.0.clear();
            self.last_scope.0.push_str(scope);
            self.last_scope.1 = kept;
            kept
        };
        self.stats.kept_by_scope += usize::from(kept);
        kept
    }

    /// The value of `v` as `ty`, converting (once) when no representation
    /// of that type exists yet.
    fn materialize(
        &mut self,
        rw: &mut Rewriter<'_>,
        v: InstrId,
        ty: ElementType,
    ) -> Result<InstrId, crate::infra::rewriter::RewriteError> {
        let value = self.value(v);
        if value.sem.is_none() {
            return Ok(value.current());
        }
        if let Some(id) = value.rep(ty) {
            return Ok(id);
        }
        let source = value.current();
        let converted = self.add_convert(rw, v, source, ty)?;
        self.value_mut(v).reps.push((ty, converted));
        Ok(converted)
    }

    /// `rounded` (value `v` in the low type) widened to `ty`, once per value.
    fn widen_rounded(
        &mut self,
        rw: &mut Rewriter<'_>,
        v: InstrId,
        rounded: InstrId,
        ty: ElementType,
    ) -> Result<InstrId, crate::infra::rewriter::RewriteError> {
        if let Some(&w) = self.rounded_wide.get(&v) {
            return Ok(w);
        }
        let w = self.add_convert(rw, v, rounded, ty)?;
        self.rounded_wide.insert(v, w);
        Ok(w)
    }

    /// `source` (a representation of value `v`) converted to `ty`, with
    /// `v`'s provenance.
    fn add_convert(
        &mut self,
        rw: &mut Rewriter<'_>,
        v: InstrId,
        source: InstrId,
        ty: ElementType,
    ) -> Result<InstrId, crate::infra::rewriter::RewriteError> {
        let dims = rw.shape(source).array_dims();
        rw.provenance_of(v);
        let converted = rw.add(Op::Convert, &[source], Some(Shape::array(ty, dims)))?;
        self.stats.converts += 1;
        Ok(converted)
    }

    /// The original operand types, each operand as that type.
    fn as_written(
        &mut self,
        rw: &mut Rewriter<'_>,
        operands: &[InstrId],
    ) -> Result<IdList, crate::infra::rewriter::RewriteError> {
        self.operands_as(rw, operands, None)
    }

    /// Each float operand as `ty` (as written when `None`); the others as
    /// they are now.
    fn operands_as(
        &mut self,
        rw: &mut Rewriter<'_>,
        operands: &[InstrId],
        ty: Option<ElementType>,
    ) -> Result<IdList, crate::infra::rewriter::RewriteError> {
        operands
            .iter()
            .map(|&o| match self.value(o).written {
                Some(written) => self.materialize(rw, o, ty.unwrap_or(written)),
                None => Ok(self.value(o).current()),
            })
            .collect()
    }

    /// `id` with its operands pointed at `new`, its shape as written.
    fn rewire(
        &self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        old: &[InstrId],
        new: &[InstrId],
    ) -> Result<(), crate::infra::rewriter::RewriteError> {
        if old == new {
            return Ok(());
        }
        rw.rewrite_in_place(id, new, None)
    }

    /// Whether every operand is still the instruction the module wrote.
    fn untouched(&self, operands: &[InstrId]) -> bool {
        operands.iter().all(|&o| {
            let v = self.value(o);
            v.written.is_none_or(|w| v.rep(w) == Some(o))
        })
    }

    fn keep(
        &mut self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        operands: &[InstrId],
    ) -> Result<Value, crate::infra::rewriter::RewriteError> {
        if !self.untouched(operands) {
            let new = self.as_written(rw, operands)?;
            self.rewire(rw, id, operands, &new)?;
        }
        let ty = float_array_type(rw.shape(id));
        Ok(Value::single(ty, ty, id, false))
    }

    fn convert(
        &mut self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        x: InstrId,
    ) -> Result<Value, crate::infra::rewriter::RewriteError> {
        let from = self.value(x).written;
        let to = float_array_type(rw.shape(id));
        let new = self.as_written(rw, &[x])?;
        self.rewire(rw, id, &[x], &new)?;
        // A convert that widens a low value exactly is that value's wider
        // representation: followers keep computing low, and converting it
        // back to low is the value itself.
        match (from, to) {
            (Some(f), Some(t)) if f == self.policy.low && f != t && widens(f, t) => {
                if t == ElementType::F32 {
                    self.rounded_wide.insert(id, id);
                }
                Ok(Value {
                    written: to,
                    sem: Some(f),
                    weak: false,
                    reps: Reps::two((t, id), (f, new[0])),
                })
            }
            _ => Ok(Value::single(to, to, id, false)),
        }
    }

    fn low(
        &mut self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        operands: &[InstrId],
    ) -> Result<Value, crate::infra::rewriter::RewriteError> {
        let low = self.policy.low;
        let shape = rw.shape(id).clone();
        let result = float_array_type(&shape);
        // Only a float op at least as wide as the low type is lowered.
        let lowerable = result.is_some_and(|t| widens(low, t))
            && operands
                .iter()
                .all(|&o| self.value(o).written.is_some_and(|t| widens(low, t)));
        if !lowerable || self.kept_by_scope(rw, id) {
            return self.keep(rw, id, operands);
        }
        let acc = result.expect("checked lowerable");
        // Operands read back from MX blocks: quantized already (a module
        // this pass has seen).
        let blocked = |o: &InstrId| {
            rw.comp()
                .instr(*o)
                .frontend_attributes
                .contains_key(MX_ATTRIBUTE)
        };
        if self.mx.is_some() && operands.iter().all(blocked) {
            return Ok(Value::accumulator(low, acc, id));
        }
        let mut new_operands = Vec::with_capacity(operands.len());
        for &o in operands {
            let rounded = self.materialize(rw, o, low)?;
            new_operands.push(if self.widen_low_dots {
                self.widen_rounded(rw, o, rounded, acc)?
            } else {
                rounded
            });
        }
        if new_operands == operands {
            // Already low (a module this pass has seen).
            return Ok(Value::accumulator(low, acc, id));
        }
        rw.rewrite_in_place(id, &new_operands, Some(shape))?;
        self.stats.low += 1;
        self.record_mx(rw, id);
        Ok(Value::accumulator(low, acc, id))
    }

    /// Records low dot `id` for MX blocks where the policy has them, its
    /// scope is not kept and each operand's one contracting dimension
    /// divides into whole blocks.
    fn record_mx(&mut self, rw: &Rewriter<'_>, id: InstrId) {
        let Some((mx, scopes)) = &self.mx else {
            return;
        };
        if scopes.keeps(&rw.comp().instr(id).metadata.op_name) {
            self.stats.mx_kept_by_scope += 1;
            return;
        }
        let Op::Dot { dims, .. } = &rw.comp().instr(id).op else {
            return;
        };
        let operands = rw.comp().operand_ids(id);
        let axis = |contracting: &[i64], operand: InstrId| match contracting {
            [axis] => {
                let extent = rw.shape(operand).array_dims()[*axis as usize];
                mx.format.blocks(extent).then_some(*axis)
            }
            _ => None,
        };
        match (
            axis(&dims.lhs_contracting, operands[0]),
            axis(&dims.rhs_contracting, operands[1]),
        ) {
            (Some(l), Some(r)) => self.mx_dots.push(MxDot {
                dot: id,
                axes: [l, r],
            }),
            _ => self.stats.mx_unblocked += 1,
        }
    }

    fn follow(
        &mut self,
        rw: &mut Rewriter<'_>,
        id: InstrId,
        operands: &[InstrId],
    ) -> Result<Value, crate::infra::rewriter::RewriteError> {
        // The type the op was written in, shared by its float operands.
        let mut written = operands.iter().filter_map(|&o| self.value(o).written);
        let Some(f) = written.next() else {
            return self.keep(rw, id, operands);
        };
        if written.any(|t| t != f) {
            return self.keep(rw, id, operands);
        }
        // The widest semantic type among the operands that are not weak.
        let mut widest: Option<ElementType> = None;
        for &o in operands {
            let v = self.value(o);
            let (Some(s), false) = (v.sem, v.weak) else {
                continue;
            };
            widest = match widest {
                None => Some(s),
                Some(w) if widens(w, s) => Some(s),
                Some(w) if widens(s, w) => Some(w),
                // bf16 meets f16: neither holds the other.
                Some(_) => Some(f),
            };
        }
        let t = match widest {
            Some(t) if t != f && widens(t, f) && !self.kept_by_scope(rw, id) => t,
            _ => return self.keep(rw, id, operands),
        };
        let new_operands = self.operands_as(rw, operands, Some(t))?;
        let written = float_array_type(rw.shape(id));
        rw.retype_in_place(id, &new_operands, t)?;
        self.stats.followed += 1;
        Ok(Value::single(
            written,
            float_array_type(rw.shape(id)),
            id,
            false,
        ))
    }
}
