//! `hlatc train`: run the compiled training step on XLA CPU.

use super::console::{millis, note, out};
use super::option_args::{OptionArgs, TrainOptions};
use super::train_data::TrainData;
use hlatc::checkpoint::STATE_FILE;
use hlatc::compile_step::{batch_shape, compile_step, CompileOptions, CompiledStep};
use hlatc::compiler::{ElementType, Literal};
use hlatc::fit::checkpoints::RunCheckpoints;
use hlatc::fit::{FitEngine, FitPolicy};
use hlatc::loader::{positions_from_json, positions_to_json};
use hlatc::metrics::{MetricsLog, Series, StepMetrics};
use hlatc::plot::{Curve, PlotOptions};
use hlatc::rank_checkpoint::params_from_tensors;
use hlatc::run_identity::RunIdentity;
use hlatc::runtime::{
    read_safetensors, safetensors_bytes, safetensors_from_bytes, write_safetensors,
    write_safetensors_with_metadata, Runtime,
};
use hlatc::state_metadata::StateMetadata;
use hlatc::token_data::TokenData;
use hlatc::train_step::StepConfig;
use hlatc::trainer::{StepStats, Trainer};
use hlatc::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Train a model on XLA CPU with the compiled step.
///
/// The step goes through the cpu target's default pass pipeline first, with
/// --remat as its checkpointing policy: what `compile --target cpu` writes.
///
/// The data is, by default, a deterministic synthetic language: each
/// sequence starts at a random token and follows a fixed random permutation
/// of the vocabulary, so the next token is learnable from the current one;
/// each step draws a fresh batch from --seed. --corpus streams text or
/// token ids through hlatc's loader instead (tokenized with --tokenizer,
/// shuffled and packed as training runs), and --data samples windows of a
/// pre-tokenized file. The loss is printed every step with progress.
///
/// With --checkpoint-dir the run saves checkpoints as it goes, and the same
/// command started again resumes from the newest complete one by itself.
///
/// The schedule defaults suit short CPU runs (peak LR 1e-2 after
/// steps/10 warmup steps, cosine to 1e-3 at the last step); the other AdamW
/// settings are HLAT's. Every one can be set.
#[derive(clap::Args)]
pub struct Args {
    /// The step's options, from the option table (as `hlatc compile`'s).
    #[command(flatten)]
    step: OptionArgs<TrainOptions>,
    /// Optimizer steps to run
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = step_count)]
    steps: u64,
    /// Seed for initialization, data and stochastic rounding
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Start from these weights (safetensors, Hugging Face names) instead of
    /// the scaled random initialization
    #[arg(long, value_name = "FILE")]
    init: Option<PathBuf>,
    /// Write the final weights here (safetensors, Hugging Face names)
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Write the whole training state here when the run stops
    /// (safetensors, by the step's input names: the weights as stored,
    /// master weights, Adam moments, the step counter and the rounding RNG
    /// state, each gathered whole from its ranks), for --resume
    #[arg(long, value_name = "FILE")]
    save_state: Option<PathBuf>,
    /// Continue from a --save-state file: from its step to --steps, with
    /// the data, schedule and rounding where it stopped, bit for bit as a
    /// run that never stopped. It holds whole tensors, so any --tp, --dp,
    /// --sequence-parallel and --zero1 may resume it; the model, --precision
    /// and projection layout must be the ones it was saved with. The
    /// schedule comes from the flags (its defaults from --steps): give the
    /// ones the run started with
    #[arg(long, value_name = "FILE", conflicts_with = "init")]
    resume: Option<PathBuf>,
    /// Stop after this many steps of --steps (the schedule still spans
    /// --steps), to --save-state a run that --resume continues
    #[arg(long, value_name = "N")]
    stop_after: Option<u64>,
    /// Write every step's loss, grad norm and learning rate (and the
    /// held-out loss where it was measured) here as CSV, once training ends
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Draw this run's loss curve (and its held-out loss, where measured)
    /// into this PNG once training ends; `hlatc plot` draws several runs
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    #[command(flatten)]
    plot_size: super::plot::SizeArgs,
    #[command(flatten)]
    data: super::train_data::DataArgs,
    #[command(flatten)]
    checkpoints: super::train_checkpoints::CheckpointArgs,
    /// Report held-out loss every N steps, and after the last [default:
    /// steps/10]
    #[arg(long, value_name = "N")]
    eval_every: Option<u64>,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    check_flags(&a)?;
    let compiled = compile(&a)?;
    let (cfg, name) = (&compiled.cfg, &compiled.name);
    let identity = run_identity(&a, cfg)?;
    let params = initial_params(&a, cfg)?;
    let (checkpoints, restored) = match a.checkpoints.open(&identity)? {
        Some(o) => (Some(o.checkpoints), o.restored),
        None => (None, None),
    };
    // A --resume file of another run is refused before anything compiles.
    let from_file = match &restored {
        Some(_) => None,
        None => check_resume_file(&a, &identity)?,
    };
    let positions = match restored.as_ref().and_then(|r| r.loader.as_deref()) {
        Some(bytes) => Some(positions_from_json(&String::from_utf8_lossy(bytes))?),
        None => None,
    };
    let mut data = TrainData::open(&a.data, cfg, a.seed, positions)?;
    // One XLA CPU device per rank of the step.
    let rt = hlatc::runtime::Runtime::for_ranks(cfg.parallel.world() as usize)?;
    let mut trainer = start_trainer(&a, &rt, &compiled, params)?;
    let mut metrics = MetricsLog::default();
    match (&restored, &checkpoints) {
        (Some(r), Some(c)) => {
            let source = r.state_source();
            trainer.resume(safetensors_from_bytes(&r.state, &source)?, &source)?;
            metrics = r.metrics.clone();
            note!(
                "resuming at step {} from the newest complete checkpoint in {}",
                r.step,
                c.path().display()
            )?;
        }
        _ => resume_from_file(&a, &mut trainer)?,
    }
    let eval = match data.tokens() {
        Some(d) if d.has_eval() => Some(Evaluator::new(&rt, cfg, d)?),
        _ => None,
    };
    let t1 = Instant::now();
    let start = trainer.try_steps_done()? as u64;
    let stop = a.stop_after.unwrap_or(a.steps);
    if start >= stop && checkpoints.is_none() {
        return Err(Error::conflict(format!(
            "--stop-after {stop}: the run is already at step {start}"
        )));
    }
    if start >= stop {
        note!("the checkpoint is at step {start}: the run is complete")?;
    }
    let policy = FitPolicy {
        stop,
        checkpoint_every: a.checkpoints.every(a.steps),
    };
    policy.run(&mut Run {
        a: &a,
        cfg,
        eval: eval.as_ref(),
        checkpoints: checkpoints.as_ref(),
        trainer: &mut trainer,
        data: &mut data,
        metrics: &mut metrics,
        start,
        stop,
        t1,
        last: None,
    })?;
    data.report(t1.elapsed())?;
    let identity = match (&checkpoints, &from_file) {
        (Some(c), _) => c.identity(),
        (None, Some(resumed)) => resumed,
        (None, None) => &identity,
    };
    finish(&a, name, &metrics, &trainer, identity, t1)
}

