//! File-driven golden tests of the passes and the Neuron pre-flight, in the
//! style of Cranelift's filetests and XLA's hlo-opt tests: each
//! `passes/tests/filetests/**/NAME.hlo` (`<pass>/` for each pass,
//! `neuron_check/` for the pre-flight's rules) starts with a
//! `// RUN: <command>` line; the command's output must equal
//! `NAME.expected` beside it. A mismatch prints a unified diff.
//!
//! Bless new expectations with
//! `HLATC_BLESS=1 cargo test -p hlatc-passes --test it filetests`.
//!
//! The module is read as `hlatc::load_module` reads HLO text: parsed, then
//! verified. Commands:
//!
//! - `opt [--target=neuron|cpu] [--remat=POLICY] [--cast=bf16|mxfp8]
//!   [--rounding=rne|sr|state-updates] PASS,PASS,...`: run the passes as a
//!   pipeline, verifying after each, then print what the passes noted as
//!   `// note:` lines and the module. Every `opt` case is also checked for
//!   idempotence: the same passes over the output change nothing.
//! - `check [--target=trn1|trn2|trn3] [--sdk=2.32|next]`: the Neuron pre-flight
//!   (`hlatc_passes::neuron_check`; trn1 and SDK 2.32 unless told), its
//!   findings as `hlatc check` prints them (`NAME.hlo:LINE:COL:
//!   instruction %x: CODE [(warning)] what (detail), advice`), then the
//!   tally.
//!
//! A module that does not read, or a pass that fails, prints `error: ` and
//! the error. An unknown command or flag fails the test, blessed or not.

use hlatc_compiler::formats::text;
use hlatc_compiler::{verify, ElementType, Module};
use hlatc_passes::neuron_check::{check_module, Chip, Sdk};
use hlatc_passes::{
    pipeline_from_names, CastPolicy, PassContext, RematPolicy, RoundingPolicy, Target,
};
use std::path::Path;

const USAGE: &str = "known: opt [--target=T] [--remat=P] [--cast=T] [--rounding=P] PASS,...; check [--target=trn1|trn2|trn3] [--sdk=2.32|next]";

/// Why a case cannot run: the command is wrong (fails the test) or the
/// module or a pass refused (the case's output).
enum Failure {
    Command(String),
    Output(String),
}

fn output(e: impl ToString) -> Failure {
    Failure::Output(e.to_string())
}

/// HLO text read as `hlatc::load_module` reads it: parsed, then verified.
fn load(src: &str) -> Result<Module, Failure> {
    let m = text::parse_module(src).map_err(output)?;
    verify(&m).map_err(output)?;
    Ok(m)
}

/// The output of `command` over `src`, the text of the file `name`.
fn run_command(command: &str, src: &str, name: &str) -> Result<String, Failure> {
    let unknown = || {
        Failure::Command(format!(
            "unknown RUN command '{}' ({USAGE})",
            command.trim()
        ))
    };
    match command.split_whitespace().collect::<Vec<_>>()[..] {
        ["opt", ref flags @ .., passes] if !passes.starts_with("--") => {
            let ctx = pass_context(flags).ok_or_else(unknown)?;
            opt(load(src)?, ctx, passes)
        }
        ["check", ref flags @ ..] => {
            let (chip, sdk) = check_flags(flags).ok_or_else(unknown)?;
            check(&load(src)?, src, name, chip, sdk)
        }
        _ => Err(unknown()),
    }
}

/// The context the `opt` flags ask for; `None` for a flag or value this
/// runner does not know.
fn pass_context(flags: &[&str]) -> Option<PassContext> {
    let mut ctx = PassContext::new(Target::Cpu);
    for flag in flags {
        if let Some(t) = flag.strip_prefix("--target=") {
            ctx.target = Target::from_name(t)?;
        } else if let Some(p) = flag.strip_prefix("--remat=") {
            ctx.remat = RematPolicy::from_name(p)?;
        } else if flag == &"--cast=mxfp8" {
            ctx.cast = Some(CastPolicy::mxfp8());
        } else if let Some(t) = flag.strip_prefix("--cast=") {
            ctx.cast = Some(CastPolicy::with_low(ElementType::from_name(t)?));
        } else if let Some(p) = flag.strip_prefix("--rounding=") {
            ctx.rounding = RoundingPolicy::from_name(p)?;
        } else {
            return None;
        }
    }
    Some(ctx)
}

fn opt(mut m: Module, ctx: PassContext, passes: &str) -> Result<String, Failure> {
    let names: Vec<&str> = passes.split(',').collect();
    let pm = pipeline_from_names("filetest", &names).map_err(output)?;
    let fresh = || {
        let mut c = PassContext::new(ctx.target);
        c.remat = ctx.remat;
        c.cast.clone_from(&ctx.cast);
        c.rounding = ctx.rounding.clone();
        c
    };
    let report = pm.run_module(&mut m, &mut fresh()).map_err(output)?;
    let printed = text::print_module(&m);
    let again = pm.run_module(&mut m, &mut fresh()).map_err(output)?;
    if again.changed() || text::print_module(&m) != printed {
        return Err(output(format!(
            "not idempotent: a second run of {passes} changed the module"
        )));
    }
    let notes: String = report
        .notes
        .iter()
        .map(|n| format!("// note: {n}\n"))
        .collect();
    Ok(notes + &printed)
}

/// The chip and SDK the `check` flags ask for (trn1 and 2.32 unless
/// told); `None` for a flag or value this runner does not know.
fn check_flags(flags: &[&str]) -> Option<(Chip, Sdk)> {
    let (mut chip, mut sdk) = (Chip::Trn1, Sdk::V2_32);
    for flag in flags {
        if let Some(c) = flag.strip_prefix("--target=") {
            chip = Chip::from_name(c)?;
        } else if let Some(s) = flag.strip_prefix("--sdk=") {
            sdk = Sdk::from_name(s)?;
        } else {
            return None;
        }
    }
    Some((chip, sdk))
}

fn check(m: &Module, src: &str, name: &str, chip: Chip, sdk: Sdk) -> Result<String, Failure> {
    let report = check_module(m, chip, sdk);
    let positions = text::instruction_positions(src).map_err(output)?;
    let mut out: String = report
        .findings
        .iter()
        .map(|f| f.line(name, Some(&positions)) + "\n")
        .collect();
    out += &format!("{chip} (SDK {sdk} defaults): {}\n", report.tally());
    Ok(out)
}

#[test]
fn an_unknown_run_command_or_flag_is_named() {
    for command in [
        " frobnicate cse",
        "opt --colour=red cse",
        "opt --target=tpu cse",
        "check --target=trn9",
        "opt",
    ] {
        match run_command(command, "HloModule m", "x.hlo") {
            Err(Failure::Command(e)) => assert_eq!(
                e,
                format!("unknown RUN command '{}' ({USAGE})", command.trim())
            ),
            _ => panic!("'{command}' must be refused as a command"),
        }
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let files = hlatc_filetest::cases(&root);
    assert!(
        files.len() > 10,
        "filetests missing under {}",
        root.display()
    );
    hlatc_filetest::run(&files, |path, command, src| {
        let name = path.file_name().unwrap().to_string_lossy();
        match run_command(command, src, &name) {
            Ok(s) => Ok(s),
            Err(Failure::Output(e)) => Ok(format!("error: {e}\n")),
            Err(Failure::Command(e)) => Err(e),
        }
    });
}
