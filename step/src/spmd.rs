//! The two SPMD forms a sharded step is written in, and where each rank
//! reads its number.
//!
//! The step is one program every rank runs. Consumers disagree on how
//! such a program says so:
//!
//! - **Replicas** (`replica_count=N`, `replica-id`, collectives without a
//!   channel): what torch-xla compiles, and so NxD on torch-neuronx.
//! - **Partitions** (`num_partitions=N`, `partition-id`, every collective
//!   with a `channel_id` and `use_global_device_ids=true`, the entry's
//!   parameters and root `sharding={manual}`): what JAX compiles, jax-neuronx
//!   included, since JAX 0.10 dropped pmap's replica path. It must be
//!   compiled with `use_spmd_partitioning`; the manual shardings tell XLA's
//!   partitioner the program is already divided.
//!
//! The replica groups are the same flat rank ids in both. A rank learns its
//! number from the device ([`RankSource::Device`]: `replica-id` or
//! `partition-id`) or from an `s32[1]` input named [`RANK_INPUT`] that rank
//! r is fed `[r]` ([`RankSource::Input`]), as NxD's `SPMDRank` does: its
//! docstring calls it a workaround until neuronx-cc supports `replica-id`
//! in one program for all ranks, so on Neuron the input is the default.
//!
//! The step is built in the replica form with `replica-id` and rewritten
//! here: [`rank_source`] once it is built, [`channels_and_shardings`] again
//! after every pipeline (passes may clone a collective, and a channel id
//! must be unique).

use hlatc_compiler::ir::sharding::{ShardingKind, SingleSharding};
use hlatc_compiler::Sharding;
use hlatc_compiler::{ElementType, Instruction, Module, Op, Shape};
use hlatc_models::option_name::OptionName as O;
use hlatc_models::Parallelism;
use hlatc_passes::rewriter::Names;
use serde::{Deserialize, Serialize};

/// The input a rank reads its number from under [`RankSource::Input`].
pub const RANK_INPUT: &str = "rank";

/// Which SPMD form a sharded step is written in (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpmdForm {
    /// `replica_count=N`: torch-xla and NxD.
    #[default]
    Replicas,
    /// `num_partitions=N`, manual shardings: JAX.
    Partitions,
}

/// Where a rank of a sharded step reads its number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSource {
    /// `replica-id` or `partition-id`, by the form.
    #[default]
    Device,
    /// An `s32[1]` input, [`RANK_INPUT`], holding the rank.
    Input,
}

impl SpmdForm {
    pub const ALL: [SpmdForm; 2] = [SpmdForm::Replicas, SpmdForm::Partitions];

    pub fn name(self) -> &'static str {
        match self {
            SpmdForm::Replicas => "replicas",
            SpmdForm::Partitions => "partitions",
        }
    }
}

impl RankSource {
    pub const ALL: [RankSource; 2] = [RankSource::Device, RankSource::Input];

    pub fn name(self) -> &'static str {
        match self {
            RankSource::Device => "device",
            RankSource::Input => "input",
        }
    }
}

/// How a sharded step is written: its form and its ranks' numbers. What
/// every step before the choice existed was, and what a manifest without
/// it means, is the default: replicas reading `replica-id`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spmd {
    pub form: SpmdForm,
    pub rank_source: RankSource,
}

impl Spmd {
    /// The form `target`'s consumers compile: on Neuron, NxD's (replicas,
    /// the rank as an input); on cpu, hlatc's own runtime (replicas,
    /// `replica-id`).
    pub fn default_for(target: hlatc_passes::Target) -> Spmd {
        match target {
            hlatc_passes::Target::Neuron => Spmd {
                form: SpmdForm::Replicas,
                rank_source: RankSource::Input,
            },
            hlatc_passes::Target::Cpu => Spmd::default(),
        }
    }

