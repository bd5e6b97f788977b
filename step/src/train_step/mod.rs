//! The training step: the model's forward pass, its backward pass and the
//! AdamW update, in one HLO module, with every input and output described.

use crate::fsdp_prefetch::issue_gathers_ahead;
use crate::memory_parts::MemoryPlan;
use crate::optimizer::{adamw, sum_of_squares, AdamWConfig, AdamWInputs};
use crate::precision::Precision;
use crate::sharding;
use crate::spmd::{self, Spmd, SpmdError, RANK_INPUT};
use crate::zero1::{self, GatherUnit, Zero1};
use hlatc_compiler::graph::autodiff::{self, AutodiffError};
use hlatc_compiler::graph::builder::{BuildError, Builder};
use hlatc_compiler::{ElementType, InstrId, Module, Op, Shape};
use hlatc_models::option_name::OptionName as O;
use hlatc_models::parallel::Fault;
use hlatc_models::{
    forward_on_rank, param_specs, BatchShape, ConfigError, ForwardInputs, Kernels, MicroBatch,
    ModelConfig, ParallelError, Parallelism, ParamSpec,
};
use serde::Serialize;
use std::time::{Duration, Instant};

mod signature;
pub use signature::{output_with_role, state_name, Role, StateLayout, TensorSpec};
pub(crate) use signature::{parameter_spec, spec};

