//! The training step: the model's forward pass, its backward pass and the
//! AdamW update, in one HLO module, with every input and output described.

use crate::optimizer::{adamw, sum_of_squares, AdamWConfig, AdamWInputs};
use crate::precision::Precision;
use crate::sharding;
use hlatc_compiler::build::autodiff::{self, AutodiffError};
use hlatc_compiler::build::builder::{BuildError, Builder};
use hlatc_compiler::{AliasKind, ElementType, InstrId, IoAlias, Module, Op, Shape};
use hlatc_models::parallel::Fault;
use hlatc_models::{
    forward_on_rank, param_specs, BatchShape, ConfigError, ForwardInputs, ModelConfig,
    ParallelError, Parallelism, ParamSpec,
};
use serde::Serialize;
use std::time::{Duration, Instant};

/// What a training step is built from. A bundle's manifest records it
/// (`config`), and [`crate::bundle::OpenedBundle`] reads it back.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepConfig {
    pub model: ModelConfig,
    pub batch: BatchShape,
    pub optimizer: AdamWConfig,
    /// How weights and optimizer state are stored and which precision each
    /// op computes in (the `amp` pass applies it when the step is
    /// optimized).
    pub precision: Precision,
    /// Rows hold several documents: the step takes `segment_ids`
    /// (`s32[batch, seq]`, one id per document), attention stays within a
    /// document and positions restart at each document's start.
    pub packed: bool,
    /// How the step is divided over ranks; `batch` is the global batch.
    pub parallel: Parallelism,
    /// A deliberate mistake, for the tests that prove the sharded checks
    /// catch it; `None` in every real step.
    #[serde(skip)]
    pub fault: Option<Fault>,
    /// Mark each decoder layer's start and end, forward and backward, with
    /// neuronx-cc's module markers (`AwsNeuronModuleMarker*`), for its
    /// modular flow. Off by default, and then not in the manifest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub module_markers: bool,
}

impl StepConfig {
    /// `model` over `batch` with the default optimizer, the default
    /// precision (bf16-mixed) and unpacked rows.
    pub fn new(model: ModelConfig, batch: BatchShape) -> Self {
        StepConfig {
            model,
            batch,
            optimizer: AdamWConfig::default(),
            precision: Precision::default(),
            packed: false,
            parallel: Parallelism::SINGLE,
            fault: None,
            module_markers: false,
        }
    }

    /// This config with `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// Bytes of the state a step carries: parameters and both Adam moments.
    pub fn state_bytes(&self) -> i64 {
        self.model
            .parameter_count()
            .saturating_mul(3 * self.precision.storage().byte_size() as i64)
    }
}

/// What a buffer is for, so a runtime knows what to feed and keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Parameter,
    AdamM,
    AdamV,
    Step,
    Tokens,
    Targets,
    SegmentIds,
    /// The state of the RNG that stochastic rounding draws from (`u64[2]`,
    /// cpu), seeded once and carried from step to step.
    RngState,
    Loss,
    GradNorm,
    LearningRate,
}

impl Role {
    /// Whether an input with this role is state the step carries to the
    /// next step: an output with the same name and role updates it, in the
    /// same buffer.
    pub fn is_state(self) -> bool {
        matches!(
            self,
            Role::Parameter | Role::AdamM | Role::AdamV | Role::Step | Role::RngState
        )
    }
}

/// Where the carried state lives in the step's signature, found from the
/// roles and names of its inputs and outputs (never from positions): for
/// each state input, in input order, the output that updates it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLayout {
    /// `(input index, output index)` for each state input, in input order.
    pub updates: Vec<(usize, usize)>,
}

impl StateLayout {
    /// Pairs each state input with the output of the same name and role;
    /// `None` when one has no such output (a signature that does not carry
    /// its state).
    pub fn of(inputs: &[TensorSpec], outputs: &[TensorSpec]) -> Option<StateLayout> {
        let updates = inputs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.role.is_state())
            .map(|(i, s)| {
                outputs
                    .iter()
                    .position(|o| o.role == s.role && o.name == s.name)
                    .map(|o| (i, o))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StateLayout { updates })
    }
}

/// The output with role `role` (loss, grad norm, learning rate).
pub fn output_with_role(outputs: &[TensorSpec], role: Role) -> Option<usize> {
    outputs.iter().position(|o| o.role == role)
}

