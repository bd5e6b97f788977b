//! The search: every layout that divides the model and the cluster, each
//! read from its compiled programs and priced by the cost model, best
//! first.

use super::cost::{features, Assumptions, Breakdown, CostParams};
use super::evaluate::{evaluate, Evaluated, Fidelity};
use super::hardware::Instance;
use super::layout::{check_layout, Layout};
use super::lighter_twins;
use super::remat_ladder::{self, Pruned};
use super::{PlanError, PlanOption};
use crate::compile_step::ModelSource;
use hlatc_models::kernels::{ImplKind, KernelArg, KernelPoint, KernelRequest};
use hlatc_models::{CpExchange, ModelConfig, Parallelism, Reshard};
use hlatc_passes::RematPolicy;
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::precision::Precision;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What `hlatc plan` takes.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    pub model: ModelSource,
    /// Tokens per sequence; the model's default (min(4096,
    /// `max_position_embeddings`)) when `None`.
    pub seq_len: Option<i64>,
    /// The precision every layout uses; searched over when `None`.
    pub precision: Option<Precision>,
    pub instance: Instance,
    pub nodes: i64,
    /// Sequences per optimizer step over the whole cluster.
    pub global_batch: i64,
    /// How many of the best layouts are read again from their whole
    /// programs (and printed).
    pub top: usize,
    /// USD per node-hour, for the cost of 4 M tokens.
    pub price: Option<f64>,
    /// One layout's SPEC to evaluate instead of searching.
    pub layout: Option<String>,
    pub params: CostParams,
    pub assumptions: Assumptions,
    /// Compiles run at once (the machine's cores when 0).
    pub threads: usize,
    /// How every layout's programs compute attention's core (`--kernel
    /// attention=...`); a `--layout` SPEC's `attention=` overrides it.
    pub attention: KernelRequest,
    /// A mixture of experts' capacity factor (`--capacity-factor`), for
    /// every layout; the model's own (dropless) when `None`.
    pub capacity_factor: Option<f64>,
    /// Compile every remat twin, leaving none to the others
    /// ([`remat_ladder`]): what the ladders' test compares them with. No
    /// front end sets it.
    pub exhaustive: bool,
}

impl PlanOptions {
    /// Refuses a value no plan can take, naming the option: what the CLI
    /// and Python share, so neither is looser than the other.
    pub fn check(&self) -> Result<(), PlanError> {
        let bad = |option: PlanOption, given: String, problem: &str| {
            Err(PlanError::Option {
                option,
                given,
                problem: problem.to_string(),
            })
        };
        if self.nodes < 1 {
            return bad(
                PlanOption::Nodes,
                self.nodes.to_string(),
                "a cluster has at least one node",
            );
        }
        if self.global_batch < 1 {
            return bad(
                PlanOption::GlobalBatch,
                self.global_batch.to_string(),
                "at least one sequence per step",
            );
        }
        // As `compile` refuses it, so that every short sequence is refused
        // alike, before the search.
        use crate::compile_step::{MIN_SEQ_LEN, TOO_SHORT};
        if let Some(s) = self.seq_len.filter(|&s| s < MIN_SEQ_LEN) {
            return bad(PlanOption::SeqLen, s.to_string(), TOO_SHORT);
        }
        if self.top == 0 {
            return bad(
                PlanOption::Top,
                "0".into(),
                "at least one layout is read whole and printed",
            );
        }
        if let Some(p) = self.price.filter(|p| !(p.is_finite() && *p > 0.0)) {
            return bad(
                PlanOption::Price,
                p.to_string(),
                "a positive price per node-hour",
            );
        }
        if let Some(p) = self.precision {
            if let Some(why) = super::layout::not_on_chip(p, self.instance.chip()) {
                return bad(PlanOption::Precision, p.name().to_string(), &why);
            }
        }
        Ok(())
    }
}

impl PlanOptions {
    /// The instance kind when none is named.
    pub const INSTANCE: Instance = Instance::Trn1;
    /// The nodes when not given.
    pub const NODES: i64 = 1;
    /// The global batch when not given: HLAT's 1,024 sequences a step.
    pub const GLOBAL_BATCH: i64 = 1024;
    /// The layouts read whole and printed when not given.
    pub const TOP: usize = 5;
    /// Compiles at once when not given: the machine's cores.
    pub const THREADS: usize = 0;
}

impl Default for PlanOptions {
    fn default() -> Self {
        PlanOptions {
            model: ModelSource::Preset("hlat-7b".into()),
            seq_len: None,
            precision: None,
            instance: PlanOptions::INSTANCE,
            nodes: PlanOptions::NODES,
            global_batch: PlanOptions::GLOBAL_BATCH,
            top: PlanOptions::TOP,
            price: None,
            layout: None,
            params: super::calibration::builtin_params(),
            assumptions: Assumptions::default(),
            threads: PlanOptions::THREADS,
            attention: KernelRequest::plain(KernelPoint::Attention),
            capacity_factor: None,
            exhaustive: false,
        }
    }
}

