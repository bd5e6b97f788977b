//! What makes a training run the run it is, recorded in every checkpoint
//! and checked when one is resumed.
//!
//! Two runs whose states have the same shapes can still be different runs
//! (another `rope_theta`, another precision, a retrained tokenizer, another
//! corpus): resuming one from the other's checkpoint would go on silently
//! with the wrong model. So a checkpoint records a [`RunIdentity`], a flat
//! map of named fields (`model.rope_theta`, `precision`, `tokenizer`,
//! `corpus`, ...), and a resume compares it with the run being started:
//! every field that differs is named with both values, unless the user
//! allowed that field (`--allow-resume-change FIELD`), and then the change
//! is kept in the identity's history so later checkpoints still say it
//! happened. The layout (TP/DP/PP, ZeRO-1) is recorded but never refused:
//! the state converts between layouts.
//!
//! One type for every writer (the CLI, `hlatc.Trainer`, `hlatc.jax`), so
//! the fields and their comparison are written once.

use crate::bundle::{sha256_file_hex, sha256_hex};
use hlatc_compiler::util::input_file;
use hlatc_step::train_step::StepConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// A checkpoint's identity file, beside its state.
pub const IDENTITY_FILE: &str = "run.json";

/// Fields that are recorded but may change at a resume: the state is
/// converted between them.
pub const CONVERTIBLE_FIELDS: [&str; 1] = ["layout"];

/// The groups of fields, as `--allow-resume-change` accepts them (a group
/// allows each of its fields).
pub const FIELD_GROUPS: [&str; 10] = [
    "model",
    "precision",
    "rounding",
    "optimizer",
    "schedule",
    "tokenizer",
    "corpus",
    "data",
    "init",
    "layout",
];

/// Fields compared only where both the checkpoint and the run record
/// them: what a run started from (`init`) is unknown to a resume of a
/// whole state (`--resume` takes its weights from the file), and is not
/// in checkpoints written before it was recorded. Where only the
/// checkpoint records it, the run goes on recording the checkpoint's.
pub const START_FIELDS: [&str; 1] = ["init"];

/// The data's fields, compared only where both sides record them, as
/// [`START_FIELDS`] are: a save or load that has no loader
/// (`hlatc.jax.Trainer.save` and `load`) does not know the data, so it
/// leaves them out rather than record a guess that a later resume with
/// the data would refuse. Where only one side records them, that side's
/// are kept.
pub const DATA_FIELDS: [&str; 2] = ["tokenizer", "corpus"];

/// Whether `field` is compared only where both sides record it.
fn compared_where_both_record(field: &str) -> bool {
    START_FIELDS.contains(&field) || DATA_FIELDS.contains(&field)
}

/// What defines a run: each field's value as text, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIdentity {
    pub fields: BTreeMap<String, String>,
    /// The changes resumes were allowed to make, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_changes: Vec<AllowedChange>,
}

/// A field a resume changed because the user allowed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedChange {
    /// The step the run resumed at.
    pub step: u64,
    pub field: String,
    pub was: String,
    pub now: String,
}

/// A field whose value differs between a checkpoint and the run resuming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldChange {
    pub field: String,
    /// `None`: the checkpoint's run did not record the field.
    pub saved: Option<String>,
    pub now: Option<String>,
}

impl std::fmt::Display for FieldChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |v: &Option<String>| v.clone().unwrap_or_else(|| "(not recorded)".into());
        write!(
            f,
            "{} is {} in the checkpoint, {} now",
            self.field,
            v(&self.saved),
            v(&self.now)
        )
    }
}

/// Who asks for a resume, and so how the way to allow a change is
/// spelled: the CLI's `--allow-resume-change`, Python's `allow_changes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontEnd {
    Cli,
    Python,
}

impl FrontEnd {
    fn allow_each_field(self) -> &'static str {
        match self {
            FrontEnd::Cli => "pass --allow-resume-change FIELD for each field",
            FrontEnd::Python => "name each field (or its group) in allow_changes",
        }
    }
}

