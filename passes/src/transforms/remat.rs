//! `remat`: selective activation checkpointing. A policy picks regions of
//! the forward pass by their provenance scope (each layer's core attention,
//! or each whole layer). Inside a region, the forward values the backward
//! pass reads are what its rules declared they save ([`saves`]); instead of
//! keeping them alive from the forward pass to the backward one, the pass
//! recomputes them in the backward pass from the region's inputs.
//!
//! Two things make the recomputation real on any XLA backend:
//! - its inputs go through an `opt-barrier`, so XLA's CSE cannot see that
//!   a clone computes the same value as the original and merge them back;
//! - the barrier also takes a backward value the clones' readers already
//!   wait for (the trigger), so the recomputation cannot be scheduled
//!   early, right after the forward pass, where it would save nothing.
//!
//! XLA CPU removes opt-barriers (`OptimizationBarrierExpander`) before its
//! last, layout-sensitive CSE, which then merges the clones back: measured,
//! the recomputed softmaxes vanished and the temporaries did not shrink. So
//! for the `cpu` target each input the clones read also passes through
//! `select(p, x, 0)`, where `p = (s == s) or (s != s)` for one element `s`
//! of the trigger: true for every value, NaN included, but nothing XLA's
//! simplifier folds. That is the kind of CSE-foiling widget JAX's remat
//! used; `neuron` gets the barrier alone, which neuronx-cc honours (NxD's
//! checkpointing relies on it).
//!
//! Autodiff recomputes what the model names in `GradHints::recompute`
//! (SwiGLU's activation, the norms' broadcasts and outputs, the
//! sequence-parallel gathers) under every policy: this pass puts the
//! forward values those copies (each marked
//! [`hlatc_compiler::Instruction::recomputed`]) read behind the same kind
//! of barrier, trigger and foil, under every policy, `none` included.
//!
//! What a region outputs to the rest of the forward pass is kept, as
//! `torch.utils.checkpoint` keeps a checkpointed function's outputs: the
//! next layer reads them anyway. A sequence-parallel gather (which
//! autodiff now recomputes itself) is the exception: its output (the full sequence a column-parallel projection
//! reads) is T times the shard it is gathered from, so under either policy
//! the shard is kept and the gather runs again in the backward pass, as
//! Megatron's and NxD's sequence parallelism do. A collective is
//! recomputed like any value: every rank runs the same program, so every
//! rank runs the clone too, in the same order. Values computed from
//! constants alone (iotas, masks, broadcast constants) are recomputed
//! wherever a clone needs them instead of being routed through the
//! barrier.
//!
//! [`saves`]: hlatc_compiler::graph::autodiff::rules::saves

use crate::infra::context::{human_bytes, PassContext, RematPolicy, Target};
use crate::infra::pass::{Pass, PassError};
use crate::infra::rewriter::{ModuleRewriter, RewriteError, Rewriter};
use crate::infra::upstream::reaches_any;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, SliceDim};
use hlatc_compiler::util::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use hlatc_compiler::{
    graph::scope, Computation, ElementType, InstrId, Literal, Metadata, Module, Op, Shape,
};
use std::collections::BTreeMap;

pub struct Remat;

impl Remat {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "remat";
}

impl Pass for Remat {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let regions = match ctx.remat {
            RematPolicy::None => false,
            policy => recompute_regions(m, ctx, policy)?,
        };
        let held = hold_recomputations(m, ctx)?;
        let cleared = clear_recomputed_marks(m);
        if held.groups > 0 {
            ctx.note(
                Remat::NAME,
                format!(
                    "autodiff's recomputations: {} behind opt-barriers ({} read)",
                    count(held.groups, "group"),
                    count(held.inputs, "forward value")
                ),
            );
        }
        Ok(regions || held.groups > 0 || cleared)
    }
}

