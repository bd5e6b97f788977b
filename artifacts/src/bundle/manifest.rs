//! `manifest.json`: what a training stack needs to know of every buffer of
//! the module, and how a sharded step is divided.

use super::files::{BUNDLE_FORMAT, PROTO_FILE, TEXT_FILE};
use super::listing;
use super::neuron::{NeuronCompile, RoundingSummary};
use super::target::BundleTarget;
use hlatc_models::param_specs;
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::train_step::{Role, StepConfig, TensorSpec, TrainStep};
use serde::Serialize;
use std::collections::BTreeMap;

/// The manifest of the bundle of `step` (for `cfg`, compiled for `target`)
/// whose proto hashes to `sha256`: what `manifest.json` holds.
pub fn manifest_json(
    step: &TrainStep,
    cfg: &StepConfig,
    target: BundleTarget,
    sha256: &str,
) -> String {
    let rounding = RoundingSummary::of(&step.module, target.target());
    let compile = target
        .chip()
        .map(|chip| NeuronCompile::of(&step.module, chip));
    manifest_with(step, cfg, target, compile, sha256, rounding)
}

/// [`manifest_json`] with the step's `rounding` already counted, and
/// its Neuron compile (`target`'s chip's) already chosen.
pub(super) fn manifest_with(
    step: &TrainStep,
    cfg: &StepConfig,
    target: BundleTarget,
    compile: Option<NeuronCompile>,
    sha256: &str,
    rounding: RoundingSummary,
) -> String {
    let neuron = compile.map(|compile| {
        let chip = compile.chip;
        NeuronInfo {
            chip: chip.name(),
            logical_nc_config: chip.logical_nc_config(),
            hbm_per_core: chip.hbm_per_core(),
            command: compile.command(),
            flags: compile.flags(),
            env: compile.env(rounding.stochastic > 0).into_iter().collect(),
        }
    });
    let fused_parts: BTreeMap<String, Vec<hlatc_models::HfPart>> = param_specs(&cfg.model)
        .into_iter()
        .filter(|p| !p.parts.is_empty())
        .map(|p| (p.name, p.parts))
        .collect();
    let manifest = Manifest {
        format: BUNDLE_FORMAT,
        hlatc_version: env!("CARGO_PKG_VERSION"),
        target: target.name(),
        passes: &step.passes,
        remat: step.remat.name(),
        precision: PrecisionInfo {
            preset: step.precision.name(),
            storage: step.precision.storage().name(),
            cast_policy: step
                .cast_policy
                .as_ref()
                .map_or_else(|| "none".to_string(), |p| p.describe()),
            rounding_policy: step.rounding.name().to_string(),
            rounding,
        },
        module: ModuleInfo {
            name: &step.module.name,
            proto: PROTO_FILE,
            text: TEXT_FILE,
            sha256: sha256.to_string(),
            instructions: step.module.instruction_count(),
            computations: step.module.computations.len(),
        },
        parameter_count: cfg.model.parameter_count(),
        parameter_tensors: param_specs(&cfg.model).len(),
        inputs: indexed(&step.inputs, &fused_parts),
        outputs: indexed(&step.outputs, &fused_parts),
        input_output_alias: alias_runs(
            step.module
                .input_output_alias
                .iter()
                .map(|a| (a.output_index[0] as usize, a.parameter as usize)),
        ),
        config: cfg,
        loss: LossInfo {
            kind: "mean cross-entropy over the targets not equal to ignore_index (0 when all are)",
            ignore_index: hlatc_models::IGNORE_INDEX,
        },
        init: InitPolicy {
            std: cfg.model.initializer_range,
            output_projection_std: cfg.model.output_projection_std(),
            norms: "ones, biases zero",
        },
        neuron,
        parallel: parallel_info(cfg, &step.inputs),
        memory_per_rank: MemoryInfo::of(MemoryPlan::of(step)),
    };
    serde_json::to_string_pretty(&manifest).expect("the manifest serializes")
}

