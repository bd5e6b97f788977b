//! What `remat` buys: the temporary memory XLA CPU's buffer assignment
//! plans for the compiled training step
//! (`PJRT_Executable_GetCompiledMemoryStats`), with each checkpointing
//! policy, on the tiny model and on a small one at sequence length 512.
//! The numbers themselves are checked against the unoptimized step in
//! `train/tests/it/passes_on_xla.rs`.

use crate::runs;
use hlatc_compiler::graph::scope;
use hlatc_compiler::Op;
use hlatc_models::{BatchShape, ModelConfig, Parallelism};
use hlatc_passes::{default_pipeline, RematPolicy, Target};
use hlatc_runtime::{CompiledMemoryStats, Runtime};
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::optimizer::AdamWConfig;
use hlatc_step::precision::Precision;
use hlatc_step::train_step::{build_train_step, optimize, StepConfig, TrainStep};

fn stats(
    rt: &Runtime,
    model: &ModelConfig,
    seq_len: i64,
    remat: RematPolicy,
) -> CompiledMemoryStats {
    let cfg = StepConfig {
        model: model.clone(),
        batch: BatchShape {
            batch_size: 1,
            seq_len,
        },
        optimizer: AdamWConfig::default(),
        precision: hlatc_step::precision::Precision::Fp32,
        packed: false,
        parallel: hlatc_models::Parallelism::SINGLE,
        spmd: Default::default(),
        fault: None,
        module_markers: false,
        kernels: Default::default(),
    };
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
    optimize(&mut step, &pipeline, Target::Cpu, remat).unwrap();
    // Under every policy, `none` included: autodiff's recomputations (the
    // SwiGLU and the norms) are put behind barriers.
    assert!(
        step.pass_report.fired("remat"),
        "{remat}: {:?}",
        step.pass_report.notes
    );
    rt.compile(&step.module).unwrap().memory_stats().unwrap()
}

fn temps(rt: &Runtime, model: &ModelConfig, seq_len: i64) -> [i64; 3] {
    let [none, core, full] = [
        RematPolicy::None,
        RematPolicy::CoreAttention,
        RematPolicy::FullLayer,
    ]
    .map(|p| stats(rt, model, seq_len, p));
    // Remat moves work, not state: the step's inputs and outputs are the
    // same buffers whatever the policy.
    for s in [&core, &full] {
        assert_eq!(
            (s.arguments, s.outputs, s.alias),
            (none.arguments, none.outputs, none.alias)
        );
    }
    let kib = |b: i64| b as f64 / 1024.0;
    println!(
        "S={seq_len} layers={} hidden={}: temp none {:.0} KiB, core-attention {:.0} KiB ({:+.1}%), full-layer {:.0} KiB ({:+.1}%)",
        model.num_hidden_layers,
        model.hidden_size,
        kib(none.temp),
        kib(core.temp),
        100.0 * (core.temp - none.temp) as f64 / none.temp as f64,
        kib(full.temp),
        100.0 * (full.temp - none.temp) as f64 / none.temp as f64,
    );
    [none.temp, core.temp, full.temp]
}

#[test]
fn core_attention_cuts_temporary_memory_by_a_third_at_seq_512() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let [none, core, full] = temps(&rt, &ModelConfig::small(), 512);
    assert!(
        (core as f64) <= 0.7 * none as f64,
        "core-attention: {core} bytes of temporaries against {none} without remat"
    );
    assert!(full < none, "full-layer: {full} against {none}");
}

/// At toy sizes the activations are tiny and what remat adds (the clones'
/// own buffers) is of the same order: core-attention grows the
/// temporaries by at most 1% and full-layer by at most 10%. Measured with
/// the legacy emitters `scripts/test.sh` runs: core-attention -1.4%,
/// full-layer -3.4% (+1.4% before autodiff's recomputations); with XLA's
/// default fusion emitters (a plain `cargo nextest run`): +0.2% and -1.8%.
#[test]
fn core_attention_does_not_grow_the_tiny_steps_temporaries() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let tiny = ModelConfig::tiny();
    let [none, core, full] = temps(&rt, &tiny, tiny.max_position_embeddings);
    assert!(
        core <= none + none / 100,
        "core-attention: {core} against {none}"
    );
    assert!(
        full <= none + none / 10,
        "full-layer: {full} against {none}"
    );
}

