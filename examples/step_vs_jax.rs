//! hlatc's training step for the `small` model (4 layers, d 128, 8 heads
//! over 4, batch 1 x 512, projections fused as `hlatc compile` stores them,
//! the `cpu` default pipeline) against JAX's step for the same model
//! (`benches/data/jax_small_step_*.hlo`), in `fp32` and `bf16-mixed`, on the
//! same PJRT plugin in one process.
//!
//! `cargo run --release --example step_vs_jax -- [ROUNDS] [SIDE...]`
//!
//! Prints XLA CPU's temporary bytes for each compiled step
//! (`PJRT_Executable_GetCompiledMemoryStats`), then runs ROUNDS rounds
//! (default 20; 0 prints the memory alone). A round runs one step of each
//! side, in an order that rotates from round to round, so drift on a
//! shared machine falls on all sides alike; the report is each side's
//! median step time and the median of the per-round ratios to JAX's.
//! SIDEs (`fp32/hlatc`, `bf16-mixed/hlatc core-attention remat`,
//! `fp32/hlatc without orient-dots` (the pass' own effect),
//! `bf16-mixed/jax`, ...) keep only those programs, for a profile of one
//! (`perf record -p`): the other programs are then not even compiled.
//! Run XLA at its normal optimization level: leave `XLA_FLAGS` unset (the
//! tests' `--xla_backend_optimization_level=0` would measure another
//! compiler).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../benches/common/step_vs_jax.rs"]
mod step_vs_jax;

use hlatc::passes::RematPolicy;
use hlatc::precision::Precision;
use hlatc::runtime::Runtime;
use std::time::Instant;
use step_vs_jax::{hlatc, jax, Side, PRECISIONS};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n % 2 {
        1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn main() {
    let rounds: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 20,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("error: ROUNDS must be a whole number");
            std::process::exit(2);
        }
    };
    let only: Vec<String> = std::env::args().skip(2).collect();
    let wanted = |precision: Precision, side: &str| {
        only.is_empty() || only.iter().any(|o| *o == format!("{precision}/{side}"))
    };
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    println!(
        "XLA_FLAGS={}",
        std::env::var("XLA_FLAGS").unwrap_or_else(|_| "(unset)".into())
    );
    for (precision, suffix) in PRECISIONS {
        let mut sides: Vec<(&str, Side)> = Vec::new();
        for (name, remat, disabled) in [
            ("hlatc", Some(RematPolicy::None), &[][..]),
            (
                "hlatc without orient-dots",
                Some(RematPolicy::None),
                &["orient-dots"][..],
            ),
            (
                "hlatc core-attention remat",
                Some(RematPolicy::CoreAttention),
                &[][..],
            ),
            ("jax", None, &[][..]),
        ] {
            if !wanted(precision, name) {
                continue;
            }
            sides.push((
                name,
                match remat {
                    Some(remat) => hlatc(&rt, precision, remat, disabled),
                    None => jax(&rt, suffix),
                },
            ));
        }
        if sides.is_empty() {
            continue;
        }
        // Ratios are to JAX's step where it runs, else to the first side's.
        let reference = sides.iter().position(|(n, _)| *n == "jax").unwrap_or(0);
        let (reference_name, reference_temp) =
            (sides[reference].0, sides[reference].1.temp_bytes());
        for (name, side) in &sides {
            let m = side.memory();
            println!(
                "{precision} {name}: temp {} bytes ({:.2} MB, {:.3}x {reference_name}'s), arguments {}, outputs {}, alias {}",
                m.temp,
                m.temp as f64 / 1e6,
                m.temp as f64 / reference_temp as f64,
                m.arguments,
                m.outputs,
                m.alias
            );
        }
        if rounds == 0 {
            continue;
        }
        // One step each first: anything done once per program is not timed.
        for (_, s) in sides.iter_mut() {
            s.step();
        }
        let mut times = vec![Vec::with_capacity(rounds); sides.len()];
        for r in 0..rounds {
            for k in 0..sides.len() {
                let i = (r + k) % sides.len();
                let t = Instant::now();
                std::hint::black_box(sides[i].1.step());
                times[i].push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let reference_times = &times[reference];
        for (i, (name, _)) in sides.iter().enumerate() {
            let ratios = times[i]
                .iter()
                .zip(reference_times)
                .map(|(a, b)| a / b)
                .collect();
            println!(
                "{precision} {name}: median {:.2} ms over {rounds} steps, {:.3}x {reference_name}'s (median per-round ratio)",
                median(times[i].clone()),
                median(ratios)
            );
        }
    }
}
