//! `compile --verify`: prints what was checked.

use super::console::out;
use hlatc::train_step::{StepConfig, TrainStep};
use hlatc::Error;
use std::path::Path;

pub fn verify_bundle(dir: &Path, step: &TrainStep, cfg: &StepConfig) -> Result<(), Error> {
    let report = hlatc::check::verify_bundle(dir, step, cfg)?;
    out!("verified:")?;
    for l in report.lines {
        out!("  {l}")?;
    }
    Ok(())
}
