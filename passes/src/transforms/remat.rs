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
//! What a region outputs to the rest of the forward pass is kept, as
//! `torch.utils.checkpoint` keeps a checkpointed function's outputs: the
//! next layer reads them anyway. A sequence-parallel gather is the
//! exception: its output (the full sequence a column-parallel projection
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
        let policy = ctx.remat;
        if policy == RematPolicy::None {
            return Ok(false);
        }
        let entry = m.entry;
        let regions = regions(m.computation(entry), policy);
        if regions.is_empty() {
            ctx.note(
                self.name(),
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
                Err(why) => ctx.note(self.name(), format!("{policy}: '{key}' left as is: {why}")),
            }
        }
        drop(r);
        rewriter.finish(ctx);
        if total.regions == 0 {
            return Ok(false);
        }
        ctx.note(
            self.name(),
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

/// The forward region each instruction belongs to under `policy`, by
/// scope: the policy's own, or else a sequence-parallel gather's.
fn regions(c: &Computation, policy: RematPolicy) -> BTreeMap<String, Region> {
    let mut out: BTreeMap<String, Region> = BTreeMap::new();
    for id in c.ids() {
        let i = c.instr(id);
        if matches!(i.op, Op::Parameter(_)) || scope::is_backward(&i.metadata.op_name) {
            continue;
        }
        let name = &i.metadata.op_name;
        let (key, keeps_outputs) = match region_key(name, policy) {
            Some(key) => (key, true),
            None => match gather_key(name, policy) {
                Some(key) => (key, false),
                None => continue,
            },
        };
        let region = out.entry(key.to_string()).or_default();
        region.members.insert(id);
        region.keeps_outputs = keeps_outputs;
    }
    out
}

/// The scope of a sequence-parallel gather, recomputed under every policy
/// but `none`.
fn gather_key(op_name: &str, policy: RematPolicy) -> Option<&str> {
    if policy == RematPolicy::None {
        return None;
    }
    scope::prefix_through(op_name, |p| p == scope::SEQUENCE_GATHER)
}

fn region_key(op_name: &str, policy: RematPolicy) -> Option<&str> {
    match policy {
        RematPolicy::None => None,
        RematPolicy::CoreAttention => {
            scope::prefix_through(op_name, |p| p == scope::CORE_ATTENTION)
        }
        RematPolicy::FullLayer => scope::prefix_through(op_name, |p| {
            p.strip_prefix(scope::LAYER_PREFIX)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        }),
    }
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
        let mut held = self.inputs.clone();
        held.push(trigger);
        let tuple = r
            .add_named("remat_inputs", Op::Tuple, &held, None)
            .map_err(err(Remat::NAME))?;
        let barrier = r
            .add_named("remat_barrier", Op::OptBarrier, &[tuple], None)
            .map_err(err(Remat::NAME))?;
        let foil = match target {
            Target::Cpu => Some(always_true(r, trigger).map_err(err(Remat::NAME))?),
            Target::Neuron => None,
        };
        let mut mapped: HashMap<InstrId, InstrId> = HashMap::default();
        for (index, &input) in self.inputs.iter().enumerate() {
            let gte = r
                .add(
                    Op::GetTupleElement {
                        index: index as i64,
                    },
                    &[barrier],
                    None,
                )
                .map_err(err(Remat::NAME))?;
            let held = match foil {
                Some(p) => unfoldable_identity(r, p, gte).map_err(err(Remat::NAME))?,
                None => gte,
            };
            mapped.insert(input, held);
        }
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

/// `pred[]` that is true for every value of `trigger`'s first element,
/// NaN included, without a simplifier being able to prove it.
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
    let mut seen: HashSet<InstrId> = HashSet::default();
    let mut stack = vec![target];
    while let Some(id) = stack.pop() {
        if readers.contains(&id) {
            return true;
        }
        if order.pos(id) < from || !seen.insert(id) {
            continue;
        }
        stack.extend(c.operands(id));
    }
    false
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
