//! `annotate-rounding`: marks the converts to the low type that round
//! stochastically, by the context's [`RoundingPolicy`]. On `neuron` the
//! marks stay as frontend attributes (the runtime switch that enables SR is
//! the bundle's business). On `cpu` each marked convert is lowered to plain
//! HLO: random bits from `rng-bit-generator`, whose state becomes an entry
//! parameter aliased to a new last output, so the bits advance every step
//! and a run is reproducible from its seed.

use crate::infra::context::{AddedState, PassContext, Target};
use crate::infra::pass::{Pass, PassError, RoundingLoweringError};
use crate::infra::rewriter::{ModuleRewriter, RewriteError, Rewriter};
use crate::infra::rounding::{Rounding, RoundingPolicy, ROUNDING_ATTRIBUTE, STOCHASTIC};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::op::RngAlgorithm;
use hlatc_compiler::util::fx::FxHashSet;
use hlatc_compiler::{AliasKind, ComputationId, ElementType, InstrId, IoAlias, Module, Op, Shape};
use std::collections::BTreeMap;

pub struct AnnotateRounding;

/// The entry parameter that carries the RNG state of stochastic rounding.
pub const RNG_STATE_NAME: &str = "rounding_rng_state";
/// The name (before uniquing) of the callees that round stochastically on
/// cpu.
pub const ROUNDING_CALLEE: &str = "stochastic_round_bf16";

/// How the entry's converts to bf16 round: `(stochastic, nearest even)`.
/// Stochastic ones are counted marked or, on cpu, already lowered to a call
/// of a [`ROUNDING_CALLEE`]; nearest-even ones are f32 to bf16 converts.
pub fn rounding_counts(m: &Module) -> (usize, usize) {
    let (mut stochastic, mut nearest_even) = (0, 0);
    for id in m.entry().ids() {
        match &m.entry().instr(id).op {
            Op::Convert if is_stochastic(m, id) => stochastic += 1,
            Op::Convert if is_narrowing(m, id, ElementType::Bf16) => nearest_even += 1,
            Op::Call { to_apply, .. }
                if m.computation(*to_apply).name.starts_with(ROUNDING_CALLEE) =>
            {
                stochastic += 1
            }
            _ => {}
        }
    }
    (stochastic, nearest_even)
}

impl AnnotateRounding {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "annotate-rounding";
}

impl Pass for AnnotateRounding {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let low = ctx.cast.as_ref().map_or(ElementType::Bf16, |c| c.low);
        let (marked, nearest, newly) = annotate(m, &ctx.rounding, low);
        // Marks are attributes: no instruction or name is added.
        ctx.names_unchanged();
        if marked + nearest > 0 {
            ctx.note(
                self.name(),
                format!(
                    "policy {}: {marked} converts to {low} round stochastically, {nearest} to nearest even",
                    ctx.rounding
                ),
            );
        }
        let lowered = if ctx.target == Target::Cpu {
            lower(m, ctx).map_err(|source| PassError::RoundingLowering {
                pass: self.name().to_string(),
                source: Box::new(source),
            })?
        } else {
            0
        };
        if lowered > 0 {
            ctx.note(
                self.name(),
                format!("cpu: {lowered} stochastic converts lowered to plain HLO; RNG state is input and output `{RNG_STATE_NAME}`"),
            );
        }
        Ok(newly > 0 || lowered > 0)
    }
}

/// Whether `id` converts an f32 array to `low`.
fn is_narrowing(m: &Module, id: InstrId, low: ElementType) -> bool {
    let c = m.entry();
    let i = c.instr(id);
    if !matches!(i.op, Op::Convert) || i.shape.as_array().map(|a| a.ty) != Some(low) {
        return false;
    }
    // A convert has one operand.
    c.operands_unordered(id)
        .next()
        .and_then(|o| c.instr(o).shape.as_array())
        .is_some_and(|a| a.ty == ElementType::F32)
}

fn is_stochastic(m: &Module, id: InstrId) -> bool {
    m.entry()
        .instr(id)
        .frontend_attributes
        .get(ROUNDING_ATTRIBUTE)
        .is_some_and(|v| v == STOCHASTIC)
}

