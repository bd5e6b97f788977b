//! File-driven golden tests, in the style of Cranelift's filetests and XLA's
//! hlo-opt tests: each `tests/filetests/**/NAME.hlo` (`fmt/` for the text
//! format, `passes/<pass>/` for each pass) starts with a `// RUN: <command>` line;
//! the command's output must equal `NAME.expected` beside it. A mismatch
//! prints a unified diff.
//!
//! Bless new expectations with `HLATC_BLESS=1 cargo test --test it filetests`.
//!
//! Commands: `fmt` (parse, verify, print canonical text) and
//! `opt [--target=neuron|cpu] [--remat=POLICY] [--cast=bf16]
//! [--rounding=rne|sr|state-updates] PASS,PASS,...` (run the passes as a
//! pipeline, verifying after each, then print what the passes noted as
//! `// note:` lines and the module). Every `opt` case is also checked for
//! idempotence: the same passes over the output change nothing.

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
    use hlatc::passes::{
        pipeline_from_names, CastPolicy, PassContext, RematPolicy, RoundingPolicy, Target,
    };
    let words: Vec<&str> = command.split_whitespace().collect();
    let mut m = hlatc::load_module(path).map_err(|e| e.to_string())?;
    let usage = || {
        format!(
            "unknown RUN command '{}' (known: fmt, opt [--target=T] [--remat=P] [--cast=T] [--rounding=P] PASS,...)",
            command.trim()
        )
    };
    let (passes, flags) = match words[..] {
        ["fmt"] => return Ok(hlatc::text::print_module(&m)),
        ["opt", ref rest @ .., passes] if !passes.starts_with("--") => (passes, rest),
        _ => return Err(usage()),
    };
    let mut ctx = PassContext::new(Target::Cpu);
    for flag in flags {
        if let Some(t) = flag.strip_prefix("--target=") {
            ctx.target = Target::from_name(t).ok_or_else(|| format!("bad target '{t}'"))?;
        } else if let Some(p) = flag.strip_prefix("--remat=") {
            ctx.remat =
                RematPolicy::from_name(p).ok_or_else(|| format!("bad remat policy '{p}'"))?;
        } else if let Some(t) = flag.strip_prefix("--cast=") {
            let low = hlatc::compiler::ElementType::from_name(t)
                .ok_or_else(|| format!("bad low type '{t}'"))?;
            ctx.cast = Some(CastPolicy::with_low(low));
        } else if let Some(p) = flag.strip_prefix("--rounding=") {
            ctx.rounding =
                RoundingPolicy::from_name(p).ok_or_else(|| format!("bad rounding policy '{p}'"))?;
        } else {
            return Err(usage());
        }
    }
    let names: Vec<&str> = passes.split(',').collect();
    let pm = pipeline_from_names("filetest", &names).map_err(|e| e.to_string())?;
    let fresh = || {
        let mut c = PassContext::new(ctx.target);
        c.remat = ctx.remat;
        c.cast.clone_from(&ctx.cast);
        c.rounding = ctx.rounding.clone();
        c
    };
    let report = pm
        .run_module(&mut m, &mut fresh())
        .map_err(|e| e.to_string())?;
    let printed = hlatc::text::print_module(&m);
    let again = pm
        .run_module(&mut m, &mut fresh())
        .map_err(|e| e.to_string())?;
    if again.changed() || hlatc::text::print_module(&m) != printed {
        return Err(format!(
            "not idempotent: a second run of {passes} changed the module"
        ));
    }
    let notes: String = report
        .notes
        .iter()
        .map(|n| format!("// note: {n}\n"))
        .collect();
    Ok(notes + &printed)
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    collect(&root.join("tests/filetests"), &mut files);
    files.sort();
    assert!(
        files.len() > 10,
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
