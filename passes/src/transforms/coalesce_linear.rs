//! `coalesce-linear`: fewer, larger matmuls.
//!
//! - Dots that read the same operand on the same side, with the same
//!   dimension numbers, whose other operands differ only in their one free
//!   dimension, become one dot on the other operands concatenated along that
//!   dimension, followed by slices: q/k/v become one `qkv` dot (GQA's
//!   narrower k/v included), gate/up one `gate_up` dot, and the weight
//!   gradients that share the layer input merge the same way.
//! - `dot(a1, b1) + dot(a2, b2)`, where the pairs differ only in one
//!   contracted dimension, becomes one dot over both concatenated along it:
//!   the input gradient summed over q/k/v (or gate/up) is one dot.
//!
//! Blocked attention's dots (scope `blocked_attention`, forward and
//! backward) are left apart: each is one tile pair, and merging the pairs
//! that share a tile would build back the `[S, S]` values the tiling
//! exists to avoid.
//!
//! Where the concatenated operands are entry parameters (weights imported
//! as inputs), the concatenation happens every step; the report says how
//! many bytes that copies.

use crate::infra::context::{human_bytes, PassContext};
use crate::infra::pass::{Pass, PassError};
use crate::infra::pattern;
use crate::infra::rewriter::{ModuleRewriter, RewriteError, Rewriter};
use crate::infra::upstream::reaches_any;
use hlatc_compiler::graph::scope;
use hlatc_compiler::ir::op::{BinaryOp, DotAlgorithm, DotDims, Precision, SliceDim};
use hlatc_compiler::util::fx::{FxHashMap as HashMap, FxHashSet as HashSet};
use hlatc_compiler::{Computation, ElementType, InstrId, Module, Op};

pub struct CoalesceLinear;

impl CoalesceLinear {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "coalesce-linear";
}

impl Pass for CoalesceLinear {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut rw: Option<ModuleRewriter> = None;
        let mut changed = false;
        // Whether any dots could merge, merged or kept apart.
        let mut candidates = false;
        let entry = m.entry;
        let allow = ctx.concat_entry_parameters;
        for ci in 0..m.computations.len() {
            let is_entry = ci == entry.index();
            let mut copied_bytes = 0i64;
            let c = &m.computations[ci];
            let order = c.post_order();
            // Groups and sums split by the policy on entry parameters.
            let (groups, groups_kept): (Vec<Group>, Vec<Group>) =
                shared_operand_groups(c, &order).into_iter().partition(|g| {
                    allow || parameter_bytes(c, g.members.iter().map(|m| m.other), is_entry) == 0
                });
            let sum_bytes = |c: &Computation, s: &SumOfDots| {
                let rhs = [s.a, s.b].map(|d| c.operands(d)[1]);
                parameter_bytes(c, rhs.into_iter(), is_entry)
            };
            let (sums, sums_kept): (Vec<SumOfDots>, Vec<SumOfDots>) = sums_of_dots(c, &order)
                .into_iter()
                .partition(|s| allow || sum_bytes(c, s) == 0);
            candidates |= !(groups.is_empty()
                && sums.is_empty()
                && groups_kept.is_empty()
                && sums_kept.is_empty());
            if groups.is_empty() && sums.is_empty() {
                note_kept_apart(
                    ctx,
                    self.name(),
                    &c.name,
                    groups_kept.len() + sums_kept.len(),
                );
                continue;
            }
            let mut r = ModuleRewriter::on_demand(&mut rw, m, ci, ctx);
            for group in groups {
                copied_bytes +=
                    parameter_bytes(r.comp(), group.members.iter().map(|m| m.other), is_entry);
                merge_group(&mut r, &group).map_err(PassError::rewrite(self.name()))?;
                changed = true;
            }
            // Merging groups rewires dots, so the sums are found again.
            let mut kept_apart = groups_kept.len();
            let order = r.comp().post_order();
            for sum in sums_of_dots(r.comp(), &order) {
                let bytes = sum_bytes(r.comp(), &sum);
                if bytes > 0 && !allow {
                    kept_apart += 1;
                    continue;
                }
                copied_bytes += bytes;
                merge_sum(&mut r, &sum).map_err(PassError::rewrite(self.name()))?;
                changed = true;
            }
            note_kept_apart(ctx, self.name(), &r.comp().name, kept_apart);
            r.remove_dead();
            if copied_bytes > 0 {
                // Counted over the result, so a weight in two merged
                // groups (forward and input gradient) counts once.
                let c = r.comp();
                let concatenated: Vec<InstrId> = c
                    .parameters()
                    .into_iter()
                    .filter(|&p| {
                        c.users(p)
                            .iter()
                            .any(|&u| matches!(c.instr(u).op, Op::Concatenate { .. }))
                    })
                    .collect();
                let bytes = parameter_bytes(c, concatenated.iter().copied(), true);
                ctx.note(
                    self.name(),
                    format!(
                        "'{}': {} weight parameters ({}) are concatenated in the graph every step",
                        c.name,
                        concatenated.len(),
                        human_bytes(bytes.max(0) as u64)
                    ),
                );
            }
        }
        ModuleRewriter::finish_on_demand(rw, ctx);
        // Not on a fixpoint's last trip, which finds nothing left.
        if !candidates && !ctx.has_changed(self.name()) {
            ctx.note(
                self.name(),
                "found no dots to merge (none share an operand with like dimension numbers and shapes): a step whose weights are stored fused, hlatc's default qkv_proj and gate_up_proj, is coalesced already (--separate-projections builds them apart)",
            );
        }
        Ok(changed)
    }
}

