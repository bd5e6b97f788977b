//! What one rank of a step needs in device memory, by what it is for,
//! against what the device has.
//!
//! The state is counted exactly from the step's inputs by role: each
//! rank's share of the weights, of the master weights and of the Adam
//! moments (a ZeRO-1 shard as the shard). The gradients are counted as
//! the rank's share of every parameter in the type they are summed and
//! clipped in (f32, f64 under fp64): the clip needs the global norm before
//! any update, so all of them are alive at once. Without ZeRO-1 each
//! gradient is converted and summed as the backward makes it, and the sum
//! replaces it. Under ZeRO-1 (moments smaller than the weights they
//! update) the sum is only the rank's shard, but the gradients are
//! reduce-scattered in buckets that span layers, so the plan keeps every
//! gradient as the backward made it (in its weight's type: bf16 under
//! `bf16-master`) beside the shard of their sum. The activations are
//! measured on the module, not assumed from a formula: every value the
//! forward pass computes and a backward instruction reads is alive where
//! the backward begins, so their bytes are what the step keeps for its
//! backward under the remat policy that ran (a recomputed region, or a
//! value autodiff recomputes, is read by its copy, not kept).
//!
//! # Working memory
//!
//! The working memory adds to the activations and the gradients what the
//! backward needs beyond them (`backward_working`): a layer's adjoints,
//! and under remat its recomputed region. It is measured on the module
//! too ([`working`]): the most bytes the step's temporaries hold at once,
//! as a fusing compiler materializes them and a memory-minding scheduler
//! orders them, less the activations and gradients (the activations
//! are given back as the backward reads them for the last time, so at the
//! peak some are gone: without remat the peak holds little beyond them).
//! `train/tests/it/memory_plan.rs` measures the working memory against what XLA
//! CPU's buffer assignment reserves as temporaries for the small model at
//! seq 512: 0.996x without remat and 0.976x with core-attention on one
//! device, 0.997x and 0.973x on a TP 2 rank with sequence parallelism
//! (0.98x and 0.70x from the activations and gradients alone). On every
//! step measured the peak is in the backward (the first layer's softmax
//! backward without remat, the first recomputed core attention with it);
//! a peak in the forward or the update would be counted here the same way.

pub use crate::memory_parts::{gib, MemoryPlan};
use crate::train_step::{Role, TrainStep};
use hlatc_compiler::graph::scope;
use hlatc_compiler::{Module, Op};
use hlatc_passes::neuron_check::Chip;

mod working;

/// Bytes of one trn1 NeuronCore's share of device memory (16 GiB), the
/// default `--device-memory` for a trn1 bundle: the chip's own figure.
pub const TRN1_CORE_BYTES: u64 = Chip::Trn1.hbm_per_core();

impl MemoryPlan {
    /// The plan of `step` as optimized: the one [`optimize`] recorded
    /// (the remat pass decides what is kept, so plan the step its pipeline
    /// produced), or [`MemoryPlan::measure`]d now for a step not optimized.
    /// A compile asks for it twice, for its summary and for the manifest
    /// written beside the proto, and measuring a 70B module costs about as
    /// much as a pass.
    ///
    /// [`optimize`]: crate::train_step::optimize
    pub fn of(step: &TrainStep) -> MemoryPlan {
        step.memory.unwrap_or_else(|| MemoryPlan::measure(step))
    }

    /// The plan of `step`'s module as it is now.
    pub fn measure(step: &TrainStep) -> MemoryPlan {
        let with_role = |role: Role| step.inputs.iter().filter(move |s| s.role == role);
        let bytes = |role: Role| -> u64 {
            with_role(role)
                .map(|s| elements(&s.shape) * s.dtype.byte_size() as u64)
                .sum()
        };
        let count = |role: Role| -> u64 { with_role(role).map(|s| elements(&s.shape)).sum() };
        let sum_type_bytes = step.precision.gradient_sum_type().byte_size() as u64;
        let (made, summed) = (count(Role::Parameter), count(Role::AdamM));
        let gathered = step.gathered_weights;
        let gathered_weights = gathered.alive;
        let gradients = if gathered.whole > 0 {
            // FSDP: the backward makes the weights' whole gradients
            // (`GatheredWeights::gradients`) beside the rank's shard of
            // their sums.
            gathered.gradients + summed * sum_type_bytes
        } else if summed > 0 && summed < made {
            bytes(Role::Parameter) + summed * sum_type_bytes
        } else {
            made * sum_type_bytes
        };
        let activations = saved_for_backward(&step.module);
        MemoryPlan {
            parameters: bytes(Role::Parameter),
            master_weights: bytes(Role::MasterWeight),
            optimizer_state: bytes(Role::AdamM) + bytes(Role::AdamV),
            gradient_accumulators: bytes(Role::GradAccumulator),
            gradients,
            gathered_weights,
            activations,
            backward_working: beyond(&step.module, activations + gradients + gathered_weights),
        }
    }