/// One layout's prediction.
#[derive(Clone, Debug, Serialize)]
pub struct Candidate {
    /// The layout as `--layout` reads it.
    pub layout: String,
    #[serde(skip)]
    pub parsed: Layout,
    pub step_seconds: f64,
    pub seq_per_s: f64,
    pub tokens_per_s: f64,
    /// Model FLOPs utilization as the Neuron SDK's table states it:
    /// `6 N seq` FLOPs per sequence over the cluster's BF16 peak.
    pub mfu: f64,
    pub memory: MemoryPlan,
    pub memory_per_rank: u64,
    pub fits: bool,
    /// USD per 4 M tokens (HLAT's CPT figure), with `--price`.
    pub cost_per_4m_tokens: Option<f64>,
    pub breakdown: Breakdown,
    /// The `hlatc compile` command that builds it.
    pub command: String,
    /// Whether the figures were read from the whole programs rather than
    /// extrapolated from two- and three-layer stages.
    pub exact: bool,
    /// What the Neuron pre-flight warns of in its whole programs (a
    /// layout it refuses is not ranked); none for those read from stages.
    pub preflight_warnings: Vec<String>,
}

/// The search's result.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    pub model: String,
    pub instance: &'static str,
    pub nodes: i64,
    pub global_batch: i64,
    pub seq_len: i64,
    /// Every layout evaluated: those that fit first, each group fastest
    /// first; the first `top` read from their whole programs.
    pub candidates: Vec<Candidate>,
    /// Layouts hlatc could not compile, with why.
    pub refused: Vec<(String, String)>,
    /// Layouts not compiled because their state alone cannot fit a core
    /// ([`state_floor`]), with that floor in bytes.
    pub too_large: Vec<(String, u64)>,
    /// Layouts not compiled because a twin decides them: one that holds
    /// less does not fit ([`lighter_twins`]), or on a remat ladder
    /// ([`remat_ladder`]) one with more remat does not fit, or one with
    /// less fits.
    pub pruned: Vec<(String, Pruned)>,
    /// For a dropless mixture of experts, the plan searched again under
    /// a capacity factor, where its best is faster.
    pub capacity_advice: Option<CapacityAdvice>,
    /// Wall time of the search, seconds.
    pub seconds: f64,
    pub params: Vec<(&'static str, f64)>,
    pub assumptions: Assumptions,
}

/// The capacity factor a dropless mixture of experts is advised to try,
/// each expert taking up to 1.25 times its even share of the tokens: the
/// factor `moe.md`'s layouts use, hlatc's choice rather than a published
/// default.
pub const ADVISED_CAPACITY_FACTOR: f64 = 1.25;

/// What a capacity factor would give a dropless mixture of experts (every
/// expert's exchange buffers holding all of a sequence's tokens): the best
/// layout of the plan searched again with each expert capped at
/// [`ADVISED_CAPACITY_FACTOR`] times its share (tokens past it dropped).
#[derive(Clone, Debug, Serialize)]
pub struct CapacityAdvice {
    pub factor: f64,
    /// The best layout's seq/s, dropless.
    pub dropless_seq_per_s: f64,
    /// The best layout under the factor, with the command that builds it.
    pub capped: Candidate,
}

impl Plan {
    /// The best layout that fits, if any does.
    pub fn best(&self) -> Option<&Candidate> {
        self.candidates.first().filter(|c| c.fits)
    }

    /// Writes every layout evaluated, with its prediction, as JSON to
    /// `path`, whole or not at all.
    pub fn write_json(&self, path: &std::path::Path) -> Result<(), PlanError> {
        let io = |source| PlanError::Io {
            path: path.display().to_string(),
            source,
        };
        let mut text = serde_json::to_string_pretty(self).map_err(|e| io(e.into()))?;
        text.push('\n');
        hlatc_runtime::atomic_file::write_atomic(path, text.as_bytes()).map_err(io)
    }
}

/// Refuses an output path (`--json`, `--plot`) whose folder does not
/// exist, or that is a folder itself: checked before the search, which
/// takes minutes.
pub fn check_output(option: PlanOption, path: &std::path::Path) -> Result<(), PlanError> {
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    let problem = if path.is_dir() {
        "a folder, where a file is written".to_string()
    } else if !folder.is_dir() {
        format!("no folder {} to write it in", folder.display())
    } else {
        return Ok(());
    };
    Err(PlanError::Option {
        option,
        given: path.display().to_string(),
        problem,
    })
}

/// What every layout of a plan shares.
struct Setting<'a> {
    cfg: &'a ModelConfig,
    name: &'a str,
    seq_len: i64,
    o: &'a PlanOptions,
}

