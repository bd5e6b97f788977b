//! `hlatc passes`: what each pass does, and each target's default pipeline.

use super::console::out;
use hlatc::passes::{default_pass_names, registry, Target};
use hlatc::Error;
use std::process::ExitCode;

/// List the optimization passes, a line each, and the default pipelines.
///
/// `compile` runs its target's default pipeline (change it with --passes or
/// --disable-pass); `opt` runs any passes over HLO text or proto.
#[derive(clap::Args)]
pub struct Args {}

pub fn main(_a: Args) -> Result<ExitCode, Error> {
    list()
}

pub fn list() -> Result<ExitCode, Error> {
    for p in registry() {
        out!("{:<20} {}", p.name, p.description)?;
    }
    for t in Target::ALL {
        out!(
            "default pipeline for {t}: {}",
            default_pass_names(t).join(",")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
