//! `hlatc convert`: between HLO text and HloModuleProto.

use hlatc::{Error, Format};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, clap::ValueEnum)]
enum To {
    Text,
    Proto,
}

/// Convert a module between HLO text and serialized HloModuleProto.
///
/// The input format is detected from its content; the output format comes
/// from --to, else from the output extension (.pb, .proto, .binpb: proto;
/// anything else: text). Emission is deterministic: the same module always
/// gives the same bytes.
#[derive(clap::Args)]
pub struct Args {
    /// Module to convert
    input: PathBuf,
    /// Where to write the converted module
    #[arg(short, long)]
    output: PathBuf,
    /// Output format, overriding the extension
    #[arg(long, value_enum)]
    to: Option<To>,
}

pub fn main(a: Args) -> Result<ExitCode, Error> {
    let m = super::load(&a.input)?;
    let format = match a.to {
        Some(To::Text) => Format::Text,
        Some(To::Proto) => Format::Proto,
        None => Format::from_path(&a.output),
    };
    super::write_module(Some(&a.output), &m, format)?;
    Ok(ExitCode::SUCCESS)
}