fn serialize_element_type<S: serde::Serializer>(t: &ElementType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

fn deserialize_element_type<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<ElementType, D::Error> {
    let name = <String as serde::Deserialize>::deserialize(d)?;
    ElementType::from_name(&name)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown element type '{name}'")))
}

/// One input or output of the step.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct TensorSpec {
    pub name: String,
    /// Written in the manifest as XLA spells it (`bf16`).
    #[serde(
        serialize_with = "serialize_element_type",
        deserialize_with = "deserialize_element_type"
    )]
    pub dtype: ElementType,
    pub shape: Vec<i64>,
    pub role: Role,
}

#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("optimizer: {0}")]
    Optimizer(String),
    #[error("building the graph: {0}")]
    Build(#[from] BuildError),
    #[error(transparent)]
    Autodiff(#[from] AutodiffError),
    #[error(transparent)]
    Parallel(#[from] ParallelError),
    /// The graph would not fit in host memory while it is built.
    #[error(transparent)]
    HostMemory(#[from] hlatc_runtime::host_memory::TooLarge),
}

/// Time spent in each stage of building the step.
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    pub forward: Duration,
    pub autodiff: Duration,
    pub optimizer: Duration,
}

pub struct TrainStep {
    pub module: Module,
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
    pub times: StageTimes,
    /// The passes [`optimize`] ran over the module, in order, with their
    /// report; empty for the step as built.
    pub passes: Vec<String>,
    pub pass_report: hlatc_passes::PipelineReport,
    /// The activation-checkpointing policy the passes ran with.
    pub remat: hlatc_passes::RematPolicy,
    /// The precision preset the step was built for.
    pub precision: Precision,
    /// What `amp` casts when the step is optimized: the preset's policy,
    /// which a caller may change per op kind before [`optimize`].
    pub cast_policy: Option<hlatc_passes::CastPolicy>,
    /// Which converts to bf16 round stochastically when the step is
    /// optimized: the preset's default unless a caller changes it.
    pub rounding: hlatc_passes::RoundingPolicy,
}

/// Runs `pipeline` for `target` over the step's module, with `remat` as the
/// checkpointing policy, the step's cast policy and rounding policy, and
/// records what ran in the step (the manifest lists it). The step's inputs
/// and outputs keep their order; a pass that appends carried state (the
/// RNG state of stochastic rounding on cpu) adds an input and an output
/// with role [`Role::RngState`] at the end.
pub fn optimize(
    step: &mut TrainStep,
    pipeline: &hlatc_passes::Pipeline,
    target: hlatc_passes::Target,
    remat: hlatc_passes::RematPolicy,
) -> Result<(), hlatc_passes::PassError> {
    let mut ctx = hlatc_passes::PassContext::new(target);
    ctx.remat = remat;
    ctx.cast = step.cast_policy.clone();
    ctx.rounding = step.rounding.clone();
    step.remat = remat;
    // The step's weights are separate inputs; concatenating them in the
    // graph would copy every weight every step.
    ctx.concat_entry_parameters = false;
    // The manifest's inputs and outputs (their dtypes too) are the step's.
    ctx.keep_entry_signature = true;
    let report = pipeline.run_module(&mut step.module, &mut ctx)?;
    for added in &ctx.added_state {
        let shape = step.module.entry().parameters()[added.parameter];
        let shape = &step.module.entry().instr(shape).shape;
        let Some(a) = shape.as_array() else {
            return Err(hlatc_passes::PassError::Failed {
                pass: "optimize".into(),
                message: format!("added state '{}' is not an array", added.name),
            });
        };
        if added.parameter != step.inputs.len() || added.output != step.outputs.len() {
            return Err(hlatc_passes::PassError::Failed {
                pass: "optimize".into(),
                message: format!(
                    "added state '{}' is input {} and output {}, not the next of each",
                    added.name, added.parameter, added.output
                ),
            });
        }
        let s = spec(&added.name, a.ty, &a.dims, Role::RngState);
        step.inputs.push(s.clone());
        step.outputs.push(s);
    }
    step.passes = pipeline
        .registered_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    step.pass_report = report;
    Ok(())
}

/// Input name prefixes of the Adam moments.
pub const ADAM_M_PREFIX: &str = "adam_m.";
pub const ADAM_V_PREFIX: &str = "adam_v.";

fn spec(name: &str, ty: ElementType, shape: &[i64], role: Role) -> TensorSpec {
    TensorSpec {
        name: name.to_string(),
        dtype: ty,
        shape: shape.to_vec(),
        role,
    }
}

/// Host memory building a step takes per decoder layer, at least. The
/// compile's peak grows by 1.5 MB a layer (53 MB for 7B's 32 layers, 127
/// MB for 70B's 80, graph and passes together); this is a lower bound of
/// that, so what it refuses could never have been built.
pub const BUILD_BYTES_PER_LAYER: u64 = 1 << 20;

fn check(cfg: &StepConfig) -> Result<(), StepError> {
    cfg.model.validate("model")?;
    let layers = cfg.model.num_hidden_layers.max(0) as u64;
    hlatc_runtime::host_memory::ensure_fits(
        &format!("building the step of {layers} layers (at least 1 MB each)"),
        layers.saturating_mul(BUILD_BYTES_PER_LAYER),
    )?;
    cfg.batch.validate(&cfg.model)?;
    if cfg.packed && cfg.batch.seq_len > cfg.model.max_position_embeddings {
        // Dynamic NTK's base follows the longest position in the batch,
        // which packed rows make a property of the data, not the step.
        return Err(hlatc_models::ConfigError::Field {
            source_name: "batch".into(),
            field: "seq_len".into(),
            message: format!(
                "{} exceeds max_position_embeddings = {} in packed rows: dynamic RoPE's base would depend on each batch's longest document, so a packed step stays within max_position_embeddings",
                cfg.batch.seq_len, cfg.model.max_position_embeddings
            ),
        }
        .into());
    }
    cfg.optimizer.validate().map_err(StepError::Optimizer)?;
    cfg.parallel.validate(&cfg.model, cfg.batch)?;
    Ok(())
}

/// A builder holding the model's parameters (first, in `param_specs`
/// order, stored as the first type and computed with as the second),
/// whatever `between` declares, then `tokens` and `targets`, and the
/// forward pass over them.
struct ModelGraph<T> {
    b: Builder,
    params: Vec<InstrId>,
    extra: T,
    fwd: hlatc_models::ForwardOutputs,
}

/// How the graph is laid out: what it is called, the types it stores and
/// computes in, packed rows, and its division over ranks (`batch` is the
/// global batch; each rank reads its DP replica's share).
struct GraphShape<'a> {
    name: &'a str,
    types: (ElementType, ElementType),
    packed: bool,
    parallel: Parallelism,
    fault: Option<Fault>,
    module_markers: bool,
}

impl<'a> GraphShape<'a> {
    fn single(name: &'a str, types: (ElementType, ElementType), packed: bool) -> Self {
        GraphShape {
            name,
            types,
            packed,
            parallel: Parallelism::SINGLE,
            fault: None,
            module_markers: false,
        }
    }
}

fn model_graph<T>(
    model: &ModelConfig,
    batch: BatchShape,
    shape: GraphShape,
    between: impl FnOnce(&mut Builder) -> T,
) -> Result<ModelGraph<T>, StepError> {
    let GraphShape {
        name,
        types: (ty, compute),
        packed,
        parallel,
        fault,
        module_markers,
    } = shape;
    let mut b = Builder::new(name);
    let stored: Vec<InstrId> = param_specs(model)
        .into_iter()
        .map(|p| {
            let dims = p.tp.local_dims(&p.dims, &parallel);
            b.parameter(&p.name, Shape::array(ty, dims))
        })
        .collect();
    let params = widen(&mut b, &stored, compute)?;
    let extra = between(&mut b);
    let batch = parallel.local_batch(batch);
    let bd = [batch.batch_size, batch.seq_len];
    let tokens = b.parameter("tokens", Shape::array(ElementType::S32, bd));
    let targets = b.parameter("targets", Shape::array(ElementType::S32, bd));
    let segments = packed.then(|| b.parameter("segment_ids", Shape::array(ElementType::S32, bd)));
    let inputs = ForwardInputs {
        params: &params,
        tokens,
        targets,
        segments,
        module_markers,
    };
    let fwd = forward_on_rank(&mut b, model, batch, inputs, parallel, fault)?;
    Ok(ModelGraph {
        b,
        params,
        extra,
        fwd,
    })
}

/// Builds the whole step. Inputs, in order: parameters, Adam m, Adam v, the
/// step counter (`s32[]`, completed steps), tokens and targets
/// (`s32[batch, seq]`). Outputs: loss, grad norm, learning rate, then the
/// updated parameters, m, v and step, each aliasing its input buffer.
pub fn build_train_step(cfg: &StepConfig) -> Result<TrainStep, StepError> {
    check(cfg)?;
    let (ty, m) = (cfg.precision.storage(), &cfg.model);
    let compute = cfg.precision.compute();
    let par = cfg.parallel;
    let specs = param_specs(m);
    let local = |p: &ParamSpec| p.tp.local_dims(&p.dims, &par);
    let t0 = Instant::now();
    let shape = GraphShape {
        name: "train_step",
        types: (ty, compute),
        packed: cfg.packed,
        parallel: par,
        fault: cfg.fault,
        module_markers: cfg.module_markers,
    };
    let g = model_graph(m, cfg.batch, shape, |b| {
        let declare = |b: &mut Builder, prefix: &str| -> Vec<InstrId> {
            specs
                .iter()
                .map(|p| b.parameter(&format!("{prefix}{}", p.name), Shape::array(ty, local(p))))
                .collect()
        };
        let adam_m = declare(b, ADAM_M_PREFIX);
        let adam_v = declare(b, ADAM_V_PREFIX);
        let step = b.parameter("step", Shape::scalar(ElementType::S32));
        (adam_m, adam_v, step)
    })?;
    let ModelGraph {
        mut b,
        params,
        extra: (adam_m, adam_v, step),
        fwd,
    } = g;
    let adam_m = widen(&mut b, &adam_m, compute)?;
    let adam_v = widen(&mut b, &adam_v, compute)?;
    let batch = par.local_batch(cfg.batch);
    let bd = [batch.batch_size, batch.seq_len];
    let t1 = Instant::now();
    let grads = if par.is_single() {
        autodiff::grad(&mut b, fwd.loss, &params, &fwd.grad_hints)?
    } else {
        rank_gradients(&mut b, cfg, fwd.loss, &params, &fwd.grad_hints, &specs)?
    };
    let t2 = Instant::now();
    let norm_squared = |b: &mut Builder, grads: &[InstrId]| {
        if par.is_single() {
            sum_of_squares(b, grads)
        } else {
            sharding::norm_squared(b, grads, &specs, &par, cfg.fault)
        }
    };
    let state = AdamWInputs {
        params: &params,
        grads: &grads,
        m: &adam_m,
        v: &adam_v,
        step,
    };
    let opt = adamw(&mut b, &cfg.optimizer, state, &norm_squared)?;
    let mut results = vec![fwd.loss, opt.grad_norm, opt.learning_rate];
    // The updates are computed in f32 and stored back in the state's type.
    for updated in [&opt.params, &opt.m, &opt.v] {
        for &u in updated.iter() {
            results.push(if ty == compute { u } else { b.convert(u, ty)? });
        }
    }
    results.push(opt.step);
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module("hlatc_train_step", root);
    module.devices.replica_count = par.world();
    let t3 = Instant::now();

    let mut inputs = Vec::new();
    for (prefix, role) in [
        ("", Role::Parameter),
        (ADAM_M_PREFIX, Role::AdamM),
        (ADAM_V_PREFIX, Role::AdamV),
    ] {
        inputs.extend(
            specs
                .iter()
                .map(|p| spec(&format!("{prefix}{}", p.name), ty, &local(p), role)),
        );
    }
    inputs.push(spec("step", ElementType::S32, &[], Role::Step));
    inputs.push(spec("tokens", ElementType::S32, &bd, Role::Tokens));
    inputs.push(spec("targets", ElementType::S32, &bd, Role::Targets));
    if cfg.packed {
        inputs.push(spec("segment_ids", ElementType::S32, &bd, Role::SegmentIds));
    }
    let mut outputs = vec![
        spec("loss", compute, &[], Role::Loss),
        spec("grad_norm", compute, &[], Role::GradNorm),
        spec("learning_rate", compute, &[], Role::LearningRate),
    ];
    // Updated state follows the statistics and reuses its input's buffer.
    outputs.extend(inputs.iter().filter(|s| s.role.is_state()).cloned());
    let layout = StateLayout::of(&inputs, &outputs).expect("every state input has its output");
    module.input_output_alias = layout
        .updates
        .iter()
        .map(|&(input, output)| IoAlias {
            output_index: vec![output as i64],
            parameter: input as i64,
            parameter_index: vec![],
            kind: AliasKind::MayAlias,
        })
        .collect();
    Ok(TrainStep {
        module,
        inputs,
        outputs,
        times: StageTimes {
            forward: t1 - t0,
            autodiff: t2 - t1,
            optimizer: t3 - t2,
        },
        passes: Vec::new(),
        pass_report: Default::default(),
        remat: hlatc_passes::RematPolicy::None,
        precision: cfg.precision,
        cast_policy: cfg.precision.cast_policy(),
        rounding: cfg.precision.default_rounding(),
    })
}

/// Every parameter's whole gradient on a rank of a sharded step: autodiff
/// of the rank's copy of the loss over the world size (each rank holds
/// the same loss), summed over the ranks that hold each parameter.
fn rank_gradients(
    b: &mut Builder,
    cfg: &StepConfig,
    loss: InstrId,
    params: &[InstrId],
    hints: &autodiff::GradHints,
    specs: &[ParamSpec],
) -> Result<Vec<InstrId>, StepError> {
    let par = cfg.parallel;
    let copies = match cfg.fault {
        Some(Fault::GradientSummedNotAveraged) => par.tp,
        _ => par.world(),
    };
    b.push_scope("backward");
    let objective = b.scale(loss, 1.0 / copies as f64)?;
    b.pop_scope();
    let grads = autodiff::grad(b, objective, params, hints)?;
    Ok(sharding::sum_over_holders(
        b, &grads, specs, &par, cfg.fault,
    )?)
}

/// Each of `xs` as `ty`: the stored state widened for computing (exactly;
/// `amp` sees through the convert and keeps computing in bf16 where the
/// policy says so).
fn widen(b: &mut Builder, xs: &[InstrId], ty: ElementType) -> Result<Vec<InstrId>, BuildError> {
    xs.iter()
        .map(|&x| match b.computation().instr(x).shape.as_array() {
            Some(a) if a.ty != ty => b.convert(x, ty),
            _ => Ok(x),
        })
        .collect()
}

/// Loss and the gradient of every parameter (no optimizer): the module the
/// gradient checks and the JAX parity test run. Inputs: parameters, tokens,
/// targets. Output: `(loss, grad...)` in parameter order.
pub fn build_loss_and_grads(
    model: &ModelConfig,
    batch: BatchShape,
    ty: ElementType,
) -> Result<Module, StepError> {
    loss_and_grads(model, batch, ty, false)
}

/// [`build_loss_and_grads`] for packed rows: a `segment_ids` input follows
/// the targets.
pub fn build_packed_loss_and_grads(
    model: &ModelConfig,
    batch: BatchShape,
    ty: ElementType,
) -> Result<Module, StepError> {
    loss_and_grads(model, batch, ty, true)
}

fn loss_and_grads(
    model: &ModelConfig,
    batch: BatchShape,
    ty: ElementType,
    packed: bool,
) -> Result<Module, StepError> {
    let ModelGraph {
        mut b, params, fwd, ..
    } = model_graph(
        model,
        batch,
        GraphShape::single("loss_and_grads", (ty, ty), packed),
        |_| (),
    )?;
    let grads = autodiff::grad(&mut b, fwd.loss, &params, &fwd.grad_hints)?;
    let mut results = vec![fwd.loss];
    results.extend(grads);
    let root = b.add(Op::Tuple, &results, None)?;
    Ok(b.into_module("hlatc_loss_and_grads", root))
}

/// The forward pass returning logits `[batch, seq, vocab]`. Inputs:
/// parameters, tokens, targets (targets only feed the unused loss).
pub fn build_logits(
    model: &ModelConfig,
    batch: BatchShape,
    ty: ElementType,
) -> Result<Module, StepError> {
    let ModelGraph { mut b, fwd, .. } = model_graph(
        model,
        batch,
        GraphShape::single("logits", (ty, ty), false),
        |_| (),
    )?;
    let logits = b.reshape(
        fwd.logits,
        &[batch.batch_size, batch.seq_len, model.vocab_size],
    )?;
    let mut m = b.into_module("hlatc_logits", logits);
    // The loss is not needed here; dead-code elimination cannot fail.
    let mut ctx = hlatc_passes::PassContext::new(hlatc_passes::Target::Cpu);
    let _ = hlatc_passes::Pass::run(&hlatc_passes::Dce, &mut m, &mut ctx);
    Ok(m)
}
