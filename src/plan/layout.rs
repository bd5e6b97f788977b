//! A layout: how one training step is divided over a cluster's cores and
//! run (parallelism, ZeRO-1, activation checkpointing, micro-batch and
//! precision), written and read as `--layout`'s SPEC, and turned into the
//! `hlatc compile` options and command that build it.

use super::hardware::Instance;
use super::PlanError;
use crate::compile_step::{CompileOptions, ModelSource};
use hlatc_models::kernels::{ImplKind, KernelRequest};
use hlatc_models::{
    BatchShape, CpBalance, CpExchange, EpExchange, ModelConfig, Parallelism, Reshard,
};
use hlatc_passes::neuron_check::Chip;
use hlatc_passes::{RematPolicy, Target};
use hlatc_step::memory_plan::DeviceMemory;
use hlatc_step::precision::Precision;
use std::fmt;

/// One way to run a step on a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// TP, PP, DP, EP (a mixture of experts'), sequence parallelism and
    /// ZeRO-1, as a step takes them.
    pub parallel: Parallelism,
    pub remat: RematPolicy,
    /// Sequences per micro-batch on each DP replica.
    pub micro_batch: i64,
    pub precision: Precision,
    /// How hlatc's programs compute attention's core (`--kernel
    /// attention=...`): the layout is priced from the program it builds.
    pub attention: KernelRequest,
}

/// The keys a SPEC takes, as it writes them.
const KEYS: [&str; 16] = [
    "tp",
    "pp",
    "dp",
    "cp",
    "cp_balance",
    "cp_exchange",
    "ep",
    "ep_exchange",
    "sp",
    "zero1",
    "fsdp",
    "reshard",
    "remat",
    "micro_batch",
    "precision",
    "attention",
];

impl Layout {
    /// Cores the layout runs on.
    pub fn ranks(&self) -> i64 {
        self.parallel.world()
    }

    /// Micro-batches per optimizer step on each replica: the gradient
    /// accumulation steps, or the pipeline's micro-batches.
    pub fn micro_batches(&self, global_batch: i64) -> Result<i64, PlanError> {
        let per_replica = self.parallel.dp * self.micro_batch;
        if global_batch % per_replica != 0 {
            return Err(PlanError::Layout {
                layout: self.to_string(),
                message: format!(
                    "{} does not divide into dp {} x micro_batch {} = {per_replica} sequences \
                     per micro-batch",
                    super::PlanOption::GlobalBatch.set(global_batch),
                    self.parallel.dp,
                    self.micro_batch
                ),
            });
        }
        Ok(global_batch / per_replica)
    }

