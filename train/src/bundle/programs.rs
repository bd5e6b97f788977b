//! What the bundles of several programs (gradient accumulation's pair, a
//! pipeline's four) share: a staging folder for the whole, and each
//! program's line in the top manifest.

use super::files::PROTO_FILE;
use super::staging::{io_error, BundleReport, StagedBundle};
use crate::train_step::TrainStep;
use crate::Error;
use serde::Serialize;
use std::path::Path;

/// One program of a bundle of several: its folder, module file, sha256
/// and size.
#[derive(Serialize)]
pub(super) struct ProgramInfo {
    name: &'static str,
    dir: &'static str,
    module: String,
    sha256: String,
    instructions: usize,
}

impl ProgramInfo {
    /// The program `step`, written to folder `dir` with report `r`.
    pub(super) fn of(
        name: &'static str,
        dir: &'static str,
        r: &BundleReport,
        step: &TrainStep,
    ) -> Self {
        ProgramInfo {
            name,
            dir,
            module: format!("{dir}/{PROTO_FILE}"),
            sha256: r.sha256.clone(),
            instructions: step.module.instruction_count(),
        }
    }
}

/// An empty staging folder beside `dir`, for a bundle of several programs
/// that [`StagedBundle::commit`] moves into place whole.
pub(super) fn staged_beside(dir: &Path) -> Result<StagedBundle, Error> {
    let staging = hlatc_runtime::atomic_file::temp_beside(dir, "staging");
    std::fs::create_dir(&staging).map_err(|e| io_error(&staging, e))?;
    Ok(StagedBundle {
        staging,
        dest: dir.to_path_buf(),
        report: BundleReport::default(),
        committed: false,
    })
}
