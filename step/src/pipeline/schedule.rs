//! The pipeline schedule: which micro-batch each stage runs forward and
//! backward at each tick.
//!
//! Every stage runs the same program at a tick (one SPMD program over
//! every rank), and a tick holds at most one forward and one backward slot
//! per stage. Stage `s` runs micro-batch `m` forward at tick `m + s` and
//! backward at tick `m + 2P - 1 - s`: the forward reaches the last stage
//! at `m + P - 1`, whose backward follows at the next tick, and each
//! stage's gradient reaches the stage before it one tick later. A stage's
//! forward and backward slots alternate between micro-batches as in 1F1B,
//! and the ticks fall into three phases, each its own program so that no
//! tick pays for a slot no stage uses:
//!
//! - warm-up, ticks `0..P`: forward slots only;
//! - steady, ticks `P..M + P - 1`: both;
//! - cool-down, ticks `M + P - 1..M + 2P - 1`: backward slots only.
//!
//! With `F` and `B` the time of a forward and a backward slot, a step takes
//! `P F + (M - 1)(F + B) + P B = (M + P - 1)(F + B)` against `M (F + B)`
//! of work, the bubble of 1F1B: `(P - 1) / (M + P - 1)`.
//!
//! A stage keeps the input of each micro-batch between its forward and its
//! backward slot (`2(P - s) - 1` ticks) and recomputes the stage from it in
//! the backward slot (activation checkpointing at the stage's edge), so
//! what it keeps per micro-batch in flight is one `[tokens, hidden]`
//! activation. The kept inputs live in a ring of [`Schedule::stash_depth`]
//! slots, micro-batch `m` in slot `m % depth`.

use serde::Serialize;

/// The schedule of `stages` stages over `micro_batches` micro-batches per
/// optimizer step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Schedule {
    pub stages: i64,
    pub micro_batches: i64,
}

/// Which slots a tick's program holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Forward slots only: no backward is due on any stage yet.
    WarmUp,
    /// A forward and a backward slot.
    Steady,
    /// Backward slots only: every forward is done.
    CoolDown,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::WarmUp, Phase::Steady, Phase::CoolDown];

    /// Whether the phase's program holds a forward slot.
    pub fn forward(self) -> bool {
        self != Phase::CoolDown
    }

    /// Whether the phase's program holds a backward slot.
    pub fn backward(self) -> bool {
        self != Phase::WarmUp
    }

    /// The name of its program.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::WarmUp => "warm_up",
            Phase::Steady => "steady",
            Phase::CoolDown => "cool_down",
        }
    }
}

/// Which micro-batch each batch input of a tick program holds (`None`:
/// none, and it is fed zeros): what the bundle's manifest states as the
/// rules of a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickFeed {
    /// `tokens`: the micro-batch stage 0 runs forward.
    pub tokens: Option<i64>,
    /// `backward_tokens`: the micro-batch stage 0 runs backward, whose
    /// embedding it computes again.
    pub backward_tokens: Option<i64>,
    /// `targets`: the micro-batch the last stage runs backward, whose loss
    /// it takes.
    pub targets: Option<i64>,
}

impl Schedule {
    /// The micro-batches tick `tick`'s batch inputs hold.
    pub fn feed(&self, tick: i64) -> TickFeed {
        TickFeed {
            tokens: self.forward_micro_batch(tick, 0),
            backward_tokens: self.backward_micro_batch(tick, 0),
            targets: self.backward_micro_batch(tick, self.stages - 1),
        }
    }

    /// Ticks per optimizer step: `M + 2P - 1`.
    pub fn ticks(&self) -> i64 {
        self.micro_batches + 2 * self.stages - 1
    }

    /// The phase tick `tick` falls in.
    pub fn phase(&self, tick: i64) -> Phase {
        if tick < self.stages {
            Phase::WarmUp
        } else if tick < self.micro_batches + self.stages - 1 {
            Phase::Steady
        } else {
            Phase::CoolDown
        }
    }

    /// The ticks of `phase`, which follow each other: [`Schedule::phase`]
    /// gives `phase` for each and for no other.
    pub fn ticks_of(&self, phase: Phase) -> std::ops::Range<i64> {
        let (p, m) = (self.stages, self.micro_batches);
        match phase {
            Phase::WarmUp => 0..p.min(self.ticks()),
            Phase::Steady => p..(m + p - 1).max(p),
            Phase::CoolDown => (m + p - 1).max(p)..self.ticks(),
        }
    }

    /// The micro-batch stage `stage` runs forward at `tick`, if any.
    pub fn forward_micro_batch(&self, tick: i64, stage: i64) -> Option<i64> {
        self.micro_batch(tick - self.forward_delay(stage))
    }

