//! The optimizer in the graph: global grad-norm clipping, a cosine learning
//! rate schedule with linear warmup computed from the step counter, and
//! AdamW with bias correction and decoupled weight decay.

use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::ir::computation::InstrId;
use hlatc_compiler::ir::op::{BinaryOp, ComparisonDirection, UnaryOp};
use hlatc_compiler::ir::shape::ElementType;
use serde::{Deserialize, Serialize};

/// Added to the grad norm before dividing the clip threshold by it, so a
/// zero gradient scales by a finite number (as `torch.nn.utils.clip_grad_norm_`).
pub const CLIP_EPSILON: f64 = 1e-6;

/// AdamW and schedule hyperparameters. The defaults are HLAT's recipe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay, applied to every parameter (norms included).
    pub weight_decay: f64,
    /// Global gradient-norm clip; `None` disables clipping.
    pub clip_norm: Option<f64>,
    pub max_lr: f64,
    pub min_lr: f64,
    pub warmup_steps: i64,
    /// Steps from the start to the end of the cosine decay; after that the
    /// rate stays at `min_lr`.
    pub total_steps: i64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            clip_norm: Some(1.0),
            max_lr: 3e-4,
            min_lr: 3e-5,
            warmup_steps: 2000,
            total_steps: 100_000,
        }
    }
}

impl AdamWConfig {
    /// Checks the values; errors name the field.
    pub fn validate(&self) -> Result<(), OptimizerConfigError> {
        use AdamWField as F;
        use OptimizerConfigError as E;
        let unit = |field, value: f64| {
            if (0.0..1.0).contains(&value) {
                Ok(())
            } else {
                Err(E::NotAFraction { field, value })
            }
        };
        unit(F::Beta1, self.beta1)?;
        unit(F::Beta2, self.beta2)?;
        for (field, value) in [
            (F::Eps, self.eps),
            (F::WeightDecay, self.weight_decay),
            (F::MaxLr, self.max_lr),
            (F::MinLr, self.min_lr),
            (F::ClipNorm, self.clip_norm.unwrap_or(1.0)),
        ] {
            if !value.is_finite() {
                return Err(E::NotFinite { field, value });
            }
        }
        // `is_nan() ||` keeps NaN out: it fails every comparison.
        if self.eps.is_nan() || self.eps <= 0.0 {
            return Err(E::NotPositive {
                field: F::Eps,
                value: self.eps,
            });
        }
        if self.weight_decay.is_nan() || self.weight_decay < 0.0 {
            return Err(E::NegativeWeightDecay(self.weight_decay));
        }
        if let Some(c) = self.clip_norm {
            if c.is_nan() || c <= 0.0 {
                return Err(E::NotPositive {
                    field: F::ClipNorm,
                    value: c,
                });
            }
        }
        if !(self.max_lr > 0.0 && self.min_lr >= 0.0 && self.min_lr <= self.max_lr) {
            return Err(E::LearningRates {
                min_lr: self.min_lr,
                max_lr: self.max_lr,
            });
        }
        if self.warmup_steps < 0 || self.total_steps < 1 {
            return Err(E::Steps {
                warmup_steps: self.warmup_steps,
                total_steps: self.total_steps,
            });
        }
        Ok(())
    }

    /// The learning rate after `step` completed steps, computed on the host
    /// exactly as the graph computes it (for tests and logs).
    pub fn learning_rate(&self, step: i64) -> f64 {
        let t = (step + 1) as f64;
        let warm = self.warmup_steps.max(1) as f64;
        if t <= self.warmup_steps as f64 {
            return self.max_lr * t / warm;
        }
        let span = (self.total_steps - self.warmup_steps).max(1) as f64;
        let progress = ((t - self.warmup_steps as f64) / span).clamp(0.0, 1.0);
        self.min_lr
            + 0.5 * (self.max_lr - self.min_lr) * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// A field of [`AdamWConfig`], by a typed name: what an
/// [`OptimizerConfigError`] is about, which front ends name by their own
/// spelling of the option that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdamWField {
    Beta1,
    Beta2,
    Eps,
    WeightDecay,
    ClipNorm,
    MaxLr,
    MinLr,
    WarmupSteps,
    TotalSteps,
}

impl AdamWField {
    /// The field's name in [`AdamWConfig`] (and in a bundle's manifest).
    pub fn name(self) -> &'static str {
        match self {
            AdamWField::Beta1 => "beta1",
            AdamWField::Beta2 => "beta2",
            AdamWField::Eps => "eps",
            AdamWField::WeightDecay => "weight_decay",
            AdamWField::ClipNorm => "clip_norm",
            AdamWField::MaxLr => "max_lr",
            AdamWField::MinLr => "min_lr",
            AdamWField::WarmupSteps => "warmup_steps",
            AdamWField::TotalSteps => "total_steps",
        }
    }
}

