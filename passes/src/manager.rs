//! Runs passes in order, verifying after each one, optionally dumping the
//! module before and after.

use crate::pass::{registry, Pass, PassError};
use hlatc_compiler::{text, verify, Module};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What one pass did.
#[derive(Debug, Clone)]
pub struct PassRun {
    pub pass: &'static str,
    pub changed: bool,
    pub instructions_before: usize,
    pub instructions_after: usize,
    pub time: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct PipelineReport {
    pub runs: Vec<PassRun>,
}

impl PipelineReport {
    pub fn changed(&self) -> bool {
        self.runs.iter().any(|r| r.changed)
    }
}

#[derive(Default)]
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    dump_dir: Option<PathBuf>,
}

impl PassManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, pass: Box<dyn Pass>) -> &mut Self {
        self.passes.push(pass);
        self
    }

    /// A pipeline of registered passes, in the given order.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self, PassError> {
        let reg = registry();
        let mut pm = PassManager::new();
        for n in names {
            let n = n.as_ref().trim();
            let info = reg
                .iter()
                .find(|p| p.name == n)
                .ok_or_else(|| PassError::UnknownPass {
                    name: n.to_string(),
                    known: reg.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
                })?;
            pm.add((info.make)());
        }
        Ok(pm)
    }

    /// Writes `NN-<pass>.before.hlo` / `.after.hlo` into `dir` for every pass.
    pub fn dump_to(&mut self, dir: PathBuf) -> &mut Self {
        self.dump_dir = Some(dir);
        self
    }

    pub fn pass_names(&self) -> Vec<&'static str> {
        self.passes.iter().map(|p| p.name()).collect()
    }

    /// Runs every pass once, verifying the input first and the module after
    /// each pass; the first broken invariant stops the pipeline.
    pub fn run(&self, module: &mut Module) -> Result<PipelineReport, PassError> {
        verify(module).map_err(PassError::InvalidInput)?;
        let mut report = PipelineReport::default();
        for (i, pass) in self.passes.iter().enumerate() {
            self.dump(i, pass.name(), "before", module)?;
            let before = module.instruction_count();
            let t = Instant::now();
            let changed = pass.run(module)?;
            let time = t.elapsed();
            verify(module).map_err(|error| PassError::BrokeModule {
                pass: pass.name(),
                error,
            })?;
            self.dump(i, pass.name(), "after", module)?;
            report.runs.push(PassRun {
                pass: pass.name(),
                changed,
                instructions_before: before,
                instructions_after: module.instruction_count(),
                time,
            });
        }
        Ok(report)
    }

    fn dump(
        &self,
        index: usize,
        pass: &'static str,
        when: &str,
        m: &Module,
    ) -> Result<(), PassError> {
        let Some(dir) = &self.dump_dir else {
            return Ok(());
        };
        let path = dir.join(format!("{:02}-{pass}.{when}.hlo", index + 1));
        std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&path, text::print_module(m)))
            .map_err(|e| PassError::Failed {
                pass,
                message: format!("cannot dump to {}: {e}", path.display()),
            })
    }
}
