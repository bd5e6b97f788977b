//! What passes did: one record per pass run, and a pipeline's report of
//! them with the notes passes left. The context collects the records; the
//! pipeline hands them back.

use std::time::Duration;

/// What one pass run did. A pass inside a pipeline is reported with its
/// path (`cpu/cleanup/cse`) and its depth.
#[derive(Debug, Clone)]
pub struct PassRun {
    pub pass: String,
    pub depth: usize,
    pub changed: bool,
    pub instructions_before: usize,
    pub instructions_after: usize,
    pub time: Duration,
}

impl PassRun {
    /// The pass's own name, without the pipelines around it.
    pub fn leaf(&self) -> &str {
        self.pass.rsplit('/').next().unwrap_or(&self.pass)
    }
}

#[derive(Debug, Clone, Default)]
pub struct PipelineReport {
    /// Every pass run, a pipeline before the passes inside it.
    pub runs: Vec<PassRun>,
    /// What passes noted: bindings, folds, costs.
    pub notes: Vec<String>,
}

impl PipelineReport {
    pub fn changed(&self) -> bool {
        self.runs.iter().any(|r| r.changed)
    }

    /// Whether a pass of this name (at any depth) changed the module.
    pub fn fired(&self, name: &str) -> bool {
        self.runs.iter().any(|r| r.leaf() == name && r.changed)
    }
}