/// Root tuple operands that are aliased to an input (carried state), and
/// what they are assembled from by moving data alone: under ZeRO-1 a
/// parameter is its updated shard, stored in its type, all-gathered and
/// cut back to shape, and the convert that stores the shard writes state
/// as surely as a convert at the root does.
fn state_outputs(m: &Module) -> Vec<InstrId> {
    let c = m.entry();
    let mut seen = FxHashSet::default();
    let mut todo = aliased_outputs(m);
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        if matches!(
            c.instr(id).op,
            Op::Reshape { .. } | Op::Slice { .. } | Op::Concatenate { .. } | Op::AllGather { .. }
        ) {
            todo.extend(c.operands(id).iter().copied());
        }
    }
    seen.into_iter().collect()
}

/// Root tuple operands that are aliased to an input.
fn aliased_outputs(m: &Module) -> Vec<InstrId> {
    let c = m.entry();
    let Some(root) = c.root() else {
        return Vec::new();
    };
    if !matches!(c.instr(root).op, Op::Tuple) {
        return Vec::new();
    }
    let outputs = c.operands(root);
    m.input_output_alias
        .iter()
        .filter_map(|a| match a.output_index.as_slice() {
            [k] => outputs.get(*k as usize).copied(),
            _ => None,
        })
        .collect()
}

/// Marks the converts the policy rounds stochastically; returns how many
/// are marked, how many narrowing converts round to nearest even, and how
/// many marks are new.
fn annotate(m: &mut Module, policy: &RoundingPolicy, low: ElementType) -> (usize, usize, usize) {
    // Index order: deterministic, and no graph walk to find the converts.
    let candidates: Vec<InstrId> = m
        .entry()
        .ids()
        .filter(|&id| is_narrowing(m, id, low))
        .collect();
    if candidates.is_empty() {
        return (0, 0, 0);
    }
    let state: FxHashSet<InstrId> = state_outputs(m).into_iter().collect();
    let chosen: Vec<InstrId> = candidates
        .iter()
        .copied()
        .filter(|&id| {
            let r = match policy {
                RoundingPolicy::NearestEven => Rounding::NearestEven,
                RoundingPolicy::Stochastic => Rounding::Stochastic,
                RoundingPolicy::StateUpdates if state.contains(&id) => Rounding::Stochastic,
                RoundingPolicy::StateUpdates => Rounding::NearestEven,
                RoundingPolicy::Custom(_, choose) => choose(m, id),
            };
            r == Rounding::Stochastic || is_stochastic(m, id)
        })
        .collect();
    let entry = m.entry;
    let mut newly = 0;
    for &id in &chosen {
        let old = m
            .computation_mut(entry)
            .instr_mut(id)
            .frontend_attributes
            .insert(ROUNDING_ATTRIBUTE.to_string(), STOCHASTIC.to_string());
        newly += usize::from(old.is_none());
    }
    (chosen.len(), candidates.len() - chosen.len(), newly)
}

/// Lowers every stochastic convert of the entry to plain HLO; returns how
/// many there were.
fn lower(m: &mut Module, ctx: &mut PassContext) -> Result<usize, RoundingLoweringError> {
    let converts = lowerable_converts(m)?;
    if converts.is_empty() {
        return Ok(0);
    }
    let root = m.entry().root().ok_or(RoundingLoweringError::NoRoot)?;
    let mut mr = ModuleRewriter::for_pass(m, ctx);
    let mut callees: BTreeMap<Vec<i64>, ComputationId> = BTreeMap::new();
    for &id in &converts {
        let dims = m.entry().instr(id).shape.array_dims();
        if let std::collections::btree_map::Entry::Vacant(slot) = callees.entry(dims) {
            let part = rounding_module(slot.key())?;
            slot.insert(mr.graft(m, part));
        }
    }
    let parameter = m.entry().parameters().len();
    let entry = m.entry;
    let mut rw = mr.on(m.computation_mut(entry));
    let wrap = |e: RewriteError| RoundingLoweringError::Rewrite(Box::new(e));
    let mut state = rw
        .add_named(
            RNG_STATE_NAME,
            Op::Parameter(parameter as i64),
            &[],
            Some(rng_state_shape()),
        )
        .map_err(wrap)?;
    let state_name = rw.comp().instr(state).name.clone();
    for &id in &converts {
        let dims = rw.shape(id).array_dims();
        state = round_with_drawn_bits(&mut rw, id, state, callees[&dims]).map_err(wrap)?;
    }
    let mut outputs = rw.comp().operands(root);
    outputs.push(state);
    rw.provenance_of(root);
    let tuple = rw.add(Op::Tuple, &outputs, None).map_err(wrap)?;
    rw.set_root(tuple);
    rw.remove_dead();
    drop(rw);
    mr.finish(ctx);
    thread_state(m, ctx, state_name, parameter, outputs.len() - 1);
    Ok(converts.len())
}

