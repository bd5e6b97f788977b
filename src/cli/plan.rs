//! `hlatc plan`: which layout to run, predicted from the compiled programs.

use super::console::{note, out};
use super::option_args::{OptionArgs, PlanRows};
use hlatc::compile_step::spellings::CompileOption;
use hlatc::memory_plan::gib;
use hlatc::models::KernelRequest;
use hlatc::plan::calibration::{median_and_worst, RunError};
use hlatc::plan::reports::CalibrationRequest;
use hlatc::plan::{Instance, Plan, PlanOptions, PlanOutcome, PlanRequest};
use hlatc::Error;
use std::path::PathBuf;
use std::process::ExitCode;

/// Predict which layout trains a model fastest on a cluster of Trainium
/// instances, from the programs hlatc compiles for each.
///
/// Every layout that divides the model and the cluster is compiled (TP
/// within a node, PP dividing the layers, DP filling the rest; SP and
/// ZeRO-1 on and off; each remat policy; micro-batches of 1, 2 and 4; and
/// the precision, or each bf16 preset when --precision is not given) and
/// its programs read: every dot's FLOPs in TensorE tiles, the bytes of the
/// ops between them, every collective's bytes over NeuronLink and EFA by
/// where its group's ranks sit, the pipeline's ticks, and the memory plan
/// of a rank. A cost model turns those into a step time; its few
/// parameters (the fraction of each peak achieved) are fitted to the
/// Neuron SDK's published training runs, or to --calibration FILE.
/// Pipeline layouts are priced as their bundles run, as NxD's pipeline
/// does: each micro-batch in flight keeps what the remat policy keeps, so
/// the backward slot does not run the stage's forward again (remat=stage,
/// also searched, keeps only the stage's input and runs it again).
///
/// The search reads each layout from two- and three-layer stages of its
/// programs (every layer between the first and the last is the same
/// program); the best --top are read
/// again from their whole programs, and printed with the `hlatc compile`
/// command that builds each. docs/src/planner.md describes the model, its
/// parameters and sources, and its error against measured runs.
#[derive(clap::Args)]
#[command(after_help = "Examples:\n  \
hlatc plan --model hlat-70b --nodes 32 --global-batch 1024 --precision bf16-master\n  \
hlatc plan --model hlat-7b --nodes 16 --layout tp=8,dp=64,sp,zero1,remat=core-attention\n  \
hlatc plan --config config.json --instance trn2.48xlarge --nodes 4 --price 40 --plot plan.png\n  \
hlatc plan --model hlat-7b --nodes 16 --calibration my-runs.csv")]
pub struct Args {
    // The model and step every layout compiles: compile's own flags
    // (--model, --config, --seq-len, --precision, --capacity-factor,
    // --kernel), read by the same option table.
    #[command(flatten)]
    step: OptionArgs<PlanRows>,
    /// The instance kind: trn1.32xlarge (32 NeuronCores, EFA 800 Gbps),
    /// trn1n.32xlarge (EFA 1,600 Gbps), trn2.48xlarge (64 logical cores
    /// at LNC=2), or Trainium3 at LNC=2: trn3-server (16 chips, 64 cores),
    /// trn3-ultraserver-gen1 (64 chips, 256 cores) or
    /// trn3-ultraserver-gen2 (144 chips, 576 cores), each a node
    #[arg(long, default_value = PlanOptions::INSTANCE.name(), value_parser = parse_instance)]
    instance: Instance,
    /// Instances in the cluster
    #[arg(
        long,
        value_name = "N",
        default_value_t = PlanOptions::NODES,
        allow_negative_numbers = true
    )]
    nodes: i64,
    /// Sequences per optimizer step over the whole cluster
    #[arg(
        long,
        value_name = "B",
        default_value_t = PlanOptions::GLOBAL_BATCH,
        allow_negative_numbers = true
    )]
    global_batch: i64,
    /// How many of the best layouts to print (each read again from its
    /// whole programs)
    #[arg(long, value_name = "K", default_value_t = PlanOptions::TOP)]
    top: usize,
    /// USD per node-hour: prints the cost of 4 M tokens (HLAT's CPT
    /// figure) for each layout
    #[arg(long, value_name = "USD", allow_negative_numbers = true)]
    price: Option<f64>,
    /// Evaluate this one layout instead of searching: comma-separated
    /// tp=T,pp=P,dp=D,cp=C,cp_balance=ORDER,cp_exchange=FORM,ep=E,
    /// ep_exchange=FORM,sp,zero1,fsdp=N,reshard=POLICY,remat=POLICY,
    /// micro_batch=M,precision=P,attention=IMPL (dp defaults to filling the
    /// cluster; pp, cp, ep, fsdp and micro_batch to 1; cp_balance to
    /// head-tail; cp_exchange to all-gather; ep_exchange to all-to-all;
    /// reshard to never; sp and zero1 to off; remat to core-attention;
    /// attention to --kernel's)
    #[arg(long, value_name = "SPEC")]
    layout: Option<String>,
    /// Fit the cost model to these measured runs instead of the built-in
    /// fit: a CSV with the columns of data/planner/published-trn1.csv
    /// (model: a preset or a config.json path relative to the CSV)
    #[arg(long, value_name = "CSV")]
    calibration: Option<PathBuf>,
    /// Predict the measured runs of this CSV (the calibration file's
    /// columns) with the parameters in use, and print each run's error:
    /// a check on runs the parameters were never fitted to
    #[arg(long, value_name = "CSV")]
    predict: Option<PathBuf>,
    /// Print the calibration (the built-in one, or --calibration's): the
    /// fitted parameters, each run's error, and each run predicted from a
    /// fit to the others (leave-one-out). With --report or --predict and
    /// none of --model, --config and --layout, only the reports are
    /// printed
    #[arg(long)]
    report: bool,
    /// Write every layout evaluated, with its prediction, as JSON
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw predicted throughput against memory per rank for every layout
    /// that fits, the best marked, as a PNG
    #[arg(long, value_name = "FILE.png")]
    plot: Option<PathBuf>,
    /// Compiles run at once [default: the machine's cores]
    #[arg(long, value_name = "N", default_value_t = PlanOptions::THREADS)]
    threads: usize,
}

