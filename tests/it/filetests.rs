//! File-driven golden tests of the text format through the facade's
//! `load_module`, in the style of Cranelift's filetests and XLA's hlo-opt
//! tests: each `tests/filetests/fmt/NAME.hlo` starts with a
//! `// RUN: <command>` line; the command's output must equal
//! `NAME.expected` beside it. A mismatch prints a unified diff.
//!
//! Bless new expectations with `HLATC_BLESS=1 cargo test --test it filetests`.
//!
//! One command: `fmt` (read as `hlatc::load_module` reads a file: parse,
//! verify; print the canonical text). An unknown command fails the test,
//! blessed or not. The other crates keep their filetests beside their
//! code: the reader's and the verifier's errors in
//! `compiler/tests/filetests/` (`parse`, `verify`), the passes and the
//! Neuron pre-flight in `passes/tests/filetests/` (`opt`, `check`).

use std::path::{Path, PathBuf};

const BLESS_ENV: &str = "HLATC_BLESS";

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "hlo") {
            out.push(p);
        }
    }
}

/// The output of `command` over the module in `path`; `Err` where the
/// command is not one this runner knows.
fn run_command(command: &str, path: &Path) -> Result<String, String> {
    match command.split_whitespace().collect::<Vec<_>>()[..] {
        ["fmt"] => Ok(match hlatc::load_module(path) {
            Ok(m) => hlatc::text::print_module(&m),
            Err(e) => format!("error: {e}\n"),
        }),
        _ => Err(format!(
            "unknown RUN command '{}' (known: fmt)",
            command.trim()
        )),
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("tests/filetests"), &mut files);
    files.sort();
    assert!(
        !files.is_empty(),
        "filetests missing under {}",
        root.display()
    );
    let bless = std::env::var_os(BLESS_ENV).is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let command = src
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// RUN:"))
            .unwrap_or_else(|| panic!("{}: first line must be `// RUN: <command>`", f.display()));
        let actual = match run_command(command, f) {
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