/// Plans `o`: evaluates its `--layout`, or searches every layout. A model
/// that cannot be read is the compile's own error (a config's key, a
/// sequence too long); the rest are [`PlanError`]s.
pub fn plan(o: &PlanOptions) -> Result<Plan, crate::Error> {
    let t0 = Instant::now();
    o.check()?;
    let (mut cfg, name) = o.model.resolve(false)?;
    crate::compile_step::set_capacity_factor(&mut cfg, o.capacity_factor)?;
    let seq_len =
        crate::compile_step::batch_shape(&cfg, &name, Some(1), o.seq_len, (1, 4096))?.seq_len;
    // Refused before the search, which would refuse every layout of it.
    if let Some(KernelArg::Tile(tile)) = o.attention.argument {
        if seq_len % tile != 0 {
            return Err(PlanError::Option {
                option: PlanOption::Kernel,
                given: o.attention.to_string(),
                problem: format!(
                    "a tile of {tile} does not cut a sequence of {seq_len} into whole tiles; \
                     use a tile that divides it"
                ),
            }
            .into());
        }
    }
    let cores = o.nodes * o.instance.hardware().cores_per_node;
    let setting = Setting {
        cfg: &cfg,
        name: &name,
        seq_len,
        o,
    };
    let layouts = match &o.layout {
        Some(spec) => {
            let precision = o.precision.unwrap_or(Precision::Bf16Master);
            let l = Layout::parse(
                spec,
                cores,
                o.instance.chip(),
                precision,
                o.attention.clone(),
            )?;
            check_layout(&cfg, &l, seq_len, o.global_batch, cores)?;
            vec![l]
        }
        None => search_space(&cfg, seq_len, o, cores)?,
    };
    let fidelity = match o.layout {
        Some(_) => Fidelity::Exact,
        None => Fidelity::Extrapolated,
    };
    let hbm = o.instance.hardware().hbm_bytes;
    let mut too_large = Vec::new();
    let layouts: Vec<Layout> = match o.layout {
        Some(_) => layouts,
        None => layouts
            .into_iter()
            .filter(|l| {
                let floor =
                    state_floor(&cfg, l, o.global_batch) + attention_floor(&cfg, l, seq_len);
                if floor > hbm {
                    too_large.push((l.to_string(), floor));
                }
                floor <= hbm
            })
            .collect(),
    };
    // A ring is priced at least as slow as its all-gather twin (the same
    // bytes, more latency steps, its steps' pairs padded), so it can only
    // win by memory: it is compiled where its twin does not fit.
    let (rings, layouts): (Vec<Layout>, Vec<Layout>) = layouts
        .into_iter()
        .partition(|l| o.layout.is_none() && l.parallel.cp_exchange == CpExchange::Ring);
    // So is FSDP gathering its weights again in the backward (the same
    // program, every unit gathered a second time): it is compiled where its
    // twin that keeps them does not fit. An exhaustive search compiles it
    // anyway, to hold the rule against it.
    let (regathering, layouts): (Vec<Layout>, Vec<Layout>) = layouts
        .into_iter()
        .partition(|l| o.layout.is_none() && !o.exhaustive && l.parallel.reshards());
    let mut candidates = Vec::new();
    let mut refused = Vec::new();
    // Each layout evaluated, and whether it fits.
    let mut evaluate = |layouts: &[Layout], candidates: &mut Vec<Candidate>| -> Vec<bool> {
        let results = evaluate_all(&setting, layouts, fidelity);
        let mut fits = Vec::with_capacity(layouts.len());
        for (layout, r) in layouts.iter().zip(results) {
            let c = r.and_then(|e| setting.candidate(layout, &e, fidelity == Fidelity::Exact));
            fits.push(c.as_ref().is_ok_and(|c| c.fits));
            match c {
                Ok(c) => candidates.push(c),
                Err(e) => refused.push((layout.to_string(), without_layout(e))),
            }
        }
        fits
    };
    let too_large_names: HashSet<String> = too_large.iter().map(|(l, _)| l.clone()).collect();
    let mut pruned: Vec<(String, Pruned)> = match o.layout.is_some() || o.exhaustive {
        true => {
            evaluate(&layouts, &mut candidates);
            Vec::new()
        }
        false => by_weight(
            layouts,
            too_large_names.clone(),
            micro_batches(seq_len),
            o.global_batch,
            |round| evaluate(round, &mut candidates),
        ),
    };
    let (regathering, left_out) = keeping_twin_does_not_fit(regathering, &candidates, &pruned);
    pruned.extend(left_out);
    let decided = by_weight(
        regathering,
        too_large_names,
        micro_batches(seq_len),
        o.global_batch,
        |round| evaluate(round, &mut candidates),
    );
    pruned.extend(decided);
    // A twin that fits (or would: a twin with less remat fits) leaves its
    // ring nothing to win; one over a core by more than the ring could
    // save stays over it as a ring.
    let known = KnownFits::of(&candidates, &pruned);
    let rings: Vec<Layout> = rings
        .into_iter()
        .filter(|l| match known.of_layout(&l.gathering_twin().to_string()) {
            KnownFit::Read { fits: true, .. } | KnownFit::ByTwin => false,
            KnownFit::Read {
                fits: false,
                memory,
            } => memory.saturating_sub(ring_saving(&cfg, l, seq_len)) <= hbm,
            KnownFit::Unknown => true,
        })
        .collect();
    evaluate(&rings, &mut candidates);
    if candidates.is_empty() && o.layout.is_none() {
        return Err(nothing_fits(&too_large, &refused, hbm).into());
    }
    if o.layout.is_some() && !refused.is_empty() {
        let (layout, why) = refused.remove(0);
        return Err(PlanError::Layout {
            layout,
            message: why,
        }
        .into());
    }
    rank(&mut candidates);
    // The best are read again from their whole programs, and ranked again.
    // One that no longer fits falls behind those that do; the next are
    // read whole in turn, so the header and the list never disagree.
    if fidelity == Fidelity::Extrapolated {
        for _ in 0..EXACT_ROUNDS {
            let pending: Vec<usize> = (0..o.top.min(candidates.len()))
                .filter(|&k| !candidates[k].exact)
                .collect();
            if pending.is_empty() {
                break;
            }
            let top: Vec<Layout> = pending
                .iter()
                .map(|&k| candidates[k].parsed.clone())
                .collect();
            let exact = evaluate_all(&setting, &top, Fidelity::Exact);
            for (&k, e) in pending.iter().zip(exact) {
                let c = &mut candidates[k];
                match e {
                    Ok(e) => match setting.candidate(&c.parsed, &e, true) {
                        Ok(exact) => *c = exact,
                        Err(e) => refused.push((c.layout.clone(), e.to_string())),
                    },
                    Err(e) => refused.push((c.layout.clone(), e.to_string())),
                }
            }
            candidates.retain(|c| !refused.iter().any(|(l, _)| *l == c.layout));
            rank(&mut candidates);
        }
    }
    let capacity_advice = capacity_advice(&setting, &candidates);
    Ok(Plan {
        model: name.clone(),
        instance: o.instance.name(),
        nodes: o.nodes,
        global_batch: o.global_batch,
        seq_len,
        candidates,
        refused,
        too_large,
        pruned,
        capacity_advice,
        seconds: t0.elapsed().as_secs_f64(),
        params: o.params.named(),
        assumptions: o.assumptions,
    })
}

