//! What the bundles of several programs (gradient accumulation's pair, a
//! pipeline's four) share: a staging folder for the whole, and each
//! program's line in the top manifest.

use super::files::PROTO_FILE;
use super::staging::{io_error, BundleReport, StagedBundle};
use crate::Error;
use hlatc_step::pipeline::Phase;
use hlatc_step::train_step::TrainStep;
use serde::{Serialize, Serializer};
use std::path::Path;

/// A program of a bundle, named as its folder is: one spelling for the
/// manifests, `hlatc check`, Python and the docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProgramName {
    /// The one program of a bundle of one (no folder of its own).
    Step,
    /// Gradient accumulation's program run once per micro-batch.
    MicroStep,
    /// The update from accumulated gradients, under accumulation or a
    /// pipeline.
    ApplyStep,
    /// A pipeline's tick programs.
    WarmUp,
    Steady,
    CoolDown,
}

/// A name that is no program's; it lists the names there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown program '{given}' (known: {})", ProgramName::names().join(", "))]
pub struct UnknownProgram {
    pub given: String,
}

impl ProgramName {
    pub const ALL: [ProgramName; 6] = [
        ProgramName::Step,
        ProgramName::MicroStep,
        ProgramName::ApplyStep,
        ProgramName::WarmUp,
        ProgramName::Steady,
        ProgramName::CoolDown,
    ];
    /// Gradient accumulation's programs, in the order they run.
    pub const ACCUMULATION: [ProgramName; 2] = [ProgramName::MicroStep, ProgramName::ApplyStep];
    /// A pipeline's programs: the tick programs, then the apply step.
    pub const PIPELINE: [ProgramName; 4] = [
        ProgramName::WarmUp,
        ProgramName::Steady,
        ProgramName::CoolDown,
        ProgramName::ApplyStep,
    ];

    /// Its name, which is also its folder's in a bundle of several.
    pub const fn name(self) -> &'static str {
        match self {
            ProgramName::Step => "step",
            ProgramName::MicroStep => "micro_step",
            ProgramName::ApplyStep => "apply_step",
            ProgramName::WarmUp => Phase::WarmUp.name(),
            ProgramName::Steady => Phase::Steady.name(),
            ProgramName::CoolDown => Phase::CoolDown.name(),
        }
    }

    /// Every name, in [`ProgramName::ALL`]'s order.
    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|p| p.name()).collect()
    }

    /// The program named `name`.
    pub fn from_name(name: &str) -> Result<ProgramName, UnknownProgram> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownProgram {
                given: name.to_string(),
            })
    }

    /// The program a manifest's `programs[].name` names. Accumulation
    /// bundles written before the names were the folders' said `micro
    /// step` and `apply step`; those still open.
    pub fn from_manifest(name: &str) -> Result<ProgramName, UnknownProgram> {
        match name {
            "micro step" => Ok(ProgramName::MicroStep),
            "apply step" => Ok(ProgramName::ApplyStep),
            _ => Self::from_name(name),
        }
    }
}

impl From<Phase> for ProgramName {
    fn from(p: Phase) -> ProgramName {
        match p {
            Phase::WarmUp => ProgramName::WarmUp,
            Phase::Steady => ProgramName::Steady,
            Phase::CoolDown => ProgramName::CoolDown,
        }
    }
}

impl std::fmt::Display for ProgramName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ProgramName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One program of a bundle of several: its folder, module file, sha256
/// and size. Its name and folder are one spelling.
#[derive(Serialize)]
pub(super) struct ProgramInfo {
    name: ProgramName,
    dir: ProgramName,
    module: String,
    sha256: String,
    instructions: usize,
}

impl ProgramInfo {
    /// The program `step`, written to its folder with report `r`.
    pub(super) fn of(name: ProgramName, r: &BundleReport, step: &TrainStep) -> Self {
        ProgramInfo {
            name,
            dir: name,
            module: format!("{name}/{PROTO_FILE}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_is_named_as_its_folder_and_read_back() {
        for p in ProgramName::ALL {
            assert_eq!(ProgramName::from_name(p.name()), Ok(p));
            assert_eq!(ProgramName::from_manifest(p.name()), Ok(p));
        }
        for phase in Phase::ALL {
            assert_eq!(ProgramName::from(phase).name(), phase.name());
        }
        // Accumulation bundles written before the one spelling still open.
        assert_eq!(
            ProgramName::from_manifest("micro step"),
            Ok(ProgramName::MicroStep)
        );
        assert_eq!(
            ProgramName::from_manifest("apply step"),
            Ok(ProgramName::ApplyStep)
        );
        // Only a manifest's old spelling is read; a name given is the one.
        let e = ProgramName::from_name("micro step").unwrap_err();
        assert_eq!(e.given, "micro step");
        let said = e.to_string();
        for p in ProgramName::ALL {
            assert!(said.contains(p.name()), "{said}");
        }
    }
}
