//! `fuse-softmax`: recognizes softmax, `exp(x - max(x)) / sum(exp(x -
//! max(x)))`, and its backward, `y * (dy - sum(dy * y))`, over one axis,
//! through the reshapes, broadcasts and converts frameworks put around the
//! reductions. On `neuron` each becomes the `AwsNeuronSoftmax` /
//! `AwsNeuronSoftmaxBackward` custom call; on `cpu` a `call` of the same
//! math, so the structure is exercised where it can be run.

use crate::infra::context::PassContext;
use crate::infra::pass::{Pass, PassError};
use crate::infra::pattern::{self, ReducerOps, Region};
use crate::targets::neuron::softmax_math::{Direction, SoftmaxWriter};
use hlatc_compiler::ir::op::{BinaryOp, UnaryOp};
use hlatc_compiler::util::fx::FxHashMap as HashMap;
use hlatc_compiler::{ArrayShape, Computation, InstrId, Module, Op};

pub struct FuseSoftmax;

/// A recognized softmax or softmax backward.
struct Match {
    direction: Direction,
    region: Region,
    /// `{x}` forward, `{y, dy}` backward: the custom call's operand order.
    operands: Vec<InstrId>,
    axis: i64,
}

impl FuseSoftmax {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "fuse-softmax";
}

impl Pass for FuseSoftmax {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let reducers = ReducerOps::of(m);
        // Made on the first match, so a module without softmaxes costs
        // only the search.
        let mut writer: Option<SoftmaxWriter> = None;
        let target = ctx.target;
        let mut changed = false;
        for ci in 0..m.computations.len() {
            let is_entry = ci == m.entry.index();
            let matches = find_matches(&m.computations[ci], is_entry, &reducers, ctx, self.name());
            if matches.is_empty() {
                continue;
            }
            let writer = writer.get_or_insert_with(|| SoftmaxWriter::new(m, target, ctx));
            // A backward's `y` may be a forward output fused just before.
            let mut replaced: HashMap<InstrId, InstrId> = HashMap::default();
            for mt in matches {
                let operands: Vec<InstrId> = mt
                    .operands
                    .iter()
                    .map(|o| *replaced.get(o).unwrap_or(o))
                    .collect();
                let fused = writer.replace(
                    self.name(),
                    m,
                    ci,
                    (mt.direction, mt.axis),
                    &operands,
                    mt.region.output,
                )?;
                replaced.insert(mt.region.output, fused);
            }
            writer.remove_dead(m, ci);
            changed = true;
        }
        if let Some(w) = writer {
            w.finish(ctx);
        }
        Ok(changed)
    }
}

/// Every non-overlapping softmax region of `c`, forward and backward.
fn find_matches(
    c: &Computation,
    is_entry: bool,
    reducers: &ReducerOps,
    ctx: &mut PassContext,
    pass: &str,
) -> Vec<Match> {
    let mut found: Vec<Match> = Vec::new();
    let mut taken = hlatc_compiler::util::fx::FxHashSet::default();
    for id in c.post_order() {
        let Some(mt) = forward(c, reducers, id).or_else(|| backward(c, reducers, id)) else {
            continue;
        };
        if let Some(e) = mt.region.escape(c) {
            ctx.note(
                pass,
                format!(
                    "left '{}' alone: '{}' inside the softmax is read outside it",
                    c.instr(id).name,
                    c.instr(e).name
                ),
            );
            continue;
        }
        if mt.region.interior.iter().any(|i| taken.contains(i)) || (!is_entry && is_whole(c, &mt)) {
            continue;
        }
        taken.extend(mt.region.interior.iter().copied());
        found.push(mt);
    }
    found
}

/// Whether `c` is nothing but this softmax: a callee that is not the entry
/// (one an earlier run made on `cpu`) is fused already.
fn is_whole(c: &Computation, mt: &Match) -> bool {
    c.root() == Some(mt.region.output)
        && c.parameters().len() == mt.operands.len()
        && mt
            .operands
            .iter()
            .all(|&o| matches!(c.instr(o).op, Op::Parameter(_)))
}