impl std::fmt::Display for AdamWField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An [`AdamWConfig`] value out of range; the message names the field.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OptimizerConfigError {
    /// A beta outside `[0, 1)`: the moments would not decay.
    #[error("{field} must be in [0, 1), got {value}")]
    NotAFraction { field: AdamWField, value: f64 },
    /// An infinite or NaN value, which would poison every update.
    #[error("{field} must be a finite number, got {value}")]
    NotFinite { field: AdamWField, value: f64 },
    /// `eps` or a clip threshold at or below zero.
    #[error("{field} must be positive, got {value}")]
    NotPositive { field: AdamWField, value: f64 },
    /// Negative decay, which would grow the weights.
    #[error("weight_decay must be non-negative, got {0}")]
    NegativeWeightDecay(f64),
    /// A schedule that would not go from `max_lr` down to `min_lr`.
    #[error(
        "learning rates need 0 <= min_lr <= max_lr and max_lr > 0, got min {min_lr} max {max_lr}"
    )]
    LearningRates { min_lr: f64, max_lr: f64 },
    /// A negative warmup, or a schedule of no steps.
    #[error(
        "warmup_steps must be >= 0 and total_steps >= 1, got {warmup_steps} and {total_steps}"
    )]
    Steps { warmup_steps: i64, total_steps: i64 },
}

impl OptimizerConfigError {
    /// The field at fault: of two that disagree, the one out of its own
    /// range (`max_lr` not positive, a negative warmup), else the second.
    /// (Values that are not finite were refused before these comparisons.)
    pub fn field(&self) -> AdamWField {
        use OptimizerConfigError as E;
        match self {
            E::NotAFraction { field, .. }
            | E::NotFinite { field, .. }
            | E::NotPositive { field, .. } => *field,
            E::NegativeWeightDecay(_) => AdamWField::WeightDecay,
            E::LearningRates { max_lr, .. } if *max_lr <= 0.0 => AdamWField::MaxLr,
            E::LearningRates { .. } => AdamWField::MinLr,
            E::Steps { warmup_steps, .. } if *warmup_steps < 0 => AdamWField::WarmupSteps,
            E::Steps { .. } => AdamWField::TotalSteps,
        }
    }

    /// What is wrong with [`Self::field`]'s value, without naming it:
    /// `must be in [0, 1)`.
    pub fn problem(&self) -> String {
        use OptimizerConfigError as E;
        match self {
            E::NotAFraction { .. } => "must be in [0, 1)".into(),
            E::NotFinite { .. } => "must be a finite number".into(),
            E::NotPositive { .. } => "must be positive".into(),
            E::NegativeWeightDecay(_) => "must be 0 or more".into(),
            E::LearningRates { max_lr, .. } if *max_lr <= 0.0 => "must be positive".into(),
            E::LearningRates { min_lr, .. } if *min_lr < 0.0 => "must be 0 or more".into(),
            E::LearningRates { max_lr, .. } => {
                format!("must not exceed the peak learning rate ({max_lr})")
            }
            E::Steps { warmup_steps, .. } if *warmup_steps < 0 => "must be 0 or more".into(),
            E::Steps { .. } => "must be at least 1".into(),
        }
    }
}

