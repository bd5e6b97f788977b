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
use std::path::Path;

const USAGE: &str = "known: parse, verify";

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
    let files = hlatc_filetest::cases(&root);
    for dir in ["parse", "verify"] {
        assert!(
            files.iter().any(|f| f.starts_with(root.join(dir))),
            "no filetests under {}/{dir}",
            root.display()
        );
    }
    hlatc_filetest::run(&files, |_, command, src| run_command(command, src));
}