/// What defines this run (recorded in its checkpoints and --save-state,
/// checked when they are resumed): the step's configuration, the rounding
/// it runs with, the tokenizer's content and the data's fingerprint, for
/// data drawn from the seed the seed and the batch's shape, and what the
/// weights started from (--init's content, or the seed).
fn run_identity(a: &Args, cfg: &StepConfig) -> Result<RunIdentity, Error> {
    let o = a.step.options();
    let rounding = o
        .rounding
        .clone()
        .unwrap_or_else(|| cfg.precision.default_rounding());
    let mut id = RunIdentity::of_step(cfg, &rounding.to_string(), o.grad_accum);
    let tokenizer = match a.data.tokenizer() {
        Some(path) => Some(hlatc::run_identity::tokenizer_hash(path)?),
        None => None,
    };
    let corpus = match a.data.files()? {
        Some(files) => hlatc::run_identity::files_fingerprint(&files, a.data.coverage())?,
        None => "the synthetic language".to_string(),
    };
    if a.data.draws_from_seed() {
        let b = &cfg.batch;
        id = id.with_data_order(a.seed, b.batch_size, b.seq_len);
    }
    // What the weights start from; a --resume file's own record says it
    // for a run that goes on from a whole state.
    match (&a.init, &a.resume) {
        (_, Some(_)) => {}
        (Some(path), None) => id = id.with_init(&hlatc::run_identity::init_from_file(path)?),
        (None, None) => id = id.with_init(&hlatc::run_identity::init_from_seed(a.seed)),
    }
    Ok(id.with_tokenizer(tokenizer.as_deref()).with_corpus(&corpus))
}