/// The optimizer's results, as instructions.
/// What one AdamW update reads: each parameter with its gradient and
/// moments (in the same order), and the completed-step counter.
#[derive(Clone, Copy)]
pub struct AdamWInputs<'a> {
    pub params: &'a [InstrId],
    pub grads: &'a [InstrId],
    pub m: &'a [InstrId],
    pub v: &'a [InstrId],
    pub step: InstrId,
}

pub struct AdamWOutputs {
    pub learning_rate: InstrId,
    /// The global norm before clipping.
    pub grad_norm: InstrId,
    pub params: Vec<InstrId>,
    pub m: Vec<InstrId>,
    pub v: Vec<InstrId>,
    pub step: InstrId,
}

/// Appends one AdamW step. `step` is the s32 count of completed steps.
pub fn adamw(
    b: &mut Builder,
    cfg: &AdamWConfig,
    state: AdamWInputs,
    norm_squared: &NormSquared<'_>,
) -> Result<AdamWOutputs, BuildError> {
    let AdamWInputs {
        params,
        grads,
        m,
        v,
        step,
    } = state;
    let ty = b.ty(params[0]);
    b.push_scope(hlatc_compiler::graph::scope::OPTIMIZER);
    b.push_scope("schedule");
    let one_s32 = b.scalar(ElementType::S32, 1.0);
    let next_step = b.add2(step, one_s32)?;
    let t = b.convert(next_step, ty)?;
    let lr = schedule(b, cfg, t, ty)?;
    b.pop_scope();

    // Global norm over every gradient.
    b.push_scope("grad_norm");
    let total = norm_squared(b, grads)?;
    let norm = b.unary(UnaryOp::Sqrt, total)?;
    let clip_scale = match cfg.clip_norm {
        Some(c) => {
            let eps = b.scalar(ty, CLIP_EPSILON);
            let denom = b.add2(norm, eps)?;
            let c = b.scalar(ty, c);
            let ratio = b.div(c, denom)?;
            let one = b.scalar(ty, 1.0);
            Some(b.binary(BinaryOp::Minimum, ratio, one)?)
        }
        None => None,
    };
    b.pop_scope();

    // Bias corrections 1 - beta^t and the step size, shared by all tensors.
    b.push_scope("bias_correction");
    let bias = |b: &mut Builder, beta: f64| -> Result<InstrId, BuildError> {
        let beta = b.scalar(ty, beta);
        let pw = b.binary(BinaryOp::Power, beta, t)?;
        let one = b.scalar(ty, 1.0);
        b.sub(one, pw)
    };
    let bc1 = bias(b, cfg.beta1)?;
    let bc2 = bias(b, cfg.beta2)?;
    let decay = b.scalar(ty, cfg.weight_decay);

    let mut out = AdamWOutputs {
        learning_rate: lr,
        grad_norm: norm,
        params: Vec::with_capacity(params.len()),
        m: Vec::with_capacity(params.len()),
        v: Vec::with_capacity(params.len()),
        step: next_step,
    };
    b.pop_scope();
    for k in 0..params.len() {
        let (p, g) = (params[k], grads[k]);
        // A parameter's name is a valid scope component unless it has a '/'.
        let scope = b.computation().instr(p).name.replace('/', ".");
        b.push_scope(&scope);
        let dims = b.dims(p);
        let bcast = |b: &mut Builder, s: InstrId| b.broadcast(s, &dims, &[]);
        let g = match clip_scale {
            Some(s) => {
                let sb = bcast(b, s)?;
                b.mul(g, sb)?
            }
            None => g,
        };
        let m1 = b.scale(m[k], cfg.beta1)?;
        let gm = b.scale(g, 1.0 - cfg.beta1)?;
        let m_new = b.add2(m1, gm)?;
        let g2 = b.mul(g, g)?;
        let v1 = b.scale(v[k], cfg.beta2)?;
        let gv = b.scale(g2, 1.0 - cfg.beta2)?;
        let v_new = b.add2(v1, gv)?;
        let bc1b = bcast(b, bc1)?;
        let bc2b = bcast(b, bc2)?;
        let m_hat = b.div(m_new, bc1b)?;
        let v_hat = b.div(v_new, bc2b)?;
        let root = b.unary(UnaryOp::Sqrt, v_hat)?;
        let eps = b.full_like(root, cfg.eps)?;
        let denom = b.add2(root, eps)?;
        let adam = b.div(m_hat, denom)?;
        let db = bcast(b, decay)?;
        let wd = b.mul(db, p)?;
        let upd = b.add2(adam, wd)?;
        let lrb = bcast(b, lr)?;
        let delta = b.mul(lrb, upd)?;
        let p_new = b.sub(p, delta)?;
        out.params.push(p_new);
        out.m.push(m_new);
        out.v.push(v_new);
        b.pop_scope();
    }
    b.pop_scope();
    Ok(out)
}

