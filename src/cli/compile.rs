//! `hlatc compile`: a model's whole training step, ahead of time, as a bundle.

use super::console::{millis, out};
use hlatc::bundle::{
    check_destination, BundleReport, ProgramName, Target, APPLY_DIR, MANIFEST_FILE, MICRO_DIR,
    PROTO_FILE,
};
use hlatc::compile_step::spellings::CompileOption;
use hlatc::compile_step::{compile_step, parse_name, CompileOptions, CompiledStep, StepPrograms};
use hlatc::memory_plan::{gib, MemoryCheck};
use hlatc::passes::RematPolicy;
use hlatc::pipeline::{Phase, PipelineSteps};
use hlatc::train_step::TrainStep;
use hlatc::Error;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum TargetArg {
    Neuron,
    Cpu,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::Neuron => Target::Neuron,
            TargetArg::Cpu => Target::Cpu,
        }
    }
}

/// Compile a model's training step (forward, backward, AdamW) to a bundle.
///
/// The bundle holds model.hlo_module.pb (what neuronx-cc compiles),
/// model.hlo.txt, manifest.json (every input and output by name, shape,
/// dtype and role; buffer aliasing; the config and policy; the module's
/// sha256) and, for --target neuron, compile_flags.json and neuronx-cc.sh.
/// Optimizer defaults are HLAT's: AdamW betas 0.9/0.95, weight decay 0.1 on
/// every parameter, clip 1.0, cosine LR 3e-4 -> 3e-5 with 2000 warmup steps.
///
/// The target's default pass pipeline runs over the step before anything is
/// written (`hlatc passes` lists it): --passes replaces it, --disable-pass
/// leaves passes out, --passes= (empty) runs none. A release build verifies
/// the module after the pipeline and again before writing it; debug builds
/// and --verify-each-pass verify after every pass. Its `remat` pass checkpoints activations by --remat
/// (core-attention unless told otherwise); every instruction carries its
/// provenance (`layers.3/self_attn/core_attention`, `backward/...`) in
/// metadata.op_name.
///
/// For --target neuron, the Neuron pre-flight (`hlatc check`) runs on the
/// final module for the bundle's chip (--chip) before anything is written:
/// a module neuronx-cc would refuse is an error naming each instruction's
/// line in the model.hlo.txt it would have written, and nothing is
/// written; warnings are listed in the summary.
///
/// --verify reads the written proto back and checks it against the compiled
/// module and the manifest's sha256, compiles exactly those bytes on XLA
/// CPU, and runs two training steps: of the bundle's own module when its
/// state fits in host memory (512 MiB), otherwise of a miniature with the
/// same structure (GQA ratio, tying, norm and rotary settings).
#[derive(clap::Args)]
pub struct Args {
    /// Every option of the table (`hlatc::compile_step::spellings`).
    #[command(flatten)]
    options: super::option_args::CompileArgs,
}

impl Args {
    fn out(&self) -> PathBuf {
        // clap requires it.
        self.options.path(CompileOption::Out).unwrap_or_default()
    }
}

