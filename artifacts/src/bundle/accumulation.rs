//! The bundle of gradient accumulation's two programs
//! ([`hlatc_step::grad_accum`]): a bundle for each, `micro_step/` and
//! `apply_step/` (each complete: module, text, manifest, and for neuron its
//! flags, script and pre-flight), and a manifest over both that says how a
//! runtime drives them. Staged whole and moved into place whole, like a
//! single bundle.

use super::files::MANIFEST_FILE;
use super::manifest::MemoryInfo;
use super::programs::{staged_beside, ProgramInfo, ProgramName};
use super::staging::{stage_bundle, write, StagedBundle};
use super::target::BundleTarget;
use crate::Error;
use hlatc_step::grad_accum::micro_config;
use hlatc_step::memory_plan::MemoryPlan;
use hlatc_step::train_step::{StepConfig, TrainStep};
use serde::Serialize;
use std::path::Path;

/// The top manifest's format; a bundle reader of one program refuses it
/// by name and points at the two programs.
pub const ACCUMULATION_FORMAT: &str = "hlatc-bundle/2+accumulation";
pub const MICRO_DIR: &str = ProgramName::MicroStep.name();
pub const APPLY_DIR: &str = ProgramName::ApplyStep.name();

#[derive(Serialize)]
struct AccumulationManifest<'a> {
    format: &'static str,
    hlatc_version: &'static str,
    target: &'static str,
    /// The chip a Neuron bundle's programs are compiled for.
    #[serde(skip_serializing_if = "Option::is_none")]
    chip: Option<&'static str>,
    micro_batches: i64,
    programs: [ProgramInfo; 2],
    schedule: [&'static str; 4],
    config: &'a StepConfig,
    /// Per rank: the apply step's state, the micro step's activations.
    memory_per_rank: MemoryInfo,
}

/// Writes the bundle of `micro` and `apply`, the programs of `cfg`'s step
/// accumulated over `micro_batches`, to a staging directory beside `dir`;
/// nothing under `dir` changes until [`StagedBundle::commit`]. For neuron,
/// each program's pre-flight runs, and a refusal writes nothing.
pub fn stage_accumulation_bundle(
    micro: &TrainStep,
    apply: &TrainStep,
    cfg: &StepConfig,
    micro_batches: i64,
    target: BundleTarget,
    dir: &Path,
) -> Result<StagedBundle, Error> {
    let micro_cfg = micro_config(cfg, micro_batches)?;
    let mut staged = staged_beside(dir)?;
    let staging = staged.path().to_path_buf();
    let m = stage_bundle(micro, &micro_cfg, target, &staging.join(MICRO_DIR))?.commit()?;
    let a = stage_bundle(apply, cfg, target, &staging.join(APPLY_DIR))?.commit()?;
    let manifest = AccumulationManifest {
        format: ACCUMULATION_FORMAT,
        hlatc_version: env!("CARGO_PKG_VERSION"),
        target: target.name(),
        chip: target.chip().map(|c| c.name()),
        micro_batches,
        programs: [
            ProgramInfo::of(ProgramName::MicroStep, &m, micro),
            ProgramInfo::of(ProgramName::ApplyStep, &a, apply),
        ],
        schedule: [
            "per optimizer step, token_count is the number of the global batch's targets that are not the ignore index (-100)",
            "run micro_step once per micro-batch: micro-batch j is each DP replica's j-th of micro_batches runs of its rows; its grad.NAME outputs are the next run's inputs (aliased)",
            "then run apply_step once on the parameters, master weights, Adam state, step and grad.NAME; it returns them updated, grad.NAME zeroed",
            "the step's loss is the sum of the micro steps' loss outputs",
        ],
        config: cfg,
        memory_per_rank: MemoryInfo::of(MemoryPlan::of_accumulation(micro, apply)),
    };
    let json = serde_json::to_string_pretty(&manifest).expect("the manifest serializes");
    let report = &mut staged.report;
    write(
        staging.join(MANIFEST_FILE),
        format!("{json}\n").as_bytes(),
        &mut report.files,
    )?;
    report.files.extend(m.files.iter().chain(&a.files).cloned());
    report.sha256 = m.sha256.clone();
    report.proto_bytes = m.proto_bytes + a.proto_bytes;
    report.emit_time = m.emit_time + a.emit_time;
    report.write_time = m.write_time + a.write_time;
    // The micro step's check is the one with the layers in it; the apply
    // step's warnings join its lines, named by their program.
    report.preflight = match (m.preflight, a.preflight) {
        (Some(mut pm), Some(pa)) => {
            pm.lines
                .extend(pa.lines.iter().map(|l| format!("{APPLY_DIR}/{l}")));
            pm.time += pa.time;
            Some(pm)
        }
        (p, _) => p,
    };
    Ok(staged)
}
