//! The whole model's gradients: against central finite differences in f64
//! on XLA CPU, and against an independent JAX implementation in f32
//! (`tools/jax_reference.py`), for the tiny preset, a GQA config and a tied
//! config.

use hlatc_artifacts::rank_checkpoint::params_from_tensors;
use hlatc_compiler::formats::text::print_module;
use hlatc_compiler::{ElementType, Literal, Module};
use hlatc_models::{param_specs, BatchShape, ModelConfig};
use hlatc_passes::{default_pipeline, pipeline_from_names, PassContext, Pipeline, Target};
use hlatc_runtime::{assert_close, read_safetensors, Runtime};
use hlatc_step::precision::Precision;
use hlatc_step::train_step::build_loss_and_grads;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/parity")
        .join(name)
}

fn rt() -> Runtime {
    Runtime::shared().unwrap_or_else(|e| panic!("{e}"))
}

const CONFIGS: [&str; 3] = ["tiny", "gqa", "tied"];

/// One parity case: its config, the step's inputs (parameters, tokens,
/// targets) and the JAX references by policy file name.
struct Case {
    name: &'static str,
    cfg: ModelConfig,
    batch: BatchShape,
    inputs: Vec<Literal>,
}

impl Case {
    fn load(name: &'static str) -> Case {
        let dir = fixture_dir(name);
        let cfg = ModelConfig::from_hf_file(&dir.join("config.json")).unwrap();
        let batch_t = read_safetensors(&dir.join("batch.safetensors")).unwrap();
        let tokens = batch_t["tokens"].clone();
        let batch = BatchShape {
            batch_size: tokens.dims()[0],
            seq_len: tokens.dims()[1],
        };
        let (mut inputs, unused) = params_from_tensors(
            &cfg,
            ElementType::F32,
            read_safetensors(&dir.join("weights.safetensors")).unwrap(),
            name,
        )
        .unwrap();
        assert!(unused.is_empty());
        inputs.push(tokens);
        inputs.push(batch_t["targets"].clone());
        Case {
            name,
            cfg,
            batch,
            inputs,
        }
    }

    fn reference(&self, file: &str) -> BTreeMap<String, Literal> {
        read_safetensors(&fixture_dir(self.name).join(file)).unwrap()
    }

    /// The loss and every gradient of `module` on this case's inputs.
    fn run(&self, module: &Module) -> Vec<Literal> {
        let out = rt().compile(module).unwrap().run(&self.inputs).unwrap();
        assert_eq!(out.len(), 1 + param_specs(&self.cfg).len());
        out
    }
}

#[test]
fn loss_and_every_gradient_match_jax() {
    for name in CONFIGS {
        let case = Case::load(name);
        if name == "tiny" {
            assert_eq!(
                case.cfg,
                ModelConfig::tiny(),
                "the fixture must be the tiny preset"
            );
        }
        let module = build_loss_and_grads(&case.cfg, case.batch, ElementType::F32).unwrap();
        let out = case.run(&module);
        let reference = case.reference("reference.safetensors");
        let loss = out[0].to_f64_vec()[0];
        let want = reference["loss"].to_f64_vec()[0];
        assert!(
            (loss - want).abs() <= 1e-4 * want.abs(),
            "{name}: loss {loss}, JAX {want}"
        );
        let mut worst = 0f64;
        for (p, got) in param_specs(&case.cfg).iter().zip(&out[1..]) {
            let e = &reference[&format!("grad.{}", p.name)];
            let scale = hlatc_runtime::max_abs(e);
            assert!(scale > 0.0, "{name}: JAX's gradient of {} is zero", p.name);
            let stats = assert_close(e, got, 1e-4, 1e-4 * scale)
                .unwrap_or_else(|m| panic!("{name}: grad of {}: {m}", p.name));
            worst = worst.max(stats.max_abs / scale);
        }
        eprintln!(
            "{name}: loss relative error {:.1e}, worst gradient error {worst:.1e} of the tensor's largest magnitude",
            (loss - want).abs() / want
        );
    }
}