/// A count of steps: a whole number of at least 1 (clap would otherwise
/// read `-1` as an unknown flag).
fn step_count(s: &str) -> Result<u64, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= 1 => Ok(n as u64),
        Ok(_) => Err("a run takes at least 1 step".into()),
        Err(_) => s
            .parse::<u64>()
            .map_err(|_| "not a whole number of steps".to_string()),
    }
}

/// Whether the --resume file may be resumed by this run: refused if another
/// run wrote it (but for the fields --allow-resume-change names), or if it
/// is already at --steps. Returns the identity the run records from then on
/// (the state's allowed changes kept), `None` where it is this run's own.
fn check_resume_file(a: &Args, identity: &RunIdentity) -> Result<Option<RunIdentity>, Error> {
    let Some(path) = &a.resume else {
        return Ok(None);
    };
    let source = path.display().to_string();
    identity.check_allowed_names(&a.checkpoints.allow_resume_change)?;
    // A state an older hlatc (or another tool) wrote records no run.
    let Some(text) = hlatc::runtime::read_safetensors_metadata(path)? else {
        return Ok(None);
    };
    let meta = StateMetadata::from_json(&text, &source)?;
    if meta.rank.is_some() {
        return Err(Error::invalid(format!(
            "--resume {source}: holds one rank's state, not the whole state: join the ranks with \
             `hlatc unshard` first"
        )));
    }
    // Said before the schedule differs: a --steps not past the state's step
    // is the mistake to name.
    if let Some(done) = meta.step.filter(|&d| d >= a.steps) {
        return Err(Error::conflict(format!(
            "--resume {source}: it is at step {done}, and --steps {} is not past it",
            a.steps
        )));
    }
    match &meta.run_identity {
        Some(saved) => Ok(Some(super::train_checkpoints::resumed_identity(
            identity,
            saved,
            &a.checkpoints.allow_resume_change,
            meta.step.unwrap_or(0),
            &source,
        )?)),
        None => Ok(None),
    }
}

/// Continues from a --resume file (checked by [`check_resume_file`]).
fn resume_from_file(a: &Args, trainer: &mut Trainer) -> Result<(), Error> {
    let Some(path) = &a.resume else {
        return Ok(());
    };
    let source = path.display().to_string();
    trainer.resume(read_safetensors(path)?, &source)?;
    let done = trainer.try_steps_done()?;
    if done as u64 >= a.steps {
        return Err(Error::conflict(format!(
            "--resume {source}: it is at step {done}, and --steps {} is not past it",
            a.steps
        )));
    }
    note!("resuming at step {done} from {source}")
}

/// Flags that can be refused before anything is built; the output paths
/// are checked now, not after training, so nothing trained is lost.
fn check_flags(a: &Args) -> Result<(), Error> {
    if a.steps == 0 {
        return Err(Error::out_of_range("--steps must be at least 1"));
    }
    for (flag, path) in [
        ("--save", &a.save),
        ("--save-state", &a.save_state),
        ("--metrics", &a.metrics),
        ("--plot", &a.plot),
    ] {
        if let Some(path) = path {
            hlatc::runtime::atomic_file::check_writable(path)
                .map_err(|m| Error::invalid(format!("{flag} {}: {m}", path.display())))?;
        }
    }
    if a.stop_after == Some(0) || a.stop_after.is_some_and(|n| n > a.steps) {
        return Err(Error::out_of_range(format!(
            "--stop-after must be in 1..={} (--steps)",
            a.steps
        )));
    }
    a.data.check()?;
    a.checkpoints.check()?;
    if a.eval_every == Some(0) {
        return Err(Error::out_of_range("--eval-every must be at least 1"));
    }
    Ok(())
}

