//! A pass pipeline's report as `hlatc opt` and `hlatc compile` print it:
//! one line per pass run, then the pipeline's notes.

use super::console::{millis, note};
use hlatc::passes::PipelineReport;
use hlatc::Error;

/// The per-pass lines and the notes, on standard error.
pub(super) fn print_report(report: &PipelineReport) -> Result<(), Error> {
    for r in &report.runs {
        note!(
            "{:indent$}{:<28} {:<9} {:>7} -> {:<7} instructions  {:.2} ms",
            "",
            r.leaf(),
            if r.changed { "changed" } else { "unchanged" },
            r.instructions_before,
            r.instructions_after,
            millis(r.time),
            indent = 2 * r.depth
        )?;
    }
    for n in &report.notes {
        note!("{n}")?;
    }
    Ok(())
}
