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

use crate::run_identity::RunIdentity;
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
    /// The run that wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_identity: Option<RunIdentity>,
}

#[derive(Debug, thiserror::Error)]
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
    #[error("{path}: its hlatc metadata is not valid: {message}")]
    Malformed { path: String, message: String },
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
/// layout they are read as: each file its own rank, every one of
/// `layout`, all at one step. `path(r)` names rank `r`'s file.
pub fn check_rank_files(
    metadata: &[Option<StateMetadata>],
    layout: &str,
    path: impl Fn(usize) -> String,
) -> Result<(), StateMetadataError> {
    let mut first_step: Option<(usize, u64)> = None;
    for (r, m) in metadata.iter().enumerate() {
        let Some(m) = m else { continue };
        m.check_rank(&path(r), r, metadata.len(), layout)?;
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
            run_identity: None,
        })
    }

    #[test]
    fn swapped_files_other_layouts_and_mixed_steps_are_refused_by_name() {
        let p = |r: usize| format!("d/rank-{r:05}.safetensors");
        let ok = [rank(0, "L", 3), rank(1, "L", 3)];
        check_rank_files(&ok, "L", p).unwrap();
        let swapped = [rank(1, "L", 3), rank(0, "L", 3)];
        let e = check_rank_files(&swapped, "L", p).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/rank-00000.safetensors: holds rank 1's state, not rank 0's: the rank files were \
             renamed or swapped"
        );
        let e = check_rank_files(&ok, "M", p).unwrap_err();
        assert!(e
            .to_string()
            .contains("holds a rank of L (2 ranks), not of M (2 ranks)"));
        let mixed = [rank(0, "L", 3), rank(1, "L", 4)];
        let e = check_rank_files(&mixed, "L", p).unwrap_err();
        assert!(e.to_string().contains("different checkpoints"));
        // Files without metadata are read as before.
        check_rank_files(&[None, None], "L", p).unwrap();
        // A rank count alone, of another layout, is refused too.
        let mut odd = rank(1, "L", 3);
        if let Some(m) = odd.as_mut() {
            m.layout = None;
            m.ranks = Some(7);
        }
        let e = check_rank_files(&[rank(0, "L", 3), odd], "L", p).unwrap_err();
        assert!(
            e.to_string()
                .contains("holds a rank of an unrecorded layout (7 ranks)"),
            "{e}"
        );
    }
}