/// Recomputes the regions `policy` picks; whether any was.
fn recompute_regions(
    m: &mut Module,
    ctx: &mut PassContext,
    policy: RematPolicy,
) -> Result<bool, PassError> {
    let name = Remat::NAME;
    let entry = m.entry;
    let regions = regions(m.computation(entry), policy);
    if regions.is_empty() {
        ctx.note(
            name,
            format!("{policy}: no forward instruction carries a matching provenance scope (metadata.op_name); nothing to recompute"),
        );
        return Ok(false);
    }
    let mut rewriter = ModuleRewriter::for_pass(m, ctx);
    let c = m.computation_mut(entry);
    let order = Order::of(c);
    let mut r = rewriter.on(c);
    let mut total = Totals::default();
    for (key, region) in &regions {
        let Some(plan) = Plan::of(r.comp(), &order, region) else {
            continue;
        };
        match plan.check(r.comp(), &order) {
            Ok(trigger) => total.add(&plan.apply(&mut r, key, trigger, ctx.target)?),
            Err(why) => ctx.note(name, format!("{policy}: '{key}' left as is: {why}")),
        }
    }
    drop(r);
    rewriter.finish(ctx);
    if total.regions == 0 {
        return Ok(false);
    }
    ctx.note(
        name,
        format!(
            "{policy}: {}, {} recomputed behind opt-barriers; {} ({}) no longer kept for the backward pass",
            count(total.regions, "region"),
            count(total.recomputed, "instruction"),
            count(total.freed, "activation"),
            human_bytes(total.freed_bytes)
        ),
    );
    Ok(true)
}

/// Forward instructions recomputed together, from one scope.
#[derive(Default)]
struct Region {
    members: HashSet<InstrId>,
    /// Whether what the region outputs to the rest of the forward pass is
    /// kept for the backward (a layer's, core attention's) or recomputed
    /// too (a sequence-parallel gather's).
    keeps_outputs: bool,
}

/// The forward region each instruction belongs to under `policy`
/// ([`RematPolicy::region`]).
fn regions(c: &Computation, policy: RematPolicy) -> BTreeMap<String, Region> {
    let mut out: BTreeMap<String, Region> = BTreeMap::new();
    for id in c.ids() {
        let i = c.instr(id);
        if matches!(i.op, Op::Parameter(_)) || scope::is_backward(&i.metadata.op_name) {
            continue;
        }
        let Some(found) = policy.region(&i.metadata.op_name) else {
            continue;
        };
        let region = out.entry(found.key.to_string()).or_default();
        region.members.insert(id);
        region.keeps_outputs = found.keeps_outputs;
    }
    out
}

/// Positions in a topological order, and which values are computed from
/// constants alone.
struct Order {
    pos: Vec<usize>,
    generated: Vec<bool>,
}

impl Order {
    fn of(c: &Computation) -> Order {
        let n = c.ids().map(|i| i.index() + 1).max().unwrap_or(0);
        let (mut pos, mut generated) = (vec![0; n], vec![false; n]);
        for (k, id) in c.post_order().into_iter().enumerate() {
            pos[id.index()] = k;
            generated[id.index()] = match c.instr(id).op {
                Op::Constant(_) | Op::Iota { .. } => true,
                ref op if !op.is_pure() => false,
                _ => c.operands(id).iter().all(|o| generated[o.index()]),
            };
        }
        Order { pos, generated }
    }

    fn pos(&self, id: InstrId) -> usize {
        self.pos[id.index()]
    }

    fn generated(&self, id: InstrId) -> bool {
        self.generated[id.index()]
    }
}

fn is_backward(c: &Computation, id: InstrId) -> bool {
    scope::is_backward(&c.instr(id).metadata.op_name)
}

/// What rematerializing one region takes.
struct Plan {
    /// Region values the backward reads, with the backward instructions
    /// that read them.
    saved: Vec<(InstrId, Vec<InstrId>)>,
    /// Everything recomputed, in topological order.
    clones: Vec<InstrId>,
    /// Values from outside the region the clones read (kept, through the
    /// barrier), in topological order.
    inputs: Vec<InstrId>,
}