    /// Reads a SPEC (`tp=8,pp=4,dp=32,cp=2,sp,zero1,remat=core-attention,
    /// micro_batch=1,precision=bf16-master,attention=blocked`). `dp` left
    /// out fills the cluster's `cores`; the others default to 1, off,
    /// head-tail, core-attention, 1, `precision` and `attention`.
    pub fn parse(
        spec: &str,
        cores: i64,
        chip: Chip,
        precision: Precision,
        attention: KernelRequest,
    ) -> Result<Layout, PlanError> {
        let bad = |message: String| PlanError::Spec {
            spec: spec.to_string(),
            message,
        };
        let mut l = Layout {
            parallel: Parallelism {
                dp: 0,
                ..Parallelism::SINGLE
            },
            remat: RematPolicy::CoreAttention,
            micro_batch: 1,
            precision,
            attention,
        };
        if spec.trim().is_empty() {
            return Err(bad(format!(
                "an empty layout; write its degrees, e.g. tp=8,dp=4 (keys: {})",
                KEYS.join(", ")
            )));
        }
        let mut seen: Vec<&str> = Vec::new();
        for part in spec.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(bad("an empty entry between commas".into()));
            }
            let (key, value) = match part.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (part, None),
            };
            let canonical = match key {
                "sequence_parallel" => "sp",
                "mb" => "micro_batch",
                k => k,
            };
            if seen.contains(&canonical) {
                return Err(bad(format!("'{key}' is given twice")));
            }
            seen.push(canonical);
            let number = |v: Option<&str>| -> Result<i64, PlanError> {
                let v = v.ok_or_else(|| bad(format!("'{key}' needs a value ({key}=N)")))?;
                match v.parse::<i64>() {
                    Ok(n) if n >= 1 => Ok(n),
                    _ => Err(bad(format!("{key}={v}: a positive whole number is needed"))),
                }
            };
            let flag = |v: Option<&str>| -> Result<bool, PlanError> {
                match v {
                    None | Some("true" | "on" | "1") => Ok(true),
                    Some("false" | "off" | "0") => Ok(false),
                    Some(v) => Err(bad(format!("{key}={v}: true or false"))),
                }
            };
            match key {
                "tp" => l.parallel.tp = number(value)?,
                "pp" => l.parallel.pp = number(value)?,
                "dp" => l.parallel.dp = number(value)?,
                "ep" => l.parallel.ep = number(value)?,
                "cp" => l.parallel.cp = number(value)?,
                "cp_balance" => {
                    let names = CpBalance::ALL.map(CpBalance::name);
                    l.parallel.cp_balance = named(
                        (key, value),
                        "the orders",
                        &names,
                        CpBalance::from_name,
                        bad,
                    )?;
                }
                "cp_exchange" => {
                    let names = CpExchange::ALL.map(CpExchange::name);
                    l.parallel.cp_exchange = named(
                        (key, value),
                        "the forms",
                        &names,
                        CpExchange::from_name,
                        bad,
                    )?;
                }
                "ep_exchange" => {
                    let names = EpExchange::ALL.map(EpExchange::name);
                    l.parallel.ep_exchange = named(
                        (key, value),
                        "the forms",
                        &names,
                        EpExchange::from_name,
                        bad,
                    )?;
                }
                "sp" | "sequence_parallel" => l.parallel.sequence_parallel = flag(value)?,
                "zero1" => l.parallel.zero1 = flag(value)?,
                "fsdp" => l.parallel.fsdp = number(value)?,
                "reshard" => {
                    let names = Reshard::ALL.map(Reshard::name);
                    l.parallel.reshard = named(
                        (key, value),
                        "the policies",
                        &names,
                        Reshard::from_name,
                        bad,
                    )?;
                }
                "micro_batch" | "mb" => l.micro_batch = number(value)?,
                "remat" => {
                    let names = RematPolicy::ALL.map(RematPolicy::name);
                    l.remat = named(
                        (key, value),
                        "known policies",
                        &names,
                        RematPolicy::from_name,
                        bad,
                    )?;
                }
                "precision" => {
                    let v = value.unwrap_or_default();
                    l.precision = Precision::from_name(v).ok_or_else(|| {
                        let known: Vec<&str> = Precision::ALL.iter().map(|p| p.name()).collect();
                        bad(format!(
                            "precision={v}: known presets are {}",
                            known.join(", ")
                        ))
                    })?;
                    if let Some(why) = not_on_chip(l.precision, chip) {
                        return Err(bad(format!("precision={v}: {why}")));
                    }
                }
                "attention" => {
                    let v = value.unwrap_or_default();
                    l.attention = KernelRequest::parse(&format!("attention={v}"))
                        .map_err(|e| bad(e.to_string()))?;
                }
                other => {
                    return Err(bad(format!(
                        "unknown key '{other}' (known: {})",
                        KEYS.join(", ")
                    )))
                }
            }
        }
        if l.parallel.dp == 0 {
            let per_dp = l.parallel.tp * l.parallel.pp * l.parallel.cp;
            if cores % per_dp != 0 {
                return Err(bad(format!(
                    "tp {} x pp {} x cp {} = {per_dp} does not divide the cluster's {cores} \
                     cores; give dp= or other degrees",
                    l.parallel.tp, l.parallel.pp, l.parallel.cp
                )));
            }
            l.parallel.dp = cores / per_dp;
        }
        Ok(l)
    }

    /// The options `hlatc compile` takes for this layout, over `global_batch`
    /// sequences of `seq_len` tokens on `chip`, with no memory limit (the
    /// planner checks the plan itself).
    pub fn compile_options(
        &self,
        model: ModelSource,
        seq_len: i64,
        global_batch: i64,
        chip: Chip,
    ) -> Result<CompileOptions, PlanError> {
        if self.attention.kind == ImplKind::Imported {
            return Err(PlanError::Layout {
                layout: self.to_string(),
                message:
                    "the planner prices hlo, blocked and looped attention; an imported kernel \
                          is a call whose work it does not read"
                        .into(),
            });
        }
        Ok(CompileOptions {
            model,
            batch_size: Some(global_batch),
            seq_len: Some(seq_len),
            precision: self.precision,
            target: Target::Neuron,
            chip: Some(chip),
            remat: self.remat,
            parallel: self.parallel,
            device_memory: DeviceMemory::Unchecked,
            grad_accum: self.micro_batches(global_batch)?,
            kernels: self.kernels(),
            ..CompileOptions::default()
        })
    }

    /// The kernel requests the layout's programs are built with: none for
    /// the plain graph.
    fn kernels(&self) -> Vec<KernelRequest> {
        match self.attention.kind {
            ImplKind::Hlo => Vec::new(),
            _ => vec![self.attention.clone()],
        }
    }

    /// The `hlatc compile` command that builds this layout's bundle for
    /// the instance's `chip` (whose core `compile` holds the plan to by
    /// default), written from the options it compiles
    /// ([`CompileOptions::command_line`]); `model` as the user named it.
    pub fn compile_command(
        &self,
        model: &ModelSource,
        seq_len: i64,
        global_batch: i64,
        chip: Chip,
        capacity_factor: Option<f64>,
    ) -> Result<String, PlanError> {
        // A model given as JSON or already read (Python's dict, the
        // planner's own) is named as the messages name it.
        let model = match model {
            ModelSource::ConfigJson { name, .. } | ModelSource::Config { name, .. } => {
                ModelSource::ConfigFile(name.into())
            }
            spelled => spelled.clone(),
        };
        let options = CompileOptions {
            device_memory: DeviceMemory::TargetDefault,
            capacity_factor,
            ..self.compile_options(model, seq_len, global_batch, chip)?
        };
        let words = options.command_line_text().map_err(|e| PlanError::Layout {
            layout: self.to_string(),
            message: e.to_string(),
        })?;
        Ok(format!("hlatc compile {words} --out build/plan"))
    }
}

