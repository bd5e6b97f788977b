//! What mixed precision adds to compiling a training step, measured in
//! pairs: each round compiles the step in `fp32` and in `bf16-mixed`
//! (build, the `neuron` pipeline with core-attention remat, proto
//! emission), in alternating order, and the ratio of the two is taken per
//! round. On a shared machine the speed drifts between criterion's
//! benchmarks by more than the difference being measured; within a round
//! both compiles see the same machine, and alternating cancels what the
//! first compile leaves behind for the second.
//!
//! `cargo run --release --example amp_cost -- [ROUNDS] [hlat-7b|hlat-70b]`
//!
//! Prints the median, mean and quartiles of the per-round ratio, and the
//! same for building the graph alone, which is the same work in both
//! precisions: its ratio should sit near zero, and how far it strays is
//! how far the measurement can be trusted.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use hlatc::compiler::formats::proto;
use hlatc::models::{BatchShape, ModelConfig};
use hlatc::passes::{default_pipeline, CheckPolicy, RematPolicy, Target};
use hlatc::precision::Precision;
use hlatc::train_step::{build_train_step, optimize, StepConfig};
use std::hint::black_box;
use std::time::Instant;

/// Batch 1 x 4096, as the compile figures in benches/README.md are taken.
const BATCH: BatchShape = BatchShape {
    batch_size: 1,
    seq_len: 4096,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = match args.next().map(|s| s.parse()) {
        None => 100,
        Some(Ok(n)) if n >= 2 => n,
        Some(_) => {
            eprintln!("error: ROUNDS must be a whole number of at least 2");
            std::process::exit(2);
        }
    };
    let (name, model) = match args.next().as_deref() {
        None | Some("hlat-7b") => ("hlat-7b", ModelConfig::hlat_7b()),
        Some("hlat-70b") => ("hlat-70b", ModelConfig::hlat_70b()),
        Some(other) => {
            eprintln!("error: unknown model '{other}' (hlat-7b or hlat-70b)");
            std::process::exit(2);
        }
    };
    let precisions = [Precision::Fp32, Precision::Bf16Mixed];
    // The step `hlatc compile` builds: weights stored fused.
    let model = ModelConfig {
        fused_projections: true,
        ..model
    };
    let cfgs = precisions.map(|p| StepConfig::new(model.clone(), BATCH).with_precision(p));
    let mut pipeline = default_pipeline::<&str>(Target::Neuron, &[]).unwrap();
    pipeline.check_policy(CheckPolicy::End);
    // Seconds per precision this round: (build, whole compile).
    let compile = |cfg: &StepConfig| {
        let t0 = Instant::now();
        let mut step = build_train_step(black_box(cfg)).unwrap();
        let built = t0.elapsed().as_secs_f64();
        optimize(
            &mut step,
            &pipeline,
            Target::Neuron,
            RematPolicy::CoreAttention,
        )
        .unwrap();
        black_box(proto::encode_module(&step.module));
        drop(step);
        (built, t0.elapsed().as_secs_f64())
    };
    compile(&cfgs[0]);
    compile(&cfgs[1]);
    let (mut whole, mut build, mut fp32_ms, mut bf16_ms) = (vec![], vec![], 0.0, 0.0);
    for round in 0..rounds {
        let mut t = [(0.0, 0.0); 2];
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            t[k] = compile(&cfgs[k]);
        }
        build.push(t[1].0 / t[0].0);
        whole.push(t[1].1 / t[0].1);
        fp32_ms += t[0].1 * 1e3 / rounds as f64;
        bf16_ms += t[1].1 * 1e3 / rounds as f64;
    }
    println!("{name}, {rounds} rounds: fp32 {fp32_ms:.1} ms, bf16-mixed {bf16_ms:.1} ms (means)");
    println!(
        "bf16-mixed over fp32, whole compile: {}",
        summary(&mut whole)
    );
    println!(
        "same work in both (graph build):     {}",
        summary(&mut build)
    );
}

/// Median, mean and quartiles of ratios, as percentages over 1.
fn summary(ratios: &mut [f64]) -> String {
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let pct = |r: f64| format!("{:+.1}%", 100.0 * (r - 1.0));
    format!(
        "median {}, mean {}, quartiles {} .. {}",
        pct(ratios[n / 2]),
        pct(ratios.iter().sum::<f64>() / n as f64),
        pct(ratios[n / 4]),
        pct(ratios[3 * n / 4])
    )
}