/// The layouts of `regathering` (FSDP gathering its weights again in the
/// backward) whose twin that keeps them to the backward does not fit, or
/// was left out because it does not; and the others, left out: where the
/// twin fits (or a twin of it with less remat does), it computes the same
/// step without the second gathers.
fn keeping_twin_does_not_fit(
    regathering: Vec<Layout>,
    candidates: &[Candidate],
    pruned: &[(String, Pruned)],
) -> (Vec<Layout>, Vec<(String, Pruned)>) {
    let known = KnownFits::of(candidates, pruned);
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for l in regathering {
        let twin = l.keeping_twin().to_string();
        match known.of_layout(&twin) {
            KnownFit::Read { fits: true, .. } | KnownFit::ByTwin => {
                left_out.push((l.to_string(), Pruned::KeepingTwinFits { twin }))
            }
            KnownFit::Read { fits: false, .. } | KnownFit::Unknown => out.push(l),
        }
    }
    (out, left_out)
}

/// What a search knows so far of whether its layouts fit: those it read
/// from their programs, and those it left out because a twin that holds
/// at least as much fits (a twin with less remat, or one keeping FSDP's
/// gathered weights), which fit too.
struct KnownFits<'a> {
    read: HashMap<&'a str, (bool, u64)>,
    by_twin: HashSet<&'a str>,
}

/// What [`KnownFits`] knows of one layout.
enum KnownFit {
    /// Read from its programs: whether it fits, and its memory per rank.
    Read { fits: bool, memory: u64 },
    /// Left out because a heavier twin fits: it fits.
    ByTwin,
    /// Neither read nor left out for fitting.
    Unknown,
}

impl<'a> KnownFits<'a> {
    fn of(candidates: &'a [Candidate], pruned: &'a [(String, Pruned)]) -> KnownFits<'a> {
        KnownFits {
            read: candidates
                .iter()
                .map(|c| (c.layout.as_str(), (c.fits, c.memory_per_rank)))
                .collect(),
            by_twin: pruned
                .iter()
                .filter(|(_, why)| {
                    matches!(
                        why,
                        Pruned::LessRematFits { .. } | Pruned::KeepingTwinFits { .. }
                    )
                })
                .map(|(l, _)| l.as_str())
                .collect(),
        }
    }

    fn of_layout(&self, layout: &str) -> KnownFit {
        match self.read.get(layout) {
            Some(&(fits, memory)) => KnownFit::Read { fits, memory },
            None if self.by_twin.contains(layout) => KnownFit::ByTwin,
            None => KnownFit::Unknown,
        }
    }
}