#[derive(Serialize)]
struct Manifest<'a> {
    format: &'static str,
    hlatc_version: &'static str,
    target: &'static str,
    /// The passes that ran over the module, in order.
    passes: &'a [String],
    /// The activation-checkpointing policy `remat` ran with.
    remat: &'static str,
    precision: PrecisionInfo,
    module: ModuleInfo<'a>,
    parameter_count: i64,
    parameter_tensors: usize,
    /// Runs of layers stated once ([`listing`]).
    inputs: Vec<listing::Listed<IndexedTensor>>,
    outputs: Vec<listing::Listed<IndexedTensor>>,
    input_output_alias: Vec<Alias>,
    config: &'a StepConfig,
    loss: LossInfo,
    init: InitPolicy,
    #[serde(skip_serializing_if = "Option::is_none")]
    neuron: Option<NeuronInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel: Option<ParallelInfo>,
    memory_per_rank: MemoryInfo,
}

#[derive(Serialize)]
struct ModuleInfo<'a> {
    name: &'a str,
    proto: &'static str,
    text: &'static str,
    sha256: String,
    instructions: usize,
    computations: usize,
}

#[derive(Serialize)]
struct IndexedTensor {
    index: usize,
    #[serde(flatten)]
    spec: TensorSpec,
    /// For a fused tensor (and its Adam moments), which rows hold which
    /// Hugging Face tensor.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    hugging_face: Vec<hlatc_models::HfPart>,
}

impl listing::PerLayer for IndexedTensor {
    fn index(&self) -> usize {
        self.index
    }

    fn templated(&self) -> Option<(i64, Self)> {
        let layer = self.spec.layer?;
        let parameter = match &self.spec.parameter {
            Some(p) => Some(listing::template(p, layer)?),
            None => None,
        };
        Some((
            layer,
            IndexedTensor {
                index: self.index,
                spec: TensorSpec {
                    name: listing::template(&self.spec.name, layer)?,
                    parameter,
                    layer: None,
                    ..self.spec.clone()
                },
                hugging_face: templated_parts(&self.hugging_face, layer),
            },
        ))
    }

    fn alike(&self, other: &Self) -> bool {
        (&self.spec, &self.hugging_face) == (&other.spec, &other.hugging_face)
    }
}

/// A fused tensor's members in its layer's run, `{layer}` for its number.
fn templated_parts(parts: &[hlatc_models::HfPart], layer: i64) -> Vec<hlatc_models::HfPart> {
    parts
        .iter()
        .map(|p| hlatc_models::HfPart {
            name: listing::in_template(&p.name, layer),
            ..p.clone()
        })
        .collect()
}

/// Outputs `output + i` alias inputs `input + i`, for i in `[0, count)`:
/// a step's state is one run, stated once.
#[derive(Serialize)]
struct Alias {
    output: usize,
    input: usize,
    count: usize,
}

/// The step's aliases, each longest run of consecutive pairs as one.
fn alias_runs(pairs: impl Iterator<Item = (usize, usize)>) -> Vec<Alias> {
    let mut runs: Vec<Alias> = Vec::new();
    for (output, input) in pairs {
        match runs.last_mut() {
            Some(a) if a.output + a.count == output && a.input + a.count == input => a.count += 1,
            _ => runs.push(Alias {
                output,
                input,
                count: 1,
            }),
        }
    }
    runs
}

/// The precision the step computes in, and how it rounds.
#[derive(Serialize)]
struct PrecisionInfo {
    preset: &'static str,
    /// Type of the weights and the optimizer state.
    storage: &'static str,
    /// The `amp` cast policy, one line; `none` for fp32.
    cast_policy: String,
    rounding_policy: String,
    rounding: RoundingSummary,
}

