//! What a plan's calibration options ask for before its search: the fit in
//! use (`--calibration`, else the built-in one), the report of that fit
//! (`--report`) and a check on runs it was never fitted to (`--predict`).
//! The CLI prints them and Python returns them; both ask here, so neither
//! computes them its own way.

use super::calibration::{builtin_calibration, Calibration, FitReport, RunError, BUILTIN_FILE};
use super::{PlanError, PlanOptions};
use std::path::PathBuf;

/// The calibration options of a plan.
#[derive(Clone, Debug, Default)]
pub struct CalibrationRequest {
    /// Fit the cost model to this CSV of measured runs instead of the
    /// built-in fit.
    pub calibration: Option<PathBuf>,
    /// Report the fit in use: its parameters, each run's error, and each
    /// run predicted from a fit to the others.
    pub report: bool,
    /// Predict the runs of this CSV with the parameters in use.
    pub predict: Option<PathBuf>,
}

/// A calibration's fit, reported.
#[derive(Clone, Debug)]
pub struct CalibrationReport {
    /// The CSV fitted to.
    pub path: String,
    pub runs: usize,
    pub fit: FitReport,
}

/// Runs predicted by the parameters in use, never fitted to.
#[derive(Clone, Debug)]
pub struct Prediction {
    /// The CSV predicted.
    pub path: String,
    pub errors: Vec<RunError>,
}

/// What a [`CalibrationRequest`] gave.
#[derive(Clone, Debug)]
pub struct CalibrationReports {
    /// What the cost model was fitted to, in words.
    pub calibrated_on: String,
    pub report: Option<CalibrationReport>,
    pub predicted: Option<Prediction>,
}

impl CalibrationRequest {
    /// Whether the request asks for reports alone: a report or a
    /// prediction, and no model (`model_given`: a preset or a config) nor
    /// layout to plan.
    pub fn reports_only(&self, model_given: bool, layout_given: bool) -> bool {
        (self.report || self.predict.is_some()) && !model_given && !layout_given
    }

    /// Sets `o.params` to the fit in use and computes the reports asked
    /// for, pricing hlatc's programs with `o.attention`.
    pub fn apply(&self, o: &mut PlanOptions) -> Result<CalibrationReports, PlanError> {
        o.check()?;
        let calibration = self
            .calibration
            .as_deref()
            .map(Calibration::read)
            .transpose()?;
        let mut calibrated_on = match &calibration {
            None => {
                format!("the built-in fit to {BUILTIN_FILE} (the Neuron SDK's published runs)")
            }
            Some(c) => format!("a fit to {} ({} runs)", c.path, c.runs.len()),
        };
        let chip = o.instance.chip();
        let measured_on_chip = match &calibration {
            Some(c) => c.runs.iter().any(|r| r.instance.chip() == chip),
            None => builtin_calibration()?
                .runs
                .iter()
                .any(|r| r.instance.chip() == chip),
        };
        if !measured_on_chip {
            calibrated_on += &format!(
                "; no run in it is on {chip}: {}'s efficiencies are taken as those runs', its peaks are the SDK's",
                o.instance
            );
        }
        let report = match (self.report, calibration) {
            (true, c) => {
                let builtin = c.is_none();
                let c = match c {
                    Some(c) => c,
                    None => builtin_calibration()?,
                };
                let fit = c.fit_report_priced_with(&o.assumptions, &o.attention)?;
                // The built-in fit is in use as its stored values; a
                // calibration file's fit is the one reported.
                if !builtin {
                    o.params = fit.params;
                }
                Some(CalibrationReport {
                    path: c.path,
                    runs: c.runs.len(),
                    fit,
                })
            }
            (false, Some(c)) => {
                o.params = c.fitted_priced_with(&o.assumptions, &o.attention)?;
                None
            }
            (false, None) => None,
        };
        let predicted = match &self.predict {
            None => None,
            Some(path) => {
                let c = Calibration::read(path)?;
                let errors = c.predict_priced_with(&o.params, &o.assumptions, &o.attention)?;
                Some(Prediction {
                    path: c.path,
                    errors,
                })
            }
        };
        Ok(CalibrationReports {
            calibrated_on,
            report,
            predicted,
        })
    }
}
