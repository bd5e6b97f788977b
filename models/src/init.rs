//! Deterministic initialization of a model's parameters on the host.

use crate::config::ModelConfig;
use crate::params::{param_specs, Init};
use hlatc_compiler::util::split_mix::SplitMix64;
use hlatc_compiler::{ElementType, Literal, Scalar};

/// SplitMix64 stream with Box-Muller normals: platform-independent, so a
/// seed names the same weights everywhere.
struct Normal {
    stream: SplitMix64,
    spare: Option<f64>,
}

impl Normal {
    fn uniform(&mut self) -> f64 {
        // (0, 1]: never 0, so the logarithm below is finite.
        ((self.stream.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn sample(&mut self) -> f64 {
        if let Some(s) = self.spare.take() {
            return s;
        }
        let (u, v) = (self.uniform(), self.uniform());
        let r = (-2.0 * u.ln()).sqrt();
        let t = 2.0 * std::f64::consts::PI * v;
        self.spare = Some(r * t.sin());
        r * t.cos()
    }
}

/// Every parameter, initialized HLAT's way: normal(0, `initializer_range`,
/// 0.02 unless the config says), output projections normal(0,
/// `initializer_range` / sqrt(2 * layers)), norms one, biases zero.
///
/// Drawn in the Hugging Face layout and then stored as `cfg` stores them,
/// so a seed gives the same model whether its projections are fused or not.
/// (Experts are drawn stacked, which draws each expert's tensor in turn.)
pub fn init_params(cfg: &ModelConfig, ty: ElementType, seed: u64) -> Vec<(String, Literal)> {
    let hf_cfg = crate::layout::hugging_face_config(cfg);
    let drawn = hugging_face_params(&hf_cfg, ty, seed);
    if param_specs(cfg).iter().all(|p| p.parts.is_empty()) {
        return drawn;
    }
    let mut by_name: std::collections::BTreeMap<_, _> = drawn.into_iter().collect();
    if cfg.moe.is_some() {
        // Stacked experts are drawn stacked, and joined from their
        // checkpoint tensors.
        by_name = crate::layout::split(&hf_cfg, &by_name)
            .expect("the tensors drawn are the Hugging Face view's")
            .into_iter()
            .collect();
    }
    crate::layout::join(cfg, &mut by_name).expect("the Hugging Face tensors of the same model")
}

fn hugging_face_params(cfg: &ModelConfig, ty: ElementType, seed: u64) -> Vec<(String, Literal)> {
    let mut rng = Normal {
        stream: SplitMix64::new(seed),
        spare: None,
    };
    param_specs(cfg)
        .into_iter()
        .map(|p| {
            let n = p.dims.iter().product::<i64>() as usize;
            let values: Vec<Scalar> = match p.init {
                Init::Ones => vec![Scalar::Float(1.0); n],
                Init::Zeros => vec![Scalar::Float(0.0); n],
                Init::Normal(std) => (0..n).map(|_| Scalar::Float(std * rng.sample())).collect(),
            };
            let lit = Literal::from_scalars(ty, p.dims.clone(), &values)
                .expect("floats fit any float type");
            (p.name, lit)
        })
        .collect()
}
