//! `hlatc plan` as one library call: the outputs checked before the
//! search (which takes minutes), the calibration's fit and reports, the
//! search itself unless only reports are asked for, and the plan written
//! as JSON and drawn. The CLI prints what it gives and Python returns it,
//! so neither runs a plan its own way.

use super::chart::chart_to_file;
use super::reports::{CalibrationReports, CalibrationRequest};
use super::{check_output, plan, Plan, PlanError, PlanOption, PlanOptions};
use std::path::PathBuf;

/// Everything a plan is asked for.
#[derive(Clone, Debug, Default)]
pub struct PlanRequest {
    pub options: PlanOptions,
    pub calibration: CalibrationRequest,
    /// Every layout evaluated, with its prediction, written here as JSON.
    pub json: Option<PathBuf>,
    /// Throughput against memory per rank drawn here as a PNG.
    pub plot: Option<PathBuf>,
    /// Whether a model was named (a preset or a config): without one, nor
    /// a layout, a report or a prediction is all that is asked.
    pub model_given: bool,
}

/// What a [`PlanRequest`] gave.
pub struct PlanOutcome {
    /// The search's plan; `None` when only reports were asked for.
    pub plan: Option<Plan>,
    pub reports: CalibrationReports,
    /// The options the search ran with: the request's, fitted to the
    /// calibration in use.
    pub options: PlanOptions,
}

impl PlanRequest {
    /// Runs the plan: every output's folder checked first, then the fit,
    /// the reports, the search, and the files written.
    pub fn run(self) -> Result<PlanOutcome, crate::Error> {
        let outputs = [
            (PlanOption::Json, &self.json),
            (PlanOption::Plot, &self.plot),
        ];
        for (option, path) in outputs {
            if let Some(path) = path {
                check_output(option, path)?;
            }
        }
        let mut options = self.options;
        let reports = self.calibration.apply(&mut options)?;
        let layout_given = options.layout.is_some();
        if self
            .calibration
            .reports_only(self.model_given, layout_given)
        {
            return Ok(PlanOutcome {
                plan: None,
                reports,
                options,
            });
        }
        let p = plan(&options)?;
        if let Some(path) = &self.json {
            p.write_json(path)?;
        }
        if let Some(path) = &self.plot {
            chart_to_file(&p, path).map_err(PlanError::from)?;
        }
        Ok(PlanOutcome {
            plan: Some(p),
            reports,
            options,
        })
    }
}
