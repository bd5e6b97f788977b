//! Ahead-of-time compile time of the full training steps (forward graph,
//! autodiff, AdamW with clipping and schedule, HloModuleProto emission) for
//! HLAT-7B and HLAT-70B at batch 1 x 4096 (weights stored fused, as
//! `hlatc compile` stores them), without and with the neuron target's
//! default pass pipeline and core-attention remat (verified once, after the pipeline, as a
//! release `hlatc compile` does), and sharded as HLAT ran them (7B at TP 8,
//! 70B at TP 32, both with sequence parallelism).

/// The allocator the `hlatc` binary uses, so the figures are what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hlatc::compiler::formats::proto;
use hlatc::models::{BatchShape, ModelConfig, Parallelism};
use hlatc::passes::{default_pipeline, CheckPolicy, Pipeline, RematPolicy, Target};
use hlatc::pipeline::{build_pipeline_steps, PipelineForm};
use hlatc::precision::Precision;
use hlatc::train_step::{build_train_step, optimize, StepConfig, TrainStep};
use std::time::{Duration, Instant};

/// Batch 1 x 4096, as the compile figures in benches/README.md are taken.
const BATCH: BatchShape = BatchShape {
    batch_size: 1,
    seq_len: 4096,
};

/// `step` through `pipeline` (the `neuron` one) with core-attention remat,
/// as `hlatc compile` runs it.
fn for_neuron(mut step: TrainStep, pipeline: &Pipeline) -> TrainStep {
    optimize(
        &mut step,
        pipeline,
        Target::Neuron,
        RematPolicy::CoreAttention,
    )
    .unwrap();
    step
}

/// The step `hlatc compile` builds: weights stored fused.
fn step_config(model: ModelConfig) -> StepConfig {
    let model = ModelConfig {
        fused_projections: true,
        ..model
    };
    StepConfig::new(model, BATCH).with_precision(Precision::Fp32)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile_train_step");
    g.sample_size(20);
    for (name, model) in [
        ("hlat-7b", ModelConfig::hlat_7b()),
        ("hlat-70b", ModelConfig::hlat_70b()),
    ] {
        let cfg = step_config(model.clone());
        g.bench_function(format!("{name}/graph+autodiff+optimizer+emit"), |b| {
            b.iter(|| {
                let step = build_train_step(black_box(&cfg)).unwrap();
                proto::encode_module(&step.module)
            })
        });
        let mut pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
        pipeline.check_policy(CheckPolicy::End);
        // fp32 (amp has nothing to do) and bf16-mixed, the default: the
        // difference is what mixed precision costs the compile. Each
        // iteration compiles both, in alternating order, and counts its
        // own: run one after the other, a drift of the machine between
        // the two benchmarks (seen at 10-40% on shared VMs) would pass
        // for a difference between the precisions.
        let precisions = [Precision::Fp32, Precision::Bf16Mixed];
        let cfgs = precisions.map(|p| step_config(model.clone()).with_precision(p));
        let compile = |cfg: &StepConfig| {
            let step = for_neuron(build_train_step(black_box(cfg)).unwrap(), &pipeline);
            proto::encode_module(&step.module)
        };
        alternating(
            &mut g,
            precisions.map(|p| format!("{name}/graph+autodiff+optimizer+passes+emit/{p}")),
            |k| compile(&cfgs[k]),
        );
        let step = build_train_step(&cfg).unwrap();
        g.bench_function(format!("{name}/emit_proto"), |b| {
            b.iter(|| proto::encode_module(black_box(&step.module)))
        });
        g.bench_function(format!("{name}/print_text"), |b| {
            b.iter(|| hlatc::text::print_module(black_box(&step.module)))
        });
        // HLAT's layout: one program for the ranks of TP 8 with sequence
        // parallelism (70B at TP 32, as its state needs).
        let tp = if name == "hlat-7b" { 8 } else { 32 };
        let sharded = StepConfig {
            parallel: Parallelism {
                tp,
                dp: 1,
                sequence_parallel: true,
                zero1: false,
                pp: 1,
                ..Parallelism::SINGLE
            },
            ..step_config(model.clone()).with_precision(Precision::Bf16Mixed)
        };
        g.bench_function(
            format!("{name}/tp{tp}-sp/graph+autodiff+optimizer+passes+emit/bf16-mixed"),
            |b| b.iter(|| compile(&sharded)),
        );
    }
    g.finish();
}