/// `--remat POLICY`, shared by the commands that run the `remat` pass.
#[derive(clap::Args)]
pub(super) struct RematArg {
    /// Activation checkpointing: which forward activations the backward
    /// pass recomputes instead of keeping. core-attention (HLAT's and NxD's
    /// choice) recomputes each layer's attention scores and probabilities
    /// from q, k and v; full-layer recomputes each decoder layer from its
    /// input, collectives included; none keeps everything. Under
    /// --sequence-parallel both policies also keep each rank's run of the
    /// sequence and all-gather it again in the backward pass, rather than
    /// keep the gathered whole
    #[arg(long = "remat", value_name = "POLICY", default_value = "core-attention", value_parser = parse_name::<RematPolicy>)]
    pub policy: RematPolicy,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    let t0 = Instant::now();
    let out = a.out();
    check_destination(&out)?;
    let options = a.options.options();
    let compiled = compile_step(options)?;
    super::kernel_args::report_fallbacks(&compiled.kernel_fallbacks)?;
    let staged = compiled.stage_bundle(&out)?;
    // A bundle that fails its check never takes the destination's name:
    // the staged copy is removed and whatever was there stays.
    let t_verify = Instant::now();
    let checks = if a.options.switch(CompileOption::Verify) {
        Some(
            compiled
                .verify_bundle(staged.path())
                .map_err(|e| hlatc::Error::NotWritten {
                    out: out.clone(),
                    source: Box::new(e),
                })?,
        )
    } else {
        None
    };
    let verify_time = t_verify.elapsed();
    let report = staged.commit()?;
    // The compile is everything but the verification, which is XLA CPU's
    // compile and run of the bundle.
    print_summary(&a, options, &compiled, &report, t0.elapsed() - verify_time)?;
    if a.options.switch(CompileOption::PassReport) {
        super::pass_report::print_report(&compiled.programs.main().pass_report)?;
        out!("kernel points: {}", kernel_choices(&compiled))?;
    }
    if let Some(checks) = checks {
        out!(
            "verified in {:.1} s (not in the compile time above):",
            verify_time.as_secs_f64()
        )?;
        for l in checks.lines {
            out!("  {l}")?;
        }
    }
    // The process ends here: freeing the step's tens of thousands of
    // allocations one by one took 5 to 10 ms of the 7B compile's wall
    // time, for memory the exit returns whole (as rustc and clang do).
    std::mem::forget(compiled);
    Ok(ExitCode::SUCCESS)
}

/// What was compiled, a line per aspect: sizes, passes, precision, time
/// per stage, the module written, and what to run next.
fn print_summary(
    a: &Args,
    options: &CompileOptions,
    compiled: &CompiledStep,
    report: &BundleReport,
    total: Duration,
) -> Result<(), Error> {
    out!(
        "compiled {} training step for {} -> {}",
        compiled.name,
        compiled.target,
        a.out().display()
    )?;
    print_program(compiled)?;
    print_memory(compiled)?;
    if let Some(pre) = &report.preflight {
        print_preflight(pre)?;
    }
    print_passes(options, compiled)?;
    print_time(compiled, report, total)?;
    print_files(a, compiled, report)
}

/// What the step is: its parameters, instructions, ranks and programs.
fn print_program(compiled: &CompiledStep) -> Result<(), Error> {
    let (cfg, step) = (&compiled.cfg, compiled.programs.main());
    let batch = cfg.batch;
    let parameters = || {
        step.inputs
            .iter()
            .filter(|s| s.role == hlatc::train_step::Role::Parameter)
    };
    out!(
        "  parameters    {} in {} tensors; batch {} x {} tokens",
        human_count(cfg.model.parameter_count()),
        parameters().count(),
        batch.batch_size,
        batch.seq_len
    )?;
    out!(
        "  instructions  {} in {} computations; {} inputs, {} outputs, {} aliased",
        step.module.instruction_count(),
        step.module.computations.len(),
        step.inputs.len(),
        step.outputs.len(),
        step.module.input_output_alias.len()
    )?;
    if batch.seq_len > cfg.model.max_position_embeddings {
        out!(
            "  rope          dynamic NTK past max_position_embeddings = {}: base {} -> {:.1} for {} positions",
            cfg.model.max_position_embeddings,
            cfg.model.rope_theta,
            cfg.model.rope_theta_for(batch.seq_len),
            batch.seq_len
        )?;
    }
    if !cfg.parallel.is_single() {
        let local: i64 = parameters().map(|s| s.shape.iter().product::<i64>()).sum();
        out!(
            "  ranks         {} as one program ({}); each holds {} parameters",
            cfg.parallel.world(),
            cfg.parallel,
            human_count(local),
        )?;
    }
    match &compiled.programs {
        StepPrograms::One(_) => Ok(()),
        StepPrograms::Accumulated(a) => {
            let k = a.micro_batches;
            out!(
                "  accumulation  {k} micro-batches per step: {MICRO_DIR}/ runs {k} times ({} instructions, the counts above), then {APPLY_DIR}/ once ({} instructions); see manifest.json",
                step.module.instruction_count(),
                a.apply.module.instruction_count()
            )
        }
        StepPrograms::Pipelined(p) => print_pipeline(p),
    }
}

