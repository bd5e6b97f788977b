//! Writing a bundle whole or not at all: checked and written into a
//! staging directory beside its destination, then moved into place.

use super::files::{sha256_hex, FLAGS_FILE, MANIFEST_FILE, NEURON_SCRIPT, PROTO_FILE, TEXT_FILE};
use super::manifest::manifest_with;
use super::neuron::{NeuronCompile, RoundingSummary};
use super::preflight::{preflight, Preflight};
use super::target::BundleTarget;
use crate::Error;
use hlatc_compiler::util::input_file;
use hlatc_step::train_step::{StepConfig, TrainStep};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Checks, before any work, that a bundle can be written to `dir`: it is
/// absent, an empty directory, or an earlier bundle (which is replaced
/// whole), and its parent directory is writable.
pub fn check_destination(dir: &Path) -> Result<(), Error> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(not_a_place(dir, "exists and is not a directory"));
        }
        let empty = std::fs::read_dir(dir)
            .map_err(|e| io_error(dir, e))?
            .next()
            .is_none();
        if !empty && !is_bundle(dir) {
            return Err(not_a_place(
                dir,
                format!(
                    "is a directory that holds files but no hlatc {MANIFEST_FILE}; \
                     hlatc replaces a bundle directory whole, so it will not write into this one"
                ),
            ));
        }
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| io_error(&parent, e))?;
    let probe = hlatc_runtime::atomic_file::temp_beside(dir, "probe");
    std::fs::create_dir(&probe)
        .map_err(|e| not_a_place(&parent, format!("cannot write here: {e}")))?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// Verifies the step, writes the bundle and moves it into `dir`, replacing
/// an older bundle there whole. Deterministic: the same step and config
/// always give byte-identical files.
pub fn write_bundle(
    step: &TrainStep,
    cfg: &StepConfig,
    target: BundleTarget,
    dir: &Path,
) -> Result<BundleReport, Error> {
    stage_bundle(step, cfg, target, dir)?.commit()
}

/// Verifies the step and writes the whole bundle into a staging directory
/// beside `dir`; nothing under `dir` changes until [`StagedBundle::commit`].
pub fn stage_bundle(
    step: &TrainStep,
    cfg: &StepConfig,
    target: BundleTarget,
    dir: &Path,
) -> Result<StagedBundle, Error> {
    check_destination(dir)?;
    let t0 = Instant::now();
    let staging = hlatc_runtime::atomic_file::temp_beside(dir, "staging");
    std::fs::create_dir(&staging).map_err(|e| io_error(&staging, e))?;
    // Removes the staging directory on any error below.
    let mut staged = StagedBundle {
        staging: staging.clone(),
        dest: dir.to_path_buf(),
        report: BundleReport::default(),
        committed: false,
    };
    let proto_path = staging.join(PROTO_FILE);
    let text_path = staging.join(TEXT_FILE);
    let (encoded, checked) = std::thread::scope(|s| {
        // Encoding, writing and hashing the proto, and the manifest that
        // names the hash, read the step and nothing else, so they run
        // beside the checks and the printing; each side writes and syncs
        // its own file as soon as it has it, so the disk's wait overlaps
        // the other side's work (a 2,048-rank step's files are 22 MB). A
        // module the checks refuse is encoded and written for nothing,
        // and its staging directory removed.
        // The Neuron compile (its pinned flags read the whole module) is
        // chosen once, here, while the encoder encodes: the pre-flight
        // judges by it, and the manifest, written last, records it.
        let (chosen, compile_of) = std::sync::mpsc::channel();
        let encoder = s.spawn(|| Encoded::of(step, cfg, target, compile_of, &proto_path));
        let compile = target
            .chip()
            .map(|chip| NeuronCompile::of(&step.module, chip));
        // Only an encoder that has failed is gone; its error is reported.
        let _ = chosen.send(compile);
        let checked = checked_text(step, compile, dir).and_then(|c| {
            let t = Instant::now();
            hlatc_runtime::atomic_file::write_synced(&text_path, c.text.as_bytes())
                .map_err(|e| io_error(&text_path, e))?;
            Ok((c, t.elapsed()))
        });
        let encoded = encoder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (encoded, checked)
    });
    let (Checked { preflight, .. }, text_write) = checked?;
    let Encoded {
        proto_bytes,
        sha256,
        stochastic_rounding,
        manifest,
    } = encoded?;
    let emit_time = t0
        .elapsed()
        .saturating_sub(text_write)
        .saturating_sub(preflight.as_ref().map_or(Duration::ZERO, |p| p.time));
    let t1 = Instant::now();
    let mut rest: Vec<(&str, Vec<u8>)> = Vec::new();
    if let Some(compile) = preflight.as_ref().map(|p| p.compile) {
        let flags = serde_json::to_string_pretty(&compile.flags()).expect("strings serialize");
        rest.push((FLAGS_FILE, format!("{flags}\n").into_bytes()));
        rest.push((
            NEURON_SCRIPT,
            compile.script(stochastic_rounding).into_bytes(),
        ));
    }
    rest.push((MANIFEST_FILE, manifest.into_bytes()));
    let rest: Vec<(PathBuf, Vec<u8>)> = rest
        .into_iter()
        .map(|(name, bytes)| (staging.join(name), bytes))
        .collect();
    hlatc_runtime::atomic_file::write_synced_all(&rest)
        .map_err(|(path, source)| Error::Io { path, source })?;
    #[cfg(unix)]
    if target.chip().is_some() {
        use std::os::unix::fs::PermissionsExt;
        let script = staging.join(NEURON_SCRIPT);
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| io_error(&script, e))?;
    }
    staged.report = BundleReport {
        files: [proto_path, text_path]
            .into_iter()
            .chain(rest.into_iter().map(|(path, _)| path))
            .collect(),
        sha256,
        proto_bytes,
        emit_time,
        write_time: text_write + t1.elapsed(),
        preflight,
    };
    Ok(staged)
}

