//! What a pass is, and how one fails.

use crate::infra::context::PassContext;
use crate::infra::inline::InlineError;
use crate::infra::rewriter::RewriteError;
use hlatc_compiler::graph::builder::BuildError;
use hlatc_compiler::{Module, VerifyError};

/// A transformation of a module. Like XLA's HloPassInterface: it has a name
/// and reports whether it changed anything. It must keep the program's
/// meaning: the same numbers on XLA CPU with the pass on and off.
pub trait Pass {
    fn name(&self) -> &str;
    fn run(&self, module: &mut Module, ctx: &mut PassContext) -> Result<bool, PassError>;
    /// The registry name that makes this pass again (a fixpoint wrapper
    /// gives its pass's), for recording a pipeline so it can be rebuilt.
    fn registered_name(&self) -> &str {
        self.name()
    }
    /// Whether the pass keeps dynamic dimensions as they are: it builds no
    /// shape from inference (which gives bounds, not which dimensions are
    /// dynamic), or leaves dynamic instructions alone. A pipeline of such
    /// passes runs over a module with dynamic dimensions; any other
    /// refuses one.
    fn keeps_dynamic_dimensions(&self) -> bool {
        false
    }
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum PassError {
    #[error("unknown pass '{name}' (known passes: {known})")]
    UnknownPass { name: String, known: String },
    /// The module fails `checker` before any pass ran (blamed on the
    /// entry, `entry`, since no pass is to blame).
    #[error("the module does not verify before the first pass: computation '{entry}': {checker}: {source}")]
    InvalidInput {
        entry: String,
        checker: &'static str,
        #[source]
        source: Box<VerifyError>,
    },
    #[error("pass '{pass}' produced a module that breaks invariant '{checker}': {source}")]
    BrokeModule {
        pass: String,
        checker: &'static str,
        #[source]
        source: Box<VerifyError>,
    },
    #[error("pass '{pass}' did not reach a fixpoint in {iterations} iterations")]
    NoFixpoint { pass: String, iterations: usize },
    #[error("pass '{pass}': {source}")]
    Rewrite {
        pass: String,
        #[source]
        source: Box<RewriteError>,
    },
    /// `annotate-rounding` could not lower stochastic rounding for cpu.
    #[error("pass '{pass}': {source}")]
    RoundingLowering {
        pass: String,
        #[source]
        source: Box<RoundingLoweringError>,
    },
    /// `narrow-f64` met an op whose meaning depends on f64's bits.
    #[error("pass '{pass}': computation '{computation}', instruction '{instruction}': a {opcode} of f64 depends on f64's bits or on a contract outside the module, so it cannot be narrowed to f32")]
    F64Bits {
        pass: String,
        computation: String,
        instruction: String,
        opcode: &'static str,
    },
    /// `narrow-f64` met an f64 constant it cannot narrow to f32.
    #[error("pass '{pass}': computation '{computation}', constant '{constant}': {problem}")]
    F64Constant {
        pass: String,
        computation: String,
        constant: String,
        problem: Box<F64ConstantProblem>,
    },
    /// A pipeline's `--dump-dir` could not be written.
    #[error("pass '{pass}': cannot dump to {}: {source}", .path.display())]
    Dump {
        pass: String,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `conditional-to-select` could not rewrite a conditional it chose.
    #[error("pass '{pass}': computation '{computation}', conditional '{conditional}': {source}")]
    Conditional {
        pass: String,
        computation: String,
        conditional: String,
        #[source]
        source: Box<ConditionalFailure>,
    },
    /// Building the computation a pass calls failed.
    #[error("pass '{pass}': {source}")]
    Build {
        pass: String,
        #[source]
        source: Box<BuildError>,
    },
    /// What `softmax-math` was handed as a softmax is not an array.
    #[error("pass '{pass}': '{instruction}' is not an array, so it cannot be a softmax")]
    SoftmaxNotArray { pass: String, instruction: String },
    /// An MX custom call (`QuantizeMX`, `__op$block_scaled_dot`) hlatc
    /// cannot compute on XLA CPU (`lower-neuron-calls`).
    #[error("pass '{pass}': computation '{computation}', custom call '{instruction}': {problem}")]
    MxCall {
        pass: String,
        computation: String,
        instruction: String,
        problem: Box<MxCallProblem>,
    },
    /// State a pass added to the entry (`PassContext::added_state`) that
    /// the step cannot carry: not an array.
    #[error("pass '{pass}': added state '{name}' is not an array")]
    AddedStateNotArray { pass: String, name: String },
    /// State a pass added other than as the entry's next input and output.
    #[error("pass '{pass}': added state '{name}' is input {parameter} and output {output}, not the next of each")]
    AddedStateOutOfPlace {
        pass: String,
        name: String,
        parameter: usize,
        output: usize,
    },
    /// An NKI kernel's custom call that XLA CPU cannot be given in its
    /// place (`lower-neuron-calls`).
    #[error("pass '{pass}': computation '{computation}', custom call '{instruction}': {problem}")]
    NativeKernel {
        pass: String,
        computation: String,
        instruction: String,
        problem: Box<NativeKernelProblem>,
    },
    #[error(
        "passes do not track dynamic dimensions yet: computation '{computation}', instruction '{instruction}' is {shape}"
    )]
    DynamicDimensions {
        computation: String,
        instruction: String,
        shape: String,
    },
}

impl PassError {
    pub fn rewrite(pass: &str) -> impl FnOnce(RewriteError) -> PassError + '_ {
        move |source| PassError::Rewrite {
            pass: pass.to_string(),
            source: Box::new(source),
        }
    }
}

