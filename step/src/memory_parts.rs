//! The bytes of one rank's memory plan, by what they are for: the plan's
//! data, its sums and how it prints. `memory_plan` measures them from a
//! step; a step keeps the plan its `optimize` measured
//! (`TrainStep::memory`), so the type lives apart from the measuring,
//! which reads the step.

use serde::Serialize;
use std::fmt;

/// Bytes per rank of what a step holds, by role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPlan {
    pub parameters: u64,
    pub master_weights: u64,
    pub optimizer_state: u64,
    /// The f32 gradient accumulators of `--grad-accum` (the apply step's).
    pub gradient_accumulators: u64,
    pub gradients: u64,
    /// Under FSDP, the rank's whole share of every weight, gathered from
    /// the shards in the type it is stored in and alive from the forward
    /// to the backward (nothing is resharded within the step). Absent
    /// from a manifest when nothing is gathered.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gathered_weights: u64,
    /// What the forward pass keeps for the backward.
    pub activations: u64,
    /// What the backward needs beyond the activations and the gradients:
    /// the most the step's temporaries hold at once
    /// ([working memory](crate::memory_plan#working-memory)), less those two. A layer's
    /// adjoints (the small model's `[1, 8, 512, 512]` f32 score gradient:
    /// 8 MiB) and, under remat, its recomputed region.
    pub backward_working: u64,
}

impl MemoryPlan {
    /// The state the rank carries from step to step.
    pub fn state(&self) -> u64 {
        self.parameters + self.master_weights + self.optimizer_state + self.gradient_accumulators
    }

    /// The working memory of a step: its gradients, its activations and
    /// what its backward needs beyond them.
    pub fn working(&self) -> u64 {
        self.gradients + self.gathered_weights + self.activations + self.backward_working
    }

    /// The state and the working memory of a step.
    pub fn total(&self) -> u64 {
        self.state() + self.working()
    }

    /// Each part with its name, in the order the summary prints them.
    pub fn parts(&self) -> [(&'static str, u64); 8] {
        [
            ("parameters", self.parameters),
            ("master weights", self.master_weights),
            ("optimizer state", self.optimizer_state),
            ("gradient accumulators", self.gradient_accumulators),
            ("gradients", self.gradients),
            ("gathered weights", self.gathered_weights),
            ("activations", self.activations),
            ("backward working", self.backward_working),
        ]
    }
}

impl fmt::Display for MemoryPlan {
    /// `12.31 GiB: parameters 4.08 GiB, gradients 8.16 GiB, ...` (parts
    /// that take nothing are left out).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", gib(self.total()))?;
        let mut sep = ": ";
        for (name, bytes) in self.parts() {
            if bytes > 0 {
                write!(f, "{sep}{name} {}", gib(bytes))?;
                sep = ", ";
            }
        }
        Ok(())
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `bytes` as the summary and errors print them: in GiB, or in MiB or
/// KiB below one of the unit.
pub fn gib(bytes: u64) -> String {
    let (unit, scale) = match bytes {
        b if b >= 1 << 30 => ("GiB", 1u64 << 30),
        b if b >= 1 << 20 => ("MiB", 1 << 20),
        _ => ("KiB", 1 << 10),
    };
    format!("{:.2} {unit}", bytes as f64 / scale as f64)
}