/// A complete bundle written to a hidden staging directory beside its
/// destination. [`StagedBundle::commit`] moves it into place whole;
/// dropping it uncommitted removes it, so no partial bundle is ever visible
/// under the destination's name.
pub struct StagedBundle {
    pub(super) staging: PathBuf,
    pub(super) dest: PathBuf,
    pub(super) report: BundleReport,
    pub(super) committed: bool,
}

impl StagedBundle {
    /// Where the staged files are now (for checks before the commit).
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Replaces the destination with the staged bundle: an older bundle
    /// there is moved aside, the new one renamed in, the old one deleted.
    /// Files of the old bundle that the new one lacks go with it.
    pub fn commit(mut self) -> Result<BundleReport, Error> {
        let old = hlatc_runtime::atomic_file::temp_beside(&self.dest, "old");
        let had_old = self.dest.exists();
        if had_old {
            std::fs::rename(&self.dest, &old).map_err(|e| io_error(&self.dest, e))?;
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.dest) {
            if had_old {
                let _ = std::fs::rename(&old, &self.dest);
            }
            return Err(io_error(&self.dest, e));
        }
        self.committed = true;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        let mut report = std::mem::take(&mut self.report);
        for f in &mut report.files {
            if let Ok(within) = f.strip_prefix(&self.staging) {
                *f = self.dest.join(within);
            }
        }
        Ok(report)
    }
}

impl Drop for StagedBundle {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// What `write_bundle` wrote and how long it took.
#[derive(Default)]
pub struct BundleReport {
    pub files: Vec<PathBuf>,
    pub sha256: String,
    pub proto_bytes: usize,
    pub emit_time: Duration,
    pub write_time: Duration,
    /// The Neuron pre-flight of a Neuron bundle (it found no refusal, or
    /// nothing would have been written).
    pub preflight: Option<Preflight>,
}

/// A step's proto as written, the sha256 of its bytes, and the manifest
/// that names them.
struct Encoded {
    proto_bytes: usize,
    sha256: String,
    /// Whether the module rounds any value stochastically (its compile
    /// script then sets the environment that turns it on).
    stochastic_rounding: bool,
    /// `manifest.json`'s text.
    manifest: String,
}

impl Encoded {
    /// Encodes the step's module, writes and syncs it to `path` while
    /// hashing it and writing the manifest.
    fn of(
        step: &TrainStep,
        cfg: &StepConfig,
        target: BundleTarget,
        compile: std::sync::mpsc::Receiver<Option<NeuronCompile>>,
        path: &Path,
    ) -> Result<Encoded, Error> {
        let proto = hlatc_compiler::formats::proto::encode_module(&step.module);
        std::thread::scope(|s| {
            let writer = s.spawn(|| hlatc_runtime::atomic_file::write_synced(path, &proto));
            let sha256 = sha256_hex(&proto);
            let rounding = RoundingSummary::of(&step.module, target.target());
            let stochastic_rounding = rounding.stochastic > 0;
            // Sent as soon as it is chosen, before any error can end the
            // sender's side.
            let compile = compile.recv().ok().flatten();
            let manifest = format!(
                "{}\n",
                manifest_with(step, cfg, target, compile, &sha256, rounding)
            );
            writer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                .map_err(|e| io_error(path, e))?;
            Ok(Encoded {
                proto_bytes: proto.len(),
                sha256,
                stochastic_rounding,
                manifest,
            })
        })
    }
}

/// A verified module's text, and the Neuron pre-flight of it.
struct Checked {
    text: String,
    preflight: Option<Preflight>,
}

/// Verifies the step's module, prints it, and runs the Neuron pre-flight
/// when the bundle is for Neuron: everything that may refuse the bundle.
fn checked_text(
    step: &TrainStep,
    compile: Option<NeuronCompile>,
    dir: &Path,
) -> Result<Checked, Error> {
    hlatc_compiler::verify(&step.module).map_err(|source| Error::Verify {
        path: dir.to_path_buf(),
        source,
    })?;
    let text = hlatc_compiler::formats::text::print_module(&step.module);
    let preflight = compile
        .map(|compile| preflight(step, compile, &text, dir))
        .transpose()?;
    Ok(Checked { text, preflight })
}

pub(super) fn write(path: PathBuf, bytes: &[u8], files: &mut Vec<PathBuf>) -> Result<(), Error> {
    hlatc_runtime::atomic_file::write_synced(&path, bytes).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    files.push(path);
    Ok(())
}

pub(super) fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A place a bundle cannot be written to, and why.
fn not_a_place(path: &Path, message: impl Into<String>) -> Error {
    Error::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Whether `dir` holds a bundle hlatc wrote (its manifest says so).
fn is_bundle(dir: &Path) -> bool {
    input_file::read_to_string(&dir.join(MANIFEST_FILE), std::convert::identity)
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .is_some_and(|m| {
            m["format"]
                .as_str()
                .is_some_and(|f| f.starts_with("hlatc-bundle/"))
        })
}