// What the passes that fail in their own ways report, inside a `PassError`:
// kept beside it, so the pass trait imports no pass.

/// Why the entry's stochastic converts cannot be lowered for cpu
/// (`annotate-rounding`).
#[derive(Debug, thiserror::Error)]
pub enum RoundingLoweringError {
    /// A stochastic convert other than f32 to bf16, the one rounding the
    /// lowering implements.
    #[error("instruction '{instruction}': stochastic rounding on cpu lowers f32 to bf16 only")]
    NotF32ToBf16 { instruction: String },
    /// No root to add the RNG state's output to.
    #[error("the entry has no root")]
    NoRoot,
    /// A root the RNG state cannot be appended to as another output.
    #[error("the entry's root '{root}' is not a tuple: cpu stochastic rounding carries its RNG state as an extra output of a tuple root")]
    RootNotTuple { root: String },
    /// Building the rounding callee failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Rewriting the entry failed.
    #[error(transparent)]
    Rewrite(Box<RewriteError>),
}

/// Why a native kernel's `backend_config` cannot be read (the contract is
/// `targets::neuron::native_kernel`'s).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NativeKernelConfigError {
    #[error("its backend_config is empty, where NKI writes base64 of a JSON object")]
    Empty,
    #[error("its backend_config is not base64 (byte {offset}: '{byte}')")]
    NotBase64 { offset: usize, byte: char },
    #[error("its backend_config is base64, but not of a JSON object: {problem}")]
    NotJson { problem: String },
    #[error("its backend_config's JSON has no string 'func_name'")]
    NoFuncName,
}

/// Why an `AwsNeuronCustomNativeKernel` call has no plain HLO to run in its
/// place on XLA CPU (`lower-neuron-calls`).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum NativeKernelProblem {
    #[error(transparent)]
    Config(#[from] NativeKernelConfigError),
    #[error("NKI kernel '{func_name}' has no reference for XLA CPU to run in its place (hlatc has references for: {known})")]
    NoReference { func_name: String, known: String },
    #[error("NKI kernel '{func_name}': {problem}")]
    Shapes {
        func_name: String,
        problem: FlashShapesError,
    },
}

/// Why a flash-attention call's operands and results are not the shapes
/// its kernel takes and gives, or its reference could not be built.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FlashShapesError {
    #[error("{kernel} takes {takes}; the call has {count} operands")]
    Operands {
        kernel: &'static str,
        takes: &'static str,
        count: usize,
    },
    #[error("{name} is {got}, where {kernel} takes {layout} = {want:?}{alternative}")]
    Tensor {
        name: &'static str,
        got: String,
        kernel: &'static str,
        layout: &'static str,
        want: Vec<i64>,
        /// Another layout it takes, in words (empty where there is none).
        alternative: String,
    },
    #[error(
        "{name} is {got}, where the kernel takes [b, h_kv, d, s] with h_kv dividing {heads} heads"
    )]
    KeyHeads {
        name: &'static str,
        got: String,
        heads: i64,
    },
    #[error("q is {got}, where the kernel takes [b, h, d, s]")]
    QueryRank { got: String },
    #[error("q is {got}: the kernel's sequence is a multiple of {rows}")]
    QuerySequence { got: String, rows: i64 },
    #[error("{kernel} gives {gives}; the call gives {got:?}")]
    Results {
        kernel: &'static str,
        gives: String,
        got: Vec<Vec<i64>>,
    },
    #[error("its reference: {0}")]
    Build(String),
}

/// Why an MX call's `backend_config` is not one hlatc can read, or
/// compute.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MxConfigError {
    #[error("none given")]
    Empty,
    #[error("{0}")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("{field} is {value}")]
    Field { field: &'static str, value: String },
    #[error("{field} holds {item}")]
    Item { field: &'static str, item: String },
    #[error("dtype {dtype}: hlatc computes {computed} only")]
    Uncomputed { dtype: String, computed: String },
    #[error("dim {dim} of a rank-{rank} input")]
    Dim { dim: i64, rank: usize },
}

/// Why an MX custom call has no plain HLO to run in its place on XLA CPU
/// (`lower-neuron-calls`).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum MxCallProblem {
    #[error("{target}'s backend_config: {problem}")]
    Config {
        target: &'static str,
        problem: MxConfigError,
    },
    #[error("{target}: {problem}")]
    Shapes {
        target: &'static str,
        problem: String,
    },
    #[error("__op$block_scaled_dot: the {side} operand's element type is unknown: it is not a QuantizeMX call's data, and the call's backend_config names no element_dtype")]
    NoElementType { side: &'static str },
}

/// A branch's inlining or the selects that failed (`conditional-to-select`).
#[derive(Debug, thiserror::Error)]
pub enum ConditionalFailure {
    #[error(transparent)]
    Inline(#[from] InlineError),
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    #[error(transparent)]
    Literal(#[from] hlatc_compiler::LiteralError),
    #[error("branch '{0}' is not in the module")]
    NoBranch(String),
    #[error("a pred conditional needs two branches, it has {0}")]
    Branches(usize),
    #[error("{0} branches do not fit an s32 index")]
    TooManyBranches(usize),
    #[error("a {0} cannot be selected")]
    Unselectable(String),
}

/// Why an f64 constant cannot be narrowed to f32 (`narrow-f64`).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum F64ConstantProblem {
    #[error("element {0} is not a float")]
    NotFloat(usize),
    #[error("{0:e} overflows f32 (largest finite {max:e}); rounding it to inf would change the program", max = f32::MAX)]
    Overflows(f64),
    #[error(transparent)]
    Literal(#[from] hlatc_compiler::LiteralError),
}