fn parse_instance(s: &str) -> Result<Instance, String> {
    Instance::from_name(s).ok_or_else(|| {
        let known: Vec<&str> = Instance::ALL.iter().map(|i| i.name()).collect();
        format!("unknown instance '{s}' (known: {})", known.join(", "))
    })
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    let step = a.step.options();
    let attention = hlatc::kernel_choice::attention_request(&step.kernels)?;
    let request = PlanRequest {
        options: PlanOptions {
            attention: attention.clone(),
            model: step.model.clone(),
            seq_len: step.seq_len,
            precision: (a.step)
                .given(CompileOption::Precision)
                .then_some(step.precision),
            instance: a.instance,
            nodes: a.nodes,
            global_batch: a.global_batch,
            top: a.top,
            price: a.price,
            layout: a.layout.clone(),
            threads: a.threads,
            capacity_factor: step.capacity_factor,
            ..PlanOptions::default()
        },
        calibration: CalibrationRequest {
            calibration: a.calibration.clone(),
            report: a.report,
            predict: a.predict.clone(),
        },
        json: a.json.clone(),
        plot: a.plot.clone(),
        model_given: a.step.given(CompileOption::Model) || a.step.given(CompileOption::Config),
    };
    let PlanOutcome {
        plan,
        reports,
        options,
    } = request.run()?;
    if let Some(r) = &reports.report {
        out!("calibration: {} ({} runs)", r.path, r.runs)?;
        priced_with(&attention)?;
        let params: Vec<String> = r
            .fit
            .params
            .named()
            .iter()
            .map(|(n, v)| format!("{n} {v:.4}"))
            .collect();
        out!("  parameters: {}", params.join(", "))?;
        print_errors("in sample", &r.fit.in_sample)?;
        match r.fit.leave_one_out.is_empty() {
            true => out!("  leave-one-out: none (a fit to the others needs two runs or more)")?,
            false => print_errors("leave-one-out", &r.fit.leave_one_out)?,
        }
    }
    if let Some(p) = &reports.predicted {
        out!(
            "predicted: {} ({} runs, never fitted to)",
            p.path,
            p.errors.len()
        )?;
        priced_with(&attention)?;
        print_errors("predicted", &p.errors)?;
    }
    let Some(p) = plan else {
        return Ok(ExitCode::SUCCESS);
    };
    print_plan(&p, &options, &reports.calibrated_on)?;
    for path in [&a.json, &a.plot].into_iter().flatten() {
        note!("wrote {}", path.display())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Says how hlatc's programs were priced, when not by the plain graph.
fn priced_with(attention: &KernelRequest) -> Result<(), Error> {
    if attention.kind != hlatc::models::kernels::ImplKind::Hlo {
        out!("  priced with --kernel {attention}: hlatc's programs, whatever attention the runs used")?;
    }
    Ok(())
}

fn print_errors(what: &str, errors: &[RunError]) -> Result<(), Error> {
    let (median, worst) = median_and_worst(errors);
    out!(
        "  {what}: median error {:.1}%, worst {:.1}%",
        100.0 * median,
        100.0 * worst
    )?;
    for e in errors {
        out!(
            "    {:<40} {:<26} seq {:<5} {}: measured {:.2} seq/s, predicted {:.2} ({:+.1}%)",
            e.run,
            e.model,
            e.seq_len,
            e.layout,
            e.measured_seq_per_s,
            e.predicted_seq_per_s,
            100.0 * e.relative_error
        )?;
    }
    Ok(())
}

fn print_plan(p: &Plan, o: &PlanOptions, calibrated_on: &str) -> Result<(), Error> {
    let hw = o.instance.hardware();
    let fitting = p.candidates.iter().filter(|c| c.fits).count();
    out!(
        "{} on {} x {} ({} cores), {} sequences of {} tokens per step",
        p.model,
        p.nodes,
        p.instance,
        p.nodes * hw.cores_per_node,
        p.global_batch,
        p.seq_len
    )?;
    let n = p.candidates.len();
    let mut summary = format!(
        "{n} layout{} evaluated in {:.1} s: {fitting} fit{} {} per core",
        if n == 1 { "" } else { "s" },
        p.seconds,
        if fitting == 1 { "s" } else { "" },
        gib(hw.hbm_bytes)
    );
    if n > fitting {
        summary += &format!(
            ", {} do{} not",
            n - fitting,
            if n - fitting == 1 { "es" } else { "" }
        );
    }
    if !p.too_large.is_empty() {
        summary += &format!(
            "; {} more not compiled, their state (with a layer's plain attention scores) alone over a core",
            p.too_large.len()
        );
    }
    if !p.pruned.is_empty() {
        summary += &format!(
            "; {} more not compiled, a twin deciding them (one that holds less does not fit, \
             or one with less remat, or keeping FSDP's gathered weights, fits)",
            p.pruned.len()
        );
    }
    if !p.refused.is_empty() {
        summary += &format!("; {} refused", p.refused.len());
    }
    out!("{summary}")?;
    out!("cost model: {calibrated_on}")?;
    if p.best().is_none() && !p.candidates.is_empty() {
        out!("no layout fits: the ones below need the least memory")?;
    }
    let shown: Vec<_> = if p.best().is_some() {
        p.candidates.iter().filter(|c| c.fits).take(o.top).collect()
    } else {
        let mut c: Vec<_> = p.candidates.iter().collect();
        c.sort_by_key(|c| c.memory_per_rank);
        c.into_iter().take(o.top).collect()
    };
    for (k, c) in shown.iter().enumerate() {
        out!("")?;
        let cost = c
            .cost_per_4m_tokens
            .map(|usd| format!(", ${usd:.2} per 4M tokens"))
            .unwrap_or_default();
        out!("{}. {}", k + 1, c.layout)?;
        out!(
            "   step {:.2} s, {:.2} seq/s, {:.0} tokens/s, MFU {:.1}%{cost}",
            c.step_seconds,
            c.seq_per_s,
            c.tokens_per_s,
            100.0 * c.mfu
        )?;
        out!(
            "   memory per rank {} ({}){}",
            gib(c.memory_per_rank),
            if c.fits { "fits" } else { "does not fit" },
            if c.exact {
                ""
            } else {
                " [from two- and three-layer stages]"
            }
        )?;
        let b = &c.breakdown;
        out!(
            "   time: matmul {:.2} s, memory {:.2} s ({:.2} s of it under the matmuls), NeuronLink {:.2} s, EFA {:.2} s, latency {:.2} s, launch {:.2} s",
            b.matmul, b.memory, b.overlapped, b.link, b.network, b.latency, b.launch
        )?;
        for w in &c.preflight_warnings {
            out!("   pre-flight: {w}")?;
        }
        out!("   {}", c.command)?;
    }
    if let Some(a) = &p.capacity_advice {
        let c = &a.capped;
        out!("")?;
        out!(
            "advice: {} routes dropless: each expert's exchange buffers hold every token of a sequence, and its dots run over all of them. With --capacity-factor {} (each expert takes up to {} times its share, the rest dropped) the best layout runs {:.2} seq/s, not {:.2}, at {} per rank:",
            p.model,
            a.factor,
            a.factor,
            c.seq_per_s,
            a.dropless_seq_per_s,
            gib(c.memory_per_rank)
        )?;
        out!("   {}", c.command)?;
    }
    for (layout, why) in p.refused.iter().take(3) {
        note!("refused {layout}: {why}")?;
    }
    if p.refused.len() > 3 {
        note!(
            "... and {} more refused (--json lists them)",
            p.refused.len() - 3
        )?;
    }
    Ok(())
}