    /// The plan of a step accumulated over micro-batches: the apply step's
    /// state and gradients (the micro step makes each micro-batch's
    /// gradients, the same size, alive beside the accumulators), and the
    /// micro step's activations (one micro-batch's) and backward working
    /// memory (its peak beyond those activations and the gradients; the
    /// apply step holds no activations, and its update's temporaries are
    /// elementwise, fused into the loops that read the gradients).
    pub fn of_accumulation(micro: &TrainStep, apply: &TrainStep) -> MemoryPlan {
        let plan = MemoryPlan::of(apply);
        let activations = saved_for_backward(&micro.module);
        MemoryPlan {
            activations,
            backward_working: beyond(
                &micro.module,
                activations + plan.gradients + plan.gathered_weights,
            ),
            ..plan
        }
    }

    /// The plan of a pipeline-parallel step: the apply step's state and
    /// gradients (its parameters are one stage's), and as activations the
    /// most any tick program keeps for its backward slot (one micro-batch
    /// through one stage, recomputed) plus the buffers the tick programs
    /// carry: the ring of kept stage inputs and the activation and
    /// gradient received. Every stage runs the same programs, so every
    /// stage's plan is this one.
    pub fn of_pipeline(ticks: &[&TrainStep], apply: &TrainStep) -> MemoryPlan {
        let buffers: u64 = ticks
            .first()
            .map(|t| {
                t.inputs
                    .iter()
                    .filter(|s| s.role == Role::StageBuffer)
                    .map(|s| elements(&s.shape) * s.dtype.byte_size() as u64)
                    .sum()
            })
            .unwrap_or(0);
        let plan = MemoryPlan::of(apply);
        let kept: Vec<u64> = ticks
            .iter()
            .map(|t| saved_for_backward(&t.module))
            .collect();
        // Each tick's peak beyond its own activations and the gradients:
        // the plan's activations are the most any tick keeps, so the most
        // any tick needs beyond them bounds every tick.
        let backward_working = ticks
            .iter()
            .zip(&kept)
            .map(|(t, &k)| beyond(&t.module, k + plan.gradients))
            .max()
            .unwrap_or(0);
        MemoryPlan {
            activations: kept.iter().copied().max().unwrap_or(0) + buffers,
            backward_working,
            ..plan
        }
    }
}

fn elements(shape: &[i64]) -> u64 {
    shape.iter().map(|&d| d.max(0) as u64).product()
}

/// Bytes of the entry's forward values that a backward instruction reads:
/// what is alive where the backward begins. Parameters are state, counted
/// apart, and constants are the program's own, not kept by its forward
/// pass (the backward shares the forward's scalars); a value read by
/// several backward instructions counts once.
fn saved_for_backward(module: &Module) -> u64 {
    let c = module.entry();
    c.ids()
        .filter(|&id| {
            let i = c.instr(id);
            !matches!(i.op, Op::Parameter(_) | Op::Constant(_))
                && !scope::is_backward(&i.metadata.op_name)
                // FSDP's gathered weights, read by the backward as the
                // forward's weights are, are counted apart
                // (`MemoryPlan::gathered_weights`).
                && !scope::is_parameter_gather(&i.metadata.op_name)
        })
        .filter(|&id| {
            c.users(id)
                .into_iter()
                .any(|u| scope::is_backward(&c.instr(u).metadata.op_name))
        })
        .map(|id| c.instr(id).shape.byte_size())
        .sum()
}

/// What `module`'s temporaries hold at their peak beyond `counted` (its
/// activations and gradients): nothing when the peak is within them (the
/// activations are given back as the backward reads them for the last
/// time, and the gradients are made as it goes, so the peak may hold less
/// than both).
fn beyond(module: &Module, counted: u64) -> u64 {
    working::peak(module).bytes.saturating_sub(counted)
}

