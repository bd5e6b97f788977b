//! FSDP (ZeRO-3): the weights divided over the data-parallel replicas with
//! their optimizer state. Each step gathers the weights, reduce-scatters
//! the gradients and updates the rank's shards; over three steps it
//! computes what one device computes on the same global batch, in f64 to
//! `sharded.rs`' 1e-10 (loss, grad norm, every parameter and Adam moment
//! gathered from the shards). Under `bf16-master` its update is ZeRO-1's.
//! Shards never gathered, or updated with another shard's gradient, are
//! caught. FSDP through the compile step, the planner and the CLI
//! (`--reshard unless-pp`, torchtitan's layout, an FSDP state resumed in
//! another layout) is the root crate's (`tests/it/sharded.rs`).

use crate::runs::{
    assert_caught, broken_in, differences, f32_rounding_bound, gqa_odd_vocab, mha_tied, run,
    step_config, Run, EQUAL_IN, F64_RTOL,
};
use hlatc_models::parallel::Fault;
use hlatc_models::{param_specs, EpExchange, ModelConfig, Parallelism, Reshard};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, Role, StepConfig};

/// HSDP: `dp` replicas in shard groups of `n`, each a TP group of `tp`.
fn hsdp(tp: i64, dp: i64, n: i64) -> Parallelism {
    Parallelism {
        dp,
        ..fsdp(tp, n, false)
    }
}

/// FSDP over `n` replicas, each a TP group of `tp`.
fn fsdp(tp: i64, n: i64, sequence_parallel: bool) -> Parallelism {
    Parallelism {
        tp,
        dp: n,
        fsdp: n,
        sequence_parallel,
        ..Parallelism::SINGLE
    }
}

/// `model`'s step over `par` and one device's, each on `batch_size`
/// sequences, in `precision`.
fn config(model: ModelConfig, par: Parallelism, precision: Precision, batch: i64) -> StepConfig {
    let mut cfg = step_config(model, par, precision);
    cfg.batch.batch_size = batch;
    cfg
}

/// Three steps of `model` over `par` equal one device's; the sharded run.
fn equals_one_device(model: ModelConfig, par: Parallelism, batch: i64) -> Run {
    let single = run(&config(model.clone(), Parallelism::SINGLE, EQUAL_IN, batch));
    let sharded = run(&config(model, par, EQUAL_IN, batch));
    let diffs = differences(&single, &sharded, F64_RTOL);
    assert!(diffs.is_empty(), "{par}: {}", diffs.join("; "));
    assert!(single.stats[2].loss < single.stats[0].loss);
    sharded
}

macro_rules! fsdp_equals_one_device {
    ($($name:ident: $model:expr, tp $tp:expr, fsdp $n:expr, sp $sp:expr, batch $batch:expr;)*) => {$(
        #[test]
        fn $name() {
            equals_one_device($model, fsdp($tp, $n, $sp), $batch);
        }
    )*};
}

fsdp_equals_one_device! {
    gqa_fsdp2: gqa_odd_vocab(), tp 1, fsdp 2, sp false, batch 4;
    gqa_fsdp4: gqa_odd_vocab(), tp 1, fsdp 4, sp false, batch 4;
    gqa_fsdp8: gqa_odd_vocab(), tp 1, fsdp 8, sp false, batch 8;
    mha_tied_fsdp2: mha_tied(), tp 1, fsdp 2, sp false, batch 4;
    gqa_tp2_fsdp2_sp: gqa_odd_vocab(), tp 2, fsdp 2, sp true, batch 4;
    mha_tied_tp2_fsdp2: mha_tied(), tp 2, fsdp 2, sp false, batch 4;
}

macro_rules! hsdp_equals_one_device {
    ($($name:ident: $model:expr, tp $tp:expr, dp $dp:expr, fsdp $n:expr, batch $batch:expr;)*) => {$(
        #[test]
        fn $name() {
            equals_one_device($model, hsdp($tp, $dp, $n), $batch);
        }
    )*};
}

