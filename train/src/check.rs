//! Checking a written bundle: the bytes on disk are the module we meant, and
//! the recipe computes a sane training step on XLA CPU.

use crate::trainer::Trainer;
pub use crate::verify_failure::VerifyFailure;
use crate::Error;
use hlatc_artifacts::bundle::{APPLY_DIR, MANIFEST_FILE, MICRO_DIR, PROTO_FILE};
use hlatc_compiler::util::input_file;
use hlatc_compiler::Module;
use hlatc_models::{init::init_params, BatchShape, Kernels, ModelConfig};
use hlatc_passes::Target;
use hlatc_runtime::{Program, Runtime};
use hlatc_step::data::SyntheticData;
use hlatc_step::grad_accum::build_accumulation_steps;
use hlatc_step::pipeline::{build_pipeline_steps, tick_config, Phase, PipelineView};
use hlatc_step::train_step::{build_train_step, optimize, StepConfig, TrainStep};
use std::path::Path;
use std::time::Instant;

/// Models whose step state (parameters and two Adam moments) is larger than
/// this are checked through their miniature instead.
pub const MAX_HOST_STATE_BYTES: i64 = 512 << 20;

/// What was checked, one line per check, for the user.
pub struct CheckReport {
    pub lines: Vec<String>,
}

fn fail(failure: VerifyFailure) -> Error {
    Error::Verification(failure)
}

/// Re-reads the bundle in `dir`, then runs the step on XLA CPU.
pub fn verify_bundle(dir: &Path, step: &TrainStep, cfg: &StepConfig) -> Result<CheckReport, Error> {
    let mut lines = Vec::new();
    let back = read_back(dir, PROTO_FILE, step, &mut lines)?;
    let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
    let program = compile_back(&rt, back, PROTO_FILE, cfg, &mut lines)?;
    let run = if cfg.state_bytes() <= MAX_HOST_STATE_BYTES {
        let trainer = Trainer::with_program(program, cfg, step, start_params(&cfg.model, cfg))?;
        Run::own(cfg, trainer)
    } else {
        // Running needs the whole state in host memory: run the miniature.
        drop(program);
        let (run_cfg, pipeline) = miniature(cfg, step, 1)?;
        let mut mini_step = build_train_step(&run_cfg)?;
        mini_step.cast_policy.clone_from(&step.cast_policy);
        mini_step.rounding = step.rounding.clone();
        optimize(&mut mini_step, &pipeline, Target::Cpu, step.remat)?;
        let params = start_params(&run_cfg.model, cfg);
        let trainer =
            Trainer::with_program(rt.compile(&mini_step.module)?, &run_cfg, &mini_step, params)?;
        Run::miniature(cfg, &run_cfg, trainer)
    };
    run_two_steps(run, cfg, &mut lines)?;
    Ok(CheckReport { lines })
}

/// [`verify_bundle`] for the bundle of gradient accumulation's two
/// programs: each read back, then both run as one optimizer step twice.
pub fn verify_accumulation_bundle(
    dir: &Path,
    [micro, apply]: [&TrainStep; 2],
    k: i64,
    cfg: &StepConfig,
) -> Result<CheckReport, Error> {
    let mut lines = Vec::new();
    let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
    let mut programs = Vec::new();
    for (sub, step) in [(MICRO_DIR, micro), (APPLY_DIR, apply)] {
        let label = format!("{sub}/{PROTO_FILE}");
        let back = read_back(&dir.join(sub), &label, step, &mut lines)?;
        programs.push(compile_back(&rt, back, &label, cfg, &mut lines)?);
    }
    let run = if cfg.state_bytes() <= MAX_HOST_STATE_BYTES {
        let programs: [Program; 2] = programs
            .try_into()
            .map_err(|_| fail(VerifyFailure::NotTwoPrograms))?;
        let params = start_params(&cfg.model, cfg);
        let trainer = Trainer::accumulating_programs(programs, cfg, [micro, apply], k, params)?;
        Run::own(cfg, trainer)
    } else {
        drop(programs);
        let (run_cfg, pipeline) = miniature(cfg, micro, k)?;
        let mut mini = build_accumulation_steps(&run_cfg, k)?;
        for (mini_step, step) in [(&mut mini.micro, micro), (&mut mini.apply, apply)] {
            mini_step.cast_policy.clone_from(&step.cast_policy);
            mini_step.rounding = step.rounding.clone();
            optimize(mini_step, &pipeline, Target::Cpu, step.remat)?;
        }
        let programs = [
            rt.compile(&mini.micro.module)?,
            rt.compile(&mini.apply.module)?,
        ];
        let params = start_params(&run_cfg.model, cfg);
        let steps = [&mini.micro, &mini.apply];
        let trainer = Trainer::accumulating_programs(programs, &run_cfg, steps, k, params)?;
        Run::miniature(cfg, &run_cfg, trainer)
    };
    run_two_steps(run, cfg, &mut lines)?;
    Ok(CheckReport { lines })
}