#[derive(Serialize)]
struct NeuronInfo {
    /// The chip neuronx-cc compiles for (`--target`).
    chip: &'static str,
    /// Physical NeuronCores per logical core, as compiled for and as the
    /// runtime must be configured.
    logical_nc_config: u32,
    /// Bytes of HBM per (logical) core: what the memory plan is held to
    /// by default.
    hbm_per_core: u64,
    command: String,
    flags: Vec<String>,
    env: std::collections::BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
struct InitPolicy {
    std: f64,
    output_projection_std: f64,
    norms: &'static str,
}

/// What the `loss` output is, so a training stack can feed targets right.
#[derive(Serialize)]
struct LossInfo {
    kind: &'static str,
    ignore_index: i64,
}

/// What one rank needs in device memory, in bytes ([`MemoryPlan`]).
#[derive(Serialize)]
pub(super) struct MemoryInfo {
    #[serde(flatten)]
    plan: MemoryPlan,
    total: u64,
    method: &'static str,
}

impl MemoryInfo {
    pub(super) fn of(plan: MemoryPlan) -> Self {
        MemoryInfo {
            plan,
            total: plan.total(),
            method: match plan.gathered_weights {
                0 => MEMORY_METHOD,
                _ => MEMORY_METHOD_FSDP,
            },
        }
    }
}

/// How [`MemoryInfo`]'s parts are counted.
const MEMORY_METHOD: &str = "state counted from the inputs by role; gradients as the rank's parameter elements in the type they are summed in (under ZeRO-1, as the backward makes them, in their weight's type, beside the rank's shard of their sum); activations the bytes of forward values a backward instruction reads; backward_working the step's peak of temporaries beyond activations and gradients (values a fusing compiler materializes, alive from their loop to their last reader, in the better of the emitted and a list scheduler's order); total their sum";

/// [`MEMORY_METHOD`] under FSDP, where a rank gathers its weights.
const MEMORY_METHOD_FSDP: &str = "state counted from the inputs by role (under FSDP each a shard); gathered_weights the rank's whole share of every weight, in its stored type, gathered before the forward and alive to the backward; gradients as the backward makes them, whole, in their weight's type, beside the rank's shard of their sum; activations the bytes of forward values a backward instruction reads; backward_working the step's peak of temporaries beyond activations, gathered weights and gradients; total their sum";

/// How a sharded step is divided: one program every rank runs, its groups,
/// and what each rank feeds each input. What a rank holds follows from the
/// layout (T, D, PP, SP, ZeRO-1) and each parameter's split, so the
/// manifest states that rule once per parameter (`tp_split`, with the rule
/// in `holdings`) instead of listing every rank's holding: it does not grow
/// with T or the world. [`super::holdings::ManifestHoldings`] reads it back, and
/// reads the per-TP-rank lists (`tp_ranks`) of the manifests written before.
#[derive(Serialize)]
struct ParallelInfo {
    world_size: i64,
    tp: i64,
    dp: i64,
    sequence_parallel: bool,
    rank_order: &'static str,
    rank_source: &'static str,
    /// The groups in XLA's iota form (`[D,T]<=[T*D]`): every group, in
    /// the order the collectives list them.
    tp_groups: String,
    dp_groups: String,
    /// Inputs every rank holds whole (norm weights, the step counter).
    replicated: Vec<String>,
    moments: &'static str,
    /// Under ZeRO-1, how the optimizer state is divided over the replicas.
    #[serde(skip_serializing_if = "Option::is_none")]
    zero1: Option<Zero1Info>,
    /// How a rank's holding of a parameter follows from `tp_split`.
    holdings: &'static str,
    /// How TP divides each parameter it divides, in Hugging Face tensors;
    /// runs of layers stated once ([`listing`]).
    tp_split: Vec<listing::Listed<SplitInfo>>,
    /// Which rows of the global batch DP replica `d` takes.
    #[serde(skip_serializing_if = "Option::is_none")]
    dp_rows: Option<DpRows>,
    /// Under expert parallelism, how the experts are divided and reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    experts: Option<ExpertsInfo>,
    /// Under context parallelism, how each sequence is divided.
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<ContextInfo>,
}

/// How context parallelism divides each sequence.
#[derive(Serialize)]
struct ContextInfo {
    cp: i64,
    balance: hlatc_models::CpBalance,
    /// How the CP ranks exchange keys and values: `all-gather` or `ring`
    /// (each group's ring runs in `cp_groups` order).
    exchange: hlatc_models::CpExchange,
    /// Tokens in each chunk of a sequence.
    chunk_tokens: i64,
    /// The ranks that exchange one another's keys and values, in XLA's
    /// iota form.
    cp_groups: String,
    layout: &'static str,
}

const CONTEXT_LAYOUT: &str = "rank r is CP rank c = (r / tp) % cp of DP replica (r / tp) / cp; each sequence is cut into chunks of chunk_tokens, and CP rank c takes, of every batch input (tokens, targets, segment ids) in its DP replica's rows, chunk c then chunk 2*cp-1-c under head-tail, chunk c under contiguous, laid one after the other; targets are the next tokens of the positions taken, cut the same way; the replicas that gradients are summed over and that zero1 divides the state over are every DP replica's CP ranks, replica q = r / tp (its DP replica q / cp), and under FSDP a shard group is fsdp x cp consecutive replicas (read fsdp as fsdp x cp in zero1.layout)";

/// How expert parallelism divides a mixture of experts' experts.
#[derive(Serialize)]
struct ExpertsInfo {
    ep: i64,
    exchange: hlatc_models::EpExchange,
    /// The ranks that exchange tokens, in XLA's iota form.
    ep_groups: String,
    layout: &'static str,
}

const EXPERTS_LAYOUT: &str = "DP replica d is EP rank j = d % ep; each input stacking experts (mlp.experts.*, and its Adam moments) holds experts [j*E/ep, (j+1)*E/ep) of the E, in order, and their gradients are summed over the DP replicas with the same j";

/// What each DP replica holds of the optimizer state under ZeRO-1.
#[derive(Serialize)]
struct Zero1Info {
    layout: &'static str,
    /// Elements of each shard, by parameter name.
    shard_elements: BTreeMap<String, i64>,
}

/// Which rows of the global batch each DP replica takes, by rule: one
/// line whatever D (the manifests before it listed every replica's rows,
/// as `dp_ranks`).
#[derive(Serialize)]
struct DpRows {
    /// Rows of the global batch a replica takes.
    rows: i64,
    rule: &'static str,
}

const DP_ROWS_RULE: &str = "DP replica d takes rows [d*rows, (d+1)*rows) of each batch input (tokens, targets, segment ids), as every rank of it does";

/// One parameter TP divides: its input, its whole shape, its split, and
/// for a fused tensor the Hugging Face tensors its rows are.
#[derive(Serialize)]
struct SplitInfo {
    index: usize,
    name: String,
    dims: Vec<i64>,
    split: hlatc_models::TpSplit,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<hlatc_models::HfPart>,
    /// The parameter's decoder layer (in a run of layers, the run's).
    #[serde(skip_serializing_if = "Option::is_none")]
    layer: Option<i64>,
}

impl listing::PerLayer for SplitInfo {
    fn index(&self) -> usize {
        self.index
    }