hsdp_equals_one_device! {
    gqa_hsdp_2x2: gqa_odd_vocab(), tp 1, dp 4, fsdp 2, batch 4;
    gqa_hsdp_4x2: gqa_odd_vocab(), tp 1, dp 8, fsdp 2, batch 8;
    gqa_hsdp_2x4: gqa_odd_vocab(), tp 1, dp 8, fsdp 4, batch 8;
    mha_tied_tp2_hsdp_2x2: mha_tied(), tp 2, dp 4, fsdp 2, batch 4;
}

/// Resharded (`--reshard always`): the backward reads every weight gathered
/// again from the shards, unit by unit, and computes the same step.
#[test]
fn resharded_fsdp_equals_one_device() {
    let resharded = |par: Parallelism| Parallelism {
        reshard: Reshard::Always,
        ..par
    };
    let layouts = [
        fsdp(1, 2, false),
        fsdp(1, 4, false),
        fsdp(2, 2, true),
        hsdp(1, 4, 2),
    ];
    for par in layouts.map(resharded) {
        equals_one_device(gqa_odd_vocab(), par, 4);
        // The forward's gathers, one a unit (the embedding, two layers,
        // the head), and the backward's, but the embedding's: its gradient
        // reads the tokens, not the table.
        let step = build_train_step(&config(gqa_odd_vocab(), par, EQUAL_IN, 4)).unwrap();
        let c = step.module.entry();
        let gathers = |backward: bool| {
            c.ids()
                .filter(|&id| {
                    let i = c.instr(id);
                    matches!(i.op, hlatc_compiler::Op::AllGather { .. })
                        && i.metadata.op_name.contains("parameter_all_gather")
                        && i.metadata.op_name.starts_with("backward/") == backward
                })
                .count()
        };
        assert_eq!((gathers(false), gathers(true)), (4, 3), "{par}");
    }
    equals_one_device(mha_tied(), resharded(fsdp(1, 2, false)), 4);
}

#[test]
fn shard_groups_never_summed_are_caught() {
    let diffs = broken_in(Fault::ShardGroupsNotSummed, gqa_odd_vocab(), hsdp(1, 4, 2));
    assert_caught(&diffs, "step 0 grad norm");
    assert_caught(&diffs, "model.norm.weight");
}

/// FSDP 4 (and HSDP 2 x 2) over two micro-batches: each micro step
/// gathers the weights from the shards, the apply step reduce-scatters
/// the accumulated gradients and updates the shards.
#[test]
fn accumulated_fsdp_equals_one_device() {
    let resharded = Parallelism {
        reshard: Reshard::Always,
        ..fsdp(1, 4, false)
    };
    for par in [fsdp(1, 4, false), hsdp(1, 4, 2), resharded] {
        let model = gqa_odd_vocab();
        let single = run(&config(model.clone(), Parallelism::SINGLE, EQUAL_IN, 8));
        let cfg = config(model, par, EQUAL_IN, 8);
        let accumulated = crate::runs::run_with(&cfg, |rt, cfg, params| {
            let steps = hlatc_step::grad_accum::build_accumulation_steps(cfg, 2)?;
            let remat = hlatc_passes::RematPolicy::None;
            crate::cpu_trainers::accumulating(rt, cfg, steps, remat, params)
        });
        let diffs = differences(&single, &accumulated, F64_RTOL);
        assert!(diffs.is_empty(), "{par}, K 2: {}", diffs.join("; "));
    }
}

/// A mixture of experts under FSDP 2 with EP 2: its experts are divided
/// by EP (each EP rank's run held whole by the one replica that holds it),
/// the rest of its weights by FSDP.
#[test]
fn moe_fsdp2_ep2_equals_one_device() {
    let model = ModelConfig::preset("tiny-moe").unwrap();
    let par = Parallelism {
        ep: 2,
        ep_exchange: EpExchange::AllToAll,
        ..fsdp(1, 2, false)
    };
    equals_one_device(model, par, 4);
}

