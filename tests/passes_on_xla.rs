//! Every pass keeps the program's meaning: the JAX Llama training step gives
//! the same numbers on XLA CPU with each pass on and off.

use hlatc::passes::{registry, PassManager};
use hlatc::runtime::{read_safetensors, Runtime};
use hlatc::Literal;
use std::path::Path;

fn fixture() -> (hlatc::Module, Vec<Literal>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jax");
    let m = hlatc::load_module(&dir.join("llama_tiny_step.hlo")).unwrap();
    let ins = read_safetensors(&dir.join("llama_tiny_step.inputs.safetensors")).unwrap();
    let inputs = (0..ins.len())
        .map(|i| ins[&format!("arg{i}")].clone())
        .collect();
    (m, inputs)
}

#[test]
fn each_pass_and_the_full_pipeline_keep_the_numbers() {
    let rt = Runtime::shared().unwrap_or_else(|e| panic!("{e}"));
    let (module, inputs) = fixture();
    let reference = rt.compile(&module).unwrap().run(&inputs).unwrap();
    let mut pipelines: Vec<Vec<&str>> = registry().iter().map(|p| vec![p.name]).collect();
    pipelines.push(registry().iter().map(|p| p.name).collect());
    for names in pipelines {
        let mut m = module.clone();
        let report = PassManager::from_names(&names)
            .unwrap()
            .run(&mut m)
            .unwrap();
        let got = rt.compile(&m).unwrap().run(&inputs).unwrap();
        assert_eq!(got.len(), reference.len());
        for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
            // Merging identical computations must not move a single bit.
            assert_eq!(g, r, "{names:?} changed output {i}");
        }
        eprintln!(
            "{names:?}: {} -> {} instructions",
            module.instruction_count(),
            m.instruction_count()
        );
        if names.contains(&"cse") {
            assert!(
                report.changed(),
                "JAX's dump has duplicate broadcasts and constants for cse to merge"
            );
        }
    }
}

#[test]
fn unknown_pass_names_are_errors_that_list_the_known_ones() {
    let e = PassManager::from_names(&["dce", "fuse-everything"])
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "unknown pass 'fuse-everything' (known passes: cse, dce)"
    );
}
