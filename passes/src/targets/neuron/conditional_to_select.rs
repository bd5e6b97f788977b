//! `conditional-to-select`: a `conditional` whose branches are small and
//! free of effects becomes every branch computed (inlined, by the shared
//! inliner) and the result chosen with `select`. Neuron does not support
//! `conditional` (the pre-flight's `[conditional]` refusal); `select` it
//! runs.
//!
//! The bound: each branch computation has one parameter and at most
//! [`MAX_BRANCH_INSTRUCTIONS`] other instructions, every one pure (no side
//! effect, no RNG, no collective, no loop, call or nested conditional:
//! [`Op::is_pure`], and not a `call`, whose callee could be anything).
//! Computing a branch the program would have skipped is then cheap and
//! observably nothing, and HLO ops cannot trap (a division by zero gives
//! inf, an index out of range is clamped), so the chosen values are bit
//! for bit the branch's own: an unchosen branch's NaN never reaches a
//! `select` result.
//!
//! A `pred` selector picks the first branch (`true_computation`) when
//! true: `select(p, true_branch, false_branch)`. An `s32` index picks its
//! branch, or the last when out of range (negative too): a chain
//! `select(i == 0, b0, select(i == 1, b1, ... b[N-1]))`, which gives the
//! last branch for every index no comparison matches. Tuple results are
//! selected leaf by leaf (XLA's `select` takes arrays) and tupled again;
//! a result holding a token or buffer is left alone, and so is a
//! conditional with a branch over the bound (a note says which and why).

use crate::infra::context::PassContext;
use crate::infra::inline::inline;
use crate::infra::pass::{ConditionalFailure, Pass, PassError};
use crate::infra::rewriter::{ModuleRewriter, Rewriter};
use hlatc_compiler::ir::op::ComparisonDirection;
use hlatc_compiler::{ComputationId, ElementType, InstrId, Literal, Module, Op, Shape};

/// The most instructions besides its parameter a branch may have.
pub const MAX_BRANCH_INSTRUCTIONS: usize = 16;

pub struct ConditionalToSelect;

impl ConditionalToSelect {
    /// The pass' name: in `--passes`, the registry and the pass report.
    pub const NAME: &'static str = "conditional-to-select";
}

impl Pass for ConditionalToSelect {
    fn name(&self) -> &str {
        Self::NAME
    }

    fn run(&self, m: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError> {
        let mut mr: Option<ModuleRewriter> = None;
        let (mut rewritten, mut left) = (Vec::new(), Vec::new());
        for ci in 0..m.computations.len() {
            let c = &m.computations[ci];
            let conditionals: Vec<(InstrId, Vec<ComputationId>)> = c
                .ids()
                .filter_map(|id| match &c.instr(id).op {
                    Op::Conditional { branches } => Some((id, branches.clone())),
                    _ => None,
                })
                .collect();
            for (id, branches) in conditionals {
                let name = m.computations[ci].instr(id).name.clone();
                if let Err(why) = eligible(m, ci, id, &branches) {
                    left.push(format!("%{name} ({why})"));
                    continue;
                }
                let rw = mr.get_or_insert_with(|| ModuleRewriter::for_pass(m, ctx));
                rewrite(m, ci, id, &branches, rw).map_err(|e| PassError::Conditional {
                    pass: self.name().to_string(),
                    computation: m.computations[ci].name.clone(),
                    conditional: name.clone(),
                    source: Box::new(e),
                })?;
                rewritten.push(format!("%{name}"));
            }
        }
        ModuleRewriter::finish_on_demand(mr, ctx);
        if !rewritten.is_empty() {
            ctx.note(
                self.name(),
                format!(
                    "{} conditional(s) now compute every branch inlined and select the result: {}",
                    rewritten.len(),
                    rewritten.join(", ")
                ),
            );
        }
        if !left.is_empty() {
            ctx.note(
                self.name(),
                format!("left as they are: {}", left.join(", ")),
            );
        }
        Ok(!rewritten.is_empty())
    }
}

/// Why a conditional is left alone, for the pass's note.
#[derive(Debug, thiserror::Error)]
enum Ineligible {
    #[error("its result holds a token or buffer")]
    TokenOrBuffer,
    #[error("its selector is not a pred or s32 scalar")]
    Selector,
    #[error("branch '{branch}' is not in the module")]
    MissingBranch { branch: String },
    #[error("branch '{branch}' does not take one parameter")]
    Parameters { branch: String },
    #[error(
        "branch '{branch}' has {body} instructions, above the bound of {MAX_BRANCH_INSTRUCTIONS}"
    )]
    TooBig { branch: String, body: usize },
    /// Computing it when the branch is not taken could be observed, or
    /// could be anything.
    #[error("branch '{branch}' has '{instruction}', a {opcode} with effects or a callee hlatc does not look into")]
    Effects {
        branch: String,
        instruction: String,
        opcode: &'static str,
    },
}