/// HSDP of a mixture of experts: each shard group holds every EP rank's
/// experts, divided over the replicas of the group that hold them, and the
/// groups replicate one another. HSDP 2 x 2 with EP 2 (one holder a group,
/// the experts whole on it) and HSDP 2 x 4 with EP 2 (two holders a group,
/// the experts halved).
#[test]
fn moe_hsdp_with_ep_equals_one_device() {
    let model = ModelConfig::preset("tiny-moe").unwrap();
    let with_ep = |dp, n| Parallelism {
        ep: 2,
        ep_exchange: EpExchange::AllToAll,
        ..hsdp(1, dp, n)
    };
    for (dp, n, batch) in [(4, 2, 4), (8, 4, 8)] {
        equals_one_device(model.clone(), with_ep(dp, n), batch);
    }
    // The experts' shards are summed over the groups with the rest: a
    // step that leaves them apart drifts in the experts too.
    let diffs = broken_in(Fault::ShardGroupsNotSummed, model, with_ep(4, 2));
    assert_caught(&diffs, "mlp.experts.up_proj.weight");
}

/// Every per-parameter input of an FSDP step is the rank's flat shard of
/// its share: the weights too, where ZeRO-1 keeps them whole.
#[test]
fn the_weights_are_divided_with_their_state() {
    let model = gqa_odd_vocab();
    let step = build_train_step(&step_config(
        model.clone(),
        fsdp(2, 2, false),
        Precision::Bf16Master,
    ))
    .unwrap();
    let shape = |name: String| crate::runs::input_shape(&step, &name);
    let par = fsdp(2, 2, false);
    for p in param_specs(&model) {
        let local: i64 = par.local_dims(&p).iter().product();
        let k = (local + 1) / 2;
        for prefix in ["", "master.", "adam_m.", "adam_v."] {
            assert_eq!(
                shape(format!("{prefix}{}", p.name)),
                vec![k],
                "{prefix}{}",
                p.name
            );
        }
    }
    // Nothing of the weights' size is an output: the new shards are.
    let gathered = step
        .outputs
        .iter()
        .filter(|s| s.role == Role::Parameter && s.shape.len() > 1)
        .count();
    assert_eq!(gathered, 0);
}

/// `bf16-master` under FSDP 4 updates as under ZeRO-1 over DP 4: the same
/// f32 master shards from the same gradient shards, the weights gathered
/// in bf16 before the forward where ZeRO-1 gathers them after the update.
#[test]
fn bf16_master_fsdp_updates_as_zero1_does() {
    let model = gqa_odd_vocab();
    let zero1 = Parallelism {
        dp: 4,
        zero1: true,
        ..Parallelism::SINGLE
    };
    let a = run(&step_config(model.clone(), zero1, Precision::Bf16Master));
    let b = run(&step_config(
        model,
        fsdp(1, 4, false),
        Precision::Bf16Master,
    ));
    let diffs = differences(&a, &b, f32_rounding_bound());
    assert!(diffs.is_empty(), "{}", diffs.join("; "));
    assert!(a.stats[2].loss < a.stats[0].loss);
}

#[test]
fn shards_never_gathered_are_caught() {
    let resharded = Parallelism {
        reshard: Reshard::Always,
        ..fsdp(1, 2, false)
    };
    for par in [fsdp(1, 2, false), resharded] {
        let diffs = broken_in(Fault::ShardsNotGathered, gqa_odd_vocab(), par);
        assert_caught(&diffs, "step 0 loss");
        assert_caught(&diffs, "model.embed_tokens.weight");
    }
}

#[test]
fn a_shard_updated_with_another_shards_gradient_is_caught() {
    let diffs = broken_in(
        Fault::ShardUpdatedWithAnothersGradient,
        gqa_odd_vocab(),
        fsdp(1, 2, false),
    );
    assert_caught(&diffs, "model.norm.weight");
}

