//! The compiled artifact on disk: the HLO proto `neuronx-cc` compiles, its
//! text, the compile flags, and a manifest that tells a training stack what
//! every buffer is.

use crate::memory_plan::MemoryPlan;
use crate::train_step::{parameter_name, Role, StepConfig, TensorSpec, TrainStep};
use crate::Error;
use hlatc_models::param_specs;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hlatc_passes::neuron_check::{self, CheckReport, Chip, Sdk};
mod accumulation;
pub mod holdings;
mod listing;
mod opened;
mod pipeline;
mod programs;
pub(crate) mod refusal;
pub use accumulation::{stage_accumulation_bundle, ACCUMULATION_FORMAT, APPLY_DIR, MICRO_DIR};
pub use listing::{expand_json as expand_listing, ListingError};
pub use opened::{for_cpu, lower_for_cpu, OpenedBundle};
pub use pipeline::{stage_pipeline_bundle, PIPELINE_FORMAT};

/// Which compiler a bundle is for (the passes' target).
pub use hlatc_passes::Target;

pub const PROTO_FILE: &str = "model.hlo_module.pb";
pub const TEXT_FILE: &str = "model.hlo.txt";
/// The manifest format hlatc writes. Version 2 since issue 48's runs of
/// layers changed the shape of `inputs`/`outputs` (under version 1 an
/// external reader of the old flat lists broke); its JSON Schema is
/// `docs/schema/manifest-v2.json`. Readers take 1 and 2.
pub const BUNDLE_FORMAT: &str = "hlatc-bundle/2";
pub const MANIFEST_FILE: &str = "manifest.json";
pub const FLAGS_FILE: &str = "compile_flags.json";
pub const NEURON_SCRIPT: &str = "neuronx-cc.sh";

/// The lowercase hex SHA-256 of `bytes`: the module hash in the manifest.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Which front end reads the module and which chip it is for: the part of
/// the flags that `neuronx-cc.sh` writes before the module's path. The
/// chip is [`NEURON_CHIP`]'s.
pub const NEURON_INPUT_FLAGS: [&str; 2] = ["--framework=XLA", "--target=trn1"];

/// The chip a Neuron bundle is compiled for (its `--target`), which its
/// pre-flight checks against, under the current SDK's defaults.
pub const NEURON_CHIP: Chip = Chip::Trn1;

/// How neuronx-cc should treat the model, written after the module's path.
/// `--auto-cast=none`: hlatc has decided every op's precision, and by
/// default neuronx-cc would cast f32 matmuls to bf16 on its own (turning
/// `fp32` into something else).
pub const NEURON_MODEL_FLAGS: [&str; 3] = [
    "--model-type=transformer",
    "--distribution-strategy=llm-training",
    "--auto-cast=none",
];

/// Flags for `neuronx-cc compile`, as the Neuron compile cache stores them.
pub fn neuron_flags() -> Vec<&'static str> {
    NEURON_INPUT_FLAGS
        .iter()
        .chain(&NEURON_MODEL_FLAGS)
        .copied()
        .collect()
}

/// The seed the bundle gives the Neuron runtime's stochastic rounding.
pub const NEURON_ROUNDING_SEED: &str = "0";

/// Environment HLAT compiled and ran with; stochastic rounding is switched
/// on when the module has any convert marked for it.
pub fn neuron_env(stochastic_rounding: bool) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![("NEURON_FUSE_SOFTMAX", "1")];
    if stochastic_rounding {
        env.push(("NEURON_RT_STOCHASTIC_ROUNDING_EN", "1"));
        env.push(("NEURON_RT_STOCHASTIC_ROUNDING_SEED", NEURON_ROUNDING_SEED));
    }
    env
}

/// How the converts to bf16 of a step round: counted from the module.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RoundingSummary {
    /// Converts marked for stochastic rounding (on cpu: lowered to plain
    /// HLO, counted by their calls).
    pub stochastic: usize,
    /// f32 to bf16 converts that round to nearest even.
    pub nearest_even: usize,
    /// Set when the device's switch is coarser than the policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl RoundingSummary {
    pub fn of(module: &hlatc_compiler::Module, target: Target) -> RoundingSummary {
        let (stochastic, nearest_even) = hlatc_passes::rounding_counts(module);
        let warning = (target == Target::Neuron && stochastic > 0 && nearest_even > 0).then(|| {
            format!(
                "NEURON_RT_STOCHASTIC_ROUNDING_EN is one switch for the whole device: the {nearest_even} \
                 converts the policy rounds to nearest even will round stochastically too on Trainium \
                 (on XLA CPU they do not)"
            )
        });
        RoundingSummary {
            stochastic,
            nearest_even,
            warning,
        }
    }
}