/// The entry's stochastic converts, in post order, once it is known that
/// each is f32 to bf16 and that the root is a tuple the state can join.
fn lowerable_converts(m: &Module) -> Result<Vec<InstrId>, RoundingLoweringError> {
    let converts: Vec<InstrId> = m
        .entry()
        .post_order()
        .into_iter()
        .filter(|&id| is_stochastic(m, id) && matches!(m.entry().instr(id).op, Op::Convert))
        .collect();
    if converts.is_empty() {
        return Ok(converts);
    }
    for &id in &converts {
        if !is_narrowing(m, id, ElementType::Bf16) {
            return Err(RoundingLoweringError::NotF32ToBf16 {
                instruction: m.entry().instr(id).name.clone(),
            });
        }
    }
    let root = m.entry().root().ok_or(RoundingLoweringError::NoRoot)?;
    if !matches!(m.entry().instr(root).op, Op::Tuple) {
        return Err(RoundingLoweringError::RootNotTuple {
            root: m.entry().instr(root).name.clone(),
        });
    }
    Ok(converts)
}

/// The generator's state: two u64 words, a parameter and an output.
fn rng_state_shape() -> Shape {
    Shape::array(ElementType::U64, [2])
}

/// Replaces the convert `id` with a call of `to_apply` on its operand and
/// bits drawn from `state`; returns the state after the draw.
fn round_with_drawn_bits(
    rw: &mut Rewriter<'_>,
    id: InstrId,
    state: InstrId,
    to_apply: ComputationId,
) -> Result<InstrId, RewriteError> {
    let x = rw.comp().operands(id)[0];
    let dims = rw.shape(id).array_dims();
    rw.provenance_of(id);
    let drawn = rw.add(
        Op::RngBitGenerator {
            algorithm: RngAlgorithm::Default,
        },
        &[state],
        Some(Shape::Tuple(vec![
            rng_state_shape(),
            Shape::array(ElementType::U32, dims),
        ])),
    )?;
    let next = rw.add(Op::GetTupleElement { index: 0 }, &[drawn], None)?;
    let bits = rw.add(Op::GetTupleElement { index: 1 }, &[drawn], None)?;
    let rounded = rw.add_named(
        "stochastic_round",
        Op::Call {
            to_apply,
            is_composite: false,
        },
        &[x, bits],
        None,
    )?;
    rw.replace(id, rounded)?;
    Ok(next)
}

/// The added state as the module's boundary carries it: in the entry's
/// layout, aliased from its parameter to its output, and told to the
/// caller, who must feed it back each step.
fn thread_state(
    m: &mut Module,
    ctx: &mut PassContext,
    name: String,
    parameter: usize,
    output: usize,
) {
    // The added state's boundary layout is its own.
    if let Some(l) = &mut m.entry_layout {
        l.parameters.push(rng_state_shape());
        if let Shape::Tuple(elements) = &mut l.result {
            elements.push(rng_state_shape());
        }
    }
    m.input_output_alias.push(IoAlias {
        output_index: vec![output as i64],
        parameter: parameter as i64,
        parameter_index: vec![],
        kind: AliasKind::MayAlias,
    });
    ctx.added_state.push(AddedState {
        name,
        parameter,
        output,
        kind: "rng_state",
    });
}

/// `(x: f32[dims], bits: u32[dims]) -> bf16[dims]`, stochastically rounded.
fn rounding_module(dims: &[i64]) -> Result<Module, BuildError> {
    let mut b = Builder::new(ROUNDING_CALLEE);
    let x = b.parameter("x", Shape::array(ElementType::F32, dims.to_vec()));
    let bits = b.parameter("bits", Shape::array(ElementType::U32, dims.to_vec()));
    let y = b.stochastic_round_bf16(x, bits)?;
    Ok(b.into_module(ROUNDING_CALLEE, y))
}
