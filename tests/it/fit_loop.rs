//! The training loop's policy (`hlatc::fit::FitPolicy`), which `hlatc
//! train`, `hlatc.Trainer.fit` and `hlatc.jax.Trainer.fit` all run: when
//! it stops, when a checkpoint is due, and what a diverged loss stops
//! before. Driven here over an engine that writes down every call.

use hlatc::checkpoint_lock::LockError;
use hlatc::fit::checkpoints::{Notice, RunCheckpointError, RunCheckpoints};
use hlatc::fit::{FitEnd, FitEngine, FitPolicy};
use hlatc::metrics::{MetricsLog, StepMetrics};
use hlatc::run_identity::RunIdentity;
use hlatc::train::run_error::RunError;

/// An engine of `done` steps so far, whose batches run out after `batches`
/// (never when `None`), whose step `k` (from 1) has loss `loss[k - 1]` (1.0
/// past the list), and whose caller stops it after `stop_at`.
#[derive(Default)]
struct Recorder {
    done: u64,
    batches: Option<u64>,
    loss: Vec<f64>,
    stop_at: Option<u64>,
    calls: Vec<String>,
}

impl FitEngine for Recorder {
    type Error = RunError;

    fn steps_done(&mut self) -> Result<u64, RunError> {
        Ok(self.done)
    }

    fn step(&mut self) -> Result<Option<f64>, RunError> {
        if let Some(left) = &mut self.batches {
            if *left == 0 {
                return Ok(None);
            }
            *left -= 1;
        }
        self.done += 1;
        Ok(Some(
            self.loss
                .get(self.done as usize - 1)
                .copied()
                .unwrap_or(1.0),
        ))
    }

    fn record(&mut self, done: u64) -> Result<(), RunError> {
        self.calls.push(format!("record {done}"));
        Ok(())
    }

    fn save(&mut self, done: u64) -> Result<(), RunError> {
        self.calls.push(format!("save {done}"));
        Ok(())
    }

    fn go_on(&mut self, done: u64) -> Result<bool, RunError> {
        Ok(self.stop_at != Some(done))
    }
}

fn saves(r: &Recorder) -> Vec<&str> {
    r.calls
        .iter()
        .filter(|c| c.starts_with("save"))
        .map(String::as_str)
        .collect()
}

fn policy(stop: u64, every: Option<u64>) -> FitPolicy {
    FitPolicy {
        stop,
        checkpoint_every: every,
    }
}

#[test]
fn a_checkpoint_falls_every_n_steps_and_after_the_last_once() {
    let mut r = Recorder::default();
    assert_eq!(policy(5, Some(2)).run(&mut r).unwrap(), FitEnd::Reached);
    assert_eq!(r.done, 5);
    assert_eq!(saves(&r), ["save 2", "save 4", "save 5"]);
    // Each step is recorded before its checkpoint, which holds it.
    assert_eq!(r.calls[..3], ["record 1", "record 2", "save 2"]);
    // The last step due anyway is saved once.
    let mut r = Recorder::default();
    policy(4, Some(2)).run(&mut r).unwrap();
    assert_eq!(saves(&r), ["save 2", "save 4"]);
}

#[test]
fn a_resumed_run_goes_on_to_the_same_end_on_the_same_cadence() {
    let mut r = Recorder {
        done: 3,
        ..Recorder::default()
    };
    policy(6, Some(2)).run(&mut r).unwrap();
    assert_eq!(
        r.calls,
        ["record 4", "save 4", "record 5", "record 6", "save 6"]
    );
    // A run already at its end does nothing, saves nothing.
    let mut r = Recorder {
        done: 6,
        ..Recorder::default()
    };
    assert_eq!(policy(6, Some(2)).run(&mut r).unwrap(), FitEnd::Reached);
    assert!(r.calls.is_empty());
}

