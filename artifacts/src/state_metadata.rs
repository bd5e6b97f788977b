//! What a training-state file says about itself, in its safetensors
//! metadata: whose rank it holds, of which layout, at which step, of which
//! run.
//!
//! A rank file's tensors have the same names on every rank, and often the
//! same shapes: two swapped files, or the files of another layout, would
//! join into a wrong state without a word. So `hlatc shard` writes each
//! rank's number, the layout and the step into its file, and everything
//! that reads rank files (`hlatc unshard`, a trainer's load) checks them
//! first, naming the file. A file without them (another tool's, or an
//! older hlatc's) is read as before.

use crate::run_identity::{FieldChange, RunIdentity};
use serde::{Deserialize, Serialize};

/// The metadata of a state file (all optional: a whole state has no rank).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateMetadata {
    /// The rank whose share the file holds (`None`: the whole state).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// How many rank files the layout has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<usize>,
    /// The layout, as `hlatc` prints it (`TP 2 x DP 1`, `2 stages of TP 1 x DP 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// The optimizer steps the state has taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The precision preset the state is stored for (`fp32`,
    /// `bf16-mixed`, ...): a rank file's own record, as one divided from
    /// Hugging Face weights has no run identity to say it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// The run that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_identity: Option<RunIdentity>,
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum StateMetadataError {
    #[error("{path}: holds rank {holds}'s state, not rank {expected}'s: the rank files were renamed or swapped")]
    WrongRank {
        path: String,
        holds: usize,
        expected: usize,
    },
    #[error(
        "{path}: holds a rank of {holds}, not of {expected}: give the flags of the layout it was \
         written with"
    )]
    WrongLayout {
        path: String,
        holds: String,
        expected: String,
    },
    #[error("{path}: holds the state at step {holds}, {first} holds step {expected}: the rank files are of different checkpoints")]
    MixedSteps {
        path: String,
        holds: u64,
        first: String,
        expected: u64,
    },
    #[error(
        "{path}: holds a state of precision {holds}, not {expected}: give the --precision it was \
         written with"
    )]
    OtherPrecision {
        path: String,
        holds: String,
        expected: String,
    },
    /// Two rank files of different runs: `change` is the first field of
    /// the run identity that differs (`saved` is `first`'s value, `now`
    /// `path`'s).
    #[error(
        "{path} and {first} are the ranks of different runs: {} is {} in {first}, {} in {path}",
        change.field, show(&change.saved), show(&change.now)
    )]
    MixedRuns {
        path: String,
        first: String,
        change: Box<FieldChange>,
    },
    #[error("{path}: its hlatc metadata is not valid: {message}")]
    Malformed { path: String, message: String },
}

/// A recorded value, or that there is none.
fn show(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(not recorded)")
}

impl StateMetadata {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("metadata serializes")
    }

    /// The metadata in `text` (read from `path`).
    pub fn from_json(text: &str, path: &str) -> Result<StateMetadata, StateMetadataError> {
        serde_json::from_str(text).map_err(|e| StateMetadataError::Malformed {
            path: path.to_string(),
            message: e.to_string(),
        })
    }

    /// The precision the state is stored for: its own record, else its
    /// run's.
    pub fn precision(&self) -> Option<&str> {
        self.precision.as_deref().or_else(|| {
            self.run_identity
                .as_ref()
                .and_then(|id| id.fields.get("precision"))
                .map(String::as_str)
        })
    }

    /// The metadata of a whole state at `step`, of `identity`'s run.
    pub fn whole(step: u64, identity: Option<RunIdentity>) -> StateMetadata {
        StateMetadata {
            step: Some(step),
            run_identity: identity,
            ..StateMetadata::default()
        }
    }

    /// Fails unless this file (at `path`) is rank `rank` of `ranks` of
    /// `layout`; what it does not record is not checked.
    pub fn check_rank(
        &self,
        path: &str,
        rank: usize,
        ranks: usize,
        layout: &str,
    ) -> Result<(), StateMetadataError> {
        let recorded = |r: Option<usize>| r.map_or("?".to_string(), |r| r.to_string());
        let other_layout = self.layout.as_deref().is_some_and(|l| l != layout);
        if other_layout || self.ranks.is_some_and(|n| n != ranks) {
            return Err(StateMetadataError::WrongLayout {
                path: path.to_string(),
                holds: format!(
                    "{} ({} ranks)",
                    self.layout.as_deref().unwrap_or("an unrecorded layout"),
                    recorded(self.ranks)
                ),
                expected: format!("{layout} ({ranks} ranks)"),
            });
        }
        if let Some(holds) = self.rank.filter(|&h| h != rank) {
            return Err(StateMetadataError::WrongRank {
                path: path.to_string(),
                holds,
                expected: rank,
            });
        }
        Ok(())
    }
}