/// What a training step is built from. A bundle's manifest records it
/// (`config`), and `hlatc_artifacts::bundle::OpenedBundle` reads it back.
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
    /// The SPMD form a sharded step is written in, and where its ranks
    /// read their numbers. A manifest without it holds the replica form
    /// reading `replica-id`, all there was before the choice.
    #[serde(default)]
    pub spmd: Spmd,
    /// A deliberate mistake, for the tests that prove the sharded checks
    /// catch it; `None` in every real step.
    #[serde(skip)]
    pub fault: Option<Fault>,
    /// Mark each decoder layer's start and end, forward and backward, with
    /// neuronx-cc's module markers (`AwsNeuronModuleMarker*`), for its
    /// modular flow. Off by default, and then not in the manifest.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub module_markers: bool,
    /// What computes each kernel point (attention's core, ...). Every
    /// point is recorded; a manifest without it computed each by its
    /// plain graph, all there was before the choice.
    #[serde(default)]
    pub kernels: Kernels,
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
            spmd: Spmd::default(),
            fault: None,
            module_markers: false,
            kernels: Kernels::default(),
        }
    }

    /// This config with `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The SPMD form the step is written in: [`StepConfig::spmd`] for a
    /// sharded step; a step of one device has no form to choose, and is
    /// the default's.
    pub fn spmd_in_effect(&self) -> Spmd {
        match self.parallel.is_single() {
            true => Spmd::default(),
            false => self.spmd,
        }
    }

    /// Bytes of the state a step carries, over all ranks: parameters, the
    /// f32 master copy where the precision keeps one, and both Adam moments.
    pub fn state_bytes(&self) -> i64 {
        self.model
            .parameter_count()
            .saturating_mul(self.precision.state_bytes_per_parameter())
    }
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum StepError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("optimizer: {0}")]
    Optimizer(#[from] crate::optimizer::OptimizerConfigError),
    #[error(transparent)]
    Capacity(#[from] hlatc_models::moe::CapacityError),
    /// `--grad-accum` that does not divide the batch.
    #[error("{} must be at least 2 and divide the {per_replica} sequences each DP replica takes per step ({} over {})", O::GradAccum.set(.micro_batches), O::BatchSize.set(.batch_size), O::Dp.set(.dp))]
    Accumulation {
        micro_batches: i64,
        per_replica: i64,
        batch_size: i64,
        dp: i64,
    },
    #[error("building the graph: {0}")]
    Build(#[from] BuildError),
    #[error(transparent)]
    Autodiff(#[from] AutodiffError),
    #[error(transparent)]
    Parallel(#[from] ParallelError),
    /// Context parallelism with an attention kernel that has no CP form.
    #[error("{} with {}: only the plain graph (attention=hlo) and looped attention (attention=looped) read a CP rank's queries against the gathered keys; use one of them, or leave {} out", O::Cp.set(.cp), O::Kernel.set(format!("attention={}", .kernel)), O::Cp.named())]
    ContextKernel { cp: i64, kernel: String },
    /// Looped attention's tile crossing a CP rank's chunks.
    #[error("{} with {} {}: a tile must lie within one chunk of {chunk} tokens, and {tile} does not divide {chunk}; use a tile that divides it", O::Kernel.set(format!("attention=looped:{}", .tile)), O::Cp.set(.cp), O::CpBalance.set(.balance))]
    ContextTile {
        tile: i64,
        chunk: i64,
        cp: i64,
        balance: hlatc_models::CpBalance,
    },
    /// Ring attention with an attention kernel that is not looped.
    #[error("{} merges each step's block into the queries' running rows tile by tile, which only looped attention does: use {} (not attention={kernel}), or {}", O::CpExchange.set("ring"), O::Kernel.set("attention=looped[:TILE]"), O::CpExchange.set("all-gather"))]
    RingKernel { kernel: String },
    #[error(transparent)]
    Spmd(#[from] SpmdError),
    /// The graph would not fit in host memory while it is built.
    #[error(transparent)]
    HostMemory(#[from] hlatc_compiler::util::host_memory::TooLarge),
    #[error(transparent)]
    PipelineForm(#[from] crate::pipeline_form::FormError),
    /// `--pp-send all-gather` with a rank left without a partner.
    #[error("{} pairs every rank with another in each round of sends, but {} and each stage's {stage_ranks} ({} x {}) are both odd, so one rank is left alone; use an even {}, an even {} x {}, or {}", O::PpSend.set("all-gather"), O::Pp.set(.pp), O::Tp.named(), O::Dp.named(), O::Pp.named(), O::Tp.named(), O::Dp.named(), O::PpSend.set("permute"))]
    UnpairedStageSend { pp: i64, stage_ranks: i64 },
    /// The stage's layers built differently in two slots: a kept
    /// activation would be read for the wrong value. A defect of hlatc's,
    /// never of the input.
    #[error("internal error: the stage's layers were built differently for two micro-batches (kept value {place}{}); please report it", if value.is_empty() { String::new() } else { format!(", '{value}'") })]
    StageLayersDiffer { place: usize, value: String },
    /// A tick program with a forward slot alone built without knowing what
    /// the backward slot reads.
    #[error("internal error: a pipeline's warm-up program was built before its steady program had found what the forward slot keeps; please report it")]
    KeptValuesUnknown,
}

/// Time spent in each stage of building the step.
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    pub forward: Duration,
    pub autodiff: Duration,
    pub optimizer: Duration,
    /// [`optimize`]'s whole time, its passes and the memory plan it
    /// measures (zero until it runs).
    pub passes: Duration,
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
    /// The SPMD form the module is written in ([`StepConfig::spmd`] for a
    /// sharded step, the default for one device): [`optimize`] numbers the
    /// channels of the partition form again after its passes.
    pub spmd: Spmd,
    /// The memory plan of the module [`optimize`] produced (`None` before
    /// it ran): what [`MemoryPlan::of`] answers. A caller that changes the
    /// module afterwards measures it again ([`MemoryPlan::measure`]).
    pub memory: Option<MemoryPlan>,
    /// What a rank gathers from its FSDP shards each step; nothing
    /// without FSDP.
    pub gathered_weights: GatheredWeights,
}

/// The weights FSDP gathers on a rank, in bytes of their stored type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatheredWeights {
    /// Its TP share of every weight: what the backward makes gradients of.
    pub whole: u64,
    /// The most alive at once: `whole` when the gathered weights are kept
    /// from the forward to the backward; resharded, the largest two
    /// neighbouring units', each unit gathered again in the backward as
    /// it comes and the next one prefetched beside it.
    pub alive: u64,
    /// The weights' whole gradients alive at once, in the weights' type:
    /// every one where the gathered weights are kept (their buckets span
    /// units); resharded, the largest unit's, each unit's summed as the
    /// backward leaves it.
    pub gradients: u64,
}

impl GatheredWeights {
    fn of(cfg: &StepConfig) -> GatheredWeights {
        if !cfg.parallel.shards_weights() {
            return GatheredWeights::default();
        }
        let bytes = cfg.precision.storage().byte_size() as u64;
        let mut units: std::collections::BTreeMap<GatherUnit, u64> = Default::default();
        for p in param_specs(&cfg.model) {
            let n = cfg.parallel.local_dims(&p).iter().product::<i64>() as u64 * bytes;
            *units.entry(GatherUnit::of(&p)).or_default() += n;
        }
        let whole = units.values().sum();
        let sizes: Vec<u64> = units.values().copied().collect();
        let largest_unit = sizes.iter().copied().max().unwrap_or(0);
        let (alive, gradients) = match cfg.parallel.reshards() {
            // In the forward's order, which the backward's reverses.
            true => (
                sizes
                    .windows(2)
                    .map(|pair| pair[0] + pair[1])
                    .max()
                    .unwrap_or(largest_unit),
                largest_unit,
            ),
            false => (whole, whole),
        };
        GatheredWeights {
            whole,
            alive,
            gradients,
        }
    }
}

impl TrainStep {
    /// Its instructions as built, before [`optimize`]'s passes: the
    /// pipeline's first run counted them (the module's own count until the
    /// passes ran).
    pub fn instructions_built(&self) -> usize {
        self.pass_report.runs.first().map_or_else(
            || self.module.instruction_count(),
            |r| r.instructions_before,
        )
    }

    /// A step just built for `cfg` in the replica form with `replica-id`,
    /// with its signature, written in `cfg`'s SPMD form when it is sharded:
    /// no pass has run, and the preset's cast and rounding policies are the
    /// ones it will run with.
    pub(crate) fn built(
        mut module: Module,
        cfg: &StepConfig,
        (mut inputs, outputs): (Vec<TensorSpec>, Vec<TensorSpec>),
        times: StageTimes,
    ) -> Result<TrainStep, StepError> {
        let spmd = cfg.spmd_in_effect();
        spmd.set_devices(&mut module, cfg.parallel);
        if let Some(number) = spmd::rank_source(&mut module, spmd)? {
            debug_assert_eq!(number as usize, inputs.len());
            inputs.push(spec(RANK_INPUT, ElementType::S32, &[1], Role::Rank));
        }
        spmd::channels_and_shardings(&mut module, spmd);
        let gathered_weights = GatheredWeights::of(cfg);
        Ok(TrainStep {
            gathered_weights,
            module,
            inputs,
            outputs,
            times,
            passes: Vec::new(),
            pass_report: Default::default(),
            remat: hlatc_passes::RematPolicy::None,
            precision: cfg.precision,
            cast_policy: cfg.precision.cast_policy(),
            rounding: cfg.precision.default_rounding(),
            spmd,
            memory: None,
        })
    }
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
    let started = Instant::now();
    let mut ctx = hlatc_passes::PassContext::new(target);
    ctx.remat = remat;
    ctx.cast = step.cast_policy.clone();
    ctx.rounding = step.rounding.clone();
    step.remat = remat;
    step.memory = None;
    // The step's weights are separate inputs; concatenating them in the
    // graph would copy every weight every step.
    ctx.concat_entry_parameters = false;
    // The manifest's inputs and outputs (their dtypes too) are the step's.
    ctx.keep_entry_signature = true;
    // The passes see the program every SPMD form shares.
    spmd::without_channels_and_shardings(&mut step.module, step.spmd);
    let report = pipeline.run_module(&mut step.module, &mut ctx);
    spmd::channels_and_shardings(&mut step.module, step.spmd);
    let report = report?;
    for added in &ctx.added_state {
        let shape = step.module.entry().parameters()[added.parameter];
        let shape = &step.module.entry().instr(shape).shape;
        let Some(a) = shape.as_array() else {
            return Err(hlatc_passes::PassError::AddedStateNotArray {
                pass: "optimize".into(),
                name: added.name.clone(),
            });
        };
        if added.parameter != step.inputs.len() || added.output != step.outputs.len() {
            return Err(hlatc_passes::PassError::AddedStateOutOfPlace {
                pass: "optimize".into(),
                name: added.name.clone(),
                parameter: added.parameter,
                output: added.output,
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
    step.memory = Some(MemoryPlan::measure(step));
    step.times.passes = started.elapsed();
    Ok(())
}

/// Host memory building a step takes per decoder layer, at least. The
/// compile's peak grows by 1.5 MB a layer (53 MB for 7B's 32 layers, 127
/// MB for 70B's 80, graph and passes together); this is a lower bound of
/// that, so what it refuses could never have been built.
pub const BUILD_BYTES_PER_LAYER: u64 = 1 << 20;

/// Whether attention's kernel has a form for the step's context
/// parallelism: the plain graph, or looped attention whose tiles lie
/// within the chunks a CP rank holds.
fn check_context_kernel(cfg: &StepConfig) -> Result<(), StepError> {
    use hlatc_models::kernels::ContextForm;
    let par = cfg.parallel;
    if par.cp == 1 {
        return Ok(());
    }
    let chunk = cfg.batch.seq_len / par.cp_balance.chunks(par.cp);
    let ring = par.cp_exchange == hlatc_models::CpExchange::Ring;
    let kernel = &cfg.kernels.attention;
    match kernel.context_form() {
        ContextForm::Gathered if ring => Err(StepError::RingKernel {
            kernel: kernel.to_string(),
        }),
        ContextForm::Gathered => Ok(()),
        ContextForm::Tiled { tile } if chunk % tile == 0 => Ok(()),
        ContextForm::Tiled { tile } => Err(StepError::ContextTile {
            tile,
            chunk,
            cp: par.cp,
            balance: par.cp_balance,
        }),
        ContextForm::None if ring => Err(StepError::RingKernel {
            kernel: kernel.to_string(),
        }),
        ContextForm::None => Err(StepError::ContextKernel {
            cp: par.cp,
            kernel: kernel.to_string(),
        }),
    }
}

pub(crate) fn check(cfg: &StepConfig) -> Result<(), StepError> {
    cfg.model.validate("model")?;
    let layers = cfg.model.num_hidden_layers.max(0) as u64;
    hlatc_compiler::util::host_memory::ensure_fits(
        &format!("building the step of {layers} layers (at least 1 MB each)"),
        layers.saturating_mul(BUILD_BYTES_PER_LAYER),
    )?;
    cfg.batch.validate(&cfg.model)?;
    if cfg.packed && cfg.batch.seq_len > cfg.model.max_position_embeddings {
        // Dynamic NTK's base follows the longest position in the batch,
        // which packed rows make a property of the data, not the step.
        return Err(hlatc_models::ConfigError::field(
            "batch",
            "seq_len",
            hlatc_models::FieldProblem::PackedPastMaxPositions {
                seq_len: cfg.batch.seq_len,
                max: cfg.model.max_position_embeddings,
            },
        )
        .into());
    }
    cfg.optimizer.validate()?;
    cfg.parallel.validate(&cfg.model, cfg.batch)?;
    check_context_kernel(cfg)?;
    Ok(())
}

/// A builder holding the model's parameters (first, in `param_specs`
/// order, stored as the first type and computed with as the second),
/// whatever `between` declares, then `tokens` and `targets`, and the
/// forward pass over them.
pub(crate) struct ModelGraph<T> {
    pub(crate) b: Builder,
    pub(crate) params: Vec<InstrId>,
    /// Under FSDP, the weights as the rank stores them (its shards, the
    /// step's inputs) and the replicas that gathered them into `params`.
    pub(crate) fsdp: Option<FsdpWeights>,
    pub(crate) extra: T,
    pub(crate) fwd: hlatc_models::ForwardOutputs,
}

/// The weights of an FSDP step before they are gathered.
pub(crate) struct FsdpWeights {
    /// Each weight's shard, as stored (the step's parameter inputs).
    pub(crate) shards: Vec<InstrId>,
    /// The replicas the shards are divided over, and their collectives.
    pub(crate) division: Zero1,
}

/// How the graph is laid out: what it is called, the types it stores and
/// computes in, packed rows, and its division over ranks (`batch` is the
/// global batch; each rank reads its DP replica's share).
pub(crate) struct GraphShape<'a> {
    pub(crate) name: &'a str,
    pub(crate) types: (ElementType, ElementType),
    pub(crate) packed: bool,
    pub(crate) parallel: Parallelism,
    pub(crate) fault: Option<Fault>,
    pub(crate) module_markers: bool,
    pub(crate) kernels: Kernels,
    /// Some(K): the batch is one of K micro-batches of the step, its loss a
    /// share of the mean over a `token_count` input (`s32[]`, declared
    /// after whatever `between` declares): a micro step of gradient
    /// accumulation ([`hlatc_models::MicroBatch`]).
    pub(crate) micro_batches: Option<i64>,
}

impl<'a> GraphShape<'a> {
    /// The graph of `cfg`'s step, named `name`.
    pub(crate) fn of(name: &'a str, cfg: &StepConfig, micro_batches: Option<i64>) -> Self {
        GraphShape {
            name,
            types: (cfg.precision.storage(), cfg.precision.compute()),
            packed: cfg.packed,
            parallel: cfg.parallel,
            fault: cfg.fault,
            module_markers: cfg.module_markers,
            kernels: cfg.kernels.clone(),
            micro_batches,
        }
    }

    fn single(name: &'a str, types: (ElementType, ElementType), packed: bool) -> Self {
        GraphShape {
            name,
            types,
            packed,
            parallel: Parallelism::SINGLE,
            fault: None,
            module_markers: false,
            kernels: Kernels::default(),
            micro_batches: None,
        }
    }
}

pub(crate) fn model_graph<T>(
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
        kernels,
        micro_batches,
    } = shape;
    let mut b = Builder::new(name);
    let specs = param_specs(model);
    let stored: Vec<InstrId> = specs
        .iter()
        .map(|p| {
            let dims = state_dims(p, Role::Parameter, &parallel);
            b.parameter(&p.name, Shape::array(ty, dims))
        })
        .collect();
    // Under FSDP each weight is gathered whole, in the type it is stored
    // in (bf16 under bf16-master: half the bytes of f32), before the
    // forward reads it.
    let gather_from = b.computation().len();
    let (whole, fsdp) = match parallel.shards_weights() {
        true => {
            let division = Zero1::new(&mut b, parallel, fault)?;
            let whole = division.gather(&mut b, &stored, &specs)?;
            let shards = stored;
            (whole, Some(FsdpWeights { shards, division }))
        }
        false => (stored, None),
    };
    let params = widen(&mut b, &whole, compute)?;
    let regathered: Vec<InstrId> = match parallel.reshards() {
        true => b.computation().ids().skip(gather_from).collect(),
        false => Vec::new(),
    };
    let extra = between(&mut b);
    let micro_batch = micro_batches.map(|of| MicroBatch {
        token_count: b.parameter("token_count", Shape::scalar(ElementType::S32)),
        of,
    });
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
        kernels,
        micro_batch,
    };
    let mut fwd = forward_on_rank(&mut b, model, batch, inputs, parallel, fault)?;
    // Resharded: every backward rule reading a weight (or a view of it)
    // reads it gathered again from the shards, behind remat's barrier, and
    // the forward gathers each unit one unit ahead.
    fwd.grad_hints
        .recompute
        .extend(weight_derived(&b, regathered));
    if let Some(f) = fsdp.as_ref().filter(|_| parallel.reshards()) {
        let read = issue_gathers_ahead(&mut b, &f.shards, &specs, &fwd.layer_inputs)?;
        fwd.grad_hints.stop.extend(read);
    }
    Ok(ModelGraph {
        b,
        params,
        fsdp,
        extra,
        fwd,
    })
}

/// `gathered` and every forward value computed from them (and constants)
/// alone: the views of the weights (transposes, slices, broadcasts) the
/// backward rules read.
fn weight_derived(b: &Builder, gathered: Vec<InstrId>) -> Vec<InstrId> {
    let Some(&first) = gathered.first() else {
        return gathered;
    };
    let c = b.computation();
    let mut set: std::collections::HashSet<InstrId> = gathered.iter().copied().collect();
    let mut out = gathered;
    let constant = |o: &InstrId| matches!(c.instr(*o).op, Op::Constant(_) | Op::Iota { .. });
    for id in c.ids().skip_while(|&id| id != first) {
        let ops = c.operands(id);
        let derived = !set.contains(&id)
            && ops.iter().any(|o| set.contains(o))
            && ops.iter().all(|o| set.contains(o) || constant(o));
        if derived {
            set.insert(id);
            out.push(id);
        }
    }
    out
}

/// Builds the whole step. Inputs, in order: parameters, their master
/// weights (under `bf16-master`), Adam m, Adam v, the step counter
/// (`s32[]`, completed steps), tokens and targets (`s32[batch, seq]`).
/// Outputs: loss, grad norm, learning rate, then the updated parameters,
/// master weights, m, v and step, each aliasing its input buffer.
pub fn build_train_step(cfg: &StepConfig) -> Result<TrainStep, StepError> {
    check(cfg)?;
    let m = &cfg.model;
    let par = cfg.parallel;
    let specs = param_specs(m);
    let t0 = Instant::now();
    let shape = GraphShape::of("train_step", cfg, None);
    let g = model_graph(m, cfg.batch, shape, |b| {
        OptimizerState::declare(b, cfg, &specs)
    })?;
    let ModelGraph {
        mut b,
        params,
        fsdp,
        extra: state,
        fwd,
    } = g;
    let t1 = Instant::now();
    let (zero1, shards) = match fsdp {
        Some(f) => {
            let shards = widen(&mut b, &f.shards, cfg.precision.compute())?;
            (Some(f.division), Some(shards))
        }
        None if par.zero1 => (Some(Zero1::new(&mut b, par, cfg.fault)?), None),
        None => (None, None),
    };
    let grads = match (&zero1, par.is_single()) {
        (_, true) => autodiff::grad(&mut b, fwd.loss, &params, &fwd.grad_hints)?,
        (None, false) => rank_gradients(&mut b, cfg, fwd.loss, &params, &fwd.grad_hints, &specs)?,
        (Some(z), false) => {
            let grads = rank_gradients_unsummed(&mut b, cfg, fwd.loss, &params, &fwd.grad_hints)?;
            z.scatter_gradients(&mut b, &grads, &specs)?
        }
    };
    let t2 = Instant::now();
    let mut results = vec![fwd.loss];
    results.extend(update(
        &mut b,
        cfg,
        &specs,
        &params,
        &grads,
        state,
        Division::of(zero1.as_ref(), shards.as_deref()),
    )?);
    results.extend(expert_results(&fwd));
    let root = b.add(Op::Tuple, &results, None)?;
    let mut module = b.into_module("hlatc_train_step", root);
    let t3 = Instant::now();

    let (inputs, outputs) = signature(cfg, &specs);
    let layout = StateLayout::of(&inputs, &outputs).expect("every state input has its output");
    module.input_output_alias = layout.aliases();
    let times = StageTimes {
        forward: t1 - t0,
        autodiff: t2 - t1,
        optimizer: t3 - t2,
        passes: Duration::ZERO,
    };
    TrainStep::built(module, cfg, (inputs, outputs), times)
}

/// The shape of a per-parameter state input of `role` on one rank: the
/// parameter's TP share, or under ZeRO-1 (the optimizer state) and FSDP
/// (every role) the replica's shard of it.
pub(crate) fn state_dims(p: &ParamSpec, role: Role, par: &Parallelism) -> Vec<i64> {
    let local = par.local_dims(p);
    match role.is_divided_by(par) {
        true => vec![zero1::shard_len(&local, par.zero1_degree(p))],
        false => local,
    }
}

/// The type a per-parameter state input of `role` is stored in.
fn state_type(precision: Precision, role: Role) -> ElementType {
    match role.is_optimizer_state() {
        true => precision.optimizer_storage(),
        false => precision.storage(),
    }
}

/// The per-parameter roles a step carries, in input order.
fn per_parameter_roles(precision: Precision) -> Vec<Role> {
    let mut roles = vec![Role::Parameter];
    if precision.keeps_master_weights() {
        roles.push(Role::MasterWeight);
    }
    roles.extend([Role::AdamM, Role::AdamV]);
    roles
}

/// The step's inputs and outputs, from the roles it carries.
/// The optimizer step's state inputs, in order: parameters, master
/// weights, Adam moments (each of `roles`' per-parameter inputs), then the
/// step counter.
pub(crate) fn state_specs(cfg: &StepConfig, specs: &[ParamSpec]) -> Vec<TensorSpec> {
    let mut inputs = Vec::new();
    for role in per_parameter_roles(cfg.precision) {
        let ty = state_type(cfg.precision, role);
        inputs.extend(
            specs
                .iter()
                .map(|p| parameter_spec(p, role, ty, &state_dims(p, role, &cfg.parallel))),
        );
    }
    inputs.push(spec("step", ElementType::S32, &[], Role::Step));
    inputs
}

fn signature(cfg: &StepConfig, specs: &[ParamSpec]) -> (Vec<TensorSpec>, Vec<TensorSpec>) {
    let mut inputs = state_specs(cfg, specs);
    let batch = cfg.parallel.local_batch(cfg.batch);
    let bd = [batch.batch_size, batch.seq_len];
    inputs.push(spec("tokens", ElementType::S32, &bd, Role::Tokens));
    inputs.push(spec("targets", ElementType::S32, &bd, Role::Targets));
    if cfg.packed {
        inputs.push(spec("segment_ids", ElementType::S32, &bd, Role::SegmentIds));
    }
    let compute = cfg.precision.compute();
    let mut outputs = vec![
        spec("loss", compute, &[], Role::Loss),
        spec("grad_norm", compute, &[], Role::GradNorm),
        spec("learning_rate", compute, &[], Role::LearningRate),
    ];
    // Updated state follows the statistics and reuses its input's buffer.
    outputs.extend(inputs.iter().filter(|s| s.role.is_state()).cloned());
    outputs.extend(expert_outputs(cfg));
    (inputs, outputs)
}

/// A mixture of experts' routing counts, last among a step's outputs
/// (after the state, whose order the other outputs do not disturb);
/// none for a dense model.
pub(crate) fn expert_outputs(cfg: &StepConfig) -> Vec<TensorSpec> {
    let Some(moe) = &cfg.model.moe else {
        return Vec::new();
    };
    let e = [moe.num_experts];
    vec![
        spec("expert_tokens", ElementType::F32, &e, Role::ExpertTokens),
        spec("dropped_tokens", ElementType::F32, &[], Role::DroppedTokens),
    ]
}

/// The values of [`expert_outputs`], in its order.
pub(crate) fn expert_results(fwd: &hlatc_models::ForwardOutputs) -> Vec<InstrId> {
    fwd.experts
        .iter()
        .flat_map(|c| [c.routed, c.dropped])
        .collect()
}

/// The optimizer's inputs, declared after the parameters: master weights
/// (where the precision keeps them), the Adam moments (each widened to
/// the compute type) and the step counter.
pub(crate) struct OptimizerState {
    master: Vec<InstrId>,
    m: Vec<InstrId>,
    v: Vec<InstrId>,
    step: InstrId,
}

impl OptimizerState {
    pub(crate) fn declare(b: &mut Builder, cfg: &StepConfig, specs: &[ParamSpec]) -> Self {
        let mut declare = |role: Role| -> Vec<InstrId> {
            let ty = state_type(cfg.precision, role);
            specs
                .iter()
                .map(|p| {
                    let dims = state_dims(p, role, &cfg.parallel);
                    b.parameter(&state_name(role, &p.name), Shape::array(ty, dims))
                })
                .collect()
        };
        let master = match cfg.precision.keeps_master_weights() {
            true => declare(Role::MasterWeight),
            false => Vec::new(),
        };
        let m = declare(Role::AdamM);
        let v = declare(Role::AdamV);
        let step = b.parameter("step", Shape::scalar(ElementType::S32));
        OptimizerState { master, m, v, step }
    }
}

/// How a step's state is divided over its DP replicas, as its update sees
/// it.
#[derive(Clone, Copy)]
pub(crate) enum Division<'a> {
    /// Every replica holds all of it.
    Replicated,
    /// ZeRO-1: the optimizer state in shards, the weights whole.
    Zero1(&'a Zero1),
    /// FSDP: the weights in shards too (`shards`, widened to the compute
    /// type), never gathered after the update.
    Fsdp {
        division: &'a Zero1,
        shards: &'a [InstrId],
    },
}

impl<'a> Division<'a> {
    pub(crate) fn of(zero1: Option<&'a Zero1>, fsdp_shards: Option<&'a [InstrId]>) -> Self {
        match (zero1, fsdp_shards) {
            (Some(division), Some(shards)) => Division::Fsdp { division, shards },
            (Some(z), None) => Division::Zero1(z),
            (None, _) => Division::Replicated,
        }
    }

    fn replicas(self) -> Option<&'a Zero1> {
        match self {
            Division::Replicated => None,
            Division::Zero1(z) | Division::Fsdp { division: z, .. } => Some(z),
        }
    }
}

/// The optimizer's outputs after the loss: grad norm, learning rate, the
/// new parameters, master weights, moments and step counter. The update
/// is applied to the master weights where there are any (the parameters
/// become them rounded to nearest), under ZeRO-1 to this rank's shard of
/// each (gathered into the new parameters), and under FSDP to the shards
/// the rank stores (kept as they are: the next step gathers them).
pub(crate) fn update(
    b: &mut Builder,
    cfg: &StepConfig,
    specs: &[ParamSpec],
    params: &[InstrId],
    grads: &[InstrId],
    state: OptimizerState,
    division: Division,
) -> Result<Vec<InstrId>, StepError> {
    let (ty, compute) = (cfg.precision.storage(), cfg.precision.compute());
    let opt_ty = cfg.precision.optimizer_storage();
    let par = cfg.parallel;
    let zero1 = division.replicas();
    let master = widen(b, &state.master, compute)?;
    let targets = match (master.is_empty(), division) {
        (false, _) => master,
        (true, Division::Replicated) => params.to_vec(),
        (true, Division::Fsdp { shards, .. }) => shards.to_vec(),
        (true, Division::Zero1(z)) => params
            .iter()
            .zip(specs)
            .map(|(&p, spec)| z.shard(b, p, spec, &format!("{}.zero1_shard", spec.name)))
            .collect::<Result<_, _>>()?,
    };
    let m = widen(b, &state.m, compute)?;
    let v = widen(b, &state.v, compute)?;
    let stage_norm = |b: &mut Builder, grads: &[InstrId], specs: &[ParamSpec]| match zero1 {
        Some(z) => z.norm_squared(b, grads, specs),
        None if par.is_single() => sum_of_squares(b, grads),
        None => sharding::norm_squared(b, grads, specs, &par, cfg.fault),
    };
    let norm_squared = |b: &mut Builder, grads: &[InstrId]| {
        sharding::norm_squared_over_stages(b, grads, specs, &par, &stage_norm)
    };
    let inputs = AdamWInputs {
        params: &targets,
        grads,
        m: &m,
        v: &v,
        step: state.step,
    };
    let opt = adamw(b, &cfg.optimizer, inputs, &norm_squared)?;
    let stored = |b: &mut Builder, xs: &[InstrId], to: ElementType| widen(b, xs, to);
    let mut results = vec![opt.grad_norm, opt.learning_rate];
    // The updates are computed in f32 and stored back in the state's type;
    // under ZeRO-1 each shard is stored before it is gathered.
    let new_params = stored(b, &opt.params, ty)?;
    results.extend(match division {
        Division::Zero1(z) => z.gather(b, &new_params, specs)?,
        Division::Fsdp { .. } | Division::Replicated => new_params,
    });
    if cfg.precision.keeps_master_weights() {
        results.extend(stored(b, &opt.params, opt_ty)?);
    }
    results.extend(stored(b, &opt.m, opt_ty)?);
    results.extend(stored(b, &opt.v, opt_ty)?);
    results.push(opt.step);
    Ok(results)
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
    let grads = rank_gradients_unsummed(b, cfg, loss, params, hints)?;
    Ok(sharding::sum_over_holders(
        b,
        &grads,
        specs,
        &cfg.parallel,
        cfg.fault,
    )?)
}

/// This rank's share of every parameter's gradient: autodiff of the rank's
/// copy of the loss over the world size (each rank holds the same loss),
/// before any sum over ranks.
pub(crate) fn rank_gradients_unsummed(
    b: &mut Builder,
    cfg: &StepConfig,
    loss: InstrId,
    params: &[InstrId],
    hints: &autodiff::GradHints,
) -> Result<Vec<InstrId>, StepError> {
    let par = cfg.parallel;
    // Every rank of a stage holds the loss (only the last stage computes
    // it under pipeline parallelism).
    let copies = match cfg.fault {
        Some(Fault::GradientSummedNotAveraged) => par.tp,
        _ => par.stage_world(),
    };
    Ok(autodiff::grad_of_scaled(
        b,
        loss,
        1.0 / copies as f64,
        params,
        hints,
    )?)
}

/// Each of `xs` as `ty`: the stored state widened for computing (exactly;
/// `amp` sees through the convert and keeps computing in bf16 where the
/// policy says so).
pub(crate) fn widen(
    b: &mut Builder,
    xs: &[InstrId],
    ty: ElementType,
) -> Result<Vec<InstrId>, BuildError> {
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
