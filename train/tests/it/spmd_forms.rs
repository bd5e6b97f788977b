//! The two SPMD forms, and the rank as an input, are the same step: over
//! three steps on as many XLA CPU devices as ranks, the partition form
//! (`num_partitions=N`, `partition-id`, channels, manual shardings) and
//! the rank fed as an `s32[1]` input give the loss, grad norm and every
//! gathered parameter and Adam moment of the replica form reading
//! `replica-id`, bit for bit (the passes see the same program, and XLA's
//! partitioner leaves a manual one as written). What makes XLA run the partition form as
//! written (a channel on every collective, a manual entry) is refused by
//! the runtime when it is missing, before the plugin sees it. The iota
//! form of a sharded step's replica groups (`--replica-groups iota`, issue
//! 48) runs as the explicit form does, bit for bit, and keeps its form
//! through the proto; `hlatc compile`'s groups are the root crate's
//! (`tests/it/replica_groups.rs`).

use crate::runs::{differences, gqa_odd_vocab, run, run_with, step_config, Run};
use hlatc_compiler::graph::collectives::iota_replica_groups;
use hlatc_compiler::ir::sharding::ShardingKind;
use hlatc_compiler::{Op, Sharding};
use hlatc_models::Parallelism;
use hlatc_passes::RematPolicy;
use hlatc_runtime::cpu_preflight::{Refusal, Unsupported};
use hlatc_runtime::{Runtime, RuntimeError};
use hlatc_step::grad_accum::build_accumulation_steps;
use hlatc_step::precision::Precision;
use hlatc_step::spmd::{RankSource, Spmd, SpmdForm, RANK_INPUT};
use hlatc_step::train_step::{build_train_step, optimize, Role, StepConfig};
use hlatc_train::trainer::Trainer;

/// Bit for bit, as measured: the issue asked for 1e-6.
const RTOL: f64 = 0.0;

const FORMS: [Spmd; 3] = [
    Spmd {
        form: SpmdForm::Partitions,
        rank_source: RankSource::Device,
    },
    Spmd {
        form: SpmdForm::Partitions,
        rank_source: RankSource::Input,
    },
    Spmd {
        form: SpmdForm::Replicas,
        rank_source: RankSource::Input,
    },
];

fn layout(tp: i64, dp: i64, sequence_parallel: bool, zero1: bool) -> Parallelism {
    Parallelism {
        tp,
        dp,
        sequence_parallel,
        zero1,
        pp: 1,
        ..Parallelism::SINGLE
    }
}

fn config(par: Parallelism, spmd: Spmd) -> StepConfig {
    StepConfig {
        spmd,
        ..step_config(gqa_odd_vocab(), par, Precision::Fp32)
    }
}

/// Each form against the replica form reading `replica-id`, run by `go`.
fn forms_agree(par: Parallelism, go: impl Fn(&StepConfig) -> Run) {
    let replicas = go(&config(par, Spmd::default()));
    assert!(replicas.stats[2].loss < replicas.stats[0].loss);
    for spmd in FORMS {
        let other = go(&config(par, spmd));
        let diffs = differences(&replicas, &other, RTOL);
        assert!(
            diffs.is_empty(),
            "{par}, {}: {}",
            spmd.describe(),
            diffs.join("; ")
        );
    }
}

#[test]
fn tp2_forms_agree() {
    forms_agree(layout(2, 1, false, false), run);
}

#[test]
fn dp2_forms_agree() {
    forms_agree(layout(1, 2, false, false), run);
}

#[test]
fn tp2_dp2_sequence_parallel_forms_agree() {
    forms_agree(layout(2, 2, true, false), run);
}

#[test]
fn tp2_dp2_zero1_forms_agree() {
    forms_agree(layout(2, 2, true, true), run);
}

#[test]
fn gradient_accumulation_forms_agree() {
    forms_agree(layout(2, 2, false, false), |cfg| {
        run_with(cfg, |rt, cfg, params| {
            let steps = build_accumulation_steps(cfg, 2)?;
            crate::cpu_trainers::accumulating(rt, cfg, steps, RematPolicy::None, params)
        })
    });
}