pub fn neuron_command() -> String {
    format!(
        "neuronx-cc compile {} {PROTO_FILE} --output model.neff {}",
        NEURON_INPUT_FLAGS.join(" "),
        NEURON_MODEL_FLAGS.join(" ")
    )
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
        let (layer, name) = listing::layer_template(&self.spec.name)?;
        Some((
            layer,
            IndexedTensor {
                index: self.index,
                spec: TensorSpec {
                    name,
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
            rows: p.rows,
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
    command: String,
    flags: Vec<&'static str>,
    env: std::collections::BTreeMap<&'static str, &'static str>,
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

/// What one rank needs in device memory, in bytes ([`MemoryPlan`]).
#[derive(Serialize)]
struct MemoryInfo {
    #[serde(flatten)]
    plan: MemoryPlan,
    total: u64,
    method: &'static str,
}

impl MemoryInfo {
    fn of(plan: MemoryPlan) -> Self {
        MemoryInfo {
            plan,
            total: plan.total(),
            method: "state counted from the inputs by role; gradients as the rank's parameter elements in the type they are summed in (under ZeRO-1, as the backward makes them, in their weight's type, beside the rank's shard of their sum); activations the bytes of forward values a backward instruction reads; backward_working the step's peak of temporaries beyond activations and gradients (values a fusing compiler materializes, alive from their loop to their last reader, in the better of the emitted and a list scheduler's order); total their sum",
        }
    }
}

/// How a sharded step is divided: one program every rank runs, its groups,
/// and what each rank feeds each input. What a rank holds follows from the
/// layout (T, D, PP, SP, ZeRO-1) and each parameter's split, so the
/// manifest states that rule once per parameter (`tp_split`, with the rule
/// in `holdings`) instead of listing every rank's holding: it does not grow
/// with T or the world. [`holdings::ManifestHoldings`] reads it back, and
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
}

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
}

impl listing::PerLayer for SplitInfo {
    fn index(&self) -> usize {
        self.index
    }

    fn templated(&self) -> Option<(i64, Self)> {
        let (layer, name) = listing::layer_template(&self.name)?;
        Some((
            layer,
            SplitInfo {
                index: self.index,
                name,
                dims: self.dims.clone(),
                split: self.split.clone(),
                parts: templated_parts(&self.parts, layer),
            },
        ))
    }

    fn alike(&self, other: &Self) -> bool {
        (&self.name, &self.dims, &self.split, &self.parts)
            == (&other.name, &other.dims, &other.split, &other.parts)
    }
}

/// The rule [`holdings::ManifestHoldings`] applies to `tp_split`
/// (`hlatc_models::parallel::split`).
const HOLDINGS_RULE: &str = "rank r holds, of each parameter in tp_split, pieces that TP rank t = r % tp takes by its split (every DP replica holds the same): of `units` {count, size}, t takes units [t*count/tp, (t+1)*count/tp) when count >= tp (copies 1), else unit t / (tp/count) (copies tp/count); `rows` lists a fused tensor's members in row order, each split by its own units, laid side by side on the rank (dim 0); `columns` splits dim 1 so; `vocab` gives t rows [t*ceil(V/tp), (t+1)*ceil(V/tp)) of dims[0] = V, the rows past V padding. A piece of rows of a fused tensor is a range of the member (`parts`) it lies in; parameters not in tp_split are replicated, and an Adam moment or master weight holds what its parameter holds (see moments)";

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
    use crate::rank_inputs::RankHolding;
    let p = cfg.parallel;
    if p.is_single() {
        return None;
    }
    let ranks = crate::rank_inputs::RankInputs::new(cfg);
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
            })
        })
        .collect();
    let tp_split = listing::by_layer(tp_split);
    let batch = inputs.iter().find(|s| s.role == Role::Tokens);
    let dp_rows = match batch.map(|b| ranks.holding(b, 0)) {
        Some(RankHolding::BatchRows([first, end])) => Some(DpRows {
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
        rank_order: "rank r is TP rank r % tp of DP replica r / tp; replica r of the module runs rank r",
        rank_source: "replica-id: the module computes its vocabulary offset from it, so every rank runs the same program",
        tp_groups: iota_text(p.tp_groups()),
        dp_groups: iota_text(p.dp_groups()),
        replicated,
        moments: match (p.zero1, cfg.precision.keeps_master_weights()) {
            (false, false) => "adam_m.NAME and adam_v.NAME hold the same share as NAME",
            (false, true) => "adam_m.NAME, adam_v.NAME and master.NAME hold the same share as NAME",
            (true, false) => "adam_m.NAME and adam_v.NAME hold a ZeRO-1 shard of NAME's share: see zero1",
            (true, true) => "adam_m.NAME, adam_v.NAME and master.NAME hold a ZeRO-1 shard of NAME's share: see zero1",
        },
        zero1: p.zero1.then(|| Zero1Info {
            layout: "on rank r, elements [d*k, (d+1)*k) of NAME's share on TP rank r % tp, flattened row-major and zero-padded to dp*k elements, with d = r / tp",
            shard_elements: inputs
                .iter()
                .filter(|s| s.role == Role::Parameter)
                .map(|s| (s.name.clone(), crate::zero1::shard_len(&s.shape, p.dp)))
                .collect(),
        }),
        holdings: HOLDINGS_RULE,
        tp_split,
        dp_rows,
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
            let hugging_face = match spec.role.is_per_parameter() {
                true => parts.get(parameter_name(spec)).cloned().unwrap_or_default(),
                false => Vec::new(),
            };
            IndexedTensor {
                index,
                spec: spec.clone(),
                hugging_face,
            }
        })
        .collect();
    listing::by_layer(entries)
}