/// Checks rank files' metadata (`None` where a file has none) against the
/// layout and precision they are read as: each file its own rank, every
/// one of `layout` and `precision`, all at one step of one run. `path(r)`
/// names rank `r`'s file.
pub fn check_rank_files(
    metadata: &[Option<StateMetadata>],
    layout: &str,
    precision: &str,
    path: impl Fn(usize) -> String,
) -> Result<(), StateMetadataError> {
    let mut first_step: Option<(usize, u64)> = None;
    let mut first_run: Option<(usize, RunIdentity)> = None;
    for (r, m) in metadata.iter().enumerate() {
        let Some(m) = m else { continue };
        m.check_rank(&path(r), r, metadata.len(), layout)?;
        if let Some(holds) = m.precision().filter(|&p| p != precision) {
            return Err(StateMetadataError::OtherPrecision {
                path: path(r),
                holds: holds.to_string(),
                expected: precision.to_string(),
            });
        }
        // A file that records no run differs from one that does: an
        // older hlatc's file among this one's is not the same save.
        let run = m.run_identity.clone().unwrap_or_default();
        match &first_run {
            None => first_run = Some((r, run)),
            Some((f, first)) => {
                if let Some(c) = run.changes_from(first).into_iter().next() {
                    return Err(StateMetadataError::MixedRuns {
                        path: path(r),
                        first: path(*f),
                        change: Box::new(c),
                    });
                }
            }
        }
        match (first_step, m.step) {
            (None, Some(s)) => first_step = Some((r, s)),
            (Some((f, s0)), Some(s)) if s != s0 => {
                return Err(StateMetadataError::MixedSteps {
                    path: path(r),
                    holds: s,
                    first: path(f),
                    expected: s0,
                })
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(r: usize, layout: &str, step: u64) -> Option<StateMetadata> {
        Some(StateMetadata {
            rank: Some(r),
            ranks: Some(2),
            layout: Some(layout.into()),
            step: Some(step),
            precision: None,
            run_identity: None,
        })
    }

    #[test]
    fn swapped_files_other_layouts_and_mixed_steps_are_refused_by_name() {
        let p = |r: usize| format!("d/rank-{r:05}.safetensors");
        let ok = [rank(0, "L", 3), rank(1, "L", 3)];
        check_rank_files(&ok, "L", "fp32", p).unwrap();
        let swapped = [rank(1, "L", 3), rank(0, "L", 3)];
        let e = check_rank_files(&swapped, "L", "fp32", p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/rank-00000.safetensors: holds rank 1's state, not rank 0's: the rank files were \
             renamed or swapped"
        );
        let e = check_rank_files(&ok, "M", "fp32", p).unwrap_err();
        assert!(e
            .to_string()
            .contains("holds a rank of L (2 ranks), not of M (2 ranks)"));
        let mixed = [rank(0, "L", 3), rank(1, "L", 4)];
        let e = check_rank_files(&mixed, "L", "fp32", p).unwrap_err();
        assert!(e.to_string().contains("different checkpoints"));
        // Files without metadata are read as before.
        check_rank_files(&[None, None], "L", "fp32", p).unwrap();
        // A rank count alone, of another layout, is refused too.
        let mut odd = rank(1, "L", 3);
        if let Some(m) = odd.as_mut() {
            m.layout = None;
            m.ranks = Some(7);
        }
        let e = check_rank_files(&[rank(0, "L", 3), odd], "L", "fp32", p).unwrap_err();
        assert!(
            e.to_string()
                .contains("holds a rank of an unrecorded layout (7 ranks)"),
            "{e}"
        );
    }

    /// Rank `r` of 2, at step 3, of a run of `seed` stored as `precision`.
    fn of_run(r: usize, seed: &str, precision: &str) -> Option<StateMetadata> {
        let mut id = RunIdentity::default();
        id.set("precision", precision);
        id.set("data.seed", seed);
        rank(r, "L", 3).map(|m| StateMetadata {
            run_identity: Some(id),
            ..m
        })
    }

    #[test]
    fn ranks_of_two_runs_or_another_precision_are_refused_naming_the_field() {
        let p = |r: usize| format!("d/rank-{r:05}.safetensors");
        check_rank_files(
            &[of_run(0, "0", "fp32"), of_run(1, "0", "fp32")],
            "L",
            "fp32",
            p,
        )
        .unwrap();
        let mixed = [of_run(0, "0", "fp32"), of_run(1, "3", "fp32")];
        match check_rank_files(&mixed, "L", "fp32", p).unwrap_err() {
            StateMetadataError::MixedRuns {
                path,
                first,
                change,
            } => {
                assert_eq!(path, "d/rank-00001.safetensors");
                assert_eq!(first, "d/rank-00000.safetensors");
                assert_eq!(change.field, "data.seed");
                let values = (change.saved.as_deref(), change.now.as_deref());
                assert_eq!(values, (Some("0"), Some("3")));
            }
            e => panic!("not MixedRuns: {e}"),
        }
        // A file recording no run among files that do is not the same save.
        let e = check_rank_files(&[of_run(0, "0", "fp32"), rank(1, "L", 3)], "L", "fp32", p)
            .unwrap_err();
        assert!(matches!(e, StateMetadataError::MixedRuns { .. }), "{e}");
        let fp32 = [of_run(0, "0", "fp32"), of_run(1, "0", "fp32")];
        match check_rank_files(&fp32, "L", "bf16-mixed", p).unwrap_err() {
            StateMetadataError::OtherPrecision {
                path,
                holds,
                expected,
            } => {
                assert_eq!(path, "d/rank-00000.safetensors");
                assert_eq!((holds.as_str(), expected.as_str()), ("fp32", "bf16-mixed"));
            }
            e => panic!("not OtherPrecision: {e}"),
        }
        // The file's own record of its precision, without a run identity.
        let own = rank(0, "L", 3).map(|m| StateMetadata {
            precision: Some("fp32".into()),
            ..m
        });
        let e = check_rank_files(&[own, None], "L", "bf16-mixed", p).unwrap_err();
        assert!(
            matches!(e, StateMetadataError::OtherPrecision { .. }),
            "{e}"
        );
    }
}