fn rank_of(c: &Computation, id: InstrId) -> Option<usize> {
    c.instr(id).shape.as_array().map(ArrayShape::rank)
}

/// `reduce(v, op)` over one axis, read back through a broadcast over that
/// axis: returns the reduced value (seen through layout ops), the axis, and
/// every instruction on the way.
fn reduced_back(
    c: &Computation,
    reducers: &ReducerOps,
    broadcast: InstrId,
    op: BinaryOp,
    rank: usize,
) -> Option<(InstrId, i64, Vec<InstrId>)> {
    let (red, chain) = pattern::through_layout(c, broadcast);
    let r = pattern::reduce(c, reducers, red)?;
    if r.op != op || r.dimensions.len() != 1 {
        return None;
    }
    let axis = r.dimensions[0];
    if !pattern::broadcasts_back(c, &chain, rank, axis) {
        return None;
    }
    let identity = pattern::splat_value(c, r.init)?;
    let ok = match op {
        BinaryOp::Add => identity == 0.0,
        BinaryOp::Maximum => identity == f64::NEG_INFINITY || identity <= -3.0e38,
        _ => false,
    };
    ok.then_some(())?;
    let (input, input_chain) = pattern::through_layout(c, r.input);
    let mut claimed = chain;
    claimed.push(red);
    claimed.extend(input_chain);
    Some((input, axis, claimed))
}

/// `divide(e, broadcast(sum(e)))` with `e = exp(x - broadcast(max(x)))`.
fn forward(c: &Computation, reducers: &ReducerOps, d: InstrId) -> Option<Match> {
    let rank = rank_of(c, d)?;
    let (e, denom) = pattern::binary(c, d, BinaryOp::Divide)?;
    if c.instr(e).op != Op::Unary(UnaryOp::Exp) {
        return None;
    }
    let (summed, axis, sum_chain) = reduced_back(c, reducers, denom, BinaryOp::Add, rank)?;
    (summed == e).then_some(())?;
    let z = c.operands(e)[0];
    let (x, shift) = pattern::binary(c, z, BinaryOp::Subtract)?;
    let (maxed, max_axis, max_chain) = reduced_back(c, reducers, shift, BinaryOp::Maximum, rank)?;
    (maxed == x && max_axis == axis).then_some(())?;
    (c.instr(x).shape == c.instr(d).shape).then_some(())?;
    let mut region = Region::new(d);
    region
        .claim([d, e, z])
        .claim(sum_chain)
        .claim(max_chain.into_iter().filter(|&i| i != x));
    Some(Match {
        direction: Direction::Forward,
        region,
        operands: vec![x],
        axis,
    })
}

/// `multiply(y, subtract(dy, broadcast(sum(multiply(dy, y)))))`, operands
/// of the multiplies in either order.
fn backward(c: &Computation, reducers: &ReducerOps, m: InstrId) -> Option<Match> {
    let rank = rank_of(c, m)?;
    let is_diff = |t: InstrId| pattern::binary(c, t, BinaryOp::Subtract).is_some();
    let (t, y) = pattern::commuted(c, m, BinaryOp::Multiply, is_diff)?;
    let (dy, sb) = pattern::binary(c, t, BinaryOp::Subtract)?;
    let (p, axis, chain) = reduced_back(c, reducers, sb, BinaryOp::Add, rank)?;
    let (a, b) = pattern::binary(c, p, BinaryOp::Multiply)?;
    if !((a == dy && b == y) || (a == y && b == dy)) {
        return None;
    }
    let shape = &c.instr(m).shape;
    (&c.instr(y).shape == shape && &c.instr(dy).shape == shape).then_some(())?;
    let mut region = Region::new(m);
    region.claim([m, t, p]).claim(chain);
    Some(Match {
        direction: Direction::Backward,
        region,
        operands: vec![y, dy],
        axis,
    })
}
