//! Generated modules that hlatc's verifier accepts never abort XLA CPU:
//! each one either compiles and runs, or comes back as an error. An abort
//! inside the plugin kills this test process, so the test passing is the
//! proof; the counts are printed for benches/README.md.
//!
//! By default it generates [`SAMPLED`] modules from seeds that move on
//! every day (`hlatc_filetest::sweep`, which prints them; `HLATC_SWEEP_SEED`
//! replays a day's), and [`FULL`] from seed 0 with `HLATC_FULL_SWEEP=1`.
//! `HLATC_FUZZ_MODULES` sets how many modules and `HLATC_FUZZ_SEED` the
//! first seed, either alone (the figure in benches/README.md is from a
//! 10,000-module run); `HLATC_FUZZ_TRACE` prints each module before it is compiled,
//! so the last one printed is the one an abort came from;
//! `HLATC_FUZZ_EMITTERS=legacy` compiles with XLA CPU's legacy emitters
//! instead of its default ones.

mod module_gen;

use hlatc_compiler::formats::text::print_module;
use hlatc_filetest::sweep::Sweep;
use hlatc_runtime::inputs::{random_literal, SplitMix64};
use hlatc_runtime::{Emitters, Runtime};
use std::collections::BTreeMap;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The kind of an XLA error, for the summary: its first words.
fn error_kind(message: &str) -> String {
    let m = message.split_once("): ").map_or(message, |(_, rest)| rest);
    let m = m.rsplit_once("': ").map_or(m, |(_, rest)| rest);
    m.split_whitespace().take(8).collect::<Vec<_>>().join(" ")
}

/// Modules a sampled sweep generates, and a full one.
const SAMPLED: u64 = 300;
const FULL: u64 = 1500;

#[test]
fn verified_modules_never_abort_xla_cpu() {
    let seeds = match (
        std::env::var("HLATC_FUZZ_MODULES").ok(),
        std::env::var("HLATC_FUZZ_SEED").ok(),
    ) {
        (None, None) => Sweep::from_env("fuzz_xla").seeds(SAMPLED, FULL, "module"),
        _ => {
            let first = env_u64("HLATC_FUZZ_SEED", 0);
            first..first + env_u64("HLATC_FUZZ_MODULES", FULL)
        }
    };
    let count = seeds.end - seeds.start;
    // XLA CPU's default emitters, the ones users run, whichever XLA_FLAGS
    // picks (scripts/test.sh picks the legacy ones, which a 10,000-module
    // run with HLATC_FUZZ_EMITTERS=legacy checks: docs/src/correctness.md).
    let emitters = match std::env::var("HLATC_FUZZ_EMITTERS").as_deref() {
        Ok("legacy") => Emitters::Legacy,
        _ => Emitters::Fusion,
    };
    let rt = Runtime::shared()
        .unwrap_or_else(|e| panic!("{e}"))
        .with_emitters(emitters);
    let (mut ran, mut compile_errors, mut run_errors, mut refused) = (0, 0, 0, 0);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut instructions = 0;
    for seed in seeds {
        let size = 1 + (seed % 12) as usize;
        let m = match module_gen::ModuleGen::new(seed).module(size) {
            Ok(m) => m,
            Err(e) => panic!("seed {seed}: the generator built a module the verifier refuses: {e}"),
        };
        instructions += m.instruction_count();
        // An abort takes the process down before any report: with
        // HLATC_FUZZ_TRACE set, each module is printed before XLA sees it.
        if std::env::var("HLATC_FUZZ_TRACE").is_ok() {
            eprintln!("seed {seed}:\n{}", print_module(&m));
        }
        let program = match rt.compile(&m) {
            Ok(p) => p,
            Err(hlatc_runtime::RuntimeError::Preflight { .. }) => {
                refused += 1;
                continue;
            }
            Err(e) => {
                compile_errors += 1;
                if std::env::var("HLATC_FUZZ_SHOW").is_ok() {
                    eprintln!("seed {seed}: {e}\n{}", print_module(&m));
                }
                *kinds.entry(error_kind(&e.to_string())).or_default() += 1;
                continue;
            }
        };
        let mut rng = SplitMix64::new(seed);
        let inputs: Vec<_> = program
            .parameters()
            .iter()
            .map(|(_, s)| random_literal(s.as_array().expect("array parameters"), &mut rng))
            .collect();
        match program.run(&inputs) {
            Ok(outputs) => {
                assert_eq!(outputs.len(), program.outputs().len(), "seed {seed}");
                ran += 1;
            }
            Err(e) => {
                run_errors += 1;
                if std::env::var("HLATC_FUZZ_SHOW").is_ok() {
                    eprintln!("seed {seed}: {e}\n{}", print_module(&m));
                }
                *kinds.entry(error_kind(&e.to_string())).or_default() += 1;
            }
        }
    }
    eprintln!(
        "{count} modules ({instructions} instructions): {ran} ran, {compile_errors} refused by XLA with an error, \
         {run_errors} failed to run with an error, {refused} refused by hlatc's XLA CPU preflight; \
         0 panics, 0 aborts"
    );
    for (k, n) in &kinds {
        eprintln!("  {n:>5}  {k}");
    }
    // Most modules must really run, or the generator tests nothing.
    assert!(
        ran * 2 > count as usize,
        "only {ran} of {count} modules ran"
    );
}