impl Plan {
    /// `None` when the backward reads nothing inside the region that it
    /// would recompute (under [`Region::keeps_outputs`], nothing that the
    /// rest of the forward pass does not also read).
    fn of(c: &Computation, order: &Order, region: &Region) -> Option<Plan> {
        let members = &region.members;
        let mut saved: Vec<(InstrId, Vec<InstrId>)> = Vec::new();
        for &v in members {
            if order.generated(v) {
                continue;
            }
            let users = c.users(v);
            let is_output = users
                .iter()
                .any(|&u| !members.contains(&u) && !is_backward(c, u));
            let backward: Vec<InstrId> = users.into_iter().filter(|&u| is_backward(c, u)).collect();
            let kept_as_output = is_output && region.keeps_outputs;
            if !kept_as_output && !backward.is_empty() {
                saved.push((v, backward));
            }
        }
        if saved.is_empty() {
            return None;
        }
        saved.sort_by_key(|&(v, _)| order.pos(v));
        let (mut clones, mut inputs) = (Vec::new(), Vec::new());
        let mut seen: HashSet<InstrId> = HashSet::default();
        let mut stack: Vec<InstrId> = saved.iter().map(|&(v, _)| v).collect();
        while let Some(id) = stack.pop() {
            if !seen.insert(id) || matches!(c.instr(id).op, Op::Constant(_)) {
                continue;
            }
            if members.contains(&id) || order.generated(id) {
                clones.push(id);
                stack.extend(c.operands(id));
            } else {
                inputs.push(id);
            }
        }
        clones.sort_by_key(|&id| order.pos(id));
        inputs.sort_by_key(|&id| order.pos(id));
        Some(Plan {
            saved,
            clones,
            inputs,
        })
    }

    /// The trigger the barrier waits for, or why the region cannot be
    /// recomputed safely.
    fn check(&self, c: &Computation, order: &Order) -> Result<InstrId, Unsafe> {
        for &id in &self.clones {
            let i = c.instr(id);
            if let Err(why) = recomputable(&i.op) {
                return Err(Unsafe::NotRecomputable {
                    instruction: i.name.clone(),
                    opcode: i.op.opcode(),
                    why,
                });
            }
        }
        if let Some(&id) = self.inputs.iter().find(|&&id| is_backward(c, id)) {
            return Err(Unsafe::ReadsBackward {
                value: c.instr(id).name.clone(),
            });
        }
        let readers: HashSet<InstrId> = self
            .saved
            .iter()
            .flat_map(|(_, users)| users.iter().copied())
            .collect();
        // The earliest backward value a reader waits for: the barrier may
        // wait for it too without delaying any reader. Values made from
        // constants alone wait for nothing, so they cannot hold it back.
        let trigger = readers
            .iter()
            .flat_map(|&u| c.operands(u))
            .filter(|&o| {
                is_backward(c, o)
                    && !order.generated(o)
                    && !readers.contains(&o)
                    && c.instr(o).shape.as_array().is_some()
            })
            .min_by_key(|&o| order.pos(o))
            .ok_or(Unsafe::NoTrigger)?;
        // A reader computed before the trigger must not feed it, or the
        // barrier would wait for its own result.
        let first_reader = readers.iter().map(|&u| order.pos(u)).min().unwrap_or(0);
        if first_reader < order.pos(trigger) && feeds(c, order, &readers, trigger, first_reader) {
            return Err(Unsafe::TriggerFedByReader {
                trigger: c.instr(trigger).name.clone(),
            });
        }
        Ok(trigger)
    }