    /// How a step over `par` is written for `target`: the form and rank
    /// source asked for, each the target's default where not. On one
    /// device there is nothing to choose, and a choice is refused rather
    /// than ignored.
    pub fn choose(
        form: Option<SpmdForm>,
        rank_source: Option<RankSource>,
        target: hlatc_passes::Target,
        par: Parallelism,
    ) -> Result<Spmd, SpmdError> {
        if par.is_single() {
            let asked: Vec<O> = [form.map(|_| O::Spmd), rank_source.map(|_| O::RankSource)]
                .into_iter()
                .flatten()
                .collect();
            return match asked.is_empty() {
                true => Ok(Spmd::default()),
                false => Err(SpmdError::ChoiceOnOneDevice { asked }),
            };
        }
        let default = Spmd::default_for(target);
        Ok(Spmd {
            form: form.unwrap_or(default.form),
            rank_source: rank_source.unwrap_or(default.rank_source),
        })
    }

    /// `--spmd FORM, rank from SOURCE`, as summaries say it.
    pub fn describe(self) -> String {
        let rank = match (self.rank_source, self.form) {
            (RankSource::Input, _) => "the rank as an input",
            (RankSource::Device, SpmdForm::Replicas) => "replica-id",
            (RankSource::Device, SpmdForm::Partitions) => "partition-id",
        };
        format!("{}, {rank}", self.form.name())
    }

    /// The device counts of a module in this form over `par`'s ranks.
    pub fn set_devices(self, module: &mut Module, par: Parallelism) {
        let (replicas, partitions) = match self.form {
            SpmdForm::Replicas => (par.world(), 1),
            SpmdForm::Partitions => (1, par.world()),
        };
        module.devices.replica_count = replicas;
        module.devices.num_partitions = partitions;
    }
}

/// Why a built step cannot be written in a form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpmdError {
    /// The rank is read outside the entry, where no input reaches.
    #[error("'{instruction}' in computation '{computation}' reads the device's number outside the entry computation; the rank can only be an input of the entry")]
    RankOutsideEntry {
        computation: String,
        instruction: String,
    },
    /// A form or rank source asked for a step of one device.
    #[error("{} {} how a sharded step is written, and this one runs on one device: give {} or {} above 1, or leave {} out", .asked.iter().map(|o| o.named().to_string()).collect::<Vec<_>>().join(" and "), if .asked.len() == 1 { "chooses" } else { "choose" }, O::Tp.named(), O::Dp.named(), if .asked.len() == 1 { "it" } else { "them" })]
    ChoiceOnOneDevice { asked: Vec<O> },
    /// The module already has an input under the rank input's name.
    #[error("the step already has an input named '{RANK_INPUT}'")]
    RankNameTaken,
}

/// Rewrites a step built with `replica-id` to read its rank as `spmd`
/// says, and returns the parameter number of the rank input it added (if
/// any), appended after the existing ones.
pub fn rank_source(module: &mut Module, spmd: Spmd) -> Result<Option<i64>, SpmdError> {
    // The form the step is built in: nothing to rewrite.
    if spmd == Spmd::default() {
        return Ok(None);
    }
    let entry = module.entry;
    for (ci, c) in module.computations.iter().enumerate() {
        if ci == entry.index() {
            continue;
        }
        if let Some(id) = c.ids().find(|&id| c.instr(id).op == Op::ReplicaId) {
            return Err(SpmdError::RankOutsideEntry {
                computation: c.name.clone(),
                instruction: c.instr(id).name.clone(),
            });
        }
    }
    let mut names = Names::of_module(module);
    let c = module.entry_mut();
    let ids: Vec<_> = c
        .ids()
        .filter(|&id| c.instr(id).op == Op::ReplicaId)
        .collect();
    match spmd.rank_source {
        RankSource::Device => {
            if spmd.form == SpmdForm::Partitions {
                for id in ids {
                    let instr = c.instr_mut(id);
                    instr.op = Op::PartitionId;
                    instr.name = names.fresh("partition-id");
                }
            }
            Ok(None)
        }
        RankSource::Input => {
            if c.find(RANK_INPUT).is_some() {
                return Err(SpmdError::RankNameTaken);
            }
            let (scalar_name, id_name) = (names.fresh("rank.scalar"), names.fresh("rank.id"));
            let number = c.parameters().len() as i64;
            let rank_shape = Shape::array(ElementType::S32, vec![1]);
            let param = c.add(
                Instruction::new(RANK_INPUT, rank_shape.clone(), Op::Parameter(number)),
                &[],
            );
            let scalar = c.add(
                Instruction::new(
                    scalar_name,
                    Shape::array(ElementType::S32, vec![]),
                    Op::Reshape {
                        inferred_dimension: None,
                    },
                ),
                &[param],
            );
            // `replica-id` is u32; what read it keeps reading a u32.
            let id = c.add(
                Instruction::new(id_name, Shape::array(ElementType::U32, vec![]), Op::Convert),
                &[scalar],
            );
            for old in ids {
                c.instr_mut(id).metadata = c.instr(old).metadata.clone();
                c.replace_all_uses(old, id);
                c.remove(old);
            }
            if let Some(layout) = &mut module.entry_layout {
                layout.parameters.push(rank_shape);
            }
            Ok(Some(number))
        }
    }
}