/// `||a - b|| / ||b||` over every element.
fn relative_l2(a: &Literal, b: &Literal) -> f64 {
    let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.len(), b.len());
    let diff: f64 = a.iter().zip(&b).map(|(x, y)| (x - y) * (x - y)).sum();
    let norm: f64 = b.iter().map(|y| y * y).sum();
    (diff / norm).sqrt()
}

/// bf16 keeps 8 significant bits: one rounding is off by at most
/// u = 2^-9 of the value.
const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 512.0;

/// hlatc's bf16-mixed loss-and-gradients program against JAX under the same
/// policy, written independently (`Bf16Mixed` in `tools/jax_reference.py`),
/// after `pipeline` with the bf16-mixed cast policy. Returns, over all
/// gradients, the relative L2 distance to JAX bf16-mixed and bf16's own
/// effect (JAX bf16-mixed against JAX fp32); asserts the loss and each
/// gradient.
fn bf16_mixed_against_jax(
    case: &Case,
    (label, pipeline): (&str, &Pipeline),
    per_tensor_us: f64,
) -> (f64, f64) {
    let name = case.name;
    let mut module = build_loss_and_grads(&case.cfg, case.batch, ElementType::F32).unwrap();
    let mut ctx = PassContext::new(Target::Cpu);
    ctx.cast = Precision::Bf16Mixed.cast_policy();
    pipeline.run_module(&mut module, &mut ctx).unwrap();
    assert!(
        print_module(&module).contains("bf16["),
        "{name}: the pipeline cast nothing"
    );
    let out = case.run(&module);
    let jax_low = case.reference("reference_bf16_mixed.safetensors");
    let jax_f32 = case.reference("reference.safetensors");

    // The forward rounds the same values at the same places: the losses
    // agree to f32 reassociation, far inside bf16's effect on the loss.
    let loss = out[0].to_f64_vec()[0];
    let want = jax_low["loss"].to_f64_vec()[0];
    let loss_effect = (want - jax_f32["loss"].to_f64_vec()[0]).abs();
    assert!(
        (loss - want).abs() <= 1e-6 * want.abs() && loss_effect >= 1e-4 * want.abs(),
        "{name}: loss {loss}, JAX bf16-mixed {want}, JAX fp32 is {loss_effect:.1e} away"
    );

    let (mut to_jax, mut effect) = (0f64, 0f64);
    for (p, got) in param_specs(&case.cfg).iter().zip(&out[1..]) {
        let key = format!("grad.{}", p.name);
        let d = relative_l2(got, &jax_low[&key]);
        let e = relative_l2(&jax_low[&key], &jax_f32[&key]);
        assert!(
            d <= per_tensor_us * BF16_UNIT_ROUNDOFF,
            "{name}: grad of {} is {d:.2e} (relative L2) from JAX bf16-mixed; bf16's effect is {e:.2e}",
            p.name
        );
        to_jax += d * d;
        effect += e * e;
    }
    let (to_jax, effect) = (to_jax.sqrt(), effect.sqrt());
    eprintln!(
        "{name} ({}): loss {loss:.6} (JAX bf16-mixed {want:.6}, fp32 {:.6}); gradients {to_jax:.2e} from JAX bf16-mixed, bf16's effect {effect:.2e}",
        label,
        jax_f32["loss"].to_f64_vec()[0]
    );
    (to_jax, effect)
}