    /// Clones the region behind a barrier on its inputs and the trigger,
    /// and points the backward readers at the clones.
    fn apply(
        &self,
        r: &mut Rewriter<'_>,
        key: &str,
        trigger: InstrId,
        target: Target,
    ) -> Result<RegionStats, PassError> {
        let err = PassError::rewrite;
        let provenance = |r: &Rewriter<'_>, id: InstrId| Metadata {
            op_name: scope::backward(&r.comp().instr(id).metadata.op_name),
            ..r.comp().instr(id).metadata.clone()
        };
        r.set_metadata(Metadata {
            op_name: scope::backward(key),
            ..Metadata::default()
        });
        r.set_frontend_attributes(BTreeMap::new());
        let held = behind_barrier(r, "remat", &self.inputs, Some(trigger), trigger, target)
            .map_err(err(Remat::NAME))?;
        let mut mapped: HashMap<InstrId, InstrId> = self.inputs.iter().copied().zip(held).collect();
        for &id in &self.clones {
            let operands: Vec<InstrId> = r
                .comp()
                .operands(id)
                .into_iter()
                .map(|o| *mapped.get(&o).unwrap_or(&o))
                .collect();
            let md = provenance(r, id);
            let i = r.comp().instr(id);
            let (stem, op, shape, attrs) = (
                format!("{}.remat", i.name),
                i.op.clone(),
                i.shape.clone(),
                i.frontend_attributes.clone(),
            );
            r.set_metadata(md).set_frontend_attributes(attrs);
            let clone = r
                .add_named(&stem, op, &operands, Some(shape))
                .map_err(err(Remat::NAME))?;
            r.copy_value_annotations(id, clone);
            mapped.insert(id, clone);
        }
        let mut freed_bytes = 0;
        for (v, readers) in &self.saved {
            freed_bytes += r.shape(*v).byte_size();
            for &u in readers {
                r.replace_in(u, *v, mapped[v]).map_err(err(Remat::NAME))?;
            }
        }
        Ok(RegionStats {
            recomputed: self.clones.len(),
            freed: self.saved.len(),
            freed_bytes,
        })
    }
}

/// Whether an instruction running `op` gives the same value when run again
/// from the same operands, in the same program on every rank.
fn recomputable(op: &Op) -> Result<(), NotRecomputable> {
    if op.is_pure() {
        return Ok(());
    }
    match op {
        // A channel pairs one collective instruction across partitions;
        // a clone would need a channel of its own (hlatc's steps use none).
        Op::AllGather { collective, .. }
        | Op::AllReduce { collective, .. }
        | Op::ReduceScatter { collective, .. }
        | Op::AllToAll { collective, .. } => match collective.channel_id {
            None => Ok(()),
            Some(_) => Err(NotRecomputable::Channel),
        },
        _ => Err(NotRecomputable::Impure),
    }
}

/// Why a region is left as it is, for the pass's note.
#[derive(Debug, thiserror::Error)]
enum Unsafe {
    #[error("'{instruction}' ({opcode}) cannot be recomputed: {why}")]
    NotRecomputable {
        instruction: String,
        opcode: &'static str,
        why: NotRecomputable,
    },
    /// The clones would wait for the backward pass they feed.
    #[error("it reads the backward value '{value}'")]
    ReadsBackward { value: String },
    /// Nothing to hold the recomputation back until the backward pass
    /// needs it.
    #[error("its backward readers read no backward value to wait for")]
    NoTrigger,
    /// The barrier would wait for its own result.
    #[error("every backward value its readers wait for depends on a reader ('{trigger}')")]
    TriggerFedByReader { trigger: String },
}

/// Why an instruction cannot be cloned into the backward pass.
#[derive(Debug, thiserror::Error)]
enum NotRecomputable {
    #[error("a cross-partition collective (channel_id) needs a channel of its own")]
    Channel,
    /// Running it again would be observed (effects, RNG).
    #[error("it is not a pure value")]
    Impure,
}

/// How many groups of autodiff's copies were put behind barriers, and how
/// many forward values they read.
#[derive(Default)]
struct Held {
    groups: usize,
    inputs: usize,
}

/// One group of autodiff's copies that read one another, and what they
/// read from the forward pass.
struct CopyGroup {
    members: HashSet<InstrId>,
    /// Forward values the members read, in topological order.
    inputs: Vec<InstrId>,
    /// The earliest backward value the members' readers wait for, when
    /// one does not depend on a member.
    trigger: Option<InstrId>,
}