/// Linear warmup to `max_lr`, then cosine decay to `min_lr` at `total_steps`.
/// How the squared global gradient norm is computed from the gradients
/// the step holds: [`sum_of_squares`] on one device; a sharded step counts
/// each parameter once across ranks.
pub type NormSquared<'a> = dyn Fn(&mut Builder, &[InstrId]) -> Result<InstrId, BuildError> + 'a;

/// The sum of every gradient's squares.
pub fn sum_of_squares(b: &mut Builder, grads: &[InstrId]) -> Result<InstrId, BuildError> {
    let mut squares = Vec::with_capacity(grads.len());
    for &g in grads {
        let sq = b.mul(g, g)?;
        let all: Vec<i64> = (0..b.dims(g).len() as i64).collect();
        squares.push(b.reduce_sum(sq, &all)?);
    }
    b.sum_of(squares, ElementType::F32)
}

fn schedule(
    b: &mut Builder,
    cfg: &AdamWConfig,
    t: InstrId,
    ty: ElementType,
) -> Result<InstrId, BuildError> {
    let k = |b: &mut Builder, v: f64| b.scalar(ty, v);
    let warm_den = k(b, cfg.warmup_steps.max(1) as f64);
    let max_lr = k(b, cfg.max_lr);
    let frac = b.div(t, warm_den)?;
    let warm = b.mul(max_lr, frac)?;
    let warmup = k(b, cfg.warmup_steps as f64);
    let since = b.sub(t, warmup)?;
    let span = k(b, (cfg.total_steps - cfg.warmup_steps).max(1) as f64);
    let progress = b.div(since, span)?;
    let (zero, one) = (k(b, 0.0), k(b, 1.0));
    let progress = b.add(hlatc_compiler::Op::Clamp, &[zero, progress, one], None)?;
    let pi = k(b, std::f64::consts::PI);
    let angle = b.mul(pi, progress)?;
    let c = b.unary(UnaryOp::Cos, angle)?;
    let one2 = k(b, 1.0);
    let c1 = b.add2(c, one2)?;
    let half_range = k(b, 0.5 * (cfg.max_lr - cfg.min_lr));
    let cos_part = b.mul(half_range, c1)?;
    let min_lr = k(b, cfg.min_lr);
    let decayed = b.add2(min_lr, cos_part)?;
    let in_warmup = b.compare(t, warmup, ComparisonDirection::Le)?;
    b.select(in_warmup, warm, decayed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_schedule_warms_up_then_decays() {
        let c = AdamWConfig::default();
        assert!((c.learning_rate(0) - 3e-4 / 2000.0).abs() < 1e-15);
        assert!((c.learning_rate(1999) - 3e-4).abs() < 1e-15);
        assert!((c.learning_rate(99_999) - 3e-5).abs() < 1e-12);
        assert!((c.learning_rate(1_000_000) - 3e-5).abs() < 1e-12);
        let mid = c.learning_rate(2000 + 49_000 - 1);
        assert!((mid - (3e-5 + 0.5 * 2.7e-4)).abs() < 1e-9, "{mid}");
    }

    #[test]
    fn bad_values_are_named() {
        let c = AdamWConfig {
            beta2: 1.0,
            ..Default::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "beta2 must be in [0, 1), got 1"
        );
    }
}
