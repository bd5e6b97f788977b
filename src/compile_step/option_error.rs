//! A compile option's value out of its range, named by its typed name so
//! each front end spells it its own way: `--tp 0: must be at least 1` on
//! the command line, `tp=0: must be at least 1` (with `argument="tp"`) in
//! Python.

use super::spellings::CompileOption;
use hlatc_models::parallel::{Degree, ParallelError};
use hlatc_models::Parallelism;
use hlatc_step::optimizer::{AdamWField, OptimizerConfigError};

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{} {given}: {problem}", option.flag())]
pub struct OptionError {
    pub option: CompileOption,
    /// The value as given.
    pub given: String,
    /// What is wrong with it, naming no option: `must be at least 1`.
    pub problem: String,
}

impl OptionError {
    pub fn new(option: CompileOption, given: impl ToString, problem: impl Into<String>) -> Self {
        OptionError {
            option,
            given: given.to_string(),
            problem: problem.into(),
        }
    }

    /// The error in Python's words: `tp=0: must be at least 1`.
    pub fn python_message(&self) -> String {
        format!("{}={}: {}", self.option.keyword(), self.given, self.problem)
    }

    /// Every degree of `par` at least one, else the first below, as the
    /// option that sets it.
    pub fn check_degrees(par: &Parallelism) -> Result<(), OptionError> {
        match par.check_degrees() {
            Err(ParallelError::Degree { degree, got }) => Err(OptionError::new(
                CompileOption::from(degree),
                got,
                "must be at least 1",
            )),
            // `check_degrees` refuses nothing else; the layout's other
            // refusals concern several options at once.
            Err(_) | Ok(()) => Ok(()),
        }
    }

    /// An optimizer setting out of range, as the option that set it.
    pub fn of_optimizer(e: &OptimizerConfigError) -> OptionError {
        use OptimizerConfigError as E;
        let given = match e {
            E::NotAFraction { value, .. }
            | E::NotFinite { value, .. }
            | E::NotPositive { value, .. } => value.to_string(),
            E::NegativeWeightDecay(v) => v.to_string(),
            E::LearningRates { min_lr, max_lr } => match e.field() {
                AdamWField::MaxLr => max_lr.to_string(),
                _ => min_lr.to_string(),
            },
            E::Steps {
                warmup_steps,
                total_steps,
            } => match e.field() {
                AdamWField::WarmupSteps => warmup_steps.to_string(),
                _ => total_steps.to_string(),
            },
        };
        OptionError::new(e.field().into(), given, e.problem())
    }
}

impl From<Degree> for CompileOption {
    fn from(d: Degree) -> CompileOption {
        match d {
            Degree::Tp => CompileOption::Tp,
            Degree::Dp => CompileOption::Dp,
            Degree::Pp => CompileOption::Pp,
            Degree::Ep => CompileOption::Ep,
            Degree::Fsdp => CompileOption::Fsdp,
            Degree::Cp => CompileOption::Cp,
        }
    }
}

/// The option that sets an optimizer field.
impl From<AdamWField> for CompileOption {
    fn from(f: AdamWField) -> CompileOption {
        match f {
            AdamWField::Beta1 => CompileOption::Beta1,
            AdamWField::Beta2 => CompileOption::Beta2,
            AdamWField::Eps => CompileOption::AdamEps,
            AdamWField::WeightDecay => CompileOption::WeightDecay,
            AdamWField::ClipNorm => CompileOption::ClipNorm,
            AdamWField::MaxLr => CompileOption::LrMax,
            AdamWField::MinLr => CompileOption::LrMin,
            AdamWField::WarmupSteps => CompileOption::WarmupSteps,
            AdamWField::TotalSteps => CompileOption::TotalSteps,
        }
    }
}