/// [`verify_bundle`] for the bundle of a pipeline-parallel step's four
/// programs (`view`): each read back and compiled, then all run as one
/// optimizer step twice (on the miniature, with at most 4 micro-batches,
/// when the state is too large for host memory).
pub fn verify_pipeline_bundle(
    dir: &Path,
    view: PipelineView,
    cfg: &StepConfig,
) -> Result<CheckReport, Error> {
    let mut lines = Vec::new();
    let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
    let tick_cfg = tick_config(view.stage_config, view.schedule.micro_batches);
    let mut programs = Vec::new();
    let named = Phase::ALL
        .iter()
        .zip(view.ticks)
        .map(|(p, t)| (p.name(), t, &tick_cfg))
        .chain([(APPLY_DIR, view.apply, view.stage_config)]);
    for (sub, step, step_cfg) in named {
        let label = format!("{sub}/{PROTO_FILE}");
        let back = read_back(&dir.join(sub), &label, step, &mut lines)?;
        programs.push(compile_back(&rt, back, &label, step_cfg, &mut lines)?);
    }
    let run = if cfg.state_bytes() <= MAX_HOST_STATE_BYTES {
        let params = start_params(&cfg.model, cfg);
        Run::own(
            cfg,
            Trainer::pipelined_programs(programs, cfg, view, params)?,
        )
    } else {
        drop(programs);
        let m = view.schedule.micro_batches.min(4);
        let (run_cfg, pipeline) = miniature(cfg, view.ticks[1], m)?;
        let mut mini = build_pipeline_steps(&run_cfg, m, view.form)?;
        let originals = view.ticks.iter().copied().chain([view.apply]);
        for (mini_step, step) in mini.programs_mut().zip(originals) {
            mini_step.cast_policy.clone_from(&step.cast_policy);
            mini_step.rounding = step.rounding.clone();
            optimize(mini_step, &pipeline, Target::Cpu, step.remat)?;
        }
        let programs = mini
            .programs()
            .map(|s| rt.compile(&s.module))
            .collect::<Result<Vec<_>, _>>()?;
        let params = start_params(&run_cfg.model, cfg);
        let trainer = Trainer::pipelined_programs(programs, &run_cfg, mini.view(), params)?;
        Run::miniature(cfg, &run_cfg, trainer)
    };
    run_two_steps(run, cfg, &mut lines)?;
    Ok(CheckReport { lines })
}

/// The module of `step` as the bundle in `dir` holds it (`label` names its
/// file): decoded, verified, equal to `step`'s, its sha256 the manifest's.
fn read_back(
    dir: &Path,
    label: &str,
    step: &TrainStep,
    lines: &mut Vec<String>,
) -> Result<Module, Error> {
    let proto_path = dir.join(PROTO_FILE);
    let bytes = input_file::read(&proto_path, |source| hlatc_artifacts::Error::Io {
        path: proto_path.clone(),
        source,
    })?;
    let back = hlatc_artifacts::bundle::module_from_bytes(&proto_path, &bytes)?;
    if back != step.module {
        return Err(fail(VerifyFailure::NotTheModule {
            path: proto_path.clone(),
        }));
    }
    let manifest: serde_json::Value =
        input_file::read_to_string(&dir.join(MANIFEST_FILE), std::convert::identity)
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .ok_or_else(|| {
                fail(VerifyFailure::Manifest {
                    path: dir.join(MANIFEST_FILE),
                })
            })?;
    if manifest["module"]["sha256"] != hlatc_artifacts::bundle::sha256_hex(&bytes).as_str() {
        return Err(fail(VerifyFailure::Sha256 {
            label: label.to_string(),
        }));
    }
    lines.push(format!(
        "{label} decodes, verifies and equals the compiled module (sha256 matches the manifest)"
    ));
    Ok(back)
}

/// `back` compiled by XLA CPU on as many devices as `cfg` has ranks, its
/// Neuron custom calls mapped to plain HLO.
fn compile_back(
    rt: &Runtime,
    back: Module,
    label: &str,
    cfg: &StepConfig,
    lines: &mut Vec<String>,
) -> Result<Program, Error> {
    let t = Instant::now();
    // The manifest's division says how many devices run it.
    let (runnable, lowered) = hlatc_artifacts::bundle::for_cpu(back, cfg)?;
    let program = rt.compile(&runnable)?;
    let secs = t.elapsed().as_secs_f64();
    lines.push(match lowered {
        true => format!("XLA CPU compiles {label} with its Neuron custom calls mapped to plain HLO ({secs:.1} s)"),
        false => format!("XLA CPU compiles {label} as written ({secs:.1} s)"),
    });
    Ok(program)
}

/// The parameters a check starts from: `model`'s initialization in `cfg`'s
/// storage type.
fn start_params(model: &ModelConfig, cfg: &StepConfig) -> Vec<hlatc_compiler::Literal> {
    init_params(model, cfg.precision.storage(), 0)
        .into_iter()
        .map(|(_, l)| l)
        .collect()
}

