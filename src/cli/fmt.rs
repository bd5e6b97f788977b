//! `hlatc fmt`: any module in, canonical HLO text out.

use hlatc::{Error, Format};
use std::path::PathBuf;
use std::process::ExitCode;

/// Print a module (text or HloModuleProto) as canonical HLO text.
///
/// The module is parsed and verified; errors name the line:column or the
/// instruction at fault. The output is what XLA's parser accepts and what
/// `hlatc` prints for every module: no `%` sigils, layouts on every array
/// shape, instructions in a deterministic post-order.
#[derive(clap::Args)]
pub struct Args {
    /// Module to format (HLO text or a serialized HloModuleProto)
    file: PathBuf,
    /// Write here instead of standard output
    #[arg(short, long)]
    output: Option<PathBuf>,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    let m = super::load(&a.file)?;
    super::write_module(a.output.as_ref(), &m, Format::Text)?;
    Ok(ExitCode::SUCCESS)
}
