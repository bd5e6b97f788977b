//! `hlatc plan`: which layout to run a model's training in on a cluster of
//! Trainium instances, predicted from the programs hlatc compiles for each
//! layout and a cost model calibrated on measured runs.
//!
//! - [`hardware`]: each instance kind's peaks, with their sources;
//! - [`layout`]: a layout, its SPEC and the `hlatc compile` it is;
//! - [`counts`]: what one rank's program asks of the hardware;
//! - [`evaluate`]: a layout's programs compiled and read;
//! - [`cost`]: the cost model and its parameters;
//! - [`calibration`]: measured runs, and the fit of the parameters to them;
//! - [`reports`]: the fit in use, its report and predictions of other runs;
//! - [`search`]: every layout that divides the model and the cluster;
//! - [`remat_ladder`]: which of a layout's remat twins the others decide;
//! - [`chart`]: throughput against memory per rank, as a PNG.

pub mod calibration;
pub mod chart;
pub mod cost;
pub mod counts;
pub mod evaluate;
pub mod hardware;
pub mod layout;
pub mod lighter_twins;
pub mod remat_ladder;
pub mod reports;
pub mod request;
pub mod row_fault;
pub mod search;

pub use calibration::{Calibration, MeasuredRun};
pub use cost::{Assumptions, Breakdown, CostParams};
pub use hardware::Instance;
pub use layout::Layout;
pub use request::{PlanOutcome, PlanRequest};
pub use search::{
    check_output, plan, Candidate, CapacityAdvice, Plan, PlanOptions, ADVISED_CAPACITY_FACTOR,
};

/// An option of a plan, named by each front end its own way: `--nodes`
/// on the command line, `nodes=` in Python.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter)]
pub enum PlanOption {
    Nodes,
    GlobalBatch,
    SeqLen,
    Top,
    Price,
    Precision,
    Json,
    Plot,
    Kernel,
    Layout,
}

impl PlanOption {
    /// As `hlatc plan` spells it.
    pub fn flag(self) -> &'static str {
        match self {
            PlanOption::Nodes => "--nodes",
            PlanOption::GlobalBatch => "--global-batch",
            PlanOption::SeqLen => "--seq-len",
            PlanOption::Top => "--top",
            PlanOption::Price => "--price",
            PlanOption::Precision => "--precision",
            PlanOption::Json => "--json",
            PlanOption::Plot => "--plot",
            PlanOption::Kernel => "--kernel",
            PlanOption::Layout => "--layout",
        }
    }

    /// The option given `value`, as this process's messages spell options
    /// ([`hlatc_models::option_name::spell_set`]): `--global-batch 8` on the
    /// command line, `global_batch=8` in Python.
    pub fn set(self, value: impl std::fmt::Display) -> String {
        hlatc_models::option_name::spell_set(self.flag(), self.keyword(), value)
    }

    /// As `hlatc.plan` spells it.
    pub fn keyword(self) -> &'static str {
        match self {
            PlanOption::Nodes => "nodes",
            PlanOption::GlobalBatch => "global_batch",
            PlanOption::SeqLen => "seq_len",
            PlanOption::Top => "top",
            PlanOption::Price => "price",
            PlanOption::Precision => "precision",
            PlanOption::Json => "json",
            PlanOption::Plot => "plot",
            PlanOption::Kernel => "kernels",
            PlanOption::Layout => "layout",
        }
    }
}

/// What planning can fail with, each naming the flag, row or divisor at
/// fault.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum PlanError {
    /// An option's value the plan cannot take (printed as the CLI spells
    /// the option; Python spells it its own way).
    #[error("{} {given}: {problem}", .option.flag())]
    Option {
        option: PlanOption,
        given: String,
        problem: String,
    },
    /// A measured run that reading it back would refuse, by its field
    /// (a calibration column, and `append_measured_run`'s argument).
    #[error("{field}: {message}")]
    RunRefused {
        field: &'static str,
        message: String,
    },
    /// No layout of the search is left to rank: each was over a core's
    /// memory by its state alone, or refused.
    #[error("no layout fits: {reason}")]
    NothingFits { reason: String },
    /// A `--layout` SPEC that cannot be read.
    #[error("{}: {message}", PlanOption::Layout.set(format!("'{spec}'")))]
    Spec { spec: String, message: String },
    /// A cluster that cannot hold the model or the layout.
    #[error("{0}")]
    Cluster(String),
    /// A layout that does not divide the model or the batch.
    #[error("layout {layout}: {message}")]
    Layout { layout: String, message: String },
    /// A layout hlatc could not compile.
    #[error("layout {layout}: {source}")]
    Compile {
        layout: String,
        #[source]
        source: Box<crate::Error>,
    },
    /// A calibration file's row (1-based line) that cannot be used.
    #[error("{path}:{line}: {message}")]
    Calibration {
        path: String,
        line: usize,
        message: String,
    },
    /// A file that could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Chart(#[from] crate::plot::PlotError),
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}
