//! `--precision` and `--rounding`, shared by the commands that build or
//! optimize a step.

use hlatc::passes::RoundingPolicy;
use hlatc::precision::Precision;
use hlatc::train_step::TrainStep;

#[derive(clap::Args)]
pub(super) struct PrecisionArgs {
    /// Precision preset. bf16-mixed: bf16 compute (dots accumulate in f32;
    /// softmax, exp, log, reductions, norms, loss and the optimizer stay
    /// f32) over f32 weights and f32 Adam state. bf16-pure: the same
    /// compute over bf16 weights and Adam state, updated in f32 and stored
    /// back with stochastic rounding. bf16-master: bf16 weights for compute
    /// and communication, with an f32 master copy beside f32 Adam state
    /// (sharded over DP with --zero1); the weight is its master rounded to
    /// nearest. fp32: everything in f32. fp64:
    /// everything in f64, for checking against float64 references, not
    /// for training. The `amp`
    /// pass applies it; the manifest records every input's dtype
    #[arg(long, value_name = "PRESET", default_value = "bf16-mixed", value_parser = parse_precision)]
    pub precision: Precision,
    /// Which converts to bf16 round stochastically: state-updates (the
    /// default, except rne for bf16-master: the bf16 weight and Adam-state
    /// updates of bf16-pure), sr (every convert to bf16) or rne (none). On neuron the bundle turns on
    /// the runtime's stochastic rounding; on cpu it is lowered to plain HLO
    /// with its RNG state carried as an input and output
    #[arg(long, value_name = "POLICY", value_parser = parse_rounding)]
    pub rounding: Option<RoundingPolicy>,
}

impl PrecisionArgs {
    /// Gives `step` the rounding policy asked for (the preset's otherwise).
    pub fn apply(&self, step: &mut TrainStep) {
        if let Some(r) = &self.rounding {
            step.rounding = r.clone();
        }
    }
}

pub(super) fn parse_precision(s: &str) -> Result<Precision, String> {
    Precision::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
        format!("unknown precision '{s}' (known: {})", known.join(", "))
    })
}

pub(super) fn parse_rounding(s: &str) -> Result<RoundingPolicy, String> {
    RoundingPolicy::from_name(s).ok_or_else(|| {
        format!(
            "unknown rounding policy '{s}' (known: {})",
            RoundingPolicy::NAMES.join(", ")
        )
    })
}
