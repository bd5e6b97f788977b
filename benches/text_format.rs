//! Throughput of the HLO text and proto formats on a real JAX dump of a full
//! Llama-7B training step (32 layers, forward + backward + AdamW, ~18k
//! instructions, 1.36 MB of text; `tools/jax_llama_step.py --preset 7b`).

/// The allocator the `hlatc` binary uses, so the figures are what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use hlatc::{proto, text, verify};

fn load() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/data/jax_llama_7b_step.hlo"
    );
    std::fs::read_to_string(p).expect("benches/data/jax_llama_7b_step.hlo")
}

fn bench(c: &mut Criterion) {
    let src = load();
    let module = text::parse_module(&src).unwrap();
    verify(&module).unwrap();
    let printed = text::print_module(&module);
    let bytes = proto::encode_module(&module);

    let mut g = c.benchmark_group("llama7b_step");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(src.len() as u64));
    g.bench_function("parse_text", |b| {
        b.iter(|| text::parse_module(black_box(&src)).unwrap())
    });
    g.throughput(Throughput::Bytes(printed.len() as u64));
    g.bench_function("print_text", |b| {
        b.iter(|| text::print_module(black_box(&module)))
    });
    g.bench_function("verify", |b| b.iter(|| verify(black_box(&module)).unwrap()));
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("encode_proto", |b| {
        b.iter(|| proto::encode_module(black_box(&module)))
    });
    g.bench_function("decode_proto", |b| {
        b.iter(|| proto::decode_module(black_box(&bytes)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