/// The miniature of `cfg` (same structure, toy widths, a TP that divides
/// it) with `k` micro-batches of two sequences per DP replica, and the
/// pipeline `step` went through, to build it with.
fn miniature(
    cfg: &StepConfig,
    step: &TrainStep,
    k: i64,
) -> Result<(StepConfig, hlatc_passes::Pipeline), Error> {
    let mut mini = cfg.model.miniature_for_tp(cfg.parallel.tp);
    // Every pipeline stage holds a layer or more.
    let pp = cfg.parallel.pp;
    if mini.num_hidden_layers % pp != 0 {
        mini.num_hidden_layers = pp;
    }
    // Two sequences per DP replica and micro-batch, whose tokens SP divides.
    let b = BatchShape {
        batch_size: 2 * cfg.parallel.dp * k,
        seq_len: mini.max_position_embeddings,
    };
    let run_cfg = StepConfig {
        model: mini,
        batch: b,
        kernels: miniature_kernels(&cfg.kernels),
        ..cfg.clone()
    };
    let pipeline = hlatc_passes::pipeline_from_names("miniature", &step.passes)?;
    Ok((run_cfg, pipeline))
}

/// The miniature's kernels: `kernels`, but attention by its plain graph
/// where an imported kernel computes it, whose modules take the full
/// model's shapes alone.
fn miniature_kernels(kernels: &Kernels) -> Kernels {
    match kernels.attention.imported() {
        Some(_) => Kernels::default(),
        None => kernels.clone(),
    }
}

/// What a check runs: a trainer over the bundle's own module or its
/// miniature's, with the model and batch it takes.
struct Run {
    model: ModelConfig,
    batch: BatchShape,
    what: &'static str,
    trainer: Trainer,
}

impl Run {
    fn own(cfg: &StepConfig, trainer: Trainer) -> Self {
        Run {
            model: cfg.model.clone(),
            batch: cfg.batch,
            what: "the bundle's own module",
            trainer,
        }
    }

    fn miniature(cfg: &StepConfig, run_cfg: &StepConfig, trainer: Trainer) -> Self {
        let what = match cfg.kernels == run_cfg.kernels {
            true => "its miniature (same structure, toy widths)",
            false => "its miniature (same structure, toy widths; attention by hlo, since the imported kernel takes the full model's shapes alone)",
        };
        Run {
            model: run_cfg.model.clone(),
            batch: run_cfg.batch,
            what,
            trainer,
        }
    }
}

/// Two training steps on one batch: finite statistics, a loss near
/// ln(vocab) at initialization, the schedule's learning rate, and the
/// state carried through the aliasing.
fn run_two_steps(run: Run, cfg: &StepConfig, lines: &mut Vec<String>) -> Result<(), Error> {
    let Run {
        model,
        batch,
        what,
        mut trainer,
    } = run;
    let data = SyntheticData::permutation(model.vocab_size, 0);
    let b0 = data.step_batch(cfg.packed, 0, batch.batch_size, batch.seq_len);
    let uniform = (model.vocab_size as f64).ln();
    for k in 0..2 {
        let s = trainer.step(&b0)?;
        let want_lr = cfg.optimizer.learning_rate(k);
        if !(s.loss.is_finite() && s.grad_norm.is_finite() && s.grad_norm > 0.0) {
            return Err(fail(VerifyFailure::NotFinite {
                step: k,
                loss: s.loss,
                grad_norm: s.grad_norm,
            }));
        }
        if (s.loss - uniform).abs() > 0.25 * uniform {
            return Err(fail(VerifyFailure::FarFromUniform {
                step: k,
                loss: s.loss,
                uniform,
            }));
        }
        if (s.learning_rate - want_lr).abs() > 1e-5 * want_lr.max(1e-12) + 1e-12 {
            return Err(fail(VerifyFailure::LearningRate {
                step: k,
                got: s.learning_rate,
                want: want_lr,
            }));
        }
        lines.push(format!(
            "XLA CPU, {what}, step {}: loss {:.4} (ln vocab {uniform:.4}), grad norm {:.4}, lr {:.3e}",
            k + 1,
            s.loss,
            s.grad_norm,
            s.learning_rate
        ));
    }
    if trainer.steps_done() != 2 {
        return Err(fail(VerifyFailure::StepCounter(trainer.steps_done())));
    }
    lines.push("step counter, parameters and Adam state carried through input_output_alias".into());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_failed_check_says_what_it_measured() {
        let far = Error::Verification(VerifyFailure::FarFromUniform {
            step: 1,
            loss: 9.87654,
            uniform: 5.54518,
        });
        assert_eq!(
            far.to_string(),
            "verification failed: step 1: loss 9.8765 is far from ln(vocab) = 5.5452 at initialization"
        );
        let manifest = VerifyFailure::Manifest {
            path: PathBuf::from("b/manifest.json"),
        };
        assert_eq!(
            manifest.to_string(),
            "b/manifest.json is missing or not JSON"
        );
    }
}