impl Layout {
    /// The layout with its CP ranks all-gathering keys and values: under a
    /// ring, the twin the search prices first.
    pub fn gathering_twin(&self) -> Layout {
        Layout {
            parallel: Parallelism {
                cp_exchange: CpExchange::AllGather,
                ..self.parallel
            },
            ..self.clone()
        }
    }

    /// The layout with FSDP keeping its gathered weights from the forward
    /// to the backward: under a policy that frees them, the twin the
    /// search prices first.
    pub fn keeping_twin(&self) -> Layout {
        Layout {
            parallel: Parallelism {
                reshard: Reshard::Never,
                ..self.parallel
            },
            ..self.clone()
        }
    }
}

/// The SPEC `--layout` reads, every key written.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tp={},pp={},dp={}",
            self.parallel.tp, self.parallel.pp, self.parallel.dp
        )?;
        if self.parallel.cp > 1 {
            write!(f, ",cp={}", self.parallel.cp)?;
        }
        if self.parallel.cp_balance != CpBalance::default() {
            write!(f, ",cp_balance={}", self.parallel.cp_balance.name())?;
        }
        if self.parallel.cp_exchange != CpExchange::default() {
            write!(f, ",cp_exchange={}", self.parallel.cp_exchange.name())?;
        }
        if self.parallel.ep > 1 {
            write!(f, ",ep={}", self.parallel.ep)?;
        }
        if self.parallel.ep_exchange != EpExchange::default() {
            write!(f, ",ep_exchange={}", self.parallel.ep_exchange.name())?;
        }
        if self.parallel.sequence_parallel {
            f.write_str(",sp")?;
        }
        if self.parallel.zero1 {
            f.write_str(",zero1")?;
        }
        if self.parallel.shards_weights() {
            write!(f, ",fsdp={}", self.parallel.fsdp)?;
        }
        if self.parallel.reshard != Reshard::default() {
            write!(f, ",reshard={}", self.parallel.reshard.name())?;
        }
        write!(
            f,
            ",remat={},micro_batch={},precision={}",
            self.remat.name(),
            self.micro_batch,
            self.precision.name()
        )?;
        match self.attention.kind {
            ImplKind::Hlo => Ok(()),
            _ => write!(f, ",attention={}", self.attention.implementation()),
        }
    }
}