#[test]
fn the_partition_form_is_written_as_xla_partitions_it() {
    let cfg = config(
        layout(2, 2, true, true),
        Spmd {
            form: SpmdForm::Partitions,
            rank_source: RankSource::Device,
        },
    );
    let step = build_train_step(&cfg).unwrap();
    let m = &step.module;
    assert_eq!((m.devices.replica_count, m.devices.num_partitions), (1, 4));
    let e = m.entry();
    let ops: Vec<&Op> = e.ids().map(|id| &e.instr(id).op).collect();
    assert!(!ops.iter().any(|op| **op == Op::ReplicaId));
    assert!(ops.iter().any(|op| **op == Op::PartitionId));
    let mut channels: Vec<i64> = ops
        .iter()
        .filter_map(|op| op.collective())
        .map(|c| {
            assert!(c.use_global_device_ids);
            c.channel_id.expect("a channel on every collective")
        })
        .collect();
    let n = channels.len();
    assert!(n > 10, "{n} collectives");
    channels.sort_unstable();
    channels.dedup();
    assert_eq!(channels.len(), n, "channel ids are unique");
    let manual = |s: &Option<Sharding>| match s {
        Some(Sharding::Single(s)) => s.kind == ShardingKind::Manual,
        Some(Sharding::Tuple(t)) => t.iter().all(|s| s.kind == ShardingKind::Manual),
        None => false,
    };
    assert!(e.parameters().iter().all(|&p| manual(&e.instr(p).sharding)));
    assert!(manual(&e.instr(e.root().unwrap()).sharding));
}

#[test]
fn the_rank_input_comes_last_and_replaces_replica_id() {
    let cfg = config(
        layout(2, 2, false, true),
        Spmd {
            form: SpmdForm::Replicas,
            rank_source: RankSource::Input,
        },
    );
    let step = build_train_step(&cfg).unwrap();
    let last = step.inputs.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.role, last.shape.as_slice()),
        (RANK_INPUT, Role::Rank, &[1][..])
    );
    let e = step.module.entry();
    assert_eq!(e.parameters().len(), step.inputs.len());
    assert!(!e.ids().any(|id| e.instr(id).op == Op::ReplicaId));
    assert_eq!(step.module.devices.replica_count, 4);
}

#[test]
fn a_partitioned_module_without_its_channels_or_manual_entry_is_refused() {
    let cfg = config(
        layout(2, 1, false, false),
        Spmd {
            form: SpmdForm::Partitions,
            rank_source: RankSource::Device,
        },
    );
    let rt = Runtime::shared().unwrap();
    let step = build_train_step(&cfg).unwrap();

    let mut no_channel = step.module.clone();
    let e = no_channel.entry_mut();
    let ids: Vec<_> = e.ids().collect();
    let reduce = ids
        .into_iter()
        .find(|&id| matches!(e.instr(id).op, Op::AllReduce { .. }))
        .unwrap();
    let collective = e.instr_mut(reduce).op.collective_mut().unwrap();
    collective.channel_id = None;
    collective.use_global_device_ids = false;
    let err = rt.compile(&no_channel).err().unwrap();
    let RuntimeError::Preflight { source, .. } = &err else {
        panic!("{err}")
    };
    assert!(
        matches!(&source.reason, Refusal::Unsupported(u) if matches!(**u, Unsupported::NoChannelAmongPartitions { .. })),
        "{err}"
    );

    let mut unmarked = step.module.clone();
    let e = unmarked.entry_mut();
    let p = e.parameters()[0];
    e.instr_mut(p).sharding = None;
    let err = rt.compile(&unmarked).err().unwrap();
    assert!(
        matches!(
            err,
            RuntimeError::MultiDevice {
                replica_count: 1,
                num_partitions: 2,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn iota_groups_run_as_explicit_groups_on_xla_cpu() {
    let cfg = step_config(gqa_odd_vocab(), layout(2, 2, true, true), Precision::Fp32);
    let go = |iota: bool| {
        run_with(&cfg, |rt, cfg, params| {
            let mut step = build_train_step(cfg)?;
            let target = hlatc_passes::Target::Cpu;
            let pipeline = hlatc_passes::default_pipeline::<&str>(target, &[])?;
            optimize(
                &mut step,
                &pipeline,
                target,
                hlatc_passes::RematPolicy::None,
            )?;
            if iota {
                assert!(iota_replica_groups(&mut step.module) > 0);
                let text = hlatc_compiler::formats::text::print_module(&step.module);
                assert!(text.contains("replica_groups=[2,2]<=[4]"), "TP groups");
                assert!(
                    text.contains("replica_groups=[2,2]<=[2,2]T(1,0)"),
                    "DP groups"
                );
                // Through the proto and back, as a bundle holds it: the
                // same groups, still in the iota form.
                let bytes = hlatc_compiler::formats::proto::encode_module(&step.module);
                let back = hlatc_compiler::formats::proto::decode_module(&bytes).unwrap();
                let groups = |m: &hlatc_compiler::Module| -> Vec<String> {
                    let e = m.entry();
                    e.ids()
                        .filter_map(|id| e.instr(id).op.collective())
                        .map(|c| format!("{:?}", c.replica_groups))
                        .collect()
                };
                assert_eq!(groups(&back), groups(&step.module));
                assert!(groups(&back).iter().all(|g| g.starts_with("Iota")));
            }
            Trainer::with_program(rt.compile(&step.module)?, cfg, &step, params)
        })
    };
    let (explicit, iota) = (go(false), go(true));
    let diffs = differences(&explicit, &iota, 0.0);
    assert!(diffs.is_empty(), "{}", diffs.join("; "));
}