/// The options `hlatc train` compiles its step with: its flags, and where
/// they are silent a short run's (a batch of 8 x 16; the schedule of the
/// command's doc, from --steps; packed rows where the data asks), on XLA
/// CPU. Refused before anything is built when the training state would
/// not fit in host memory.
fn step_options(a: &Args) -> Result<CompileOptions, Error> {
    let mut o = a.step.options().clone();
    // The layout first, so `--tp 0` is refused by its flag's name.
    hlatc::compile_step::OptionError::check_degrees(&o.parallel)?;
    let (model, name) = o.model_config()?;
    let batch = batch_shape(&model, &name, o.batch_size, o.seq_len, (8, 16))?;
    o.batch_size = Some(batch.batch_size);
    o.seq_len = Some(batch.seq_len);
    let steps = a.steps as i64;
    let schedule = &mut o.optimizer;
    schedule.lr_max.get_or_insert(1e-2);
    schedule.lr_min.get_or_insert(1e-3);
    schedule.warmup_steps.get_or_insert((steps / 10).max(1));
    schedule.total_steps.get_or_insert(steps);
    o.packed = a.data.packed(o.packed)?;
    let state = model
        .parameter_count()
        .saturating_mul(o.precision.state_bytes_per_parameter());
    if state > hlatc::check::MAX_HOST_STATE_BYTES {
        return Err(Error::unsupported(format!(
            "{name}'s training state (parameters and two Adam moments) takes {:.1} GB; `train` runs on XLA CPU \
             and stops at {} MiB. Use a smaller --config, or `hlatc compile --target neuron`.",
            state as f64 / 1e9,
            hlatc::check::MAX_HOST_STATE_BYTES >> 20
        )));
    }
    // Each step holds the state twice (inputs and updated outputs) and a
    // batch of tokens and targets.
    let batch_bytes = (batch.batch_size as u64)
        .saturating_mul(batch.seq_len as u64)
        .saturating_mul(8);
    hlatc::runtime::host_memory::ensure_fits(
        &format!("training {name}"),
        (state as u64).saturating_mul(2).saturating_add(batch_bytes),
    )
    .map_err(hlatc::train_step::StepError::from)?;
    Ok(o)
}

/// The step `compile --target cpu` writes for [`step_options`], its
/// kernels' fallbacks reported.
fn compile(a: &Args) -> Result<CompiledStep, Error> {
    let compiled = compile_step(&step_options(a)?)?;
    super::kernel_args::report_fallbacks(&compiled.kernel_fallbacks)?;
    Ok(compiled)
}

/// The starting weights: a checkpoint's (`--init`) or HLAT's initialization.
fn initial_params(a: &Args, cfg: &StepConfig) -> Result<Vec<Literal>, Error> {
    let model = &cfg.model;
    Ok(match &a.init {
        Some(path) => {
            let (params, unused) = params_from_tensors(
                model,
                cfg.precision.storage(),
                read_safetensors(path)?,
                &path.display().to_string(),
            )?;
            for u in unused {
                note!(
                    "warning: {}: tensor '{u}' is not a parameter of this model; ignored",
                    path.display()
                )?;
            }
            params
        }
        None => hlatc::models::init::init_params(model, cfg.precision.storage(), a.seed)
            .into_iter()
            .map(|(_, l)| l)
            .collect(),
    })
}

/// The compiled step's programs compiled by XLA CPU, its state loaded,
/// and a line saying so.
fn start_trainer(
    a: &Args,
    rt: &Runtime,
    compiled: &CompiledStep,
    params: Vec<Literal>,
) -> Result<Trainer, Error> {
    let t0 = Instant::now();
    let trainer = hlatc::step_programs::start_trainer(rt, compiled, params, a.seed)?;
    let cfg = &compiled.cfg;
    note!(
        "training {} ({:.2} M parameters, {}, rounding {}) on {}{}: batch {} x {}{}, {} steps, compiled in {:.0} ms",
        compiled.name,
        cfg.model.parameter_count() as f64 / 1e6,
        cfg.precision,
        compiled.rounding(),
        rt.platform_name(),
        division(&cfg.parallel),
        cfg.batch.batch_size,
        cfg.batch.seq_len,
        match (a.step.options().grad_accum, cfg.parallel.pp) {
            (1, 1) => String::new(),
            (k, 1) => format!(" in {k} micro-batches"),
            (m, pp) => format!(
                " in {m} micro-batches through {pp} pipeline stages (bubble {:.1}%)",
                100.0
                    * hlatc::pipeline::Schedule {
                        stages: pp,
                        micro_batches: m
                    }
                    .bubble()
            ),
        },
        a.steps,
        millis(t0.elapsed())
    )?;
    Ok(trainer)
}