/// A pipeline's stages, schedule and programs.
fn print_pipeline(p: &PipelineSteps) -> Result<(), Error> {
    let (m, schedule) = (p.schedule.micro_batches, p.schedule);
    let per_stage = p.stages.layers_per_stage();
    let spans: Vec<String> = (0..p.stages.count())
        .map(|s| {
            let l = p.stages.layers(s);
            format!("{}-{}", l.start, l.end - 1)
        })
        .collect();
    out!(
            "  pipeline      {} stages of {per_stage} layer{} ({}); {m} micro-batches on a 1F1B-ordered schedule of {} ticks, bubble {:.1}%",
            p.stages.count(),
            if per_stage == 1 { "" } else { "s" },
            spans.join(", "),
            schedule.ticks(),
            100.0 * schedule.bubble()
        )?;
    let count = |phase| schedule.ticks_of(phase).count();
    out!(
            "  programs      {}/ {} ticks ({} instructions), {}/ {} ({}, the counts above), {}/ {} ({}), then {APPLY_DIR}/ once ({}); see manifest.json",
            Phase::WarmUp.name(),
            count(Phase::WarmUp),
            p.tick(Phase::WarmUp).module.instruction_count(),
            Phase::Steady.name(),
            count(Phase::Steady),
            p.tick(Phase::Steady).module.instruction_count(),
            Phase::CoolDown.name(),
            count(Phase::CoolDown),
            p.tick(Phase::CoolDown).module.instruction_count(),
            p.apply.module.instruction_count()
        )
}

/// A rank's memory plan, against the device's memory where it is checked.
fn print_memory(compiled: &CompiledStep) -> Result<(), Error> {
    let memory = &compiled.memory;
    // Every stage runs the same programs: one plan is each stage's.
    let per = match compiled.cfg.parallel.pp {
        1 => "per rank".to_string(),
        pp => format!("per rank, each of the {pp} stages,"),
    };
    match compiled.memory_check {
        MemoryCheck::None => out!("  memory        {per} {memory}"),
        MemoryCheck::Refuse(limit) | MemoryCheck::Warn(limit) => {
            out!("  memory        {per} {memory}; of {}", gib(limit))?;
            if memory.total() > limit {
                let advice = match compiled.cfg.model.moe {
                    Some(_) => "divide it over tensor, data, expert and pipeline parallelism (--tp, --dp, --ep, --pp), or pass",
                    None => "shard it (--tp, --dp, --zero1), or pass",
                };
                out!(
                    "  warning       a single-device step over one NeuronCore's memory: {advice} --device-memory to check it against another size"
                )?;
            }
            Ok(())
        }
    }
}

/// The Neuron pre-flight's count and findings.
fn print_preflight(pre: &hlatc::bundle::Preflight) -> Result<(), Error> {
    let matmuls = pre.report.tensor_instructions;
    let limit = hlatc::passes::neuron_check::INSTRUCTION_LIMIT;
    out!(
        "  tensor engine at least {} matmul instructions per rank (the dots' tiles alone: a lower bound on neuronx-cc's count), of its limit of {} per module{}",
        human_count(matmuls as i64),
        human_count(limit as i64),
        if matmuls > limit {
            ": over it already (raise --tp, or lower --batch-size or --seq-len)"
        } else {
            ""
        }
    )?;
    out!(
        "  pre-flight    {}, {}: {} in {} instructions, {:.1} ms",
        pre.report.chip,
        pre.report.flags_shown(),
        pre.report.tally(),
        human_count(pre.report.instructions as i64),
        millis(pre.time)
    )?;
    for l in &pre.lines {
        out!("  warning       {l}")?;
    }
    Ok(())
}

