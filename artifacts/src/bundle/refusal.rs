//! The message of a Neuron refusal, on its own so that [`crate::Error`]
//! can format it without importing the bundle writer that raises it.

use hlatc_passes::neuron_check::{Chip, LocatedFinding};
use std::path::Path;

/// The message of [`crate::Error::NeuronRefused`].
pub(crate) fn refusal_message(dir: &Path, chip: Chip, findings: &[LocatedFinding]) -> String {
    let mut s = format!(
        "neuronx-cc --target={chip} would refuse this module, so nothing was written to {}:",
        dir.display()
    );
    // The first refusals are what to fix; a type used throughout (f64)
    // would otherwise list every instruction.
    const SHOWN: usize = 8;
    for f in findings.iter().take(SHOWN) {
        s.push_str(&format!("\n  {f}"));
    }
    if findings.len() > SHOWN {
        s.push_str(&format!("\n  ... and {} more", findings.len() - SHOWN));
    }
    s
}