/// Puts the forward values autodiff's recomputations ([`RECOMPUTED`]) read
/// behind an `opt-barrier` that waits for the backward pass (and, for the
/// `cpu` target, through the foil), as [`Plan::apply`] does for a region's
/// clones: without it XLA's CSE merges each copy back into the forward
/// value it recomputes, which then stays alive across the step, and its
/// scheduler may run the copy right after the forward pass. Runs under
/// every policy, after the regions (whose clones a copy may now read
/// instead of a forward value) and after the cast policy, so the barrier
/// holds each value in the type its reader reads.
fn hold_recomputations(m: &mut Module, ctx: &mut PassContext) -> Result<Held, PassError> {
    let err = PassError::rewrite;
    let entry = m.entry;
    let groups = copy_groups(m.computation(entry));
    let mut held = Held::default();
    if groups.is_empty() {
        return Ok(held);
    }
    let mut rewriter = ModuleRewriter::for_pass(m, ctx);
    let c = m.computation_mut(entry);
    let mut r = rewriter.on(c);
    for g in &groups {
        let first = g.inputs[0];
        let md = Metadata {
            op_name: r
                .comp()
                .instr(*g.members.iter().min().unwrap_or(&first))
                .metadata
                .op_name
                .clone(),
            ..Metadata::default()
        };
        r.set_metadata(md);
        r.set_frontend_attributes(BTreeMap::new());
        let foil_source = g.trigger.unwrap_or(first);
        let values = behind_barrier(
            &mut r,
            "recompute",
            &g.inputs,
            g.trigger,
            foil_source,
            ctx.target,
        )
        .map_err(err(Remat::NAME))?;
        for (&input, value) in g.inputs.iter().zip(values) {
            let readers: Vec<InstrId> = r
                .comp()
                .users(input)
                .into_iter()
                .filter(|u| g.members.contains(u))
                .collect();
            for u in readers {
                r.replace_in(u, input, value).map_err(err(Remat::NAME))?;
            }
        }
        held.groups += 1;
        held.inputs += g.inputs.len();
    }
    drop(r);
    rewriter.finish(ctx);
    Ok(held)
}

/// Clears every recomputed mark: each of autodiff's copies is held now (or
/// reads a region's clones, which are), so nothing is left for the mark to
/// ask. Whether there was one.
fn clear_recomputed_marks(m: &mut Module) -> bool {
    let mut cleared = false;
    for c in &mut m.computations {
        let marked: Vec<InstrId> = c.ids().filter(|&id| c.instr(id).recomputed).collect();
        for id in marked {
            c.instr_mut(id).recomputed = false;
            cleared = true;
        }
    }
    cleared
}

/// autodiff's copies in groups that read one another, each with the
/// forward values (other than constants) it reads; groups that read none
/// (their inputs are already a region's clones) are left out.
fn copy_groups(c: &Computation) -> Vec<CopyGroup> {
    let copies: Vec<InstrId> = c.ids().filter(|&id| c.instr(id).recomputed).collect();
    if copies.is_empty() {
        return Vec::new();
    }
    let order = Order::of(c);
    // Union-find over the copies, by the copies they read.
    let mut parent: HashMap<InstrId, InstrId> = copies.iter().map(|&id| (id, id)).collect();
    fn root(parent: &mut HashMap<InstrId, InstrId>, mut id: InstrId) -> InstrId {
        while parent[&id] != id {
            let up = parent[&parent[&id]];
            parent.insert(id, up);
            id = up;
        }
        id
    }
    for &id in &copies {
        for o in c.operands(id) {
            if parent.contains_key(&o) {
                let (a, b) = (root(&mut parent, id), root(&mut parent, o));
                parent.insert(a, b);
            }
        }
    }
    let mut by_root: BTreeMap<usize, Vec<InstrId>> = BTreeMap::new();
    let mut first_pos: HashMap<InstrId, usize> = HashMap::default();
    for &id in &copies {
        let r = root(&mut parent, id);
        let p = first_pos.entry(r).or_insert(usize::MAX);
        *p = (*p).min(order.pos(id));
    }
    for &id in &copies {
        let r = root(&mut parent, id);
        by_root.entry(first_pos[&r]).or_default().push(id);
    }
    let mut groups = Vec::new();
    for (_, members) in by_root {
        let members: HashSet<InstrId> = members.into_iter().collect();
        let mut inputs: Vec<InstrId> = members
            .iter()
            .flat_map(|&id| c.operands(id))
            .filter(|&o| {
                !members.contains(&o)
                    && !is_backward(c, o)
                    && !matches!(c.instr(o).op, Op::Constant(_))
            })
            .collect();
        inputs.sort_by_key(|&id| order.pos(id));
        inputs.dedup();
        if inputs.is_empty() {
            continue;
        }
        let readers: HashSet<InstrId> = members
            .iter()
            .flat_map(|&id| c.users(id))
            .filter(|u| !members.contains(u))
            .collect();
        let trigger = readers
            .iter()
            .flat_map(|&u| c.operands(u))
            .filter(|&o| {
                is_backward(c, o)
                    && !members.contains(&o)
                    && !readers.contains(&o)
                    && !order.generated(o)
                    && c.instr(o).shape.as_array().is_some()
            })
            .min_by_key(|&o| order.pos(o))
            .filter(|&t| may_wait_for(c, &order, (&members, &readers), t));
        let unit = members
            .iter()
            .filter_map(|&id| scope::gather_unit_of(&c.instr(id).metadata.op_name))
            .min();
        groups.push((
            CopyGroup {
                members,
                inputs,
                trigger,
            },
            readers,
            unit,
        ));
    }
    prefetch_regathers(c, &order, &mut groups);
    groups.into_iter().map(|(g, _, _)| g).collect()
}