/// Evaluates `layouts` (none of them in `too_large`, whose names are over
/// a core by their floor) lightest first, by their
/// [`lighter_twins::weight`]: a layout whose lighter twin does not fit is
/// left out, and so is each that its remat ladder decides
/// ([`remat_ladder::climb`]). `evaluate` says of a round whether each
/// fits. Returns the layouts left out, with why.
fn by_weight(
    layouts: Vec<Layout>,
    too_large: HashSet<String>,
    micro_batches: &[i64],
    global_batch: i64,
    mut evaluate: impl FnMut(&[Layout]) -> Vec<bool>,
) -> Vec<(String, Pruned)> {
    let mut does_not_fit = too_large;
    let mut pruned = Vec::new();
    let mut levels: BTreeMap<usize, Vec<Layout>> = BTreeMap::new();
    for l in layouts {
        levels
            .entry(lighter_twins::weight(&l, micro_batches))
            .or_default()
            .push(l);
    }
    for (_, level) in levels {
        let mut go = Vec::with_capacity(level.len());
        for l in level {
            let unfit_twin = lighter_twins::lighter_twins(&l, micro_batches, global_batch)
                .into_iter()
                .map(|t| t.to_string())
                .find(|t| does_not_fit.contains(t));
            match unfit_twin {
                Some(twin) => {
                    does_not_fit.insert(l.to_string());
                    pruned.push((l.to_string(), Pruned::LighterTwinDoesNotFit { twin }));
                }
                None => go.push(l),
            }
        }
        let climbed = remat_ladder::climb(go, |round| {
            let fits = evaluate(round);
            for (l, &fits) in round.iter().zip(&fits) {
                if !fits {
                    does_not_fit.insert(l.to_string());
                }
            }
            fits
        });
        for (l, why) in climbed {
            if matches!(why, Pruned::MoreRematDoesNotFit { .. }) {
                does_not_fit.insert(l.to_string());
            }
            pruned.push((l.to_string(), why));
        }
    }
    pruned
}

/// [`CapacityAdvice`] for a plan's ranked `candidates`, where the model is
/// a dropless mixture of experts whose best layout fits: the search run
/// again under the factor (the factor changes which layout is best: it
/// shrinks the expert-parallel exchange, not the dense form without EP),
/// or a `--layout` read again under it. Advice only where the factor's
/// best fits and is faster.
fn capacity_advice(s: &Setting, candidates: &[Candidate]) -> Option<CapacityAdvice> {
    let dropless = s
        .cfg
        .moe
        .as_ref()
        .is_some_and(|m| m.capacity_factor.is_none());
    let best = candidates.first().filter(|c| c.fits && dropless)?;
    let factor = ADVISED_CAPACITY_FACTOR;
    let o = PlanOptions {
        capacity_factor: Some(factor),
        ..s.o.clone()
    };
    // A layout the factor cannot take is no advice.
    let capped = plan(&o).ok()?.best()?.clone();
    (capped.seq_per_s > best.seq_per_s).then_some(CapacityAdvice {
        factor,
        dropless_seq_per_s: best.seq_per_s,
        capped,
    })
}

/// Why a search left no layout to rank: the smallest state any layout
/// holds on a core against the core's memory, and how many layouts were
/// refused and why, with what changes it.
fn nothing_fits(too_large: &[(String, u64)], refused: &[(String, String)], hbm: u64) -> PlanError {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mut reason = Vec::new();
    if let Some((layout, floor)) = too_large.iter().min_by_key(|(_, f)| *f) {
        reason.push(format!(
            "{} layouts hold more than a core's {:.2} GiB by their state (and a layer's \
             attention scores under the plain graph) alone, the least {layout} with {:.2} GiB: \
             more nodes, ZeRO-1 over more replicas, looped attention or context parallelism for \
             a long sequence, or a smaller model",
            too_large.len(),
            gib(hbm),
            gib(*floor)
        ));
    }
    if let Some((layout, why)) = refused.first() {
        reason.push(format!(
            "{} layouts were refused, the first {layout}: {why}",
            refused.len()
        ));
    }
    PlanError::NothingFits {
        reason: reason.join("; "),
    }
}

/// How many times the planner reads the best layouts whole: again when
/// one it read no longer fits and others take its place.
const EXACT_ROUNDS: usize = 3;

/// Those that fit first, fastest first; the layout's text breaks ties, so
/// the order is the same on every run.
fn rank(c: &mut [Candidate]) {
    c.sort_by(|a, b| {
        b.fits
            .cmp(&a.fits)
            .then(b.seq_per_s.total_cmp(&a.seq_per_s))
            .then(a.layout.cmp(&b.layout))
    });
}

impl Setting<'_> {
    fn candidate(
        &self,
        layout: &Layout,
        e: &Evaluated,
        exact: bool,
    ) -> Result<Candidate, PlanError> {
        let o = self.o;
        let hw = o.instance.hardware();
        let breakdown = features(&e.work, &hw, &o.assumptions).breakdown(&o.params);
        let step = breakdown.total();
        let seq_per_s = o.global_batch as f64 / step;
        let tokens_per_s = seq_per_s * self.seq_len as f64;
        let cores = (o.nodes * hw.cores_per_node) as f64;
        // A token reads the experts it chose, not the others.
        let model_flops = 6.0 * self.cfg.active_parameter_count() as f64 * self.seq_len as f64;
        let mfu = seq_per_s * model_flops / (cores * hw.bf16_flops);
        let memory_per_rank = e.memory.total();
        Ok(Candidate {
            layout: layout.to_string(),
            parsed: layout.clone(),
            step_seconds: step,
            seq_per_s,
            tokens_per_s,
            mfu,
            memory: e.memory,
            memory_per_rank,
            fits: memory_per_rank <= hw.hbm_bytes,
            cost_per_4m_tokens: o
                .price
                .map(|usd| usd * o.nodes as f64 * (4.0e6 / tokens_per_s) / 3600.0),
            breakdown,
            command: layout.compile_command(
                &o.model,
                self.seq_len,
                o.global_batch,
                o.instance.chip(),
                o.capacity_factor,
            )?,
            exact,
            preflight_warnings: e.warnings.clone(),
        })
    }
}

