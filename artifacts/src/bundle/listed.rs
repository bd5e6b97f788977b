//! Every tensor of a bundle on disk, flat, read from its manifests alone:
//! a bundle of one program, or the programs a top manifest lists (each in
//! its folder, with its own manifest), each program's inputs and outputs
//! with runs of layers read out. What Python's `hlatc.Bundle` lists;
//! [`super::OpenedBundle`] is the reader that rebuilds a program to run.

use super::files::MANIFEST_FILE;
use super::listing::expand_json;
use super::programs::ProgramName;
use super::{PROGRAM_FORMATS, READ_FORMATS};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A bundle's manifests, read.
#[derive(Debug)]
pub struct ListedBundle {
    /// The top manifest's format.
    pub format: String,
    /// The top manifest.
    pub manifest: Value,
    /// Each program in the order the bundle lists them (`step` for a bundle
    /// of one), with its inputs and outputs, each an entry of its
    /// manifest's listing with its runs read out.
    pub programs: Vec<ListedProgram>,
}

#[derive(Debug)]
pub struct ListedProgram {
    pub name: ProgramName,
    /// The manifest it was read from.
    pub manifest: PathBuf,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
}

/// A bundle that cannot be listed, by the file at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ListingFault {
    /// The directory or manifest at fault.
    pub path: PathBuf,
    pub message: String,
}

impl ListedBundle {
    /// Reads the manifests of the bundle in `dir`.
    pub fn read(dir: &Path) -> Result<ListedBundle, ListingFault> {
        if !dir.is_dir() {
            let why = match dir.exists() {
                false => "no such bundle directory",
                true => "not a directory, so not a bundle",
            };
            return Err(fault(dir, format!("{}: {why}", dir.display())));
        }
        let top_path = dir.join(MANIFEST_FILE);
        let top = read_manifest(dir, &top_path, &READ_FORMATS)?;
        let format = top["format"].as_str().unwrap_or_default().to_string();
        let programs = match top.get("programs") {
            None => vec![program(ProgramName::Step, &top, &top_path)?],
            Some(entries) => {
                let named = named_programs(entries)
                    .map_err(|e| fault(&top_path, format!("{}: {e}", top_path.display())))?;
                named
                    .into_iter()
                    .map(|(name, folder)| {
                        let path = dir.join(folder).join(MANIFEST_FILE);
                        let manifest = read_manifest(dir, &path, &PROGRAM_FORMATS)?;
                        program(name, &manifest, &path)
                    })
                    .collect::<Result<_, _>>()?
            }
        };
        Ok(ListedBundle {
            format,
            manifest: top,
            programs,
        })
    }
}

fn fault(path: &Path, message: String) -> ListingFault {
    ListingFault {
        path: path.to_path_buf(),
        message,
    }
}

/// The manifest at `path` of the bundle in `dir`, of one of `formats`.
fn read_manifest(dir: &Path, path: &Path, formats: &[&str]) -> Result<Value, ListingFault> {
    let shown = path.display();
    let read = hlatc_compiler::util::input_file::read(path, std::convert::identity);
    let bytes = read.map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fault(
            path,
            format!("{shown}: missing, so {} is not a bundle", dir.display()),
        ),
        _ => fault(path, format!("{shown}: not a bundle manifest: {e}")),
    })?;
    let manifest: Value = std::str::from_utf8(&bytes)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(t).map_err(|e| e.to_string()))
        .map_err(|e| fault(path, format!("{shown}: not a bundle manifest: {e}")))?;
    let found = manifest.get("format");
    if found
        .and_then(Value::as_str)
        .is_some_and(|f| formats.contains(&f))
    {
        return Ok(manifest);
    }
    let quoted: Vec<String> = formats.iter().map(|f| format!("'{f}'")).collect();
    let later = match found.and_then(Value::as_str) {
        Some(f) if f.starts_with("hlatc-bundle/") => " (a bundle written by a later hlatc?)",
        _ => "",
    };
    let found = match found.and_then(Value::as_str) {
        Some(f) => format!("'{f}'"),
        None => "none".to_string(),
    };
    Err(fault(
        path,
        format!(
            "{shown}: format {found}, but this hlatc reads {}{later}",
            quoted.join(", ")
        ),
    ))
}

/// Each entry of a top manifest's `programs`: its program (by `name`, or
/// its folder's) and its folder.
fn named_programs(entries: &Value) -> Result<Vec<(ProgramName, String)>, String> {
    let cannot = |why: String| format!("a 'programs' entry hlatc cannot read: {why}");
    let entries = entries
        .as_array()
        .ok_or_else(|| cannot("'programs' is not a list".into()))?;
    entries
        .iter()
        .map(|e| {
            let dir = e
                .get("dir")
                .and_then(Value::as_str)
                .ok_or_else(|| cannot(format!("{e} has no 'dir'")))?;
            let name = e.get("name").and_then(Value::as_str).unwrap_or(dir);
            let program = ProgramName::from_manifest(name).map_err(|e| cannot(e.to_string()))?;
            Ok((program, dir.to_string()))
        })
        .collect()
}

/// One program's listings, read out.
fn program(
    name: ProgramName,
    manifest: &Value,
    path: &Path,
) -> Result<ListedProgram, ListingFault> {
    let listed = |kind: &str| -> Result<Vec<Value>, ListingFault> {
        let key = format!("{kind}s");
        let entries = manifest
            .get(&key)
            .filter(|v| v.is_array())
            .ok_or_else(|| fault(path, format!("{}: no '{key}' list", path.display())))?;
        expand_json(entries).map_err(|e| {
            fault(
                path,
                format!(
                    "{}: an entry of '{key}' hlatc cannot read: {e}",
                    path.display()
                ),
            )
        })
    };
    Ok(ListedProgram {
        name,
        manifest: path.to_path_buf(),
        inputs: listed("input")?,
        outputs: listed("output")?,
    })
}