/// Why conditional `id` of computation `ci` cannot become selects, if it
/// cannot.
fn eligible(
    m: &Module,
    ci: usize,
    id: InstrId,
    branches: &[ComputationId],
) -> Result<(), Ineligible> {
    let c = &m.computations[ci];
    if c.instr(id)
        .shape
        .any_leaf(&|s| matches!(s, Shape::Token | Shape::Buffer(_)))
    {
        return Err(Ineligible::TokenOrBuffer);
    }
    let selector = c
        .operand_ids(id)
        .first()
        .and_then(|&s| c.instr(s).shape.as_array());
    if !selector
        .is_some_and(|a| a.rank() == 0 && matches!(a.ty, ElementType::Pred | ElementType::S32))
    {
        return Err(Ineligible::Selector);
    }
    for &id in branches {
        let Some(callee) = m.get_computation(id) else {
            return Err(Ineligible::MissingBranch {
                branch: id.describe(),
            });
        };
        let b = &callee.name;
        if callee.parameters().len() != 1 {
            return Err(Ineligible::Parameters { branch: b.clone() });
        }
        let body = callee
            .ids()
            .filter(|&i| !matches!(callee.instr(i).op, Op::Parameter(_)))
            .count();
        if body > MAX_BRANCH_INSTRUCTIONS {
            return Err(Ineligible::TooBig {
                branch: b.clone(),
                body,
            });
        }
        if let Some(i) = callee.ids().find(|&i| {
            let op = &callee.instr(i).op;
            !matches!(op, Op::Parameter(_)) && (!op.is_pure() || matches!(op, Op::Call { .. }))
        }) {
            return Err(Ineligible::Effects {
                branch: b.clone(),
                instruction: callee.instr(i).name.clone(),
                opcode: callee.instr(i).op.opcode(),
            });
        }
    }
    Ok(())
}

/// Inlines every branch of conditional `id` at its operand and puts the
/// selected result in its place.
fn rewrite(
    m: &mut Module,
    ci: usize,
    id: InstrId,
    branches: &[ComputationId],
    rw: &mut ModuleRewriter,
) -> Result<(), ConditionalFailure> {
    let operands = m.computations[ci].operands(id);
    let Some((&selector, args)) = operands.split_first() else {
        return Err(ConditionalFailure::Branches(0));
    };
    let mut values = Vec::with_capacity(branches.len());
    for (b, &arg) in branches.iter().zip(args) {
        // Cloned: the branch and the computation it is inlined into are
        // both the module's. Branches are small by the bound.
        let callee = m
            .get_computation(*b)
            .cloned()
            .ok_or_else(|| ConditionalFailure::NoBranch(b.describe()))?;
        values.push(inline(
            &mut m.computations[ci],
            &callee,
            &[arg],
            &mut rw.names,
        )?);
    }
    let shape = m.computations[ci].instr(id).shape.clone();
    let mut r = rw.on(&mut m.computations[ci]);
    r.provenance_of(id);
    let chosen = if r.shape(selector).as_array().map(|a| a.ty) == Some(ElementType::Pred) {
        let [on_true, on_false] = values[..] else {
            return Err(ConditionalFailure::Branches(values.len()));
        };
        select(&mut r, selector, on_true, on_false, &shape)?
    } else {
        // The last branch unless the index names an earlier one.
        let mut chosen = *values.last().ok_or(ConditionalFailure::Branches(0))?;
        for (k, &v) in values.iter().enumerate().rev().skip(1) {
            let k =
                i32::try_from(k).map_err(|_| ConditionalFailure::TooManyBranches(values.len()))?;
            let constant = Op::Constant(Literal::from_s32(vec![], &[k])?);
            let index = r.add(constant, &[], Some(Shape::scalar(ElementType::S32)))?;
            let is = r.add(
                Op::Compare {
                    direction: ComparisonDirection::Eq,
                    kind: None,
                },
                &[selector, index],
                None,
            )?;
            chosen = select(&mut r, is, v, chosen, &shape)?;
        }
        chosen
    };
    r.replace(id, chosen)?;
    r.remove_orphans();
    Ok(())
}

/// `on_true` where the scalar `pred` holds, else `on_false`, both of
/// `shape`: one `select` per array leaf, tupled back for a tuple.
fn select(
    r: &mut Rewriter<'_>,
    pred: InstrId,
    on_true: InstrId,
    on_false: InstrId,
    shape: &Shape,
) -> Result<InstrId, ConditionalFailure> {
    Ok(match shape {
        Shape::Tuple(parts) => {
            let mut leaves = Vec::with_capacity(parts.len());
            for (k, part) in parts.iter().enumerate() {
                let index = k as i64;
                let t = r.add(Op::GetTupleElement { index }, &[on_true], None)?;
                let f = r.add(Op::GetTupleElement { index }, &[on_false], None)?;
                leaves.push(select(r, pred, t, f, part)?);
            }
            r.add(Op::Tuple, &leaves, Some(shape.clone()))?
        }
        Shape::Array(a) => {
            let mask = if a.rank() == 0 {
                pred
            } else {
                let dims = Shape::array(ElementType::Pred, a.dims.clone());
                r.add(Op::Broadcast { dimensions: vec![] }, &[pred], Some(dims))?
            };
            r.add(Op::Select, &[mask, on_true, on_false], Some(shape.clone()))?
        }
        // `eligible` leaves these alone.
        Shape::Token | Shape::Buffer(_) => {
            return Err(ConditionalFailure::Unselectable(shape.to_string()))
        }
    })
}
