//! The bundle of a pipeline-parallel step ([`crate::pipeline`]): a bundle
//! for each of its four programs, `warm_up/`, `steady/`, `cool_down/` and
//! `apply_step/` (each complete: module, text, manifest, and for neuron
//! its flags, script and pre-flight; each one stage's program, its
//! manifest's config the stage model's), and a manifest over them that
//! says how a runtime drives them: the schedule, which stage holds which
//! layers, and each stage's memory per rank. Staged whole and moved into
//! place whole, like a single bundle.

use super::files::MANIFEST_FILE;
use super::manifest::MemoryInfo;
use super::preflight::Preflight;
use super::programs::{staged_beside, ProgramInfo, ProgramName};
use super::staging::{stage_bundle, write, StagedBundle};
use super::target::BundleTarget;
use crate::Error;
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::pipeline::{tick_config, Phase, PipelineView};
use hlatc_step::train_step::{StepConfig, TrainStep};
use serde::Serialize;
use std::path::Path;

/// The top manifest's format; a bundle reader of one program refuses it
/// by name and points at the programs.
pub const PIPELINE_FORMAT: &str = "hlatc-bundle/2+pipeline";

#[derive(Serialize)]
struct PipelineManifest<'a> {
    format: &'static str,
    hlatc_version: &'static str,
    target: &'static str,
    /// The chip a Neuron bundle's programs are compiled for.
    #[serde(skip_serializing_if = "Option::is_none")]
    chip: Option<&'static str>,
    micro_batches: i64,
    form: FormInfo,
    programs: Vec<ProgramInfo>,
    schedule: ScheduleInfo,
    stages: Vec<StageInfo>,
    config: &'a StepConfig,
    /// Per rank, the same on every stage: the apply step's state, the
    /// tick programs' activations and buffers.
    memory_per_rank: MemoryInfo,
}

/// How the tick programs are written ([`hlatc_step::pipeline::PipelineForm`]).
#[derive(Serialize)]
struct FormInfo {
    /// What the forward slot keeps for the backward slot.
    remat: &'static str,
    /// How stages send: `all-gather` or `permute`.
    send: &'static str,
}

