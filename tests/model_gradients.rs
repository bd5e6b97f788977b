//! The whole model's gradients: against central finite differences in f64
//! on XLA CPU, and against an independent JAX implementation in f32
//! (`tools/jax_reference.py`), for the tiny preset, a GQA config and a tied
//! config.

use hlatc::compiler::{ElementType, Literal};
use hlatc::models::{param_specs, BatchShape, ModelConfig};
use hlatc::runtime::{assert_close, read_safetensors, Runtime};
use hlatc::train_step::build_loss_and_grads;
use hlatc::trainer::params_from_tensors;
use std::path::{Path, PathBuf};

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/parity")
        .join(name)
}

fn rt() -> Runtime {
    Runtime::shared().unwrap_or_else(|e| panic!("{e}"))
}

const CONFIGS: [&str; 3] = ["tiny", "gqa", "tied"];

#[test]
fn loss_and_every_gradient_match_jax() {
    for name in CONFIGS {
        let dir = fixture_dir(name);
        let cfg = ModelConfig::from_hf_file(&dir.join("config.json")).unwrap();
        if name == "tiny" {
            assert_eq!(
                cfg,
                ModelConfig::tiny(),
                "the fixture must be the tiny preset"
            );
        }
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
        let module = build_loss_and_grads(&cfg, batch, ElementType::F32).unwrap();
        let out = rt().compile(&module).unwrap().run(&inputs).unwrap();
        let reference = read_safetensors(&dir.join("reference.safetensors")).unwrap();
        let loss = out[0].to_f64_vec()[0];
        let want = reference["loss"].to_f64_vec()[0];
        assert!(
            (loss - want).abs() <= 1e-4 * want.abs(),
            "{name}: loss {loss}, JAX {want}"
        );
        let specs = param_specs(&cfg);
        assert_eq!(out.len(), 1 + specs.len());
        let mut worst = 0f64;
        for (p, got) in specs.iter().zip(&out[1..]) {
            let e = &reference[&format!("grad.{}", p.name)];
            let scale = hlatc::runtime::max_abs(e);
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

/// Random f64 parameters: matrices uniform in +-0.17, norms 1 +- 0.17.
fn random_params(cfg: &ModelConfig, seed: u64) -> Vec<Literal> {
    let mut rng = hlatc::runtime::inputs::SplitMix64::new(seed);
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
