//! What is wrong with a training state, or the tensors a run starts from:
//! a tensor missing, of another shape or type, one the step does not hold,
//! a count of ranks or parameters that does not fit. Each names the
//! tensor or input and, where the tensors were read, where from.

use hlatc_compiler::ElementType;
use hlatc_models::layout::LayoutError;
use hlatc_models::option_name::OptionName as O;
use hlatc_step::train_step::Role;

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum StateError {
    /// The hints name the layout first: rank files of another division
    /// (PP read as DP, or the reverse) miss tensors as often as another
    /// precision does.
    #[error("{origin}: no tensor '{tensor}' ({role:?} state of this step; was it saved with another {}/{}/{} layout, {} or projection layout?)", O::Tp.named(), O::Dp.named(), O::Pp.named(), O::Precision.named())]
    MissingTensor {
        origin: String,
        tensor: String,
        role: Role,
    },
    #[error("{origin}: tensor '{tensor}' is {got_ty}{got_dims:?}, this step's is {want_ty}{want_dims:?} (another {}/{}/{} layout, model or precision?)", O::Tp.named(), O::Dp.named(), O::Pp.named())]
    TensorShape {
        origin: String,
        tensor: String,
        got_ty: ElementType,
        got_dims: Vec<i64>,
        want_ty: ElementType,
        want_dims: Vec<i64>,
    },
    #[error("{origin}: tensor '{tensor}' is not state of this step (a state of another {}/{}/{} layout, model or precision?)", O::Tp.named(), O::Dp.named(), O::Pp.named())]
    UnknownTensor { origin: String, tensor: String },
    #[error("{origin}: tensor '{tensor}' is {ty}, not a float")]
    NotFloat {
        origin: String,
        tensor: String,
        ty: ElementType,
    },
    /// A Hugging Face checkpoint that does not fit the model's layout.
    #[error("{origin}: {error}")]
    Layout {
        origin: String,
        #[source]
        error: LayoutError,
    },
    #[error("{origin}: no tensor '{tensor}'")]
    CheckpointTensor { origin: String, tensor: String },
    /// A tensor that cannot be converted to the type the step takes it in.
    #[error("{what}: {error}")]
    Convert {
        what: String,
        #[source]
        error: hlatc_compiler::ir::literal::LiteralError,
    },
    #[error("the step takes {expected} parameters, {got} were given")]
    ParameterCount { expected: usize, got: usize },
    #[error("no parameter '{tensor}' for stage {stage}")]
    StageParameter { tensor: String, stage: usize },
    #[error("input '{input}' belongs to a parameter the model does not have")]
    UnknownParameter { input: String },
    #[error("input '{input}' ({role:?}) is no state")]
    NotState { input: String, role: Role },
    #[error("input '{input}' has role {role:?}, which is not a step input")]
    NotStepInput { input: String, role: Role },
    #[error("input '{input}' is {manifest:?} in the manifest, but its role gives {from_role:?}")]
    ManifestShape {
        input: String,
        manifest: Vec<i64>,
        from_role: Vec<i64>,
    },
    #[error("master weight '{input}' comes before its parameter")]
    MasterBeforeParameter { input: String },
    #[error("parameter '{parameter}' is held as {holding}, not as ranges of Hugging Face tensors")]
    NotHuggingFaceRanges { parameter: String, holding: String },
    #[error("{got} ranks' states for a step of {world} ranks ({layout})")]
    RankCount {
        got: usize,
        world: usize,
        layout: String,
    },
}