#[derive(Serialize)]
struct ScheduleInfo {
    ticks: i64,
    /// The ticks each tick program runs.
    phases: Vec<PhaseInfo>,
    bubble: f64,
    rules: [&'static str; 6],
}

#[derive(Serialize)]
struct PhaseInfo {
    program: &'static str,
    /// `[first, end)`.
    ticks: [i64; 2],
}

#[derive(Serialize)]
struct StageInfo {
    stage: i64,
    /// `[first, end)` of the whole model's decoder layers.
    layers: [i64; 2],
    /// `[first, end)` of the global ranks.
    ranks: [i64; 2],
}

/// Writes the bundle of a pipeline-parallel step of `cfg` (the programs
/// `view` holds) to a staging directory beside `dir`; nothing under `dir`
/// changes until [`StagedBundle::commit`]. For neuron, each program's
/// pre-flight runs, and a refusal writes nothing.
pub fn stage_pipeline_bundle(
    view: PipelineView,
    cfg: &StepConfig,
    target: BundleTarget,
    dir: &Path,
) -> Result<StagedBundle, Error> {
    let schedule = view.schedule;
    let mut staged = staged_beside(dir)?;
    let staging = staged.path().to_path_buf();
    let tick_cfg = tick_config(view.stage_config, schedule.micro_batches);
    let mut programs = Vec::new();
    let mut reports = Vec::new();
    let named: Vec<(ProgramName, &TrainStep, &StepConfig)> = Phase::ALL
        .iter()
        .zip(view.ticks)
        .map(|(&p, t)| (p.into(), t, &tick_cfg))
        .chain([(ProgramName::ApplyStep, view.apply, view.stage_config)])
        .collect();
    for (name, step, step_cfg) in named {
        let r = stage_bundle(step, step_cfg, target, &staging.join(name.name()))?.commit()?;
        programs.push(ProgramInfo::of(name, &r, step));
        reports.push((name, r));
    }
    let phases = Phase::ALL
        .iter()
        .map(|&p| {
            let ticks = schedule.ticks_of(p);
            // An empty phase (no steady tick for one micro-batch) is [0, 0].
            let span = match ticks.is_empty() {
                true => [0, 0],
                false => [ticks.start, ticks.end],
            };
            PhaseInfo {
                program: p.name(),
                ticks: span,
            }
        })
        .collect();
    let per_stage = cfg.parallel.stage_world();
    let layers = view.stage_config.model.num_hidden_layers;
    let stages = (0..cfg.parallel.pp)
        .map(|s| StageInfo {
            stage: s,
            layers: [s * layers, (s + 1) * layers],
            ranks: [s * per_stage, (s + 1) * per_stage],
        })
        .collect();
    let manifest = PipelineManifest {
        format: PIPELINE_FORMAT,
        hlatc_version: env!("CARGO_PKG_VERSION"),
        target: target.name(),
        chip: target.chip().map(|c| c.name()),
        micro_batches: schedule.micro_batches,
        form: FormInfo {
            remat: view.form.remat.name(),
            send: view.form.send.name(),
        },
        programs,
        schedule: ScheduleInfo {
            ticks: schedule.ticks(),
            phases,
            bubble: schedule.bubble(),
            rules: [
                "rank r is TP rank r % tp of DP replica (r / tp) % dp of stage r / (tp * dp); every rank runs the same programs",
                "stage s holds the whole model's layers [s * k, (s + 1) * k): its programs' model.layers.j is the whole model's model.layers.{s * k + j}; the embedding, final norm and LM head are every stage's",
                "per optimizer step, token_count is the number of the global batch's targets that are not the ignore index (-100); micro-batch m is each DP replica's m-th of micro_batches runs of its rows",
                "for each tick t in [0, ticks), run the program of its phase with tick = t, tokens = micro-batch t (zeros past the last), backward_tokens = micro-batch t - (2 * pp - 1), targets = micro-batch t - pp (zeros outside [0, micro_batches)); the pipeline.* and grad.NAME outputs are the next run's inputs (aliased), zero at the first tick",
                "then run apply_step once on the parameters, master weights, Adam state, step and grad.NAME; it returns them updated, grad.NAME zeroed",
                "the step's loss is the sum of the tick programs' loss outputs, and a mixture of experts' routing the sum of their expert_tokens and dropped_tokens outputs (warm_up and steady have them; every rank holds each)",
            ],
        },
        stages,
        config: cfg,
        memory_per_rank: MemoryInfo::of(MemoryPlan::of_pipeline(&view.ticks, view.apply)),
    };
    let json = serde_json::to_string_pretty(&manifest).expect("the manifest serializes");
    let report = &mut staged.report;
    write(
        staging.join(MANIFEST_FILE),
        format!("{json}\n").as_bytes(),
        &mut report.files,
    )?;
    let steady = reports
        .iter()
        .position(|(n, _)| *n == ProgramName::Steady)
        .expect("the steady program");
    report.sha256 = reports[steady].1.sha256.clone();
    // The steady program's check is the one with both slots in it; the
    // others' findings join its lines, named by their program.
    reports.swap(0, steady);
    let mut preflight: Option<Preflight> = None;
    for (name, r) in reports {
        report.files.extend(r.files.iter().cloned());
        report.proto_bytes += r.proto_bytes;
        report.emit_time += r.emit_time;
        report.write_time += r.write_time;
        let Some(mut p) = r.preflight else { continue };
        p.lines = p.lines.iter().map(|l| format!("{name}/{l}")).collect();
        match &mut preflight {
            None => preflight = Some(p),
            Some(all) => {
                all.lines.extend(p.lines);
                all.time += p.time;
            }
        }
    }
    report.preflight = preflight;
    Ok(staged)
}
