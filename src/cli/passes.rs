//! `hlatc passes`: what each pass does, and each target's default pipeline.

use super::console::out;
use hlatc::passes::{default_pass_names, registry, Target};
use hlatc::Error;
use std::process::ExitCode;

/// List the optimization passes, a line each, the default pipelines, and
/// the kernel points with their implementations.
///
/// `compile` runs its target's default pipeline (change it with --passes or
/// --disable-pass); `opt` runs any passes over HLO text or proto. Each
/// kernel point is computed by its target's first implementation unless
/// `compile --kernel POINT=IMPL` asks for another.
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
    for (point, kinds) in super::kernel_args::points() {
        let by_target: Vec<String> = Target::ALL
            .into_iter()
            .map(|t| format!("{t} {}", hlatc::kernel_choice::priority(t, point)[0].name()))
            .collect();
        out!(
            "kernel point {:<13} implementations: {}; default: {}",
            point.name(),
            kinds.join(", "),
            by_target.join(", ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
