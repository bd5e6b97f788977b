//! Golden tests of the text reader and the verifier, in the style of
//! Cranelift's filetests: each `compiler/tests/filetests/**/NAME.hlo`
//! (`parse/` for what the reader refuses, `verify/` for what the verifier
//! refuses or accepts) starts with a `// RUN: <command>` line; the
//! command's output must equal `NAME.expected` beside it. A mismatch
//! prints a unified diff.
//!
//! Bless new expectations with
//! `HLATC_BLESS=1 cargo test -p hlatc-compiler --test it filetests`.
//!
//! Commands: `parse` (read the text) and `verify` (read it, then
//! `hlatc_compiler::verify`). Either prints `ok`, or `error: ` and the
//! error as the library prints it: a reader's error with its line and
//! column in the file (the RUN line is line 1), a verifier's with the
//! computation and instruction it names. An unknown command fails the
//! test, blessed or not.

use hlatc_compiler::{formats::text, verify};
use std::path::{Path, PathBuf};

const BLESS_ENV: &str = "HLATC_BLESS";
const USAGE: &str = "known: parse, verify";

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

/// The output of `command` over the module text `src`; `Err` where the
/// command itself is not one this runner knows.
fn run_command(command: &str, src: &str) -> Result<String, String> {
    let verified = match command.split_whitespace().collect::<Vec<_>>()[..] {
        ["parse"] => false,
        ["verify"] => true,
        _ => {
            return Err(format!(
                "unknown RUN command '{}' ({USAGE})",
                command.trim()
            ))
        }
    };
    let outcome = text::parse_module(src)
        .map_err(|e| e.to_string())
        .and_then(|m| match verified {
            true => verify(&m).map_err(|e| e.to_string()),
            false => Ok(()),
        });
    Ok(match outcome {
        Ok(()) => "ok\n".to_string(),
        Err(e) => format!("error: {e}\n"),
    })
}

#[test]
fn an_unknown_run_command_is_named() {
    let e = run_command(" frobnicate --x", "HloModule m").unwrap_err();
    assert_eq!(
        e,
        "unknown RUN command 'frobnicate --x' (known: parse, verify)"
    );
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    for dir in ["parse", "verify"] {
        assert!(
            files.iter().any(|f| f.starts_with(root.join(dir))),
            "no filetests under {}/{dir}",
            root.display()
        );
    }
    let bless = std::env::var_os(BLESS_ENV).is_some_and(|v| v != "0");
    let mut failures = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).unwrap();
        let Some(command) = src.lines().next().and_then(|l| l.strip_prefix("// RUN:")) else {
            failures.push(format!(
                "{}: the first line must be `// RUN: <command>`",
                f.display()
            ));
            continue;
        };
        let actual = match run_command(command, &src) {
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