fn note_kept_apart(ctx: &mut PassContext, pass: &str, computation: &str, n: usize) {
    if n > 0 {
        ctx.note(
            pass,
            format!(
                "'{computation}': left {n} dot groups apart whose merge would concatenate entry parameters every step"
            ),
        );
    }
}

/// A dot seen from one of its operands.
#[derive(Clone, Debug)]
struct Member {
    dot: InstrId,
    other: InstrId,
    /// The other operand's one free dimension.
    free: usize,
}

/// Dots that may merge: same shared operand, side, dimension numbers and
/// precision, and other operands alike except in their free dimension.
struct Group {
    shared_is_lhs: bool,
    shared: InstrId,
    dims: DotDims,
    precision: Vec<Precision>,
    members: Vec<Member>,
}

fn dot_parts(
    c: &Computation,
    id: InstrId,
) -> Option<(&DotDims, &Vec<Precision>, InstrId, InstrId)> {
    let op_name = &c.instr(id).metadata.op_name;
    if scope::prefix_through(op_name, |p| p == scope::BLOCKED_ATTENTION).is_some() {
        return None;
    }
    // A dot with an evaluation algorithm of its own is left as written.
    let Op::Dot {
        dims,
        precision,
        algorithm: DotAlgorithm::Unset,
    } = &c.instr(id).op
    else {
        return None;
    };
    let o = c.operands(id);
    Some((dims, precision, o[0], o[1]))
}

/// The dimensions of a rank-`rank` operand that are neither batch nor
/// contracting.
fn free_dims(rank: usize, batch: &[i64], contracting: &[i64]) -> Vec<usize> {
    (0..rank)
        .filter(|&d| !batch.contains(&(d as i64)) && !contracting.contains(&(d as i64)))
        .collect()
}

fn dims_of(c: &Computation, id: InstrId) -> Vec<i64> {
    c.instr(id).shape.array_dims()
}

