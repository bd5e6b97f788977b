//! `hlatc plan`'s unit of work: one layout of HLAT-70B on 32 trn1 nodes
//! (TP 32 x PP 4 x DP 8, SP, ZeRO-1, core-attention, `bf16-master`, global
//! batch 1024 x 4096), compiled and read as the search reads it (two- and
//! three-layer stages) and as the printed layouts are read (the whole
//! programs), then priced. A search is a few hundred of the first and
//! `--top` of the second, on every core.

/// The allocator the `hlatc` binary uses, so the figures are what it does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{criterion_group, criterion_main, Criterion};
use hlatc::models::ModelConfig;
use hlatc::passes::neuron_check::Chip;
use hlatc::plan::cost::features;
use hlatc::plan::evaluate::{evaluate, Fidelity};
use hlatc::plan::{calibration::builtin_params, Assumptions, Instance, Layout};
use hlatc::precision::Precision;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan");
    g.sample_size(10);
    let cfg = ModelConfig::hlat_70b();
    let plain = hlatc::models::KernelRequest::plain(hlatc::models::KernelPoint::Attention);
    let layout = Layout::parse(
        "tp=32,pp=4,dp=8,sp,zero1",
        1024,
        Instance::Trn1.chip(),
        Precision::Bf16Master,
        plain,
    )
    .unwrap();
    let hw = Instance::Trn1.hardware();
    for (name, fidelity) in [
        ("extrapolated", Fidelity::Extrapolated),
        ("exact", Fidelity::Exact),
    ] {
        g.bench_function(format!("hlat-70b/tp32-pp4-dp8/{name}"), |b| {
            b.iter(|| {
                let e = evaluate(
                    &cfg,
                    "hlat-70b",
                    4096,
                    1024,
                    &layout,
                    32,
                    Chip::Trn1,
                    fidelity,
                )
                .unwrap();
                features(&e.work, &hw, &Assumptions::default())
                    .breakdown(&builtin_params())
                    .total()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