/// Whether a barrier holding `members` back for `readers` may wait for
/// `t`: not when `t` is computed from one of the readers or from a copy it
/// holds back (the barrier would wait for its own result).
fn may_wait_for(
    c: &Computation,
    order: &Order,
    (members, readers): (&HashSet<InstrId>, &HashSet<InstrId>),
    t: InstrId,
) -> bool {
    let first_reader = readers.iter().map(|&u| order.pos(u)).min().unwrap_or(0);
    let fed_by_reader = first_reader < order.pos(t) && feeds(c, order, readers, t, first_reader);
    !fed_by_reader && !feeds_from(c, order, members, t)
}

/// FSDP's gathers of each unit again in the backward, issued one unit
/// ahead as torchtitan's FSDP2 prefetches: each unit's copies wait for
/// the backward to reach the unit after it in the forward (the trigger of
/// that unit's gathers), not for the backward to reach their own, so a
/// scheduler can overlap a unit's gather with the unit before it in the
/// backward, at most two units' weights whole at once. A unit whose
/// neighbour's trigger it may not wait for keeps its own.
fn prefetch_regathers(
    c: &Computation,
    order: &Order,
    groups: &mut [(CopyGroup, HashSet<InstrId>, Option<usize>)],
) {
    // Each unit's earliest trigger in the backward.
    let mut reached: BTreeMap<usize, InstrId> = BTreeMap::new();
    for (g, _, unit) in groups.iter() {
        if let (Some(u), Some(t)) = (*unit, g.trigger) {
            let at = reached.entry(u).or_insert(t);
            if order.pos(t) < order.pos(*at) {
                *at = t;
            }
        }
    }
    for (g, readers, unit) in groups.iter_mut() {
        let Some(u) = *unit else { continue };
        let Some((_, &ahead)) = reached.range(u + 1..).next() else {
            continue;
        };
        if may_wait_for(c, order, (&g.members, readers), ahead) {
            g.trigger = Some(ahead);
        }
    }
}

/// Whether one of `members` lies upstream of `target`.
fn feeds_from(c: &Computation, order: &Order, members: &HashSet<InstrId>, target: InstrId) -> bool {
    let from = members.iter().map(|&m| order.pos(m)).min().unwrap_or(0);
    feeds(c, order, members, target, from)
}

