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

use std::path::Path;

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
    let files = hlatc_filetest::cases(&root.join("tests/filetests"));
    assert!(
        !files.is_empty(),
        "filetests missing under {}",
        root.display()
    );
    hlatc_filetest::run(&files, |path, command, _| run_command(command, path));
}
