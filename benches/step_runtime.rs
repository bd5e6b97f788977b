//! Step time on XLA CPU of the training step as built against the same
//! step through the `cpu` default pipeline, without remat and with
//! core-attention remat, side by side: what the passes cost or buy at run
//! time. The tiny model at 2 x 16 tokens, and a small one (4 layers,
//! d 128, 8 heads over 4) at 1 x 512.

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

criterion_group!(benches, bench);
criterion_main!(benches);
