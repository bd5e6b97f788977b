//! File-driven golden tests, in the style of Cranelift's filetests and XLA's
//! hlo-opt tests: each `tests/filetests/**/NAME.hlo` starts with a
//! `// RUN: <command>` line; the command's output must equal
//! `NAME.expected` beside it. A mismatch prints a unified diff.
//!
//! Bless new expectations with `HLATC_BLESS=1 cargo test --test filetests`.
//!
//! Commands: `fmt` (parse, verify, print canonical text) and
//! `opt PASS,PASS,...` (run passes through the pass manager, then print).

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

fn run_command(command: &str, path: &Path) -> Result<String, String> {
    let mut words = command.split_whitespace();
    let mut m = hlatc::load_module(path).map_err(|e| e.to_string())?;
    match (words.next(), words.next(), words.next()) {
        (Some("fmt"), None, None) => {}
        (Some("opt"), Some(passes), None) => {
            let names: Vec<&str> = passes.split(',').collect();
            let pm = hlatc::passes::PassManager::from_names(&names).map_err(|e| e.to_string())?;
            pm.run(&mut m).map_err(|e| e.to_string())?;
        }
        _ => {
            return Err(format!(
                "unknown RUN command '{}' (known: fmt, opt PASS,...)",
                command.trim()
            ))
        }
    }
    Ok(hlatc::text::print_module(&m))
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no filetests under {}", root.display());
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
            Err(e) => format!("error: {e}\n"),
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
        "{} filetest(s) differ from their expectations (re-bless with {BLESS_ENV}=1 if the change is intended):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