/// How the step is divided, as the summary says it (nothing for one
/// device).
fn division(p: &hlatc::models::Parallelism) -> String {
    if p.is_single() {
        return String::new();
    }
    format!(" x {} devices ({p})", p.world())
}

/// `hlatc train`'s side of the training loop ([`FitPolicy::run`]): its
/// trainer on XLA CPU, its data, and a line per step with the held-out
/// loss where it is measured.
struct Run<'a> {
    a: &'a Args,
    cfg: &'a StepConfig,
    eval: Option<&'a Evaluator>,
    checkpoints: Option<&'a RunCheckpoints>,
    trainer: &'a mut Trainer,
    data: &'a mut TrainData,
    metrics: &'a mut MetricsLog,
    /// The step the run started (or resumed) at, and the one it stops at.
    start: u64,
    stop: u64,
    t1: Instant,
    /// The step just run, until it is recorded.
    last: Option<StepStats>,
}

impl FitEngine for Run<'_> {
    type Error = Error;

    fn steps_done(&mut self) -> Result<u64, Error> {
        Ok(self.trainer.try_steps_done()? as u64)
    }

    fn step(&mut self) -> Result<Option<f64>, Error> {
        let k = self.steps_done()?;
        let b = self.data.batch(k, self.a.seed, self.cfg)?;
        let s = self.trainer.step(&b)?;
        let loss = s.loss;
        self.last = Some(s);
        Ok(Some(loss))
    }

    fn record(&mut self, done: u64) -> Result<(), Error> {
        let Some(s) = self.last.take() else {
            return Ok(());
        };
        self.print_step(done, &s)?;
        let a = self.a;
        let eval_every = a.eval_every.unwrap_or((a.steps / 10).max(1));
        let mut held_out_loss = None;
        if let Some(e) = self.eval {
            if done % eval_every == 0 || done == self.stop {
                let loss = e.loss(self.trainer)?;
                held_out_loss = Some(loss);
                out!(
                    "step {done:>width$}/{}  held-out loss {loss:.4}  ({} batches)",
                    a.steps,
                    e.batches.len(),
                    width = a.steps.to_string().len()
                )?;
            }
        }
        self.metrics.push(StepMetrics {
            step: done,
            loss: s.loss,
            grad_norm: s.grad_norm,
            learning_rate: s.learning_rate,
            held_out_loss,
        });
        Ok(())
    }

    fn save(&mut self, done: u64) -> Result<(), Error> {
        let Some(c) = self.checkpoints else {
            return Ok(());
        };
        let state = safetensors_bytes(&self.trainer.try_training_state()?, STATE_FILE)?;
        let loader = self.data.positions().map(|p| positions_to_json(&p));
        c.save(
            done,
            &state,
            loader.as_ref().map(|l| l.as_bytes()),
            self.metrics,
        )?;
        Ok(())
    }

    fn go_on(&mut self, _done: u64) -> Result<bool, Error> {
        Ok(true)
    }
}

impl Run<'_> {
    fn print_step(&self, done: u64, s: &StepStats) -> Result<(), Error> {
        let (start, stop) = (self.start, self.stop);
        let steps = self.a.steps;
        let per_step = self.t1.elapsed().as_secs_f64() / (done - start) as f64;
        // A mixture of experts' routing: the busiest expert over the mean,
        // and the share a capacity dropped.
        let experts = match &s.experts {
            Some(e) => format!(
                "  experts {:.2}x  dropped {:.1}%",
                e.imbalance(),
                100.0 * e.dropped_share()
            ),
            None => String::new(),
        };
        out!(
            "step {done:>width$}/{steps}  ({:>3.0}%)  loss {:.4}  grad-norm {:.4}  lr {:.2e}{experts}  {:.1} ms/step  eta {:.1} s",
            100.0 * done as f64 / steps as f64,
            s.loss,
            s.grad_norm,
            s.learning_rate,
            per_step * 1e3,
            per_step * (stop - done) as f64,
            width = steps.to_string().len()
        )
    }
}

