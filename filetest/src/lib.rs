//! The harness of hlatc's golden-file tests, in the style of Cranelift's
//! filetests: every `NAME.hlo` under a folder starts with a
//! `// RUN: <command>` line, and what the crate's runner prints for it must
//! equal `NAME.expected` beside it. A mismatch prints a unified diff;
//! `HLATC_BLESS=1` writes the outputs as the new expectations instead.
//!
//! Each crate keeps its commands (the compiler's `parse` and `verify`, the
//! passes' `opt` and `check`, the facade's `fmt`) and its cases beside its
//! code; this walks, blesses, diffs and reports for all of them.
//!
//! [`sweep`] is the other thing the crates' tests share: how a test over
//! an exhaustive set samples it, and how to walk it whole.

use std::path::{Path, PathBuf};

pub mod sweep;

/// The environment variable that blesses the outputs.
pub const BLESS_ENV: &str = "HLATC_BLESS";

/// Every `.hlo` file under `dir`, sorted.
pub fn cases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    collect(dir, &mut out);
    out.sort();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("filetests under {}: {e}", dir.display()));
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "hlo") {
            out.push(p);
        }
    }
}

/// Runs every case in `files`: `run(path, command, text)` gives the
/// output for a case's command (the text after `// RUN:`), or `Err` naming
/// what is wrong with the command, which fails the test blessed or not.
/// Panics listing every failure: a missing RUN line, a bad command, or an
/// output that differs from its expectation (as a unified diff).
pub fn run(files: &[PathBuf], run: impl Fn(&Path, &str, &str) -> Result<String, String>) {
    let bless = std::env::var_os(BLESS_ENV).is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for f in files {
        let src = std::fs::read_to_string(f).unwrap();
        let Some(command) = src.lines().next().and_then(|l| l.strip_prefix("// RUN:")) else {
            failures.push(format!(
                "{}: the first line must be `// RUN: <command>`",
                f.display()
            ));
            continue;
        };
        let actual = match run(f, command, &src) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{}: {e}", f.display()));
                continue;
            }
        };
        let expected_path = f.with_extension("expected");
        if bless {
            std::fs::write(&expected_path, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual {
            let diff = similar::TextDiff::from_lines(&expected, &actual)
                .unified_diff()
                .header(&expected_path.display().to_string(), "actual")
                .to_string();
            failures.push(diff);
        }
    }
    assert!(
        failures.is_empty(),
        "{} filetest(s) failed (re-bless with {BLESS_ENV}=1 if a changed output is intended):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
