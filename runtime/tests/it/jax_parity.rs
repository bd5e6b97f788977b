//! A real JAX dump of a small Llama training step (forward, backward, AdamW),
//! imported as text and run on XLA CPU through hlatc, gives the outputs JAX
//! itself computed for the same inputs. Fixture: `tools/jax_llama_step.py`.

use crate::common;
use hlatc_compiler::{formats::proto, formats::text, Literal};
use hlatc_runtime::{assert_close, read_safetensors};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/jax")
        .join(name)
}

fn ordered(map: &BTreeMap<String, Literal>, prefix: &str) -> Vec<Literal> {
    (0..map.len())
        .map(|i| map[&format!("{prefix}{i}")].clone())
        .collect()
}

/// f32 outputs agree to 1e-5 relative to each output's largest magnitude
/// (elementwise, so a tiny Adam moment cannot hide behind a large one).
fn check_outputs(got: &[Literal], expected: &[Literal]) {
    assert_eq!(got.len(), expected.len());
    for (i, (g, e)) in got.iter().zip(expected).enumerate() {
        let scale = hlatc_runtime::max_abs(e);
        assert_close(e, g, 1e-5, 1e-5 * scale).unwrap_or_else(|m| panic!("output {i}: {m}"));
    }
}

#[test]
fn jax_llama_step_matches_jax_on_xla_cpu() {
    let hlo = std::fs::read_to_string(fixture("llama_tiny_step.hlo")).unwrap();
    let module = text::parse_module(&hlo).unwrap();
    let inputs = ordered(
        &read_safetensors(&fixture("llama_tiny_step.inputs.safetensors")).unwrap(),
        "arg",
    );
    let expected = ordered(
        &read_safetensors(&fixture("llama_tiny_step.outputs.safetensors")).unwrap(),
        "out",
    );
    assert_eq!((inputs.len(), expected.len()), (66, 64));
    let program = common::runtime().compile(&module).unwrap();
    let got = program.run(&inputs).unwrap();
    check_outputs(&got, &expected);
    // The loss JAX printed when it wrote the fixture.
    assert!((got[0].to_f64_vec()[0] - 4.576290).abs() < 1e-5);

    // The same after a trip through our printer and through the proto.
    let reprinted = text::parse_module(&text::print_module(&module)).unwrap();
    let decoded = proto::decode_module(&proto::encode_module(&reprinted)).unwrap();
    let got2 = common::runtime()
        .compile(&decoded)
        .unwrap()
        .run(&inputs)
        .unwrap();
    assert_eq!(got, got2, "round trips must not change a single bit");
}
