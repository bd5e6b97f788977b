//! A training run's per-step metrics, as the CSV `hlatc train --metrics`
//! writes and `hlatc plot` reads back.
//!
//! The columns are fixed: `step,loss,grad_norm,learning_rate,held_out_loss`,
//! the last empty on steps where no held-out loss was measured. Reading is
//! strict: a missing or unknown column, a short row or a value that is not
//! a number is an error naming the file, line and column.

use hlatc_compiler::util::input_file;
use std::fmt::Write as _;
use std::path::Path;

/// The header every metrics file starts with.
pub const HEADER: [&str; 5] = [
    "step",
    "loss",
    "grad_norm",
    "learning_rate",
    "held_out_loss",
];

/// One optimizer step's numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct StepMetrics {
    pub step: u64,
    pub loss: f64,
    pub grad_norm: f64,
    pub learning_rate: f64,
    /// Measured on some steps only.
    pub held_out_loss: Option<f64>,
}

/// The column a curve is drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Series {
    Loss,
    GradNorm,
    LearningRate,
    HeldOutLoss,
}

impl Series {
    pub const ALL: [Series; 4] = [
        Series::Loss,
        Series::GradNorm,
        Series::LearningRate,
        Series::HeldOutLoss,
    ];

    /// The column's name in the CSV header.
    pub fn column(self) -> &'static str {
        match self {
            Series::Loss => "loss",
            Series::GradNorm => "grad_norm",
            Series::LearningRate => "learning_rate",
            Series::HeldOutLoss => "held_out_loss",
        }
    }

    pub fn from_column(name: &str) -> Option<Series> {
        Self::ALL.into_iter().find(|s| s.column() == name)
    }

    /// The value on one step, where there is one.
    pub fn of(self, m: &StepMetrics) -> Option<f64> {
        match self {
            Series::Loss => Some(m.loss),
            Series::GradNorm => Some(m.grad_norm),
            Series::LearningRate => Some(m.learning_rate),
            Series::HeldOutLoss => m.held_out_loss,
        }
    }
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum MetricsError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

/// Every step of one run, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetricsLog {
    pub steps: Vec<StepMetrics>,
}

impl MetricsLog {
    pub fn push(&mut self, m: StepMetrics) {
        self.steps.push(m);
    }

    /// The first and the last step's loss ((0, 0) for an empty log).
    pub fn first_and_last_loss(&self) -> (f64, f64) {
        let loss = |m: Option<&StepMetrics>| m.map_or(0.0, |m| m.loss);
        (loss(self.steps.first()), loss(self.steps.last()))
    }

    /// `(step, value)` for every step that has a value of `series`.
    pub fn points(&self, series: Series) -> Vec<(f64, f64)> {
        self.steps
            .iter()
            .filter_map(|m| series.of(m).map(|v| (m.step as f64, v)))
            .collect()
    }

    /// The CSV text, header first. Floats print in Rust's shortest
    /// round-trip form, so reading it back gives the same numbers.
    pub fn to_csv(&self) -> String {
        let mut out = HEADER.join(",");
        out.push('\n');
        for m in &self.steps {
            let held_out = m.held_out_loss.map(|v| v.to_string()).unwrap_or_default();
            let _ = writeln!(
                out,
                "{},{},{},{},{held_out}",
                m.step, m.loss, m.grad_norm, m.learning_rate
            );
        }
        out
    }

    pub fn read(path: &Path) -> Result<MetricsLog, MetricsError> {
        let file = path.display().to_string();
        let text = input_file::read_to_string(path, |source| MetricsError::Io {
            file: file.clone(),
            source,
        })?;
        Self::parse(&text, &file)
    }

    /// Parses `text`; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<MetricsLog, MetricsError> {
        let err = |line: usize, column: usize, message: String| MetricsError::Syntax {
            file: file.to_string(),
            line,
            column,
            message,
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
        let Some((_, header)) = lines.next() else {
            return Err(err(1, 1, "empty file; expected the metrics header".into()));
        };
        let mut column = 1;
        let names: Vec<&str> = header.split(',').collect();
        for (k, name) in names.iter().enumerate() {
            match HEADER.get(k) {
                Some(want) if want == name => {}
                Some(want) => {
                    return Err(err(
                        1,
                        column,
                        format!(
                            "column {} is `{name}`, expected `{want}` (the header is `{}`)",
                            k + 1,
                            HEADER.join(",")
                        ),
                    ))
                }
                None => return Err(err(1, column, format!("unknown column `{name}`"))),
            }
            column += name.len() + 1;
        }
        if names.len() < HEADER.len() {
            return Err(err(
                1,
                header.len() + 1,
                format!("missing column `{}`", HEADER[names.len()]),
            ));
        }
        let mut log = MetricsLog::default();
        for (line, row) in lines {
            if row.trim().is_empty() {
                continue;
            }
            let fields: Vec<&str> = row.split(',').collect();
            if fields.len() != HEADER.len() {
                return Err(err(
                    line,
                    1,
                    format!(
                        "{} fields, expected {} ({})",
                        fields.len(),
                        HEADER.len(),
                        HEADER.join(",")
                    ),
                ));
            }
            let mut at = Vec::with_capacity(fields.len());
            let mut col = 1;
            for f in &fields {
                at.push(col);
                col += f.len() + 1;
            }
            let number = |k: usize| -> Result<f64, MetricsError> {
                fields[k].trim().parse::<f64>().map_err(|_| {
                    err(
                        line,
                        at[k],
                        format!("{} `{}` is not a number", HEADER[k], fields[k]),
                    )
                })
            };
            let step = fields[0].trim().parse::<u64>().map_err(|_| {
                err(
                    line,
                    1,
                    format!("step `{}` is not a step number", fields[0]),
                )
            })?;
            if let Some(prev) = log.steps.last() {
                if step <= prev.step {
                    return Err(err(
                        line,
                        1,
                        format!("step {step} does not follow step {}", prev.step),
                    ));
                }
            }
            log.push(StepMetrics {
                step,
                loss: number(1)?,
                grad_norm: number(2)?,
                learning_rate: number(3)?,
                held_out_loss: if fields[4].trim().is_empty() {
                    None
                } else {
                    Some(number(4)?)
                },
            });
        }
        Ok(log)
    }
}