/// `order` is `c`'s post-order, shared by the searches of one round.
fn shared_operand_groups(c: &Computation, order: &[InstrId]) -> Vec<Group> {
    type Key = (
        InstrId,
        bool,
        DotDims,
        Vec<Precision>,
        Vec<i64>,
        usize,
        Option<ElementType>,
    );
    // Keys in first-seen order, with their members; the map finds a key's
    // place without cloning it again.
    let mut index: HashMap<Key, usize> = HashMap::default();
    index.reserve(order.len() / 8);
    let mut keyed: Vec<(Key, Vec<Member>)> = Vec::new();
    for &id in order {
        let Some((dims, precision, l, rr)) = dot_parts(c, id) else {
            continue;
        };
        if l == rr {
            continue;
        }
        for shared_is_lhs in [true, false] {
            let (shared, other) = if shared_is_lhs { (l, rr) } else { (rr, l) };
            let (batch, contracting) = if shared_is_lhs {
                (&dims.rhs_batch, &dims.rhs_contracting)
            } else {
                (&dims.lhs_batch, &dims.lhs_contracting)
            };
            let od = dims_of(c, other);
            let free = free_dims(od.len(), batch, contracting);
            let [f] = free[..] else { continue };
            let mut like = od.clone();
            like[f] = 0;
            let ty = c.instr(id).shape.as_array().map(|a| a.ty);
            let key = (
                shared,
                shared_is_lhs,
                dims.clone(),
                precision.clone(),
                like,
                f,
                ty,
            );
            let slot = *index.entry(key).or_insert_with_key(|k| {
                keyed.push((k.clone(), Vec::new()));
                keyed.len() - 1
            });
            keyed[slot].1.push(Member {
                dot: id,
                other,
                free: f,
            });
        }
    }
    // A dot joins at most one group: the first, in program order, where it
    // has company.
    let position: HashMap<InstrId, usize> =
        order.iter().enumerate().map(|(k, &i)| (i, k)).collect();
    let mut used: HashSet<InstrId> = HashSet::default();
    let mut out = Vec::new();
    for (key, all) in keyed {
        let members: Vec<Member> = all.into_iter().filter(|m| !used.contains(&m.dot)).collect();
        let members = independent(c, &position, members);
        let distinct: HashSet<InstrId> = members.iter().map(|m| m.other).collect();
        if members.len() < 2 || distinct.len() != members.len() {
            continue;
        }
        used.extend(members.iter().map(|m| m.dot));
        out.push(Group {
            shared_is_lhs: key.1,
            shared: key.0,
            dims: key.2,
            precision: key.3,
            members,
        });
    }
    out
}

/// `members` (in program order) less each whose other operand is computed
/// from an earlier kept member's dot: one dot over all of them would read
/// its own result (the same router selection in every layer of a mixture
/// of experts, each layer's input the last one's output).
fn independent(
    c: &Computation,
    position: &HashMap<InstrId, usize>,
    members: Vec<Member>,
) -> Vec<Member> {
    let mut kept: Vec<Member> = Vec::with_capacity(members.len());
    for m in members {
        let dots: HashSet<InstrId> = kept.iter().map(|k| k.dot).collect();
        let first = kept.iter().map(|k| position[&k.dot]).min();
        let placed = |id: InstrId| position.get(&id).copied();
        if first.is_none_or(|first| !reaches_any(c, m.other, &dots, placed, first)) {
            kept.push(m);
        }
    }
    kept
}

/// Bytes of the entry parameters among `operands` (a merge concatenates
/// them every step).
fn parameter_bytes(
    c: &Computation,
    operands: impl Iterator<Item = InstrId>,
    is_entry: bool,
) -> i64 {
    if !is_entry {
        return 0;
    }
    operands
        .filter(|&o| matches!(c.instr(o).op, Op::Parameter(_)))
        .filter_map(|o| c.instr(o).shape.as_array())
        .map(|a| a.dims.iter().product::<i64>() * a.ty.byte_size() as i64)
        .sum()
}

fn slice_along(dims: &[i64], dim: usize, start: i64, limit: i64) -> Op {
    Op::Slice {
        slices: dims
            .iter()
            .enumerate()
            .map(|(k, &n)| SliceDim {
                start: if k == dim { start } else { 0 },
                limit: if k == dim { limit } else { n },
                stride: 1,
            })
            .collect(),
    }
}

fn merge_group(r: &mut Rewriter<'_>, g: &Group) -> Result<(), RewriteError> {
    let f = g.members[0].free;
    let others: Vec<InstrId> = g.members.iter().map(|m| m.other).collect();
    r.provenance_of(g.members[0].dot);
    let cat = r.add(
        Op::Concatenate {
            dimension: f as i64,
        },
        &others,
        None,
    )?;
    let operands = if g.shared_is_lhs {
        [g.shared, cat]
    } else {
        [cat, g.shared]
    };
    let dot = r.add(
        Op::Dot {
            dims: g.dims.clone(),
            precision: g.precision.clone(),
            algorithm: DotAlgorithm::Unset,
        },
        &operands,
        None,
    )?;
    // Where the other operand's free dimension lands in the result: after
    // the batch dims, and after the lhs free dims when it is the rhs.
    let nb = g.dims.lhs_batch.len();
    let out_dim = if g.shared_is_lhs {
        let lhs_rank = r.shape(g.shared).as_array().map_or(0, |a| a.rank());
        nb + free_dims(lhs_rank, &g.dims.lhs_batch, &g.dims.lhs_contracting).len()
    } else {
        nb
    };
    let merged_dims = dims_of(r.comp(), dot);
    let mut start = 0;
    for m in &g.members {
        let width = dims_of(r.comp(), m.other)[f];
        r.provenance_of(m.dot);
        let part = r.add(
            slice_along(&merged_dims, out_dim, start, start + width),
            &[dot],
            None,
        )?;
        r.replace(m.dot, part)?;
        start += width;
    }
    Ok(())
}

