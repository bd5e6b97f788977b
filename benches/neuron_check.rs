//! The Neuron pre-flight (`hlatc::passes::neuron_check`) on the steps
//! `hlatc compile --target neuron` checks before writing a bundle: HLAT-7B
//! and HLAT-70B at batch 1 x 4096, `bf16-mixed` (the default), through
//! the `neuron` pipeline with core-attention remat; and on the JAX dump of
//! a Llama-7B step. Only the check is timed; the steps are built once.

/// The allocator the `hlatc` binary uses, so the figures are what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use hlatc::compile_step::{compile_step, CompileOptions, ModelSource};
use hlatc::passes::neuron_check::{check_module, Chip, Sdk};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("neuron_check");
    g.sample_size(50);
    for name in ["hlat-7b", "hlat-70b"] {
        // What `hlatc compile --model NAME` builds (batch 1 x 4096,
        // bf16-mixed, the neuron pipeline, core-attention remat).
        let options = CompileOptions {
            model: ModelSource::Preset(name.into()),
            ..CompileOptions::default()
        };
        let compiled = compile_step(&options).unwrap();
        let step = compiled.programs.main();
        g.bench_function(format!("{name}/bf16-mixed/trn1"), |b| {
            b.iter(|| check_module(black_box(&step.module), Chip::Trn1, Sdk::V2_32))
        });
    }
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/data/jax_llama_7b_step.hlo"),
    )
    .unwrap();
    let jax = hlatc::text::parse_module(&text).unwrap();
    g.bench_function("jax-llama-7b-dump/trn1", |b| {
        b.iter(|| check_module(black_box(&jax), Chip::Trn1, Sdk::V2_32))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