#[test]
fn data_that_ends_first_stops_the_run_saved_where_it_ended() {
    let mut r = Recorder {
        batches: Some(3),
        ..Recorder::default()
    };
    assert_eq!(
        policy(5, Some(2)).run(&mut r).unwrap(),
        FitEnd::DataEnded { at: 3 }
    );
    assert_eq!(saves(&r), ["save 2", "save 3"]);
}

#[test]
fn the_callers_stop_is_saved_first() {
    let mut r = Recorder {
        stop_at: Some(3),
        ..Recorder::default()
    };
    assert_eq!(
        policy(9, Some(5)).run(&mut r).unwrap(),
        FitEnd::Stopped { at: 3 }
    );
    assert_eq!(saves(&r), ["save 3"]);
}

#[test]
fn without_checkpoints_nothing_is_saved() {
    let mut r = Recorder {
        batches: Some(2),
        stop_at: Some(1),
        ..Recorder::default()
    };
    assert_eq!(
        policy(5, None).run(&mut r).unwrap(),
        FitEnd::Stopped { at: 1 }
    );
    assert_eq!(r.calls, ["record 1"]);
}

#[test]
fn a_loss_that_is_not_finite_stops_before_its_step_is_recorded_or_saved() {
    for bad in [f64::NAN, f64::INFINITY] {
        let mut r = Recorder {
            loss: vec![2.0, bad],
            ..Recorder::default()
        };
        match policy(5, Some(1)).run(&mut r) {
            Err(RunError::Diverged { step: 2, loss }) => assert!(!loss.is_finite()),
            other => panic!("{bad}: {other:?}"),
        }
        assert_eq!(r.calls, ["record 1", "save 1"]);
    }
}

fn identity(precision: &str) -> RunIdentity {
    let mut id = RunIdentity::default();
    id.set("precision", precision);
    id
}

fn one_step() -> MetricsLog {
    let mut log = MetricsLog::default();
    log.push(StepMetrics {
        step: 1,
        loss: 5.5,
        grad_norm: 1.25,
        learning_rate: 1e-3,
        held_out_loss: None,
    });
    log
}

#[test]
fn a_run_takes_up_its_newest_checkpoint_and_refuses_another_runs() {
    let path = crate::support::scratch("fit_loop_checkpoints");
    let opened = RunCheckpoints::open(&path, 3, &identity("fp32"), &[]).unwrap();
    assert!(opened.restored.is_none() && opened.notices.is_empty());
    // One run at a time: the directory is locked while it is open.
    match RunCheckpoints::open(&path, 3, &identity("fp32"), &[]) {
        Err(RunCheckpointError::Lock(e)) => {
            assert!(matches!(e, LockError::Held { .. }), "{e}")
        }
        other => panic!("{:?}", other.err()),
    }
    let c = opened.checkpoints;
    c.save(1, b"state", Some(b"[]"), &one_step()).unwrap();
    drop(c);

    let again = RunCheckpoints::open(&path, 3, &identity("fp32"), &[]).unwrap();
    let r = again.restored.expect("the checkpoint of step 1");
    assert_eq!((r.step, r.state.as_slice()), (1, b"state".as_slice()));
    assert_eq!(r.loader.as_deref(), Some(b"[]".as_slice()));
    assert_eq!(r.metrics, one_step());
    assert!(r
        .state_source()
        .ends_with("step-00000001/state.safetensors"));
    drop(again.checkpoints);

    // Another precision: refused by name, unless allowed (then said).
    match RunCheckpoints::open(&path, 3, &identity("bf16-mixed"), &[]) {
        Err(RunCheckpointError::Identity(e)) => assert!(
            e.to_string()
                .contains("precision is fp32 in the checkpoint, bf16-mixed now"),
            "{e}"
        ),
        other => panic!("{:?}", other.err()),
    }
    let allowed = ["precision".to_string()];
    let changed = RunCheckpoints::open(&path, 3, &identity("bf16-mixed"), &allowed).unwrap();
    assert!(matches!(
        changed.notices.as_slice(),
        [Notice::AllowedChange { change, .. }] if change.field == "precision"
    ));
    assert_eq!(changed.checkpoints.identity().allowed_changes.len(), 1);
}