/// Evaluates `layouts` on the machine's cores, each result in its layout's
/// place.
fn evaluate_all(
    s: &Setting,
    layouts: &[Layout],
    fidelity: Fidelity,
) -> Vec<Result<Evaluated, PlanError>> {
    let threads = match s.o.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(layouts.len())
    .max(1);
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Evaluated, PlanError>>>> =
        layouts.iter().map(|_| Mutex::new(None)).collect();
    let cores_per_node = s.o.instance.hardware().cores_per_node;
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(layout) = layouts.get(k) else { break };
                let r = evaluate(
                    s.cfg,
                    s.name,
                    s.seq_len,
                    s.o.global_batch,
                    layout,
                    cores_per_node,
                    s.o.instance.chip(),
                    fidelity,
                );
                if let Ok(mut slot) = results[k].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .zip(layouts)
        .map(|(slot, l)| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(PlanError::Layout {
                    layout: l.to_string(),
                    message: "its evaluation did not finish".into(),
                })
            })
        })
        .collect()
}

/// The fewest bytes a rank of `l` holds from step to step, from the
/// model's parameter counts alone: its share of the weights in their
/// storage type (divided over the shard group under FSDP), of the f32
/// master weights and Adam moments (divided over the replicas under
/// ZeRO-1, over the shard group under FSDP), and of the f32 gradient
/// accumulators where micro-batches accumulate. A rank holds at least `N / (tp pp)` of the
/// parameters (replicated norms only add to it), a mixture's routed
/// experts `X / (tp pp ep)` of theirs (ZeRO-1 dividing their state over
/// the `dp / ep` replicas holding them), so a layout over a core's memory
/// by this floor is over it by its plan too, and is not compiled.
pub fn state_floor(cfg: &ModelConfig, l: &Layout, global_batch: i64) -> u64 {
    let p = &l.parallel;
    let split = (p.tp * p.pp) as f64;
    let experts = cfg.expert_parameter_count() as f64;
    let dense = (cfg.parameter_count() as f64 - experts) / split;
    let experts = experts / (split * p.ep as f64);
    // The replicas that divide a share's state: FSDP's shard group, or
    // every replica under ZeRO-1 (the experts' holders, `dp / ep`, alike).
    let replicas = |over: i64| match (p.shards_weights(), p.zero1) {
        (true, _) => over.min(p.fsdp) as f64,
        (false, true) => over as f64,
        (false, false) => 1.0,
    };
    let weights = |over: i64| match p.shards_weights() {
        true => replicas(over),
        false => 1.0,
    };
    let storage = l.precision.storage().byte_size() as f64;
    // The master copy and the two moments: what ZeRO-1 divides.
    let optimizer = l.precision.state_bytes_per_parameter() as f64 - storage;
    let accumulated = p.pp > 1 || l.micro_batches(global_batch).is_ok_and(|k| k > 1);
    let accumulators = match accumulated {
        true => l.precision.gradient_sum_type().byte_size() as f64,
        false => 0.0,
    };
    let bytes = |share: f64, over: i64| {
        share * (storage / weights(over) + optimizer / replicas(over) + accumulators)
    };
    let replicas = p.replicas();
    (bytes(dense, replicas) + bytes(experts, replicas / p.ep)) as u64
}

/// Bytes one layer's scores take on a rank of `l` under the plain graph
/// of attention, `[micro_batch, heads / tp, S / cp, S]` in 16 bits (the
/// least any precision keeps them in); none for blocked or looped
/// attention, which never build them. The step holds at least one
/// layer's, so a layout over a core by this and its state is over it by
/// its plan too: at long sequences it spares compiling every layout of
/// the plain graph.
pub fn attention_floor(cfg: &ModelConfig, l: &Layout, seq_len: i64) -> u64 {
    if l.attention.kind != ImplKind::Hlo {
        return 0;
    }
    let p = &l.parallel;
    let heads = (cfg.num_attention_heads / p.tp).max(1) as u64;
    let queries = (seq_len / p.cp) as u64;
    l.micro_batch as u64 * heads * queries * seq_len as u64 * 2
}