/// What `write_bundle` wrote and how long it took.
#[derive(Default)]
pub struct BundleReport {
    pub files: Vec<PathBuf>,
    pub sha256: String,
    pub proto_bytes: usize,
    pub emit_time: Duration,
    pub write_time: Duration,
    /// The Neuron pre-flight of a Neuron bundle (it found no refusal, or
    /// nothing would have been written).
    pub preflight: Option<Preflight>,
}

/// What the Neuron pre-flight found in a bundle's module, and how long it
/// took.
pub struct Preflight {
    pub report: CheckReport,
    /// Each finding as a line, located in the bundle's text file.
    pub lines: Vec<String>,
    /// The check itself (not the locating of its findings in the text).
    pub time: Duration,
}

/// Runs the Neuron pre-flight on a bundle's module for [`NEURON_CHIP`]:
/// its refusals are an error, so a bundle neuronx-cc would refuse is never
/// written. `text` is the module's text as the bundle holds it, where the
/// findings are located.
fn preflight(step: &TrainStep, text: &str, dir: &Path) -> Result<Preflight, Error> {
    let t0 = Instant::now();
    // The step's memory plan, checked against --device-memory, decides
    // whether it fits.
    let report = neuron_check::check_planned_step(&step.module, NEURON_CHIP, Sdk::default());
    let time = t0.elapsed();
    // Only findings about instructions need the text read for positions.
    let positions = report
        .names_instructions()
        .then(|| hlatc_compiler::formats::text::instruction_positions(text).ok())
        .flatten();
    let located = |f: &neuron_check::Finding| f.located(TEXT_FILE, positions.as_ref());
    if report.refused() {
        return Err(Error::NeuronRefused {
            dir: dir.to_path_buf(),
            findings: report.refusals().map(located).collect(),
        });
    }
    let lines = report
        .findings
        .iter()
        .map(|f| located(f).to_string())
        .collect();
    Ok(Preflight {
        report,
        lines,
        time,
    })
}

fn write(path: PathBuf, bytes: &[u8], files: &mut Vec<PathBuf>) -> Result<(), Error> {
    hlatc_runtime::atomic_file::write_synced(&path, bytes).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    files.push(path);
    Ok(())
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A place a bundle cannot be written to, and why.
fn not_a_place(path: &Path, message: impl Into<String>) -> Error {
    Error::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Whether `dir` holds a bundle hlatc wrote (its manifest says so).
fn is_bundle(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some_and(|m| {
            m["format"]
                .as_str()
                .is_some_and(|f| f.starts_with("hlatc-bundle/"))
        })
}

/// Checks, before any work, that a bundle can be written to `dir`: it is
/// absent, an empty directory, or an earlier bundle (which is replaced
/// whole), and its parent directory is writable.
pub fn check_destination(dir: &Path) -> Result<(), Error> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(not_a_place(dir, "exists and is not a directory"));
        }
        let empty = std::fs::read_dir(dir)
            .map_err(|e| io_error(dir, e))?
            .next()
            .is_none();
        if !empty && !is_bundle(dir) {
            return Err(not_a_place(
                dir,
                format!(
                    "is a directory that holds files but no hlatc {MANIFEST_FILE}; \
                     hlatc replaces a bundle directory whole, so it will not write into this one"
                ),
            ));
        }
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| io_error(&parent, e))?;
    let probe = hlatc_runtime::atomic_file::temp_beside(dir, "probe");
    std::fs::create_dir(&probe)
        .map_err(|e| not_a_place(&parent, format!("cannot write here: {e}")))?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// A complete bundle written to a hidden staging directory beside its