/// [`RunIdentityError::Changed`]'s message, with the way to allow the
/// changes as `front_end` spells it.
pub fn changed_message(source_name: &str, changes: &[FieldChange], front_end: FrontEnd) -> String {
    format!(
        "{source_name} was written by another run: {}; {} to resume it anyway",
        changes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
        front_end.allow_each_field()
    )
}

#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum RunIdentityError {
    /// The message names the CLI's flag; [`changed_message`] gives
    /// another front end's.
    #[error("{}", changed_message(source_name, changes, FrontEnd::Cli))]
    Changed {
        source_name: String,
        changes: Vec<FieldChange>,
    },
    #[error(
        "--allow-resume-change {field}: no such field of a run's identity (fields: {}, or a group: {})",
        known.join(", "),
        FIELD_GROUPS.join(", ")
    )]
    UnknownField { field: String, known: Vec<String> },
    #[error("{source_name}: its run identity is not valid: {message}")]
    Malformed {
        source_name: String,
        message: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file (a device, a FIFO), refused before it is read.
    #[error(transparent)]
    NotRegularFile(#[from] hlatc_compiler::util::input_file::NotRegularFile),
}

impl RunIdentity {
    /// The fields a step's configuration decides: the model (every
    /// `config.json` value, and whether projections are fused), the
    /// precision and rounding, the optimizer and its schedule, and the
    /// layout with its `grad_accum` micro-batches. `rounding` is the
    /// policy the run rounds with (the precision's default unless one was
    /// asked for).
    pub fn of_step(cfg: &StepConfig, rounding: &str, grad_accum: i64) -> RunIdentity {
        let mut id = RunIdentity::default();
        id.flatten("model", serde_json::to_value(&cfg.model));
        id.set("precision", cfg.precision.name());
        id.set("rounding", rounding);
        let o = &cfg.optimizer;
        id.set("optimizer.name", "adamw");
        id.set("optimizer.beta1", o.beta1);
        id.set("optimizer.beta2", o.beta2);
        id.set("optimizer.eps", o.eps);
        id.set("optimizer.weight_decay", o.weight_decay);
        id.set(
            "optimizer.clip_norm",
            o.clip_norm.map_or("none".to_string(), |c| c.to_string()),
        );
        id.set("schedule.max_lr", o.max_lr);
        id.set("schedule.min_lr", o.min_lr);
        id.set("schedule.warmup_steps", o.warmup_steps);
        id.set("schedule.total_steps", o.total_steps);
        id.set(
            "layout",
            format!("{}, grad-accum {grad_accum}", cfg.parallel),
        );
        id
    }

    /// Sets `field` to `value` (as text).
    pub fn set(&mut self, field: &str, value: impl std::fmt::Display) {
        self.fields.insert(field.to_string(), value.to_string());
    }

    /// Each key of a JSON object as `prefix.key`, its value as JSON text.
    fn flatten(&mut self, prefix: &str, value: Result<serde_json::Value, serde_json::Error>) {
        if let Ok(serde_json::Value::Object(map)) = value {
            for (k, v) in map {
                let text = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                self.fields.insert(format!("{prefix}.{k}"), text);
            }
        }
    }

    /// With the tokenizer's content hash (`tokenizer` = `sha256:...`), or
    /// `none` without one.
    pub fn with_tokenizer(mut self, hash: Option<&str>) -> RunIdentity {
        self.set("tokenizer", hash.unwrap_or("none"));
        self
    }

    /// With what the run's weights started from (`init`): [`init_from_seed`]
    /// or [`init_from_file`].
    pub fn with_init(mut self, init: &str) -> RunIdentity {
        self.set("init", init);
        self
    }

    /// With the data's fingerprint (`corpus`).
    pub fn with_corpus(mut self, fingerprint: &str) -> RunIdentity {
        self.set("corpus", fingerprint);
        self
    }

    /// With what decides the batches of data drawn from the seed alone
    /// (the synthetic language, `--data`'s windows): `data.seed`,
    /// `data.batch_size` and `data.seq_len`. A corpus' loader records them
    /// in its own position, which refuses a resume of other ones.
    pub fn with_data_order(mut self, seed: u64, batch_size: i64, seq_len: i64) -> RunIdentity {
        self.set("data.seed", seed);
        self.set("data.batch_size", batch_size);
        self.set("data.seq_len", seq_len);
        self
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("an identity serializes")
    }

    /// The identity in `text`, read from `source_name` (for errors).
    pub fn from_json(text: &str, source_name: &str) -> Result<RunIdentity, RunIdentityError> {
        serde_json::from_str(text).map_err(|e| RunIdentityError::Malformed {
            source_name: source_name.to_string(),
            message: e.to_string(),
        })
    }

    /// The fields whose values differ from `saved`'s, the convertible ones
    /// (the layout) aside, and those one side does not know (what the run
    /// started from, the data) compared only where both record them.
    pub fn changes_from(&self, saved: &RunIdentity) -> Vec<FieldChange> {
        let names: std::collections::BTreeSet<&String> =
            self.fields.keys().chain(saved.fields.keys()).collect();
        let recorded_by_both =
            |n: &str| saved.fields.contains_key(n) && self.fields.contains_key(n);
        names
            .into_iter()
            .filter(|n| !CONVERTIBLE_FIELDS.contains(&n.as_str()))
            .filter(|n| !compared_where_both_record(n) || recorded_by_both(n))
            .filter_map(|n| {
                let (s, c) = (saved.fields.get(n), self.fields.get(n));
                (s != c).then(|| FieldChange {
                    field: n.clone(),
                    saved: s.cloned(),
                    now: c.cloned(),
                })
            })
            .collect()
    }

    /// Whether a run with this identity may resume a checkpoint of
    /// `saved` (read from `source_name`) at `step`, with `allowed` the
    /// fields (or groups) the user let change. On success, the identity to
    /// record from now on: this one, with `saved`'s history and the
    /// changes allowed now appended, which are also returned.
    pub fn check_resume(
        &self,
        saved: &RunIdentity,
        allowed: &[String],
        step: u64,
        source_name: &str,
    ) -> Result<(RunIdentity, Vec<FieldChange>), RunIdentityError> {
        self.check_allowed_names(allowed)?;
        let changes = self.changes_from(saved);
        let (ok, refused): (Vec<_>, Vec<_>) = changes
            .into_iter()
            .partition(|c| allowed.iter().any(|a| field_in(&c.field, a)));
        if !refused.is_empty() {
            return Err(RunIdentityError::Changed {
                source_name: source_name.to_string(),
                changes: refused,
            });
        }
        let mut next = self.clone();
        for (field, v) in &saved.fields {
            if compared_where_both_record(field) && !next.fields.contains_key(field) {
                next.fields.insert(field.clone(), v.clone());
            }
        }
        next.allowed_changes = saved.allowed_changes.clone();
        next.allowed_changes
            .extend(ok.iter().map(|c| AllowedChange {
                step,
                field: c.field.clone(),
                was: c.saved.clone().unwrap_or_default(),
                now: c.now.clone().unwrap_or_default(),
            }));
        Ok((next, ok))
    }

    /// Refuses an `--allow-resume-change` that names no field or group, so
    /// a misspelt one is not silently useless.
    pub fn check_allowed_names(&self, allowed: &[String]) -> Result<(), RunIdentityError> {
        for a in allowed {
            let known = FIELD_GROUPS.contains(&a.as_str()) || self.fields.contains_key(a);
            if !known {
                return Err(RunIdentityError::UnknownField {
                    field: a.clone(),
                    known: self.fields.keys().cloned().collect(),
                });
            }
        }
        Ok(())
    }
}

/// Whether `field` is `allowed` or in the group it names
/// (`model.rope_theta` is in `model`).
fn field_in(field: &str, allowed: &str) -> bool {
    field == allowed
        || field
            .strip_prefix(allowed)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// `init` of weights drawn from `seed` by hlatc's initialization.
pub fn init_from_seed(seed: u64) -> String {
    format!("hlatc's initialization, seed {seed}")
}

/// `init` of weights read from the file at `path` (`train --init`): its
/// content hash, the whole file read.
pub fn init_from_file(path: &Path) -> Result<String, RunIdentityError> {
    let hex = sha256_file_hex(path, |source| RunIdentityError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(format!("the weights of a file, sha256:{hex}"))
}

/// A tokenizer file's content hash, `sha256:<hex>`: a tokenizer is known
/// by what it holds, not where it lies.
pub fn content_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// Bytes read from each sampled block of a corpus file.
const SAMPLE_BLOCK: u64 = 64 << 10;
/// Blocks sampled from each file, evenly spaced, the first and last
/// included: a corpus too large to hash whole is still fingerprinted in
/// milliseconds, and an edit anywhere in a small file changes it.
const SAMPLE_BLOCKS: u64 = 16;

/// How much of each file a fingerprint reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// Each file's size and 16 evenly spaced blocks of 64 KiB (a file
    /// up to 1 MiB whole): a corpus the loader streams, whose record of
    /// what it read checks the rest at a resume.
    Sampled,
    /// Every byte: a file the run reads whole and nothing else records
    /// (`--data`), so an edit anywhere in it is another corpus.
    Whole,
}

/// The fingerprint of the files a run reads, in order: each file's size
/// and its bytes as `coverage` reads them, hashed together (a file up to
/// 1 MiB gives the same either way). Content only, not paths or times: a
/// corpus copied to another disk is the same corpus, and an edit of what
/// was read, or of a file's size, is another. Reads as `N files, B bytes,
/// sha256 <16 hex>`.
pub fn files_fingerprint(
    files: &[PathBuf],
    coverage: Coverage,
) -> Result<String, RunIdentityError> {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    for path in files {
        let io = |source| RunIdentityError::Io {
            path: path.clone(),
            source,
        };
        let (mut f, size) = input_file::open(path, io)?;
        total = total.saturating_add(size);
        hasher.update(size.to_le_bytes());
        let mut buf = vec![0u8; SAMPLE_BLOCK as usize];
        let starts = match coverage {
            Coverage::Sampled => sample_offsets(size),
            Coverage::Whole => (0..size.div_ceil(SAMPLE_BLOCK))
                .map(|i| i * SAMPLE_BLOCK)
                .collect(),
        };
        for start in starts {
            f.seek(SeekFrom::Start(start)).map_err(io)?;
            let want = SAMPLE_BLOCK.min(size - start) as usize;
            f.read_exact(&mut buf[..want]).map_err(io)?;
            hasher.update(&buf[..want]);
        }
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!(
        "{} file{}, {total} bytes, sha256 {hex}",
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    ))
}

/// Where the sampled blocks of a file of `size` bytes start.
fn sample_offsets(size: u64) -> Vec<u64> {
    if size <= SAMPLE_BLOCK * SAMPLE_BLOCKS {
        return (0..size.div_ceil(SAMPLE_BLOCK))
            .map(|i| i * SAMPLE_BLOCK)
            .collect();
    }
    let last = size - SAMPLE_BLOCK;
    (0..SAMPLE_BLOCKS)
        .map(|i| (u128::from(last) * u128::from(i) / u128::from(SAMPLE_BLOCKS - 1)) as u64)
        .collect()
}

/// The content hash of the tokenizer file at `path`.
pub fn tokenizer_hash(path: &Path) -> Result<String, RunIdentityError> {
    let bytes = input_file::read(path, |source| RunIdentityError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(content_hash(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(pairs: &[(&str, &str)]) -> RunIdentity {
        let mut i = RunIdentity::default();
        for (k, v) in pairs {
            i.set(k, v);
        }
        i
    }

    #[test]
    fn a_changed_field_is_refused_with_both_values_and_the_layout_is_not() {
        let saved = id(&[("model.rope_theta", "10000.0"), ("layout", "TP 1")]);
        let now = id(&[("model.rope_theta", "500000.0"), ("layout", "TP 2")]);
        let e = now.check_resume(&saved, &[], 6, "ckpt/step-6").unwrap_err();
        assert_eq!(
            e.to_string(),
            "ckpt/step-6 was written by another run: model.rope_theta is 10000.0 in the \
             checkpoint, 500000.0 now; pass --allow-resume-change FIELD for each field to resume \
             it anyway"
        );
        let (next, ok) = now
            .check_resume(&saved, &["model".into()], 6, "ckpt/step-6")
            .unwrap();
        assert_eq!(ok.len(), 1);
        assert_eq!(next.allowed_changes[0].field, "model.rope_theta");
        assert_eq!(next.allowed_changes[0].step, 6);
    }

    #[test]
    fn what_a_run_started_from_is_compared_where_both_record_it() {
        let saved = id(&[("precision", "fp32"), ("init", "seed 0")]);
        let other = id(&[("precision", "fp32"), ("init", "seed 3")]);
        let e = other.check_resume(&saved, &[], 4, "ckpt").unwrap_err();
        assert!(
            e.to_string()
                .contains("init is seed 0 in the checkpoint, seed 3 now"),
            "{e}"
        );
        assert!(other
            .check_resume(&saved, &["init".into()], 4, "ckpt")
            .is_ok());
        // A whole state resumed knows no start of its own: the checkpoint's
        // is kept; a checkpoint that records none is not compared.
        let unknown = id(&[("precision", "fp32")]);
        let (next, changes) = unknown.check_resume(&saved, &[], 4, "ckpt").unwrap();
        assert!(changes.is_empty());
        assert_eq!(next.fields.get("init").map(String::as_str), Some("seed 0"));
        assert!(other.check_resume(&unknown, &[], 4, "ckpt").is_ok());
    }

    #[test]
    fn the_data_is_compared_where_both_sides_know_it_and_the_known_side_kept() {
        let with_data = id(&[
            ("precision", "fp32"),
            ("corpus", "1 file"),
            ("tokenizer", "none"),
        ]);
        let without = id(&[("precision", "fp32")]);
        // A load without a loader of a checkpoint that records the data.
        let (next, changes) = without.check_resume(&with_data, &[], 2, "ckpt").unwrap();
        assert!(changes.is_empty());
        assert_eq!(next.fields, with_data.fields);
        // A resume with the data of a checkpoint saved without a loader.
        let (next, changes) = with_data.check_resume(&without, &[], 2, "ckpt").unwrap();
        assert!(changes.is_empty());
        assert_eq!(next.fields, with_data.fields);
        let other = id(&[
            ("precision", "fp32"),
            ("corpus", "2 files"),
            ("tokenizer", "none"),
        ]);
        let e = other.check_resume(&with_data, &[], 2, "ckpt").unwrap_err();
        assert!(
            e.to_string()
                .contains("corpus is 1 file in the checkpoint, 2 files now"),
            "{e}"
        );
    }

    #[test]
    fn an_unknown_field_of_a_record_is_refused_by_name() {
        let e = RunIdentity::from_json(r#"{"fields": {}, "history": []}"#, "run.json").unwrap_err();
        assert!(e.to_string().contains("unknown field `history`"), "{e}");
        let text = r#"{"fields": {}, "allowed_changes": [{"step": 1, "field": "init", "was": "a", "now": "b", "why": "c"}]}"#;
        let e = RunIdentity::from_json(text, "run.json").unwrap_err();
        assert!(e.to_string().contains("unknown field `why`"), "{e}");
    }

    #[test]
    fn an_unknown_override_is_refused() {
        let now = id(&[("precision", "fp32")]);
        let e = now.check_allowed_names(&["precison".into()]).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("--allow-resume-change precison: no such field"));
        assert!(field_in("model.rope_theta", "model"));
        assert!(!field_in("model_x", "model"));
    }

    #[test]
    fn sampled_blocks_cover_small_files_whole_and_large_ones_to_their_end() {
        assert_eq!(sample_offsets(0), Vec::<u64>::new());
        assert_eq!(sample_offsets(10), vec![0]);
        let big = sample_offsets(100 << 20);
        assert_eq!(big.len(), 16);
        assert_eq!(*big.last().unwrap(), (100 << 20) - SAMPLE_BLOCK);
    }
}