/// The most a ring can save a rank of `l` against its all-gather twin:
/// every layer of its stage keeping the gathered keys and values for its
/// backward, at their own heads and repeated for the query heads (what
/// attention's composite reads), `2 x micro_batch x S x (h_q + h_kv) x d`
/// in f32. The ring keeps its own block instead, so it saves less.
fn ring_saving(cfg: &ModelConfig, l: &Layout, seq_len: i64) -> u64 {
    let p = &l.parallel;
    let heads = |h: i64| (h / p.tp).max(1) as u64;
    let heads = heads(cfg.num_attention_heads) + heads(cfg.num_key_value_heads);
    let layers = (cfg.num_hidden_layers / p.pp.max(1)) as u64;
    let gathered = 2 * l.micro_batch as u64 * seq_len as u64 * heads * cfg.head_dim() as u64 * 4;
    layers * gathered
}

/// How a searched layout divides the state over its DP replicas.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StateDivision {
    Replicated,
    Zero1,
    /// FSDP over every replica.
    Fsdp,
    /// HSDP: FSDP within the replicas one node holds, whose gathers and
    /// reduce-scatters stay on NeuronLink, the shard groups replicating
    /// one another across nodes (torchtitan's `dp_shard` within a node,
    /// `dp_replicate` across).
    Hsdp,
}

impl StateDivision {
    const ALL: [StateDivision; 4] = [
        StateDivision::Replicated,
        StateDivision::Zero1,
        StateDivision::Fsdp,
        StateDivision::Hsdp,
    ];

    /// The FSDP shard group it gives `dp` replicas of `tp x cp` ranks on
    /// nodes of `per_node` cores (1 without FSDP), or `None` where it is
    /// another division again: without replicas to divide over, or HSDP
    /// whose node holds every replica (FSDP over all of them) or does not
    /// cut them into whole groups.
    fn shard_group(self, dp: i64, tp: i64, cp: i64, per_node: i64) -> Option<i64> {
        match self {
            StateDivision::Replicated => Some(1),
            StateDivision::Zero1 => (dp * cp > 1).then_some(1),
            StateDivision::Fsdp => (dp > 1).then_some(dp),
            StateDivision::Hsdp => {
                let in_node = per_node / (tp * cp);
                (in_node > 1 && in_node < dp && dp % in_node == 0).then_some(in_node)
            }
        }
    }
}

/// The reshard policies a search tries for a shard group of `fsdp`:
/// without FSDP none means anything; with it, the weights kept from the
/// forward to the backward, and freed and gathered again (torchtitan's two
/// policies; its default is one or the other by the stages).
fn reshard_policies(fsdp: i64) -> &'static [Reshard] {
    match fsdp > 1 {
        true => &[Reshard::Never, Reshard::Always],
        false => &[Reshard::Never],
    }
}

/// The micro-batches a search tries.
const MICRO_BATCHES: [i64; 3] = [1, 2, 4];

/// The micro-batches a search tries at `seq_len`: [`MICRO_BATCHES`], or
/// above [`LONG_CONTEXT`] one sequence (a long sequence fills the
/// matmuls alone, and more only add activations).
fn micro_batches(seq_len: i64) -> &'static [i64] {
    match seq_len > LONG_CONTEXT {
        true => &MICRO_BATCHES[..1],
        false => &MICRO_BATCHES,
    }
}

/// The longest sequence the search prices without context parallelism
/// alone: above it, it tries CP too. Below it a rank's share of attention
/// fits without dividing the sequence, and every CP degree would multiply
/// the layouts compiled.
pub const LONG_CONTEXT: i64 = 8192;

/// The CP degrees the search tries at `seq_len`: 1, and above
/// [`LONG_CONTEXT`] every power of two that cuts the sequence into
/// head-tail chunks of at least [`CP_CHUNK`] tokens.
fn context_degrees(seq_len: i64) -> impl Iterator<Item = i64> + Clone {
    (0..)
        .map(|k| 1i64 << k)
        .take_while(move |&cp| {
            cp == 1 || (seq_len > LONG_CONTEXT && seq_len / (2 * cp) >= CP_CHUNK)
        })
        .filter(move |&cp| seq_len % (2 * cp) == 0 || cp == 1)
}

/// The fewest tokens in a chunk of a CP rank the search tries: below, the
/// exchange of keys and values costs more than the attention it divides
/// (Llama 3 ran CP 16 at 131,072 tokens: chunks of 4,096).
pub const CP_CHUNK: i64 = 4096;

/// The attention a CP layout is priced with: looped attention, the form
/// long sequences take under CP (the plain graph's scores grow with the
/// whole sequence on every rank), with the largest tile up to 512 that
/// divides a chunk, unless `asked` names looped with its own tile.
fn context_attention(asked: &KernelRequest, seq_len: i64, cp: i64) -> KernelRequest {
    if asked.kind == ImplKind::Looped {
        return asked.clone();
    }
    let chunk = seq_len / (2 * cp);
    let tile = [512, 256, 128, 64, 32, 16, 8]
        .into_iter()
        .find(|t| chunk % t == 0)
        .unwrap_or(chunk);
    KernelRequest {
        point: KernelPoint::Attention,
        kind: ImplKind::Looped,
        argument: Some(KernelArg::Tile(tile)),
    }
}

