//! `hlatc check DIR`'s first look at a bundle: each program's module is the
//! one its manifest records (by sha256), so a module copied in from another
//! program or bundle is named, not checked as if it were the bundle's.

use super::console::note;
use hlatc::bundle::{sha256_hex, MANIFEST_FILE, PROTO_FILE};
use hlatc::compiler::util::input_file;
use hlatc::Error;
use std::path::Path;

/// Fails unless the module in program folder `dir` (program `name` of the
/// bundle in `top`, for a bundle of several) has the sha256 its manifest
/// records, and the one the bundle's manifest lists for it.
pub fn check_program(dir: &Path, name: Option<&str>, top: Option<&Path>) -> Result<(), Error> {
    let own = dir.join(MANIFEST_FILE);
    if !own.is_file() {
        note!(
            "warning: {} has no {MANIFEST_FILE}: its module's bytes are not checked against one",
            dir.display()
        )?;
        return Ok(());
    }
    let proto = dir.join(PROTO_FILE);
    let bytes = input_file::read(&proto, |e| Error::io(&proto, e))?;
    let found = sha256_hex(&bytes);
    let what = name.map_or("the module".to_string(), |n| {
        format!("program {n}'s module")
    });
    let recorded = recorded_sha256(&own, |m| m["module"]["sha256"].as_str())?;
    compare(&proto, &own, &what, &recorded, &found)?;
    if let (Some(top), Some(name)) = (top, name) {
        let listed = top.join(MANIFEST_FILE);
        let recorded = recorded_sha256(&listed, |m| {
            m["programs"]
                .as_array()?
                .iter()
                .find(|p| p["dir"].as_str() == Some(name))?["sha256"]
                .as_str()
        })?;
        compare(&proto, &listed, &what, &recorded, &found)?;
    }
    Ok(())
}

/// The sha256 the manifest at `path` records where `at` finds it.
fn recorded_sha256(
    path: &Path,
    at: impl Fn(&serde_json::Value) -> Option<&str>,
) -> Result<String, Error> {
    let text = input_file::read_to_string(path, |e| Error::io(path, e))?;
    let manifest: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Error::file(path, format!("not a manifest hlatc can read: {e}")))?;
    at(&manifest).map(str::to_string).ok_or_else(|| {
        Error::file(
            path,
            "records no sha256 for the module, so its bytes cannot be checked",
        )
    })
}

fn compare(
    proto: &Path,
    manifest: &Path,
    what: &str,
    expected: &str,
    found: &str,
) -> Result<(), Error> {
    if expected == found {
        return Ok(());
    }
    Err(Error::file(
        proto,
        format!(
            "its sha256 is {found}, but {} records {expected} for {what}: the module was replaced \
             or changed after the bundle was written",
            manifest.display()
        ),
    ))
}