/// destination. [`StagedBundle::commit`] moves it into place whole;
/// dropping it uncommitted removes it, so no partial bundle is ever visible
/// under the destination's name.
pub struct StagedBundle {
    staging: PathBuf,
    dest: PathBuf,
    report: BundleReport,
    committed: bool,
}

impl StagedBundle {
    /// Where the staged files are now (for checks before the commit).
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Replaces the destination with the staged bundle: an older bundle
    /// there is moved aside, the new one renamed in, the old one deleted.
    /// Files of the old bundle that the new one lacks go with it.
    pub fn commit(mut self) -> Result<BundleReport, Error> {
        let old = hlatc_runtime::atomic_file::temp_beside(&self.dest, "old");
        let had_old = self.dest.exists();
        if had_old {
            std::fs::rename(&self.dest, &old).map_err(|e| io_error(&self.dest, e))?;
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.dest) {
            if had_old {
                let _ = std::fs::rename(&old, &self.dest);
            }
            return Err(io_error(&self.dest, e));
        }
        self.committed = true;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        let mut report = std::mem::take(&mut self.report);
        for f in &mut report.files {
            if let Ok(within) = f.strip_prefix(&self.staging) {
                *f = self.dest.join(within);
            }
        }
        Ok(report)
    }
}

impl Drop for StagedBundle {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// Verifies the step, writes the bundle and moves it into `dir`, replacing
/// an older bundle there whole. Deterministic: the same step and config
/// always give byte-identical files.
pub fn write_bundle(
    step: &TrainStep,
    cfg: &StepConfig,
    target: Target,
    dir: &Path,
) -> Result<BundleReport, Error> {
    stage_bundle(step, cfg, target, dir)?.commit()
}

/// Verifies the step and writes the whole bundle into a staging directory
/// beside `dir`; nothing under `dir` changes until [`StagedBundle::commit`].
pub fn stage_bundle(
    step: &TrainStep,
    cfg: &StepConfig,
    target: Target,
    dir: &Path,
) -> Result<StagedBundle, Error> {
    check_destination(dir)?;
    let t0 = Instant::now();
    let staging = hlatc_runtime::atomic_file::temp_beside(dir, "staging");
    std::fs::create_dir(&staging).map_err(|e| io_error(&staging, e))?;
    // Removes the staging directory on any error below.
    let mut staged = StagedBundle {
        staging: staging.clone(),
        dest: dir.to_path_buf(),
        report: BundleReport::default(),
        committed: false,
    };
    let proto_path = staging.join(PROTO_FILE);
    let text_path = staging.join(TEXT_FILE);
    let (encoded, checked) = std::thread::scope(|s| {
        // Encoding, writing and hashing the proto, and the manifest that
        // names the hash, read the step and nothing else, so they run
        // beside the checks and the printing; each side writes and syncs
        // its own file as soon as it has it, so the disk's wait overlaps
        // the other side's work (a 2,048-rank step's files are 22 MB). A
        // module the checks refuse is encoded and written for nothing,
        // and its staging directory removed.
        let encoder = s.spawn(|| Encoded::of(step, cfg, target, &proto_path));
        let checked = checked_text(step, target, dir).and_then(|c| {
            let t = Instant::now();
            hlatc_runtime::atomic_file::write_synced(&text_path, c.text.as_bytes())
                .map_err(|e| io_error(&text_path, e))?;
            Ok((c, t.elapsed()))
        });
        let encoded = encoder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (encoded, checked)
    });
    let (Checked { preflight, .. }, text_write) = checked?;
    let Encoded {
        proto_bytes,
        sha256,
        stochastic_rounding,
        manifest,
    } = encoded?;
    let emit_time = t0
        .elapsed()
        .saturating_sub(text_write)
        .saturating_sub(preflight.as_ref().map_or(Duration::ZERO, |p| p.time));
    let t1 = Instant::now();
    let mut rest: Vec<(&str, Vec<u8>)> = Vec::new();
    if target == Target::Neuron {
        let flags = serde_json::to_string_pretty(&neuron_flags()).expect("strings serialize");
        rest.push((FLAGS_FILE, format!("{flags}\n").into_bytes()));
        rest.push((
            NEURON_SCRIPT,
            neuron_script(stochastic_rounding).into_bytes(),
        ));
    }
    rest.push((MANIFEST_FILE, manifest.into_bytes()));
    let rest: Vec<(PathBuf, Vec<u8>)> = rest
        .into_iter()
        .map(|(name, bytes)| (staging.join(name), bytes))
        .collect();
    hlatc_runtime::atomic_file::write_synced_all(&rest)
        .map_err(|(path, source)| Error::Io { path, source })?;
    #[cfg(unix)]
    if target == Target::Neuron {
        use std::os::unix::fs::PermissionsExt;
        let script = staging.join(NEURON_SCRIPT);
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io_error(&script, e))?;
    }
    staged.report = BundleReport {
        files: [proto_path, text_path]
            .into_iter()
            .chain(rest.into_iter().map(|(path, _)| path))
            .collect(),
        sha256,
        proto_bytes,
        emit_time,
        write_time: text_write + t1.elapsed(),
        preflight,
    };
    Ok(staged)
}