/// The forward agrees with JAX to f32 reassociation: both round the
/// weights, the dot operands and the bf16 elementwise ops (rotary, score
/// scale and mask, SiLU and the gate product) identically.
///
/// Gradients agree exactly in the last layer and the head. Below the first
/// attention backward they part where the two order the backward of a bf16
/// op differently: hlatc runs the backward of a bf16 elementwise op whose
/// cotangent arrives in f32 (the score scale behind the f32 softmax, the
/// rotary of k behind the f32 KV-group sum) in f32 with its constant
/// unrounded, JAX in the forward's bf16. Each such op moves an element by
/// at most u = 2^-9, and a gradient sums a handful of them: each tensor
/// stays within 6u with `amp` alone, and the distance over all gradients
/// well inside bf16's own effect (measured 0.27 to 0.37 of it). A policy slip (a softmax, norm or loss in bf16, a dot
/// without f32 accumulation, an unrounded dot operand) moves hlatc by
/// about the whole effect or more: fp32 itself is at 1.0.
///
/// The default pipeline runs `coalesce-linear` before `amp`: q/k/v (and
/// gate/up) become one dot, so their input gradients meet in its f32
/// accumulator instead of in bf16 adds, a little further from JAX's
/// separate projections (measured 0.34 to 0.52 of the effect).
#[test]
fn bf16_mixed_loss_and_gradients_match_jax_under_the_same_policy() {
    let amp = pipeline_from_names("amp", &["amp"]).unwrap();
    let default = default_pipeline::<&str>(Target::Cpu, &[]).unwrap();
    for name in CONFIGS {
        let case = Case::load(name);
        let (d, e) = bf16_mixed_against_jax(&case, ("amp", &amp), 6.0);
        assert!(
            d <= 0.45 * e,
            "{name}: amp puts hlatc {d:.2e} from JAX bf16-mixed, not well inside bf16's effect {e:.2e}"
        );
        let (d, e) = bf16_mixed_against_jax(&case, ("default cpu pipeline", &default), 8.0);
        assert!(
            d <= 0.6 * e,
            "{name}: the default pipeline puts hlatc {d:.2e} from JAX bf16-mixed, against bf16's effect {e:.2e}"
        );
    }
}

/// Random f64 parameters: matrices uniform in +-0.17, norms 1 +- 0.17.
fn random_params(cfg: &ModelConfig, seed: u64) -> Vec<Literal> {
    let mut rng = hlatc_runtime::inputs::SplitMix64::new(seed);
    param_specs(cfg)
        .iter()
        .map(|p| {
            let n = p.dims.iter().product::<i64>() as usize;
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    let u = rng.next_f64() * 2.0 - 1.0;
                    if p.dims.len() == 1 {
                        1.0 + 0.17 * u
                    } else {
                        0.17 * u
                    }
                })
                .collect();
            Literal::from_f64(p.dims.clone(), &v).unwrap()
        })
        .collect()
}

#[test]
fn whole_model_gradients_match_finite_differences() {
    for name in CONFIGS {
        let cfg = ModelConfig::from_hf_file(&fixture_dir(name).join("config.json")).unwrap();
        let batch = BatchShape {
            batch_size: 2,
            seq_len: 5,
        };
        let module = build_loss_and_grads(&cfg, batch, ElementType::F64).unwrap();
        let program = rt().compile(&module).unwrap();
        let mut inputs = random_params(&cfg, 7);
        let n_params = inputs.len();
        let toks: Vec<i32> = (0..10)
            .map(|i| (i * 7 + 3) % cfg.vocab_size as i32)
            .collect();
        let tgts: Vec<i32> = (0..10)
            .map(|i| (i * 5 + 1) % cfg.vocab_size as i32)
            .collect();
        inputs.push(Literal::from_s32(vec![2, 5], &toks).unwrap());
        inputs.push(Literal::from_s32(vec![2, 5], &tgts).unwrap());
        let out = program.run(&inputs).unwrap();
        let loss_at = |inputs: &[Literal]| program.run(inputs).unwrap()[0].to_f64_vec()[0];
        let eps = 1e-5;
        let mut checked = 0;
        for k in 0..n_params {
            let x = inputs[k].to_f64_vec();
            let grad = out[1 + k].to_f64_vec();
            // Three elements per tensor, spread over it (the first, a
            // middle one, the last): every parameter's rule chain is hit.
            for j in [0, x.len() / 2, x.len() - 1] {
                let mut plus = inputs.clone();
                let mut minus = inputs.clone();
                let mut xp = x.clone();
                xp[j] += eps;
                plus[k] = Literal::from_f64(inputs[k].dims().to_vec(), &xp).unwrap();
                xp[j] -= 2.0 * eps;
                minus[k] = Literal::from_f64(inputs[k].dims().to_vec(), &xp).unwrap();
                let fd = (loss_at(&plus) - loss_at(&minus)) / (2.0 * eps);
                assert!(
                    (grad[j] - fd).abs() <= 1e-6 * fd.abs().max(1e-2),
                    "{name}: parameter {k} ({}) element {j}: autodiff {}, finite differences {fd}",
                    param_specs(&cfg)[k].name,
                    grad[j]
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 3 * n_params);
    }
}
