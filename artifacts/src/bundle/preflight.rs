//! The Neuron pre-flight of a bundle's module, run before anything is
//! written: a module neuronx-cc would refuse is never written.

use super::files::TEXT_FILE;
use super::neuron::NeuronCompile;
use crate::Error;
use hlatc_passes::neuron_check::{self, CheckReport};
use hlatc_step::train_step::TrainStep;
use std::path::Path;
use std::time::{Duration, Instant};

/// What the Neuron pre-flight found in a bundle's module, and how long it
/// took.
pub struct Preflight {
    /// How the bundle is compiled: the flags the check judged under.
    pub compile: NeuronCompile,
    pub report: CheckReport,
    /// Each finding as a line, located in the bundle's text file.
    pub lines: Vec<String>,
    /// The check itself (not the locating of its findings in the text).
    pub time: Duration,
}

/// Runs the Neuron pre-flight on a bundle's module for its `compile`'s
/// chip, under the integer flags it pins:
/// its refusals are an error, so a bundle neuronx-cc would refuse is never
/// written. `text` is the module's text as the bundle holds it, where the
/// findings are located.
pub(super) fn preflight(
    step: &TrainStep,
    compile: NeuronCompile,
    text: &str,
    dir: &Path,
) -> Result<Preflight, Error> {
    let t0 = Instant::now();
    let chip = compile.chip;
    // The step's memory plan, checked against --device-memory, decides
    // whether it fits.
    let report = neuron_check::check_planned_step(&step.module, chip, compile.integer);
    let time = t0.elapsed();
    // Only findings about instructions need the text read for positions.
    let positions = report
        .names_instructions()
        .then(|| hlatc_compiler::formats::text::instruction_positions(text).ok())
        .flatten();
    let located = |f: &neuron_check::Finding| f.located(TEXT_FILE, positions.as_ref());
    if report.refused() {
        return Err(Error::NeuronRefused {
            dir: dir.to_path_buf(),
            chip,
            findings: report.refusals().map(located).collect(),
        });
    }
    let lines = report
        .findings
        .iter()
        .map(|f| located(f).to_string())
        .collect();
    Ok(Preflight {
        compile,
        report,
        lines,
        time,
    })
}