/// `add(a, b)` of two dots whose operands may be concatenated along the
/// contracted pair `(lhs_dim, rhs_dim)`.
struct SumOfDots {
    add: InstrId,
    a: InstrId,
    b: InstrId,
    lhs_dim: usize,
    rhs_dim: usize,
}

/// `add(d1, d2)` of two dots read by nothing else, with the same dimension
/// numbers, whose operands differ only in one contracted dimension pair.
fn sums_of_dots(c: &Computation, order: &[InstrId]) -> Vec<SumOfDots> {
    let mut out = Vec::new();
    let mut used = HashSet::default();
    for &id in order {
        let Some((a, b)) = pattern::binary(c, id, BinaryOp::Add) else {
            continue;
        };
        if a == b || used.contains(&a) || used.contains(&b) {
            continue;
        }
        if c.sole_user(a) != Some(id) || c.sole_user(b) != Some(id) {
            continue;
        }
        if let Some((lhs_dim, rhs_dim)) = contracted_pair(c, a, b) {
            used.extend([a, b]);
            out.push(SumOfDots {
                add: id,
                a,
                b,
                lhs_dim,
                rhs_dim,
            });
        }
    }
    out
}

/// The contracted dimension pair along which two dots' operands may be
/// concatenated: `(lhs dim, rhs dim)`.
fn contracted_pair(c: &Computation, a: InstrId, b: InstrId) -> Option<(usize, usize)> {
    let (da, pa, la, ra) = dot_parts(c, a)?;
    let (db, pb, lb, rb) = dot_parts(c, b)?;
    if da != db || pa != pb || c.instr(a).shape != c.instr(b).shape {
        return None;
    }
    let (dla, dlb, dra, drb) = (
        dims_of(c, la),
        dims_of(c, lb),
        dims_of(c, ra),
        dims_of(c, rb),
    );
    if dla.len() != dlb.len() || dra.len() != drb.len() {
        return None;
    }
    let differ =
        |x: &[i64], y: &[i64]| -> Vec<usize> { (0..x.len()).filter(|&k| x[k] != y[k]).collect() };
    let (dl, dr) = (differ(&dla, &dlb), differ(&dra, &drb));
    let ty = |i: InstrId| c.instr(i).shape.as_array().map(|s| s.ty);
    if ty(la) != ty(lb) || ty(ra) != ty(rb) {
        return None;
    }
    // Either they differ in exactly one contracted pair, or (same sizes)
    // any contracted pair will do; pick the first.
    da.lhs_contracting
        .iter()
        .zip(&da.rhs_contracting)
        .map(|(&l, &r)| (l as usize, r as usize))
        .find(|&(l, r)| dl.iter().all(|&k| k == l) && dr.iter().all(|&k| k == r))
}

fn merge_sum(r: &mut Rewriter<'_>, sum: &SumOfDots) -> Result<(), RewriteError> {
    let SumOfDots {
        add,
        a,
        b,
        lhs_dim: l,
        rhs_dim: rr,
    } = *sum;
    let (oa, ob) = (r.comp().operands(a), r.comp().operands(b));
    let Op::Dot {
        dims,
        precision,
        algorithm,
    } = r.comp().instr(a).op.clone()
    else {
        unreachable!("sums_of_dots collects dots")
    };
    r.provenance_of(add);
    let lhs = r.add(
        Op::Concatenate {
            dimension: l as i64,
        },
        &[oa[0], ob[0]],
        None,
    )?;
    let rhs = r.add(
        Op::Concatenate {
            dimension: rr as i64,
        },
        &[oa[1], ob[1]],
        None,
    )?;
    let dot = r.add(
        Op::Dot {
            dims,
            precision,
            algorithm,
        },
        &[lhs, rhs],
        None,
    )?;
    r.replace(add, dot)
}