/// Why a layout was refused, without the layout its error names (the
/// refusal is listed under it).
fn without_layout(e: PlanError) -> String {
    match e {
        PlanError::Layout { message, .. } => message,
        PlanError::Compile { source, .. } => source.to_string(),
        e => e.to_string(),
    }
}

/// The precisions a search tries when none is fixed: those that train
/// bf16 models well (HLAT's), not the f32 and f64 references.
const SEARCHED_PRECISIONS: [Precision; 3] = [
    Precision::Bf16Master,
    Precision::Bf16Mixed,
    Precision::Bf16Pure,
];

/// The EP degrees a search tries for `cfg` over `dp` replicas: each that
/// divides the experts and the replicas (1 alone for a dense model).
fn expert_degrees(cfg: &ModelConfig, dp: i64) -> Vec<i64> {
    let experts = cfg.moe.as_ref().map_or(1, |m| m.num_experts);
    (1..=experts.min(dp))
        .filter(|ep| experts % ep == 0 && dp % ep == 0)
        .collect()
}

/// Every layout of the cluster that divides the model and the batch:
/// TP within a node (a power of two up to its cores), PP dividing the
/// layers, CP above [`LONG_CONTEXT`] tokens ([`context_degrees`], priced
/// with looped attention, by all-gather and by ring), DP filling the rest, and for a mixture of
/// experts every EP dividing the experts and DP (by `all-to-all`); SP on
/// and off where it means anything; the state replicated, under ZeRO-1,
/// under FSDP over every replica, or under HSDP with a node's replicas in
/// each shard group ([`StateDivision`]), FSDP's weights kept to the backward
/// or gathered again there ([`reshard_policies`]); every remat policy;
/// micro-batches of 1, 2 and 4; and the precision, or each of the bf16
/// presets.
pub fn search_space(
    cfg: &ModelConfig,
    seq_len: i64,
    o: &PlanOptions,
    cores: i64,
) -> Result<Vec<Layout>, PlanError> {
    let per_node = o.instance.hardware().cores_per_node;
    let precisions: Vec<Precision> = match o.precision {
        Some(p) => vec![p],
        None => SEARCHED_PRECISIONS.to_vec(),
    };
    let mut out = Vec::new();
    let tps = (0..).map(|k| 1i64 << k).take_while(|&t| t <= per_node);
    let divisions = tps.flat_map(|tp| {
        (1..=cfg.num_hidden_layers)
            .filter(|pp| cfg.num_hidden_layers % pp == 0)
            .flat_map(move |pp| context_degrees(seq_len).map(move |cp| (tp, pp, cp)))
    });
    let exchanges = |cp: i64| match cp {
        1 => &CpExchange::ALL[..1],
        _ => &CpExchange::ALL[..],
    };
    let divisions = divisions.flat_map(|(tp, pp, cp)| {
        exchanges(cp)
            .iter()
            .map(move |&cp_exchange| (tp, pp, cp, cp_exchange))
    });
    for (tp, pp, cp, cp_exchange) in divisions {
        if cores % (tp * pp * cp) != 0 {
            continue;
        }
        let dp = cores / (tp * pp * cp);
        let attention = match cp {
            1 => o.attention.clone(),
            _ => context_attention(&o.attention, seq_len, cp),
        };
        for (ep, sequence_parallel) in expert_degrees(cfg, dp)
            .into_iter()
            .flat_map(|ep| [(ep, false), (ep, true)])
        {
            let states = StateDivision::ALL.into_iter().filter_map(|state| {
                let fsdp = state.shard_group(dp, tp, cp, per_node)?;
                Some(
                    reshard_policies(fsdp)
                        .iter()
                        .map(move |&r| (state, fsdp, r)),
                )
            });
            for (state, fsdp, reshard) in states.flatten() {
                for remat in RematPolicy::ALL {
                    for &micro_batch in micro_batches(seq_len) {
                        for &precision in &precisions {
                            let l = Layout {
                                parallel: Parallelism {
                                    tp,
                                    pp,
                                    dp,
                                    cp,
                                    cp_exchange,
                                    ep,
                                    sequence_parallel,
                                    zero1: state == StateDivision::Zero1,
                                    fsdp,
                                    reshard,
                                    ..Parallelism::SINGLE
                                },
                                remat,
                                micro_batch,
                                precision,
                                attention: attention.clone(),
                            };
                            if check_layout(cfg, &l, seq_len, o.global_batch, cores).is_ok() {
                                out.push(l);
                            }
                        }
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(PlanError::Cluster(format!(
            "no layout of {} x {} ({cores} cores) divides the model and {}: \
             tp must divide the attention heads ({}) and the MLP width ({}) within a node's \
             {per_node} cores, pp the layers ({}), and dp x micro-batch the global batch, in \
             at most {} micro-batches a step",
            o.nodes,
            o.instance,
            PlanOption::GlobalBatch.set(o.global_batch),
            cfg.num_attention_heads,
            cfg.intermediate_size,
            cfg.num_hidden_layers,
            super::layout::MAX_MICRO_BATCHES
        )));
    }
    Ok(out)
}