    fn templated(&self) -> Option<(i64, Self)> {
        let layer = self.layer?;
        Some((
            layer,
            SplitInfo {
                index: self.index,
                name: listing::template(&self.name, layer)?,
                dims: self.dims.clone(),
                split: self.split.clone(),
                parts: templated_parts(&self.parts, layer),
                layer: None,
            },
        ))
    }

    fn alike(&self, other: &Self) -> bool {
        (&self.name, &self.dims, &self.split, &self.parts)
            == (&other.name, &other.dims, &other.split, &other.parts)
    }
}

/// Where a ZeRO-1 shard lies in its parameter's share.
const ZERO1_LAYOUT: &str = "on rank r, elements [d*k, (d+1)*k) of NAME's share on TP rank r % tp, flattened row-major and zero-padded to dp*k elements, with d = r / tp";

/// [`ZERO1_LAYOUT`] under HSDP: shard groups of `fsdp` consecutive DP
/// replicas, each holding every shard.
const HSDP_LAYOUT: &str = "on rank r, elements [d*k, (d+1)*k) of NAME's share on TP rank r % tp, flattened row-major and zero-padded to fsdp*k elements, with d = (r / tp) % fsdp: each of the dp / fsdp shard groups of consecutive replicas holds every shard";

/// [`ZERO1_LAYOUT`] with expert parallelism: the experts' state divided
/// over the replicas that hold them.
const ZERO1_EXPERTS_LAYOUT: &str = "on rank r, elements [d*k, (d+1)*k) of NAME's share on TP rank r % tp, flattened row-major and zero-padded to n*k elements, with d = r / tp and n = dp; for experts expert parallelism divides (see experts), d = (r / tp) / ep and n = dp / ep: the replicas that hold the same experts divide their state";

/// The rule [`super::holdings::ManifestHoldings`] applies to `tp_split`
/// (`hlatc_models::parallel::split`).
const HOLDINGS_RULE: &str = "rank r holds, of each parameter in tp_split, pieces that TP rank t = r % tp takes by its split (every DP replica holds the same): of `units` {count, size}, t takes units [t*count/tp, (t+1)*count/tp) when count >= tp (copies 1), else unit t / (tp/count) (copies tp/count); `rows` lists a fused tensor's members in row order, each split by its own units, laid side by side on the rank (dim 0); `columns` splits dim 1 so; `expert_rows` and `expert_columns` split dim 1 and dim 2 of a stack of experts so, and each expert (a part with `stacked`, its row `rows[0]`) is held as that range of its own tensor, one dimension down (under expert parallelism, see experts, a rank holds its EP rank's run of them only); `vocab` gives t rows [t*ceil(V/tp), (t+1)*ceil(V/tp)) of dims[0] = V, the rows past V padding. A piece of rows of a fused tensor is a range of the member (`parts`) it lies in; parameters not in tp_split are replicated, and an Adam moment or master weight holds what its parameter holds (see moments)";

/// `groups` as XLA's iota text, `[groups,size]<=[dims]T(perm)`.
fn iota_text(groups: Vec<Vec<i64>>) -> String {
    use hlatc_compiler::ir::collective::ReplicaGroups;
    let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    match ReplicaGroups::List(groups.into()).to_iota() {
        Some(ReplicaGroups::Iota {
            groups,
            group_size,
            reshape,
            transpose,
        }) => {
            let t = match transpose.is_empty() {
                true => String::new(),
                false => format!("T({})", join(&transpose)),
            };
            format!("[{groups},{group_size}]<=[{}]{t}", join(&reshape))
        }
        _ => unreachable!("a layout's groups are an iota"),
    }
}

fn parallel_info(cfg: &StepConfig, inputs: &[TensorSpec]) -> Option<ParallelInfo> {
    use hlatc_step::rank_inputs::RankHolding;
    let p = cfg.parallel;
    if p.is_single() {
        return None;
    }
    let ranks = hlatc_step::rank_inputs::RankInputs::new(cfg);
    let replicated = inputs
        .iter()
        .filter(|s| ranks.holding(s, 0) == RankHolding::Replicated)
        .map(|s| s.name.clone())
        .collect();
    let tp_split = inputs
        .iter()
        .enumerate()
        .filter(|(_, s)| s.role == Role::Parameter)
        .filter_map(|(index, s)| {
            let spec = ranks.parameter(s)?;
            (spec.tp != hlatc_models::TpSplit::Replicated).then(|| SplitInfo {
                index,
                name: s.name.clone(),
                dims: spec.dims.clone(),
                split: spec.tp.clone(),
                parts: spec.parts.clone(),
                layer: s.layer,
            })
        })
        .collect();
    let tp_split = listing::by_layer(tp_split);
    let batch = inputs.iter().find(|s| s.role == Role::Tokens);
    let dp_rows = match batch.map(|b| ranks.holding(b, 0)) {
        Some(
            RankHolding::BatchRows([first, end])
            | RankHolding::BatchChunks {
                rows: [first, end], ..
            },
        ) => Some(DpRows {
            rows: end - first,
            rule: DP_ROWS_RULE,
        }),
        _ => None,
    };
    Some(ParallelInfo {
        world_size: p.world(),
        tp: p.tp,
        dp: p.dp,
        sequence_parallel: p.sequence_parallel,
        rank_order: match p.cp {
            1 => "rank r is TP rank r % tp of DP replica r / tp; replica r of the module runs rank r",
            _ => "rank r is TP rank r % tp of CP rank (r / tp) % cp of DP replica (r / tp) / cp; replica r of the module runs rank r",
        },
        rank_source: "replica-id: the module computes its vocabulary offset from it, so every rank runs the same program",
        tp_groups: iota_text(p.tp_groups()),
        dp_groups: iota_text(p.dp_groups()),
        replicated,
        moments: match (p.shards_optimizer_state(), cfg.precision.keeps_master_weights()) {
            _ if p.shards_weights() => "NAME, adam_m.NAME and adam_v.NAME (and master.NAME under bf16-master) each hold an FSDP shard of NAME's share: see zero1",
            (false, false) => "adam_m.NAME and adam_v.NAME hold the same share as NAME",
            (false, true) => "adam_m.NAME, adam_v.NAME and master.NAME hold the same share as NAME",
            (true, false) => "adam_m.NAME and adam_v.NAME hold a ZeRO-1 shard of NAME's share: see zero1",
            (true, true) => "adam_m.NAME, adam_v.NAME and master.NAME hold a ZeRO-1 shard of NAME's share: see zero1",
        },
        zero1: p.shards_optimizer_state().then(|| Zero1Info {
            layout: match p.ep {
                _ if p.fsdp_replicas() > 1 => HSDP_LAYOUT,
                1 => ZERO1_LAYOUT,
                _ => ZERO1_EXPERTS_LAYOUT,
            },
            shard_elements: inputs
                .iter()
                .filter(|s| s.role == Role::Parameter)
                .filter_map(|s| {
                    let spec = ranks.parameter(s)?;
                    let local = p.local_dims(spec);
                    let k = hlatc_step::zero1::shard_len(&local, p.zero1_degree(spec));
                    Some((s.name.clone(), k))
                })
                .collect(),
        }),
        holdings: HOLDINGS_RULE,
        tp_split,
        dp_rows,
        experts: (p.ep > 1).then(|| ExpertsInfo {
            ep: p.ep,
            exchange: p.ep_exchange,
            ep_groups: iota_text(p.ep_groups()),
            layout: EXPERTS_LAYOUT,
        }),
        context: (p.cp > 1).then(|| ContextInfo {
            cp: p.cp,
            balance: p.cp_balance,
            exchange: p.cp_exchange,
            chunk_tokens: cfg.batch.seq_len / p.cp_balance.chunks(p.cp),
            cp_groups: iota_text(p.cp_groups()),
            layout: CONTEXT_LAYOUT,
        }),
    })
}

/// `v` with indices and, for fused parameters and their moments, the
/// Hugging Face parts (`parts`, by stored parameter name), as a listing:
/// runs of layers stated once.
fn indexed(
    v: &[TensorSpec],
    parts: &BTreeMap<String, Vec<hlatc_models::HfPart>>,
) -> Vec<listing::Listed<IndexedTensor>> {
    let entries = v
        .iter()
        .enumerate()
        .map(|(index, spec)| {
            let hugging_face = spec
                .parameter
                .as_deref()
                .and_then(|p| parts.get(p))
                .cloned()
                .unwrap_or_default();
            IndexedTensor {
                index,
                spec: spec.clone(),
                hugging_face,
            }
        })
        .collect();
    listing::by_layer(entries)
}
