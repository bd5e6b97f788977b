//! Rotary position embeddings: the inverse frequencies of each rotated pair,
//! with the scalings `transformers` implements (`ROPE_INIT_FUNCTIONS` in
//! `modeling_rope_utils.py`), computed the same way so checkpoints trained
//! with them see the same angles.

use serde::{Deserialize, Serialize};

/// How the base frequencies are rescaled for a longer context.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "snake_case")]
pub enum RopeScaling {
    /// Position interpolation: every frequency divided by `factor`.
    Linear { factor: f64 },
    /// Dynamic NTK: the base grows with the sequence length once it passes
    /// `max_position_embeddings` ([`RopeScaling::theta_for`]); below that
    /// it is the unscaled rotation.
    Dynamic { factor: f64 },
    /// Llama 3.1's piecewise scaling: long wavelengths divided by `factor`,
    /// short ones kept, the band between smoothly interpolated.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: i64,
    },
}

impl RopeScaling {
    /// Its `rope_type` in a `config.json`.
    pub fn name(&self) -> &'static str {
        match self {
            RopeScaling::Linear { .. } => "linear",
            RopeScaling::Dynamic { .. } => "dynamic",
            RopeScaling::Llama3 { .. } => "llama3",
        }
    }

    /// Whether the rotation depends on the sequence length, so that a
    /// sequence longer than `max_position_embeddings` has a defined
    /// meaning (only dynamic NTK's does).
    pub fn scales_with_length(&self) -> bool {
        matches!(self, RopeScaling::Dynamic { .. })
    }

    /// The base a sequence of `seq_len` positions rotates with, as
    /// `transformers` computes it for dynamic NTK: unchanged up to
    /// `max_position_embeddings`, then `theta * (factor * seq_len / max -
    /// (factor - 1)) ^ (head_dim / (head_dim - 2))`. Every other scaling
    /// keeps `theta`.
    pub fn theta_for(&self, theta: f64, head_dim: i64, seq_len: i64, max_positions: i64) -> f64 {
        match *self {
            RopeScaling::Dynamic { factor } if seq_len > max_positions => {
                let dim = head_dim as f64;
                let growth = factor * seq_len as f64 / max_positions as f64 - (factor - 1.0);
                theta * growth.powf(dim / (dim - 2.0))
            }
            _ => theta,
        }
    }

    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<(), RopeScalingError> {
        let positive = |name: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(RopeScalingError::NotPositive { name, value })
            }
        };
        match *self {
            RopeScaling::Linear { factor } | RopeScaling::Dynamic { factor } => {
                positive("factor", factor)
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => {
                positive("factor", factor)?;
                positive("low_freq_factor", low_freq_factor)?;
                positive("high_freq_factor", high_freq_factor)?;
                if high_freq_factor <= low_freq_factor {
                    return Err(RopeScalingError::BandInverted {
                        low_freq_factor,
                        high_freq_factor,
                    });
                }
                if original_max_position_embeddings <= 0 {
                    return Err(RopeScalingError::OriginalLength {
                        original_max_position_embeddings,
                    });
                }
                Ok(())
            }
        }
    }
}

/// A RoPE scaling parameter out of range; the message names it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RopeScalingError {
    /// A factor that is zero, negative or not finite.
    #[error("{name} must be a positive number, got {value}")]
    NotPositive { name: &'static str, value: f64 },
    /// Llama 3's band between the two frequency factors is empty.
    #[error(
        "high_freq_factor ({high_freq_factor}) must exceed low_freq_factor ({low_freq_factor})"
    )]
    BandInverted {
        low_freq_factor: f64,
        high_freq_factor: f64,
    },
    /// Llama 3's pre-scaling context length is not positive.
    #[error(
        "original_max_position_embeddings must be positive, got {original_max_position_embeddings}"
    )]
    OriginalLength {
        original_max_position_embeddings: i64,
    },
}

/// The `head_dim / 2` inverse frequencies, as `transformers` computes them
/// (in f32: `1 / theta^(2i / head_dim)`, then the scaling).
pub fn inverse_frequencies(theta: f64, head_dim: i64, scaling: Option<&RopeScaling>) -> Vec<f64> {
    let base: Vec<f32> = (0..head_dim / 2)
        .map(|i| 1.0 / (theta as f32).powf((2 * i) as f32 / head_dim as f32))
        .collect();
    let scaled: Vec<f32> = match scaling {
        None | Some(RopeScaling::Dynamic { .. }) => base,
        Some(RopeScaling::Linear { factor }) => base.iter().map(|f| f / *factor as f32).collect(),
        Some(&RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        }) => {
            let (factor, low, high) = (
                factor as f32,
                low_freq_factor as f32,
                high_freq_factor as f32,
            );
            let old = original_max_position_embeddings as f32;
            let (low_wavelen, high_wavelen) = (old / low, old / high);
            base.iter()
                .map(|&f| {
                    let wavelen = 2.0 * std::f32::consts::PI / f;
                    if wavelen > low_wavelen {
                        f / factor
                    } else if wavelen < high_wavelen {
                        f
                    } else {
                        let smooth = (old / wavelen - low) / (high - low);
                        (1.0 - smooth) * f / factor + smooth * f
                    }
                })
                .collect()
        }
    };
    scaled.into_iter().map(f64::from).collect()
}
