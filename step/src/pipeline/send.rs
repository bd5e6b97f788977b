//! How a tick program moves a stage's output to the next stage and an
//! input's gradient to the stage before, in the [`StageSend`] form asked
//! for. Every rank runs the same program, so a send is one collective over
//! every rank, and a rank that receives nothing (stage 0 going forward,
//! the last stage going back) gets zeros in either form.
//!
//! - **`permute`:** one `collective-permute` from each rank to its twin on
//!   the neighbouring stage.
//! - **`all-gather`:** neuronx-distributed's form (`pipeline/comm.py`:
//!   "Use all_gather instead of all_reduce for send/recv"): an all-gather
//!   over 2-rank groups, each rank taking its partner's half. Groups must
//!   not overlap, so the stage boundaries are taken in two rounds: round A
//!   pairs stages `(2k, 2k+1)`, round B `(2k+1, 2k+2)` (and, with an even
//!   number of stages, the last with the first, a pair whose halves nobody
//!   reads). A rank receives from the stage before in round A when its
//!   stage is odd and in round B when it is even; from the stage after,
//!   the other way round. With 2 stages round A is every boundary and
//!   round B is not emitted. With an odd number of stages one stage sits
//!   out each round; its ranks pair among themselves (twins of
//!   neighbouring rank numbers), which needs an even number of ranks per
//!   stage.

use crate::pipeline_form::StageSend;
use crate::train_step::StepError;
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::graph::collectives::replica_groups;
use hlatc_compiler::ir::collective::Collective;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use hlatc_compiler::{ElementType, InstrId};
use hlatc_models::Parallelism;

/// A tick program's sends, in one form, for one layout.
pub(super) enum Sends {
    Permute {
        /// Each rank to its twin on the next stage, and back.
        forward: Vec<(i64, i64)>,
        backward: Vec<(i64, i64)>,
    },
    AllGather {
        /// Round A's groups, and round B's (absent with 2 stages).
        round_a: Collective,
        round_b: Option<Collective>,
    },
}

/// Where a rank sits: what a send needs to know of it (`pred[]` each).
pub(super) struct Place {
    /// `s32[]`: the rank's stage.
    pub stage: InstrId,
    pub first: InstrId,
    pub last: InstrId,
}

impl Sends {
    pub(super) fn new(par: Parallelism, form: StageSend) -> Result<Sends, StepError> {
        let twins = par.pp_groups();
        Ok(match form {
            StageSend::Permute => {
                let forward: Vec<(i64, i64)> = twins
                    .iter()
                    .flat_map(|t| t.windows(2).map(|p| (p[0], p[1])))
                    .collect();
                let backward = forward.iter().map(|&(a, z)| (z, a)).collect();
                Sends::Permute { forward, backward }
            }
            StageSend::AllGather => {
                let pp = par.pp;
                if pp % 2 == 1 && twins.len() % 2 == 1 {
                    return Err(StepError::UnpairedStageSend {
                        pp,
                        stage_ranks: par.stage_world(),
                    });
                }
                Sends::AllGather {
                    round_a: replica_groups(&round(&twins, 0)),
                    round_b: (pp > 2).then(|| replica_groups(&round(&twins, 1))),
                }
            }
        })
    }

    /// `y`, sent by every rank to its twin on the next stage: what each
    /// rank receives from the stage before.
    pub(super) fn forward(
        &self,
        b: &mut Builder,
        at: &Place,
        y: InstrId,
    ) -> Result<InstrId, BuildError> {
        match self {
            Sends::Permute { forward, .. } => b.collective_permute(y, forward),
            Sends::AllGather { round_a, round_b } => {
                // From the stage before: round A's first half for an odd
                // stage, round B's for an even one.
                let take_a = |b: &mut Builder| is_odd(b, at.stage);
                let got = gathered(b, (round_a, round_b.as_ref()), take_a, y, 0)?;
                zero_where(b, at.first, got)
            }
        }
    }

    /// `dx`, sent by every rank to its twin on the stage before: what each
    /// rank receives from the stage after.
    pub(super) fn backward(
        &self,
        b: &mut Builder,
        at: &Place,
        dx: InstrId,
    ) -> Result<InstrId, BuildError> {
        match self {
            Sends::Permute { backward, .. } => b.collective_permute(dx, backward),
            Sends::AllGather { round_a, round_b } => {
                // From the stage after: round A's second half for an even
                // stage, round B's for an odd one.
                let take_a = |b: &mut Builder| {
                    let odd = is_odd(b, at.stage)?;
                    b.unary(UnaryOp::Not, odd)
                };
                let got = gathered(b, (round_a, round_b.as_ref()), take_a, dx, 1)?;
                zero_where(b, at.last, got)
            }
        }
    }
}

/// The 2-rank groups of one round: `parity` 0 pairs stages `(2k, 2k+1)`,
/// 1 pairs `(2k+1, 2k+2)` and the last stage with the first when the
/// stages are even; a stage left out pairs its ranks among themselves.
fn round(twins: &[Vec<i64>], parity: usize) -> Vec<Vec<i64>> {
    let pp = twins.first().map_or(0, Vec::len);
    let mut groups = Vec::new();
    let mut left_out = Vec::new();
    for t in twins {
        let mut s = parity;
        while s + 1 < pp {
            groups.push(vec![t[s], t[s + 1]]);
            s += 2;
        }
        match (parity, pp % 2) {
            (1, 0) => groups.push(vec![t[pp - 1], t[0]]),
            (0, 1) => left_out.push(t[pp - 1]),
            (1, 1) => left_out.push(t[0]),
            _ => {}
        }
    }
    groups.extend(left_out.chunks(2).map(<[i64]>::to_vec));
    groups
}

/// The half a rank takes of the all-gather of `x` over its pair: `half`
/// of round A where `take_a` holds, of round B elsewhere.
fn gathered(
    b: &mut Builder,
    (round_a, round_b): (&Collective, Option<&Collective>),
    take_a: impl FnOnce(&mut Builder) -> Result<InstrId, BuildError>,
    x: InstrId,
    half: i64,
) -> Result<InstrId, BuildError> {
    let dims = b.dims(x);
    let mut one = vec![1];
    one.extend_from_slice(&dims);
    let x = b.reshape(x, &one)?;
    let half_of = |b: &mut Builder, groups: &Collective| -> Result<InstrId, BuildError> {
        let pair = b.all_gather(x, 0, groups)?;
        let mine = b.slice_dim(pair, 0, half, half + 1)?;
        b.reshape(mine, &dims)
    };
    let a = half_of(b, round_a)?;
    let Some(round_b) = round_b else {
        return Ok(a);
    };
    let other = half_of(b, round_b)?;
    let take_a = take_a(b)?;
    let take_a = b.broadcast(take_a, &dims, &[])?;
    b.select(take_a, a, other)
}

/// `x`, zero where `p` holds (a rank nothing is sent to).
fn zero_where(b: &mut Builder, p: InstrId, x: InstrId) -> Result<InstrId, BuildError> {
    let dims = b.dims(x);
    let p = b.broadcast(p, &dims, &[])?;
    let zeros = b.full_like(x, 0.0)?;
    b.select(p, zeros, x)
}

/// `pred[]`: whether `stage` (`s32[]`) is odd.
fn is_odd(b: &mut Builder, stage: InstrId) -> Result<InstrId, BuildError> {
    let two = b.scalar(ElementType::S32, 2.0);
    let one = b.scalar(ElementType::S32, 1.0);
    let r = b.binary(BinaryOp::Remainder, stage, two)?;
    b.compare(r, one, ComparisonDirection::Eq)
}