/// Why a plan for `chip` cannot take `precision`, if it cannot: f64,
/// which neuronx-cc refuses (the pre-flight's `f64` rule), and mxfp8
/// before Trainium3, the first chip with an MX matmul.
pub fn not_on_chip(precision: Precision, chip: Chip) -> Option<String> {
    let why = refusal(precision, chip)?;
    let presets: Vec<&str> = Precision::ALL
        .iter()
        .filter(|&&p| refusal(p, chip).is_none())
        .map(|p| p.name())
        .collect();
    Some(format!(
        "{why}; the presets a plan for {chip} takes are {}",
        presets.join(", ")
    ))
}

/// [`not_on_chip`]'s reason alone.
fn refusal(precision: Precision, chip: Chip) -> Option<String> {
    Some(match precision {
        Precision::Fp64 => "Trainium has no f64 (neuronx-cc refuses it)".to_string(),
        Precision::Mxfp8 if chip != Chip::Trn3 => {
            let trn3: Vec<&str> = Instance::ALL
                .iter()
                .filter(|i| i.chip() == Chip::Trn3)
                .map(|i| i.name())
                .collect();
            format!(
                "mxfp8 multiplies on Trainium3's MX matmul, which {chip} has not (plan for {})",
                trn3.join(", ")
            )
        }
        _ => return None,
    })
}

/// The most micro-batches one optimizer step accumulates that the planner
/// prices: a pipeline's schedule is laid out tick by tick, so a search
/// over a global batch of billions would run for hours. Training runs
/// accumulate tens (HLAT: 1,024 sequences over 32 replicas).
pub const MAX_MICRO_BATCHES: i64 = 4096;

/// Whether `l` runs `cfg` on the cluster's `cores`: the degrees fill the
/// cluster, and divide the model and the batch.
pub fn check_layout(
    cfg: &ModelConfig,
    l: &Layout,
    seq_len: i64,
    global_batch: i64,
    cores: i64,
) -> Result<(), PlanError> {
    if l.ranks() != cores {
        return Err(PlanError::Cluster(format!(
            "layout {l}: tp {} x pp {} x cp {} x dp {} = {} cores, but the cluster has \
             {cores} (--nodes x the instance's cores)",
            l.parallel.tp,
            l.parallel.pp,
            l.parallel.cp,
            l.parallel.dp,
            l.ranks()
        )));
    }
    let k = l.micro_batches(global_batch)?;
    let batch = BatchShape {
        batch_size: l.parallel.dp * l.micro_batch,
        seq_len,
    };
    l.parallel
        .validate(cfg, batch)
        .map_err(|e| PlanError::Layout {
            layout: l.to_string(),
            message: e.to_string(),
        })?;
    if l.remat.needs_stages() && l.parallel.pp <= 1 {
        return Err(PlanError::Layout {
            layout: l.to_string(),
            message: "remat=stage keeps only each pipeline stage's input: it needs pp 2 or more"
                .into(),
        });
    }
    if k > MAX_MICRO_BATCHES {
        return Err(PlanError::Layout {
            layout: l.to_string(),
            message: format!(
                "{k} micro-batches a step, over the {MAX_MICRO_BATCHES} the planner prices: \
                 a larger micro-batch, more replicas or a smaller global batch"
            ),
        });
    }
    if l.parallel.pp > 1 && k < 1 {
        return Err(PlanError::Layout {
            layout: l.to_string(),
            message: "a pipeline needs at least one micro-batch".into(),
        });
    }
    Ok(())
}

/// The value of `key=v` read by `from_name`: a word among `names`, which
/// `what` says what they are; `bad` makes the refusal of the spec.
fn named<T>(
    (key, v): (&str, Option<&str>),
    what: &str,
    names: &[&str],
    from_name: impl Fn(&str) -> Option<T>,
    bad: impl Fn(String) -> PlanError,
) -> Result<T, PlanError> {
    let v = v.unwrap_or_default();
    from_name(v).ok_or_else(|| bad(format!("{key}={v}: {what} are {}", names.join(", "))))
}