/// HLAT's 70B layout (TP 32 x PP 8 x DP 8 with sequence parallelism,
/// sequences of 4096, 128 micro-batches of one sequence, `bf16-master`,
/// ZeRO-1): its four programs built, through the `neuron` pipeline and
/// emitted, against the single-device 70B step alike, in alternating
/// order as the precisions above are.
fn bench_pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile_pipeline");
    g.sample_size(10);
    let mut pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    pipeline.check_policy(CheckPolicy::End);
    let batch = BatchShape {
        batch_size: 1024,
        seq_len: 4096,
    };
    let single =
        StepConfig::new(ModelConfig::hlat_70b(), batch).with_precision(Precision::Bf16Master);
    let layout = StepConfig {
        parallel: Parallelism {
            tp: 32,
            dp: 8,
            sequence_parallel: true,
            zero1: true,
            pp: 8,
            ..Parallelism::SINGLE
        },
        ..single.clone()
    };
    let run = |step: TrainStep| proto::encode_module(&for_neuron(step, &pipeline).module).len();
    let compile = |k: usize| -> usize {
        match k {
            0 => run(build_train_step(black_box(&single)).unwrap()),
            _ => {
                let form = PipelineForm::for_target(Target::Neuron, RematPolicy::CoreAttention);
                let steps = build_pipeline_steps(black_box(&layout), 128, form).unwrap();
                let ticks: usize = steps.ticks.into_iter().map(run).sum();
                ticks + run(steps.apply)
            }
        }
    };
    alternating(
        &mut g,
        ["hlat-70b/one-device", "hlat-70b/tp32-pp8-dp8-sp-zero1"]
            .map(|n| format!("{n}/build+passes+emit/bf16-master")),
        compile,
    );
    g.finish();
}

/// Benchmarks two compiles (`compile(0)` and `compile(1)`) in alternating
/// order, each timing only its own runs, so that a slower minute of the
/// machine falls on both alike.
fn alternating<R>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    names: [String; 2],
    compile: impl Fn(usize) -> R,
) {
    for (mine, name) in names.into_iter().enumerate() {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut own = Duration::ZERO;
                for i in 0..iters {
                    for k in [i as usize % 2, 1 - i as usize % 2] {
                        let t = Instant::now();
                        black_box(compile(k));
                        if k == mine {
                            own += t.elapsed();
                        }
                    }
                }
                own
            })
        });
    }
}

/// HLAT's 70B layout for 2,048 ranks (TP 32 x DP 64 with sequence
/// parallelism, one sequence of 4096 per replica, `bf16-master`, ZeRO-1)
/// against the single-device 70B step: built, through the `neuron`
/// pipeline, emitted as proto and printed as text (each collective's
/// 2,048 replica ids in both), alternating as above. Issue 48 asks for
/// at most 1.2x.
fn bench_world(c: &mut Criterion) {
    let mut g = c.benchmark_group("compile_world");
    g.sample_size(10);
    let mut pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    pipeline.check_policy(CheckPolicy::End);
    let single =
        StepConfig::new(ModelConfig::hlat_70b(), BATCH).with_precision(Precision::Bf16Master);
    let layout = StepConfig {
        parallel: Parallelism {
            tp: 32,
            dp: 64,
            sequence_parallel: true,
            zero1: true,
            pp: 1,
            ..Parallelism::SINGLE
        },
        batch: BatchShape {
            batch_size: 64,
            seq_len: 4096,
        },
        ..single.clone()
    };
    let compile = |k: usize| -> usize {
        let cfg = if k == 0 { &single } else { &layout };
        let step = for_neuron(build_train_step(black_box(cfg)).unwrap(), &pipeline);
        proto::encode_module(&step.module).len()
            + hlatc::compiler::formats::text::print_module(&step.module).len()
    };
    alternating(
        &mut g,
        ["hlat-70b/one-device", "hlat-70b/tp32-dp64-sp-zero1"]
            .map(|n| format!("{n}/build+passes+emit+print/bf16-master")),
        compile,
    );
    g.finish();
}

criterion_group!(benches, bench, bench_pipeline, bench_world);
criterion_main!(benches);