/// What this build does not divide is refused by name, before anything
/// is built.
#[test]
fn layouts_fsdp_does_not_take_yet_are_refused() {
    use hlatc_models::ParallelError as E;
    let model = gqa_odd_vocab();
    let refused = |par: Parallelism| {
        let cfg = step_config(model.clone(), par, Precision::Fp32);
        match build_train_step(&cfg) {
            Err(hlatc_step::train_step::StepError::Parallel(e)) => e,
            Err(e) => panic!("{par}: {e}"),
            Ok(_) => panic!("{par}: built"),
        }
    };
    assert_eq!(
        refused(hsdp(1, 4, 3)),
        E::FsdpIndivisibleDp { fsdp: 3, dp: 4 }
    );
    // A shard group of 2 cannot hold 4 EP ranks' experts alike.
    let experts = Parallelism {
        ep: 4,
        ..hsdp(1, 8, 2)
    };
    let moe = config(
        ModelConfig::preset("tiny-moe").unwrap(),
        experts,
        Precision::Fp32,
        8,
    );
    assert!(matches!(
        build_train_step(&moe),
        Err(hlatc_step::train_step::StepError::Parallel(
            E::HsdpSplitsExperts {
                fsdp: 2,
                dp: 8,
                ep: 4,
                group: 2
            }
        ))
    ));
    let with_zero1 = Parallelism {
        zero1: true,
        ..fsdp(1, 2, false)
    };
    assert_eq!(refused(with_zero1), E::Zero1WithFsdp { fsdp: 2 });
    let reshard = Reshard::Always;
    let unsharded = Parallelism {
        reshard,
        ..Parallelism::SINGLE
    };
    assert_eq!(refused(unsharded), E::ReshardWithoutFsdp { reshard });
    let staged = Parallelism {
        pp: 2,
        reshard,
        ..fsdp(1, 2, false)
    };
    assert_eq!(refused(staged), E::ReshardWithStages { reshard, pp: 2 });
    let reshard = Reshard::UnlessPp;
    let unsharded = Parallelism {
        reshard,
        ..Parallelism::SINGLE
    };
    assert_eq!(refused(unsharded), E::ReshardWithoutFsdp { reshard });
}

/// Resharded, FSDP issues each unit's gathers one unit ahead, as FSDP2
/// prefetches. In the forward a layer's gather waits for the layer before
/// it to begin (it reads what the layer before that computed) and not to
/// end, so it can overlap it; in the backward a layer's gather again waits
/// for the backward to reach the layer after it, not to leave it. Without
/// the prefetch each would wait for its own turn, and this fails.
#[test]
fn resharded_gathers_are_issued_one_unit_ahead() {
    use hlatc_compiler::graph::scope;
    use hlatc_compiler::{InstrId, Op};
    use hlatc_passes::{default_pipeline, RematPolicy, Target};
    use std::collections::HashSet;
    let mut model = gqa_odd_vocab();
    model.num_hidden_layers = 4;
    let par = Parallelism {
        reshard: Reshard::Always,
        ..fsdp(1, 2, false)
    };
    let mut step = build_train_step(&config(model, par, EQUAL_IN, 4)).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
    hlatc_step::train_step::optimize(&mut step, &pipeline, Target::Cpu, RematPolicy::None).unwrap();
    let c = step.module.entry();
    let ancestors = |id: InstrId| {
        let mut seen = HashSet::new();
        let mut stack = vec![id];
        while let Some(x) = stack.pop() {
            for o in c.operands(x) {
                if seen.insert(o) {
                    stack.push(o);
                }
            }
        }
        seen
    };
    // Whether the instruction `id` waits for one of `layer`'s, in the
    // forward or the backward.
    let waits_for = |id: InstrId, layer: i64, backward: bool| {
        let layer = scope::layer(layer);
        ancestors(id).into_iter().any(|a| {
            let name = &c.instr(a).metadata.op_name;
            scope::is_backward(name) == backward
                && name.split('/').any(|p| p == layer)
                && scope::gather_unit_of(name).is_none()
        })
    };
    let gather_of = |place: usize, backward: bool| {
        c.ids()
            .find(|&id| {
                let name = &c.instr(id).metadata.op_name;
                matches!(c.instr(id).op, Op::AllGather { .. })
                    && scope::gather_unit_of(name) == Some(place)
                    && scope::is_backward(name) == backward
            })
            .unwrap_or_else(|| panic!("unit {place}'s gather, backward {backward}"))
    };
    // Layer l is unit l + 1; the head, unit 5, follows layer 3.
    for l in 2..=4 {
        let g = gather_of(l as usize + 1, false);
        assert!(waits_for(g, l - 2, false), "layer {l}'s gather, forward");
        assert!(!waits_for(g, l - 1, false), "layer {l}'s gather, forward");
    }
    for l in 0..=1 {
        let g = gather_of(l as usize + 1, true);
        assert!(waits_for(g, l + 2, true), "layer {l}'s gather, backward");
        assert!(!waits_for(g, l + 1, true), "layer {l}'s gather, backward");
    }
}
