//! What is wrong with one row of a calibration file. The file and line
//! are added where the row is read ([`super::PlanError::Calibration`]).

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RowFault {
    #[error("{column} '{value}': a positive whole number is needed")]
    NotPositiveWhole { column: &'static str, value: String },
    #[error("{column} '{value}': true or false")]
    NotTrueOrFalse { column: &'static str, value: String },
    #[error("seq_per_s '{value}': a positive number is needed")]
    NotPositiveRate { value: String },
    #[error("model '{model}' is neither a preset nor a config file ({} not found)", .path.display())]
    NoSuchModel { model: String, path: PathBuf },
    #[error("model '{model}' is neither a preset nor a built-in config")]
    NotBuiltIn { model: String },
    #[error("instance '{value}': known instances are {known}")]
    UnknownInstance { value: String, known: String },
    #[error("remat '{value}': none, core-attention or full-layer")]
    UnknownRemat { value: String },
    #[error("precision '{value}': a precision preset (bf16-master, bf16-mixed, ...)")]
    UnknownPrecision { value: String },
    #[error(
        "precision '{value}': {why}, so no run of it was measured there and the planner refuses it"
    )]
    PrecisionNotOnTrainium { value: String, why: String },
    #[error("a mixture of experts ({model_type}): its EP degree, exchange and capacity factor have no columns in a calibration file, so its runs are not recorded or read yet (the cost model prices its layouts from their programs without them)")]
    ExpertsUnrecorded { model_type: &'static str },
    #[error("fsdp={fsdp}: a calibration file has no FSDP column, so an FSDP run's row would be read back as another layout; it is not recorded yet")]
    FsdpUnrecorded { fsdp: i64 },
    #[error("tp {tp} x pp {pp} x dp {dp} = {ranks} cores, but {nodes} {instance} have {cores}")]
    CoresUnfilled {
        tp: i64,
        pp: i64,
        dp: i64,
        ranks: i64,
        nodes: i64,
        instance: String,
        cores: i64,
    },
}