/// Writes `--metrics`, `--plot` and `--save`, and the run's summary line.
fn finish(
    a: &Args,
    name: &str,
    metrics: &MetricsLog,
    trainer: &Trainer,
    identity: &RunIdentity,
    t1: Instant,
) -> Result<ExitCode, Error> {
    if let Some(path) = &a.metrics {
        hlatc::runtime::atomic_file::write_atomic(path, metrics.to_csv().as_bytes())
            .map_err(|e| Error::io(path, e))?;
    }
    if let Some(path) = &a.plot {
        plot_run(a, name, metrics, path)?;
    }
    let (first, last) = metrics.first_and_last_loss();
    out!(
        "loss {first:.4} -> {last:.4} ({:.1}% of the start) in {:.2} s",
        100.0 * last / first,
        t1.elapsed().as_secs_f64()
    )?;
    if let Some(path) = &a.save {
        // Checkpoints are Hugging Face's tensors whatever the storage.
        let tensors = trainer.try_hugging_face_params()?;
        write_safetensors(path, &tensors)?;
        note!("saved {} tensors to {}", tensors.len(), path.display())?;
    }
    if let Some(path) = &a.save_state {
        let tensors = trainer.try_training_state()?;
        let done = trainer.try_steps_done()?;
        let meta = StateMetadata::whole(done as u64, Some(identity.clone()));
        write_safetensors_with_metadata(path, &tensors, Some(&meta.to_json()))?;
        note!(
            "saved the training state at step {} ({} tensors) to {}",
            done,
            tensors.len(),
            path.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Mean loss over the held-out batches, with the weights as they are.
struct Evaluator {
    /// The type the weights are evaluated in (they may be stored narrower).
    ty: ElementType,
    program: hlatc::runtime::Program,
    batches: Vec<hlatc::data::Batch>,
}

impl Evaluator {
    fn new(rt: &Runtime, cfg: &StepConfig, d: &TokenData) -> Result<Evaluator, Error> {
        let module = hlatc::train_step::build_packed_loss_and_grads(
            &cfg.model,
            cfg.batch,
            cfg.precision.compute(),
        )?;
        Ok(Evaluator {
            ty: cfg.precision.compute(),
            program: rt.compile(&module)?,
            batches: d.eval_batches(cfg.batch.batch_size, cfg.batch.seq_len),
        })
    }

    fn loss(&self, trainer: &Trainer) -> Result<f64, Error> {
        let params = trainer
            .try_state(hlatc::train_step::Role::Parameter)?
            .into_iter()
            .map(|(n, l)| {
                l.converted(self.ty).map_err(|source| Error::Tensor {
                    what: format!("parameter '{n}'"),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut total = 0.0;
        for b in &self.batches {
            let mut inputs = params.clone();
            inputs.extend(b.inputs());
            total += self.program.run(&inputs)?[0].to_f64_vec()[0];
        }
        Ok(total / self.batches.len().max(1) as f64)
    }
}

/// This run's training loss, and its held-out loss where it was measured,
/// into `path`.
fn plot_run(
    a: &Args,
    model: &str,
    metrics: &MetricsLog,
    path: &std::path::Path,
) -> Result<(), Error> {
    let mut opts = PlotOptions::new(Series::Loss);
    opts.title = format!(
        "{model}, {}, {} steps",
        a.step.options().precision.name(),
        a.steps
    );
    opts.width = a.plot_size.width;
    opts.height = a.plot_size.height;
    let mut curves = vec![Curve {
        label: "training loss".into(),
        log: metrics,
    }];
    // The held-out points, as their own curve of the loss column.
    let held_out = MetricsLog {
        steps: metrics
            .steps
            .iter()
            .filter_map(|m| {
                m.held_out_loss.map(|loss| StepMetrics {
                    loss,
                    held_out_loss: None,
                    ..m.clone()
                })
            })
            .collect(),
    };
    if !held_out.steps.is_empty() {
        curves.push(Curve {
            label: "held-out loss".into(),
            log: &held_out,
        });
    }
    super::plot::write_plot(&curves, &opts, path)
}
