//! Checking a written bundle: the bytes on disk are the module we meant, and
//! the recipe computes a sane training step on XLA CPU.

use crate::bundle::{MANIFEST_FILE, PROTO_FILE};
use crate::data::SyntheticData;
use crate::train_step::{build_train_step, optimize, StepConfig, TrainStep};
use crate::trainer::Trainer;
use crate::Error;
use hlatc_models::{init::init_params, BatchShape};
use hlatc_passes::Target;
use hlatc_runtime::Runtime;
use std::path::Path;
use std::time::Instant;

/// Models whose step state (parameters and two Adam moments) is larger than
/// this are checked through their miniature instead.
pub const MAX_HOST_STATE_BYTES: i64 = 512 << 20;

/// What was checked, one line per check, for the user.
pub struct CheckReport {
    pub lines: Vec<String>,
}

fn fail(msg: String) -> Error {
    Error::Verification(msg)
}

/// Re-reads the bundle in `dir`, then runs the step on XLA CPU.
pub fn verify_bundle(dir: &Path, step: &TrainStep, cfg: &StepConfig) -> Result<CheckReport, Error> {
    let mut lines = Vec::new();
    let proto_path = dir.join(PROTO_FILE);
    let bytes = std::fs::read(&proto_path).map_err(|e| Error::Io {
        path: proto_path.clone(),
        message: e.to_string(),
    })?;
    let back =
        hlatc_compiler::formats::proto::decode_module(&bytes).map_err(|source| Error::Proto {
            path: proto_path.clone(),
            source,
        })?;
    hlatc_compiler::verify(&back).map_err(|source| Error::Verify {
        path: proto_path.clone(),
        source,
    })?;
    if back != step.module {
        return Err(fail(format!(
            "{} does not decode to the compiled module",
            proto_path.display()
        )));
    }
    let manifest: serde_json::Value = std::fs::read_to_string(dir.join(MANIFEST_FILE))
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .ok_or_else(|| {
            fail(format!(
                "{} is missing or not JSON",
                dir.join(MANIFEST_FILE).display()
            ))
        })?;
    if manifest["module"]["sha256"] != crate::bundle::sha256_hex(&bytes).as_str() {
        return Err(fail(
            "the manifest's sha256 does not match the proto".into(),
        ));
    }
    lines.push(format!("{PROTO_FILE} decodes, verifies and equals the compiled module (sha256 matches the manifest)"));

    let rt = Runtime::for_ranks(cfg.parallel.world() as usize)?;
    let t = Instant::now();
    // The manifest's division says how many devices run it.
    let (runnable, lowered) = crate::bundle::for_cpu(back, cfg.parallel.world())?;
    let program = rt.compile(&runnable)?;
    lines.push(if lowered {
        format!(
            "XLA CPU compiles {PROTO_FILE} with its Neuron custom calls mapped to plain HLO ({:.1} s)",
            t.elapsed().as_secs_f64()
        )
    } else {
        format!(
            "XLA CPU compiles {PROTO_FILE} as written ({:.1} s)",
            t.elapsed().as_secs_f64()
        )
    });

    let (model, batch, what, mut trainer) = if cfg.state_bytes() <= MAX_HOST_STATE_BYTES {
        let params = init_params(&cfg.model, cfg.precision.storage(), 0)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        let trainer = Trainer::with_program(program, cfg, step, params)?;
        (
            cfg.model.clone(),
            cfg.batch,
            "the bundle's own module",
            trainer,
        )
    } else {
        // Running needs the whole state in host memory: run the miniature.
        drop(program);
        let mini = cfg.model.miniature_for_tp(cfg.parallel.tp);
        // Two sequences per DP replica, whose tokens SP divides.
        let b = BatchShape {
            batch_size: 2 * cfg.parallel.dp,
            seq_len: mini.max_position_embeddings,
        };
        let run_cfg = StepConfig {
            model: mini.clone(),
            batch: b,
            ..cfg.clone()
        };
        let params = init_params(&mini, cfg.precision.storage(), 0)
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        // The miniature goes through the same passes (for cpu).
        let mut mini_step = build_train_step(&run_cfg)?;
        mini_step.cast_policy.clone_from(&step.cast_policy);
        mini_step.rounding = step.rounding.clone();
        let pipeline = hlatc_passes::pipeline_from_names("miniature", &step.passes)?;
        optimize(&mut mini_step, &pipeline, Target::Cpu, step.remat)?;
        let trainer =
            Trainer::with_program(rt.compile(&mini_step.module)?, &run_cfg, &mini_step, params)?;
        (
            mini,
            b,
            "its miniature (same structure, toy widths)",
            trainer,
        )
    };
    let data = SyntheticData::permutation(model.vocab_size, 0);
    let b0 = data.step_batch(cfg.packed, 0, batch.batch_size, batch.seq_len);
    let uniform = (model.vocab_size as f64).ln();
    for k in 0..2 {
        let s = trainer.step(&b0)?;
        let want_lr = cfg.optimizer.learning_rate(k);
        if !(s.loss.is_finite() && s.grad_norm.is_finite() && s.grad_norm > 0.0) {
            return Err(fail(format!(
                "step {k}: loss {} grad norm {} are not finite and positive",
                s.loss, s.grad_norm
            )));
        }
        if (s.loss - uniform).abs() > 0.25 * uniform {
            return Err(fail(format!(
                "step {k}: loss {:.4} is far from ln(vocab) = {uniform:.4} at initialization",
                s.loss
            )));
        }
        if (s.learning_rate - want_lr).abs() > 1e-5 * want_lr.max(1e-12) + 1e-12 {
            return Err(fail(format!(
                "step {k}: learning rate {} but the schedule says {want_lr}",
                s.learning_rate
            )));
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
        return Err(fail(format!(
            "the step counter reads {} after 2 steps",
            trainer.steps_done()
        )));
    }
    lines.push("step counter, parameters and Adam state carried through input_output_alias".into());
    Ok(CheckReport { lines })
}