/// What the passes did, and the precision and rounding they left.
fn print_passes(options: &CompileOptions, compiled: &CompiledStep) -> Result<(), Error> {
    let step = compiled.programs.main();
    out!(
        "  passes        {} -> {} instructions: {}",
        step.instructions_built(),
        step.module.instruction_count(),
        passes_summary(step)
    )?;
    if !compiled.cfg.kernels.all_default() {
        out!("  kernels       {}", kernel_choices(compiled))?;
    }
    if options.passes.is_some() {
        // Passes named by hand say what they found, changed or not.
        for n in &step.pass_report.notes {
            out!("  pass note     {n}")?;
        }
    }
    let rounding = hlatc::bundle::RoundingSummary::of(&step.module, compiled.target.target());
    out!(
        "  precision     {}: {}; rounding {}: {} converts to bf16 stochastic, {} nearest-even",
        step.precision,
        state_types(step.precision),
        step.rounding,
        rounding.stochastic,
        rounding.nearest_even
    )?;
    if let Some(w) = &rounding.warning {
        out!("  warning       {w}")?;
    }
    Ok(())
}

/// What each kernel point took, as `--kernel` spells it.
fn kernel_choices(compiled: &CompiledStep) -> String {
    compiled
        .cfg
        .kernels
        .chosen()
        .into_iter()
        .map(|(point, spelled)| format!("{point}={spelled}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the compile's time went.
fn print_time(
    compiled: &CompiledStep,
    report: &BundleReport,
    total: Duration,
) -> Result<(), Error> {
    let times = &compiled.programs.main().times;
    out!(
        "  time          forward {:.1} ms, autodiff {:.1} ms, optimizer {:.1} ms, passes {:.1} ms, emit {:.1} ms, write {:.1} ms; compile total {:.1} ms",
        millis(times.forward),
        millis(times.autodiff),
        millis(times.optimizer),
        millis(compiled.programs.passes_time()),
        millis(report.emit_time),
        millis(report.write_time),
        millis(total)
    )
}

/// The module written, and for Neuron what to run next in each folder.
fn print_files(a: &Args, compiled: &CompiledStep, report: &BundleReport) -> Result<(), Error> {
    // The folders of the programs the bundle holds: the bundle itself for
    // a step of one program.
    let programs = compiled.programs();
    let folders: Vec<PathBuf> = programs
        .iter()
        .map(|(name, _)| match name {
            ProgramName::Step => a.out(),
            other => a.out().join(other.name()),
        })
        .collect();
    let module = match programs.as_slice() {
        [(ProgramName::Step, _)] => PROTO_FILE.to_string(),
        many => many
            .iter()
            .map(|(name, _)| format!("{}/{PROTO_FILE}", name.name()))
            .collect::<Vec<_>>()
            .join(", "),
    };
    out!(
        "  module        {module} ({:.1} MB), sha256 {}; see {MANIFEST_FILE}",
        report.proto_bytes as f64 / 1e6,
        report.sha256
    )?;
    if compiled.target.chip().is_some() {
        for f in folders {
            out!("  next          cd {} && ./neuronx-cc.sh", f.display())?;
        }
    }
    Ok(())
}

/// The passes that ran, and those that changed the module.
fn passes_summary(step: &TrainStep) -> String {
    if step.passes.is_empty() {
        "none".to_string()
    } else {
        let fired: Vec<&str> = step
            .pass_report
            .runs
            .iter()
            .filter(|r| r.changed && r.depth == 0)
            .map(|r| r.pass.as_str())
            .collect();
        format!(
            "{} ran, {} changed the module",
            step.passes.join(","),
            if fired.is_empty() {
                "none".to_string()
            } else {
                fired.join(",")
            }
        )
    }
}

/// `6.74 B`, `134.5 M`, `20.5 K`, `980`.
fn human_count(n: i64) -> String {
    let x = n as f64;
    match n {
        n if n >= 1_000_000_000 => format!("{:.2} B", x / 1e9),
        n if n >= 1_000_000 => format!("{:.1} M", x / 1e6),
        n if n >= 1_000 => format!("{:.1} K", x / 1e3),
        n => n.to_string(),
    }
}

/// What the summary says the state is stored in.
fn state_types(p: hlatc::precision::Precision) -> String {
    if p.keeps_master_weights() {
        format!(
            "weights {}, master weights and Adam state {}",
            p.storage(),
            p.optimizer_storage()
        )
    } else {
        format!("weights and Adam state {}", p.storage())
    }
}