/// In the partition form, every collective on its own channel, numbered
/// in order from 1, with its groups read as global device ids, and the
/// entry's parameters and root marked as already partitioned by hand.
/// Nothing in the replica form.
pub fn channels_and_shardings(module: &mut Module, spmd: Spmd) {
    if spmd.form != SpmdForm::Partitions {
        return;
    }
    let mut next = 1;
    for c in &mut module.computations {
        let ids: Vec<_> = c.ids().collect();
        for id in ids {
            let op = &mut c.instr_mut(id).op;
            let global_ids = op_takes_global_ids(op);
            if let Some(collective) = op.collective_mut() {
                collective.channel_id = Some(next);
                collective.use_global_device_ids = global_ids;
                next += 1;
            } else if let Op::CollectivePermute { channel_id, .. }
            | Op::CollectivePermuteStart { channel_id, .. } = op
            {
                *channel_id = Some(next);
                next += 1;
            }
        }
    }
    let manual = || SingleSharding {
        kind: ShardingKind::Manual,
        metadata: Vec::new(),
        shard_group: None,
    };
    let c = module.entry_mut();
    for p in c.parameters() {
        c.instr_mut(p).sharding = Some(Sharding::Single(manual()));
    }
    if let Some(root) = c.root() {
        let sharding = match &c.instr(root).shape {
            Shape::Tuple(elements) => Sharding::Tuple(elements.iter().map(|_| manual()).collect()),
            _ => Sharding::Single(manual()),
        };
        c.instr_mut(root).sharding = Some(sharding);
    }
}

/// The partition form's channels, group modes and entry shardings taken
/// off again (nothing in the replica form), so that a pipeline sees the
/// program every form shares: `remat` recomputes a collective only
/// without a channel (a clone would need one of its own), and shardings
/// set instructions apart. [`channels_and_shardings`] puts them back,
/// numbered anew, after the passes.
pub fn without_channels_and_shardings(module: &mut Module, spmd: Spmd) {
    if spmd.form != SpmdForm::Partitions {
        return;
    }
    for c in &mut module.computations {
        let ids: Vec<_> = c.ids().collect();
        for id in ids {
            let op = &mut c.instr_mut(id).op;
            if let Some(collective) = op.collective_mut() {
                collective.channel_id = None;
                collective.use_global_device_ids = false;
            } else if let Op::CollectivePermute { channel_id, .. }
            | Op::CollectivePermuteStart { channel_id, .. } = op
            {
                *channel_id = None;
            }
        }
    }
    let c = module.entry_mut();
    let marked: Vec<_> = c.parameters().into_iter().chain(c.root()).collect();
    for id in marked {
        c.instr_mut(id).sharding = None;
    }
}

/// Whether XLA takes `use_global_device_ids` on `op`: all-reduce,
/// all-gather and reduce-scatter (begun or whole).
fn op_takes_global_ids(op: &Op) -> bool {
    matches!(
        op,
        Op::AllReduce { .. }
            | Op::AllGather { .. }
            | Op::ReduceScatter { .. }
            | Op::AllReduceStart { .. }
            | Op::AllGatherStart { .. }
    )
}