    /// The micro-batch stage `stage` runs backward at `tick`, if any.
    pub fn backward_micro_batch(&self, tick: i64, stage: i64) -> Option<i64> {
        self.micro_batch(tick - self.backward_delay(stage))
    }

    /// Ticks from a micro-batch's first forward to its forward on `stage`.
    pub fn forward_delay(&self, stage: i64) -> i64 {
        stage
    }

    /// Ticks from a micro-batch's first forward to its backward on `stage`.
    pub fn backward_delay(&self, stage: i64) -> i64 {
        2 * self.stages - 1 - stage
    }

    fn micro_batch(&self, m: i64) -> Option<i64> {
        (0..self.micro_batches).contains(&m).then_some(m)
    }

    /// Micro-batches whose input stage `stage` keeps at once: those between
    /// their forward and backward slots, `min(2(P - s) - 1, M)`.
    pub fn in_flight(&self, stage: i64) -> i64 {
        (self.backward_delay(stage) - self.forward_delay(stage)).min(self.micro_batches)
    }

    /// Slots of the ring of kept stage inputs: the most any stage keeps
    /// (stage 0's; one program serves every stage).
    pub fn stash_depth(&self) -> i64 {
        self.in_flight(0)
    }

    /// The fraction of a step each stage idles: `(P - 1) / (M + P - 1)`.
    pub fn bubble(&self) -> f64 {
        let p = self.stages as f64;
        (p - 1.0) / (self.micro_batches as f64 + p - 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays the schedule: every micro-batch runs forward then backward
    /// on every stage exactly once, in pipeline order, each stage's input
    /// arriving the tick after its neighbour sent it, and never more in
    /// flight than the ring holds.
    #[test]
    fn every_micro_batch_flows_through_every_stage_once_in_order() {
        for (stages, micro_batches) in [(2, 1), (2, 4), (4, 1), (4, 4), (4, 9), (8, 3)] {
            let s = Schedule {
                stages,
                micro_batches,
            };
            let mut fwd = vec![vec![None; micro_batches as usize]; stages as usize];
            let mut bwd = fwd.clone();
            for t in 0..s.ticks() {
                let phase = s.phase(t);
                for st in 0..stages {
                    if let Some(m) = s.forward_micro_batch(t, st) {
                        assert!(phase.forward(), "tick {t} of {s:?}");
                        assert!(fwd[st as usize][m as usize].replace(t).is_none());
                    }
                    if let Some(m) = s.backward_micro_batch(t, st) {
                        assert!(phase.backward(), "tick {t} of {s:?}");
                        assert!(bwd[st as usize][m as usize].replace(t).is_none());
                    }
                    let kept = (0..micro_batches)
                        .filter(|&m| {
                            let f = fwd[st as usize][m as usize];
                            f.is_some_and(|f| f <= t) && bwd[st as usize][m as usize].is_none()
                        })
                        .count() as i64;
                    assert!(kept <= s.in_flight(st) && kept <= s.stash_depth());
                }
            }
            for m in 0..micro_batches as usize {
                for st in 0..stages as usize {
                    let (f, b) = (fwd[st][m].unwrap(), bwd[st][m].unwrap());
                    assert!(f < b);
                    if st > 0 {
                        assert_eq!(fwd[st - 1][m].unwrap() + 1, f);
                        assert_eq!(bwd[st][m].unwrap() + 1, bwd[st - 1][m].unwrap());
                    }
                }
                assert_eq!(
                    fwd[stages as usize - 1][m].unwrap() + 1,
                    bwd[stages as usize - 1][m].unwrap()
                );
            }
        }
    }

    #[test]
    fn the_bubble_is_1f1bs() {
        let s = Schedule {
            stages: 8,
            micro_batches: 128,
        };
        assert_eq!(s.ticks(), 143);
        assert!((s.bubble() - 7.0 / 135.0).abs() < 1e-12);
        let phases: Vec<usize> = Phase::ALL
            .iter()
            .map(|&p| (0..s.ticks()).filter(|&t| s.phase(t) == p).count())
            .collect();
        assert_eq!(phases, [8, 127, 8]);
    }

    #[test]
    fn ticks_of_a_phase_are_the_ticks_phase_gives_it() {
        for stages in 1..6 {
            for micro_batches in 1..9 {
                let s = Schedule {
                    stages,
                    micro_batches,
                };
                for p in Phase::ALL {
                    let by_phase: Vec<i64> = (0..s.ticks()).filter(|&t| s.phase(t) == p).collect();
                    let range: Vec<i64> = s.ticks_of(p).collect();
                    assert_eq!(
                        range, by_phase,
                        "{p:?} of {stages} stages, {micro_batches} micro-batches"
                    );
                }
            }
        }
    }
}