/// A step's proto as written, the sha256 of its bytes, and the manifest
/// that names them.
struct Encoded {
    proto_bytes: usize,
    sha256: String,
    /// Whether the module rounds any value stochastically (its compile
    /// script then sets the environment that turns it on).
    stochastic_rounding: bool,
    /// `manifest.json`'s text.
    manifest: String,
}

impl Encoded {
    /// Encodes the step's module, writes and syncs it to `path` while
    /// hashing it and writing the manifest.
    fn of(
        step: &TrainStep,
        cfg: &StepConfig,
        target: Target,
        path: &Path,
    ) -> Result<Encoded, Error> {
        let proto = hlatc_compiler::formats::proto::encode_module(&step.module);
        std::thread::scope(|s| {
            let writer = s.spawn(|| hlatc_runtime::atomic_file::write_synced(path, &proto));
            let sha256 = sha256_hex(&proto);
            let rounding = RoundingSummary::of(&step.module, target);
            let stochastic_rounding = rounding.stochastic > 0;
            let manifest = format!("{}\n", manifest_with(step, cfg, target, &sha256, rounding));
            writer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                .map_err(|e| io_error(path, e))?;
            Ok(Encoded {
                proto_bytes: proto.len(),
                sha256,
                stochastic_rounding,
                manifest,
            })
        })
    }
}

/// A verified module's text, and the Neuron pre-flight of it.
struct Checked {
    text: String,
    preflight: Option<Preflight>,
}

/// Verifies the step's module, prints it, and runs the Neuron pre-flight
/// when the bundle is for Neuron: everything that may refuse the bundle.
fn checked_text(step: &TrainStep, target: Target, dir: &Path) -> Result<Checked, Error> {
    hlatc_compiler::verify(&step.module).map_err(|source| Error::Verify {
        path: dir.to_path_buf(),
        source,
    })?;
    let text = hlatc_compiler::formats::text::print_module(&step.module);
    let preflight = (target == Target::Neuron)
        .then(|| preflight(step, &text, dir))
        .transpose()?;
    Ok(Checked { text, preflight })
}

/// `neuronx-cc.sh`: the bundle's compile for Trainium, with the
/// environment the module needs (stochastic rounding's when it has any).
fn neuron_script(stochastic_rounding: bool) -> String {
    let env: String = neuron_env(stochastic_rounding)
        .iter()
        .map(|(k, v)| format!("export {k}={v}\n"))
        .collect();
    format!(
        "#!/usr/bin/env bash\n# Compiles this bundle for Trainium. Generated by hlatc.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n{env}exec {} \"$@\"\n",
        neuron_command()
    )
}

/// The manifest of the bundle of `step` (for `cfg`, compiled for `target`)
/// whose proto hashes to `sha256`: what `manifest.json` holds.
pub fn manifest_json(step: &TrainStep, cfg: &StepConfig, target: Target, sha256: &str) -> String {
    let rounding = RoundingSummary::of(&step.module, target);
    manifest_with(step, cfg, target, sha256, rounding)
}

/// [`manifest_json`] with the step's `rounding` already counted.
fn manifest_with(
    step: &TrainStep,
    cfg: &StepConfig,
    target: Target,
    sha256: &str,
    rounding: RoundingSummary,
) -> String {
    let neuron = (target == Target::Neuron).then(|| NeuronInfo {
        command: neuron_command(),
        flags: neuron_flags(),
        env: neuron_env(rounding.stochastic > 0).into_iter().collect(),
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