/// `pred[]` that is true for every value of `trigger`'s first element,
/// NaN included, without a simplifier being able to prove it.
/// `inputs`, with `trigger` after them when there is one, through one
/// opt-barrier (`{stem}_inputs`, `{stem}_barrier`), and each input read back
/// out of it, in order: what a recomputation reads, which XLA may then
/// neither hoist above the trigger nor merge with the forward's own values.
/// On cpu each is also passed through the foil, an identity XLA CPU cannot
/// fold (`unfoldable_identity` on a predicate made from `foil_source`).
fn behind_barrier(
    r: &mut Rewriter<'_>,
    stem: &str,
    inputs: &[InstrId],
    trigger: Option<InstrId>,
    foil_source: InstrId,
    target: Target,
) -> Result<Vec<InstrId>, RewriteError> {
    let mut items = inputs.to_vec();
    items.extend(trigger);
    let tuple = r.add_named(&format!("{stem}_inputs"), Op::Tuple, &items, None)?;
    let barrier = r.add_named(&format!("{stem}_barrier"), Op::OptBarrier, &[tuple], None)?;
    let foil = match target {
        Target::Cpu => Some(always_true(r, foil_source)?),
        Target::Neuron => None,
    };
    (0..inputs.len())
        .map(|index| {
            let gte = r.add(
                Op::GetTupleElement {
                    index: index as i64,
                },
                &[barrier],
                None,
            )?;
            match foil {
                Some(p) => unfoldable_identity(r, p, gte),
                None => Ok(gte),
            }
        })
        .collect()
}

fn always_true(r: &mut Rewriter<'_>, trigger: InstrId) -> Result<InstrId, RewriteError> {
    // `check` only picks array triggers; a tuple would fail shape inference.
    let dims = r
        .shape(trigger)
        .as_array()
        .map(|a| a.dims.clone())
        .unwrap_or_default();
    let first = r.add(
        Op::Slice {
            slices: dims
                .iter()
                .map(|_| SliceDim {
                    start: 0,
                    limit: 1,
                    stride: 1,
                })
                .collect(),
        },
        &[trigger],
        None,
    )?;
    let ty = r
        .shape(trigger)
        .as_array()
        .map_or(ElementType::F32, |a| a.ty);
    let s = r.add(Op::RESHAPE, &[first], Some(Shape::scalar(ty)))?;
    let compare = |r: &mut Rewriter<'_>, direction| {
        r.add(
            Op::Compare {
                direction,
                kind: None,
            },
            &[s, s],
            None,
        )
    };
    let eq = compare(r, ComparisonDirection::Eq)?;
    let ne = compare(r, ComparisonDirection::Ne)?;
    r.add(Op::Binary(BinaryOp::Or), &[eq, ne], None)
}

/// `select(p, x, 0)`: `x` itself while `p` holds, which it always does.
fn unfoldable_identity(
    r: &mut Rewriter<'_>,
    p: InstrId,
    x: InstrId,
) -> Result<InstrId, RewriteError> {
    let Shape::Array(a) = r.shape(x).clone() else {
        return Ok(x);
    };
    let pb = r.add(
        Op::Broadcast { dimensions: vec![] },
        &[p],
        Some(Shape::array(ElementType::Pred, a.dims.clone())),
    )?;
    let zero = r.add(Op::Constant(Literal::zeros(a.ty, vec![])), &[], None)?;
    let zeros = r.add(
        Op::Broadcast { dimensions: vec![] },
        &[zero],
        Some(Shape::Array(a.clone())),
    )?;
    r.add(Op::Select, &[pb, x, zeros], None)
}

/// Whether one of `readers` lies upstream of `target`, looking only at
/// instructions at or after position `from` (nothing earlier can be one).
fn feeds(
    c: &Computation,
    order: &Order,
    readers: &HashSet<InstrId>,
    target: InstrId,
    from: usize,
) -> bool {
    reaches_any(c, target, readers, |id| Some(order.pos(id)), from)
}

struct RegionStats {
    recomputed: usize,
    freed: usize,
    freed_bytes: u64,
}

#[derive(Default)]
struct Totals {
    regions: usize,
    recomputed: usize,
    freed: usize,
    freed_bytes: u64,
}

impl Totals {
    fn add(&mut self, s: &RegionStats) {
        self.regions += 1;
        self.recomputed += s.recomputed;
        self.freed += s.freed;
        self.freed_bytes += s.freed_bytes;
    }
}

/// `n` and `noun`, plural unless `n` is 1.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
