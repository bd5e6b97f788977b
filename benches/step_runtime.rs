//! Step time on XLA CPU of the training step as built against the same
//! step through the `cpu` default pipeline, without remat and with
//! core-attention remat, side by side: what the passes cost or buy at run
//! time. The tiny model at 2 x 16 tokens, and a small one (4 layers,
//! d 128, 8 heads over 4) at 1 x 512.
//!
//! `step_vs_jax`: the small step as `hlatc compile --target cpu` builds it
//! (projections fused, the `cpu` default pipeline, no remat as JAX's has
//! none) against JAX's own step for the same model
//! (`benches/data/jax_small_step_*.hlo`, `tools/jax_step_bench.py`), in
//! `fp32` and `bf16-mixed`, on the same PJRT plugin, the two sides one
//! step each in turn in every iteration batch. It prints each step's XLA
//! CPU temporaries first. Run with `XLA_FLAGS` unset (XLA at its normal
//! optimization level); `cargo run --release --example step_vs_jax` gives
//! the per-round ratio.

#[path = "common/step_vs_jax.rs"]
mod step_vs_jax;

/// The allocator the `hlatc` binary uses, so the figures are what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use hlatc::compiler::ElementType;
use hlatc::data::SyntheticData;
use hlatc::models::{init::init_params, BatchShape, ModelConfig};
use hlatc::passes::{default_pipeline, RematPolicy, Target};
use hlatc::runtime::Runtime;
use hlatc::train_step::{build_train_step, optimize, StepConfig};
use hlatc::trainer::Trainer;

fn bench(c: &mut Criterion) {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let mut g = c.benchmark_group("train_step_on_xla_cpu");
    g.sample_size(20);
    for (name, model, batch) in [
        (
            "tiny",
            ModelConfig::tiny(),
            BatchShape {
                batch_size: 2,
                seq_len: 16,
            },
        ),
        (
            "small-s512",
            ModelConfig::small(),
            BatchShape {
                batch_size: 1,
                seq_len: 512,
            },
        ),
    ] {
        let cfg = StepConfig::new(model, batch).with_precision(hlatc::precision::Precision::Fp32);
        let data = SyntheticData::permutation(cfg.model.vocab_size, 0);
        let b0 = data.batch(0, batch.batch_size, batch.seq_len);
        let params: Vec<_> = init_params(&cfg.model, ElementType::F32, 0)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        for (label, passes) in [
            ("as built", None),
            ("default passes", Some(RematPolicy::None)),
            (
                "default passes + core-attention remat",
                Some(RematPolicy::CoreAttention),
            ),
        ] {
            let mut step = build_train_step(&cfg).unwrap();
            if let Some(remat) = passes {
                let p = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
                optimize(&mut step, &p, Target::Cpu, remat).unwrap();
            }
            let program = rt.compile(&step.module).unwrap();
            let mut trainer = Trainer::with_program(program, &cfg, &step, params.clone()).unwrap();
            g.bench_function(format!("{name}/{label}"), |b| {
                b.iter(|| trainer.step(&b0).unwrap())
            });
        }
    }
    g.finish();
}

/// hlatc's small step against JAX's. Each sample of one side runs a step
/// of the other between its own timed steps, so the two alternate step by
/// step and drift on a shared machine falls on both alike.
fn versus_jax(c: &mut Criterion) {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let mut g = c.benchmark_group("step_vs_jax");
    g.sample_size(10);
    for (precision, suffix) in step_vs_jax::PRECISIONS {
        let mut ours = step_vs_jax::hlatc(&rt, precision, RematPolicy::None, &[]);
        let mut theirs = step_vs_jax::jax(&rt, suffix);
        println!(
            "{precision}: XLA CPU temporaries hlatc {} bytes, jax {} bytes",
            ours.temp_bytes(),
            theirs.temp_bytes()
        );
        for (side, first) in [("hlatc", true), ("jax", false)] {
            g.bench_function(format!("small-s512/{precision}/{side}"), |b| {
                b.iter_custom(|iters| {
                    let mut timed = std::time::Duration::ZERO;
                    for _ in 0..iters {
                        let (me, other) = match first {
                            true => (&mut ours, &mut theirs),
                            false => (&mut theirs, &mut ours),
                        };
                        let t = std::time::Instant::now();
                        std::hint::black_box(me.step());
                        timed += t.elapsed();
                        std::hint::black_box(other.step());
                    }
                    timed
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench, versus_jax);
criterion_main!(benches);
