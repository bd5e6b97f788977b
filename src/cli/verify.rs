//! `compile --verify`: prints what was checked.

use hlatc::train_step::{StepConfig, TrainStep};
use hlatc::Error;
use std::path::Path;

pub fn verify_bundle(dir: &Path, step: &TrainStep, cfg: &StepConfig) -> Result<(), Error> {
    let report = hlatc::check::verify_bundle(dir, step, cfg)?;
    println!("verified:");
    for l in report.lines {
        println!("  {l}");
    }
    Ok(())
}
