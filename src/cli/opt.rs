//! `hlatc opt`: run passes by name over a module, like XLA's `hlo-opt`.

use super::console::{note, out};
use hlatc::passes::{registry, PassManager};
use hlatc::{Error, Format};
use std::path::PathBuf;
use std::process::ExitCode;

/// Run optimization passes over a module and print the result.
///
/// Passes run in the order given; the module is verified before the first
/// pass and after every pass, and the first broken invariant stops the
/// pipeline with the pass's name. A per-pass summary (changed or not,
/// instruction counts, time) goes to standard error.
#[derive(clap::Args)]
pub struct Args {
    /// Module to optimize (HLO text or HloModuleProto)
    #[arg(required_unless_present = "list_passes")]
    file: Option<PathBuf>,
    /// Comma-separated pass names, e.g. --passes=cse,dce
    #[arg(long, value_delimiter = ',', required_unless_present = "list_passes")]
    passes: Vec<String>,
    /// Write here (format by extension) instead of text to standard output
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Dump the module before and after every pass into this directory
    #[arg(long, value_name = "DIR")]
    dump_dir: Option<PathBuf>,
    /// List the available passes and exit
    #[arg(long)]
    list_passes: bool,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    if a.list_passes {
        for p in registry() {
            out!("{:<8} {}", p.name, p.description)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let file = a.file.expect("clap requires FILE without --list-passes");
    let mut module = hlatc::load_module(&file)?;
    let mut pm = PassManager::from_names(&a.passes)?;
    if let Some(d) = a.dump_dir {
        pm.dump_to(d);
    }
    let report = pm
        .run(&mut module)
        .map_err(|e| Error::Usage(format!("{}: {e}", file.display())))?;
    for r in &report.runs {
        note!(
            "{:<8} {:<9} {:>6} -> {:<6} instructions  {:.2} ms",
            r.pass,
            if r.changed { "changed" } else { "unchanged" },
            r.instructions_before,
            r.instructions_after,
            r.time.as_secs_f64() * 1e3
        )?;
    }
    let format = a.output.as_deref().map_or(Format::Text, Format::from_path);
    super::write_output(a.output.as_ref(), &hlatc::module_bytes(&module, format))?;
    Ok(ExitCode::SUCCESS)
}