/// The device memory a rank's plan is checked against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceMemory {
    /// One NeuronCore of the bundle's chip ([`Chip::hbm_per_core`]:
    /// [`TRN1_CORE_BYTES`] on trn1) for a sharded step on `neuron`, a
    /// refusal when it does not fit; a single-device step is
    /// only warned about (its state alone outgrows a core for every preset
    /// past 1B, and compiling it whole is how its graph is checked and
    /// timed). Nothing is checked on `cpu`: host memory is the limit there.
    #[default]
    TargetDefault,
    /// Exactly this many bytes per rank, for any step and target.
    Bytes(u64),
    /// No check.
    Unchecked,
}

/// What to do about a plan, per [`DeviceMemory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryCheck {
    Refuse(u64),
    Warn(u64),
    None,
}

impl DeviceMemory {
    /// Whether a step with `world` ranks for `chip` (`None`: XLA CPU) is
    /// refused, warned about or not checked.
    pub fn check(self, chip: Option<Chip>, world: i64) -> MemoryCheck {
        match (self, chip) {
            (DeviceMemory::Bytes(b), _) => MemoryCheck::Refuse(b),
            (DeviceMemory::Unchecked, _) | (DeviceMemory::TargetDefault, None) => MemoryCheck::None,
            (DeviceMemory::TargetDefault, Some(chip)) if world > 1 => {
                MemoryCheck::Refuse(chip.hbm_per_core())
            }
            (DeviceMemory::TargetDefault, Some(chip)) => MemoryCheck::Warn(chip.hbm_per_core()),
        }
    }
}

/// A `--device-memory` that is not a size.
#[derive(Debug, thiserror::Error)]
pub enum SizeError {
    #[error("unknown unit '{0}' in a device memory (known: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; or none)")]
    Unit(String),
    #[error("'{0}' is not a device memory (a number with a unit such as 16GiB, or none)")]
    Number(String),
}

impl std::str::FromStr for DeviceMemory {
    type Err = SizeError;

    /// `none`, or a size with an optional unit (`16GiB`, `24GB`,
    /// `512MiB`, `1073741824`).
    fn from_str(s: &str) -> Result<Self, SizeError> {
        if s == "none" {
            return Ok(DeviceMemory::Unchecked);
        }
        let split = s
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let scale: f64 = match unit.trim() {
            "" | "B" => 1.0,
            "KiB" => (1u64 << 10) as f64,
            "MiB" => (1u64 << 20) as f64,
            "GiB" => (1u64 << 30) as f64,
            "TiB" => (1u64 << 40) as f64,
            "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            other => return Err(SizeError::Unit(other.to_string())),
        };
        let bytes = number
            .parse::<f64>()
            .map(|n| n * scale)
            .map_err(|_| SizeError::Number(s.to_string()))?;
        // At least a byte, and what a u64 holds (NaN fails both).
        if !(1.0..u64::MAX as f64).contains(&bytes) {
            return Err(SizeError::Number(s.to_string()));
        }
        Ok(DeviceMemory::Bytes(bytes as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_their_units() {
        let bytes = |s: &str| match s.parse::<DeviceMemory>().unwrap() {
            DeviceMemory::Bytes(b) => b,
            other => panic!("{other:?}"),
        };
        assert_eq!(bytes("16GiB"), TRN1_CORE_BYTES);
        assert_eq!(bytes("24GB"), 24_000_000_000);
        assert_eq!(bytes("1.5KiB"), 1536);
        assert_eq!(bytes("4096"), 4096);
        assert_eq!(
            "none".parse::<DeviceMemory>().unwrap(),
            DeviceMemory::Unchecked
        );
        for bad in ["16XB", "GiB", "0", "-1GiB", "1e400"] {
            assert!(bad.parse::<DeviceMemory>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_default_refuses_sharded_neuron_steps_and_warns_about_single_ones() {
        let d = DeviceMemory::TargetDefault;
        assert_eq!(
            d.check(Some(Chip::Trn1), 8),
            MemoryCheck::Refuse(TRN1_CORE_BYTES)
        );
        assert_eq!(
            d.check(Some(Chip::Trn1), 1),
            MemoryCheck::Warn(TRN1_CORE_BYTES)
        );
        assert_eq!(d.check(None, 8), MemoryCheck::None);
        assert_eq!(
            DeviceMemory::Bytes(5).check(None, 1),
            MemoryCheck::Refuse(5)
        );
    }

    #[test]
    fn the_default_is_the_chips_core() {
        let d = DeviceMemory::TargetDefault;
        assert_eq!(d.check(Some(Chip::Trn2), 64), MemoryCheck::Refuse(24 << 30));
        assert_eq!(d.check(Some(Chip::Trn2), 1), MemoryCheck::Warn(24 << 30));
    }
}