/// TP 2 x DP 2 with sequence parallelism and ZeRO-1.
const SEQUENCE_PARALLEL: Parallelism = Parallelism {
    tp: 2,
    dp: 2,
    sequence_parallel: true,
    zero1: true,
    pp: 1,
    ..Parallelism::SINGLE
};

/// The [`SEQUENCE_PARALLEL`] step as its pipeline leaves it under `remat`.
fn sequence_parallel_step(remat: RematPolicy) -> TrainStep {
    let par = SEQUENCE_PARALLEL;
    let cfg = runs::step_config(runs::gqa_odd_vocab(), par, Precision::Fp32);
    let mut step = build_train_step(&cfg).unwrap();
    let pipeline = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
    optimize(&mut step, &pipeline, Target::Cpu, remat).unwrap();
    step
}

/// The sequence-parallel all-gathers of the forward pass (`lm_head` and
/// two per layer), and how many of them a backward instruction reads.
fn forward_gathers(step: &TrainStep) -> (usize, usize) {
    let c = step.module.entry();
    let gathers: Vec<_> = c
        .ids()
        .filter(|&id| {
            let i = c.instr(id);
            matches!(i.op, Op::AllGather { .. })
                && i.metadata.op_name.contains(scope::SEQUENCE_GATHER)
                && !scope::is_backward(&i.metadata.op_name)
        })
        .collect();
    let read_by_backward = gathers
        .iter()
        .filter(|&&g| {
            c.users(g)
                .into_iter()
                .any(|u| scope::is_backward(&c.instr(u).metadata.op_name))
        })
        .count();
    (gathers.len(), read_by_backward)
}

/// Under sequence parallelism a rank keeps its run of the sequence and
/// gathers the full sequence again in the backward pass, under every
/// policy (autodiff recomputes the gather; `none` no longer keeps it): no
/// gathered value stays alive from the forward pass to the backward one.
/// Core-attention keeps less than `none`, and full-layer, which
/// recomputes whole layers, collectives included, less still.
#[test]
fn sequence_parallel_remat_keeps_each_ranks_run_and_gathers_again() {
    let gathers = 2 * runs::gqa_odd_vocab().num_hidden_layers as usize + 1;
    let mut previous = u64::MAX;
    // `stage` is a pipeline's alone (a step without stages refuses it).
    let policies = [
        RematPolicy::None,
        RematPolicy::CoreAttention,
        RematPolicy::FullLayer,
    ];
    for remat in policies {
        let step = sequence_parallel_step(remat);
        assert_eq!(forward_gathers(&step), (gathers, 0), "{remat}");
        let notes = step.pass_report.notes.join("\n");
        assert!(!notes.contains("left as is"), "{remat}: {notes}");
        let kept = MemoryPlan::of(&step).activations;
        assert!(
            kept < previous,
            "{remat}: {kept} bytes kept, {previous} before"
        );
        previous = kept;
    }
}

/// Recomputing the gathers (and under full-layer every collective of a
/// layer) computes what the step computes unoptimized: three steps on four
/// XLA CPU devices agree as a sharded step agrees with one device.
#[test]
fn sequence_parallel_remat_computes_the_unoptimized_step() {
    let par = SEQUENCE_PARALLEL;
    let cfg = runs::step_config(runs::gqa_odd_vocab(), par, runs::EQUAL_IN);
    let reference = runs::run(&cfg);
    for remat in [RematPolicy::CoreAttention, RematPolicy::FullLayer] {
        let optimized = runs::run_with(&cfg, |rt, cfg, params| {
            crate::cpu_trainers::optimized(rt, cfg, remat, params)
        });
        let diffs = runs::differences(&reference, &optimized, runs::F64_RTOL);
        assert!(diffs.is_empty(), "{remat}: {}", diffs.join("; "));
    }
}
