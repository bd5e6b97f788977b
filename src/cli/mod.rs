//! Subcommands. Each lives in its own module; this one declares the
//! interface clap parses and dispatches.

mod compile;
mod convert;
mod fmt;
mod model_args;
mod opt;
mod run;
mod train;
mod verify;

use clap::{Parser, Subcommand};
use hlatc::Error;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hlatc",
    version,
    about = "Compile Llama-family training steps to XLA HLO, and inspect, convert and run HLO on XLA CPU",
    long_about = "hlatc reads and writes XLA HLO in both of its forms: text (what XLA, JAX and torch-xla \
print) and HloModuleProto (*.pb, what neuronx-cc and PJRT consume). Every module is verified \
(shapes, names, aliasing) when it is loaded, and can be run on XLA's CPU backend through the \
PJRT C API.\n\nThe CPU plugin is fetched once with scripts/fetch-xla-cpu-plugin.sh (or point \
HLATC_PJRT_PLUGIN at xla_cpu_pjrt.so).",
    after_help = "Examples:\n  \
hlatc fmt dump.txt                          canonical HLO text of a JAX/XLA dump\n  \
hlatc convert model.hlo_module.pb -o m.txt  proto to text (and back, by extension)\n  \
hlatc opt m.txt --passes=cse,dce            run passes by name (--list-passes)\n  \
hlatc run m.txt --inputs in.safetensors --outputs out.safetensors\n  \
hlatc run m.txt --expect ref.safetensors    run and compare with reference outputs"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Compile(compile::Args),
    Train(train::Args),
    Fmt(fmt::Args),
    Convert(convert::Args),
    Opt(opt::Args),
    Run(run::Args),
}

pub fn dispatch(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Compile(a) => compile::main(a),
        Command::Train(a) => train::main(a),
        Command::Fmt(a) => fmt::main(a),
        Command::Convert(a) => convert::main(a),
        Command::Opt(a) => opt::main(a),
        Command::Run(a) => run::main(a),
    }
}

/// Writes to `path`, or to stdout for `None`.
fn write_output(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    match path {
        Some(p) => std::fs::write(p, bytes).map_err(|e| Error::Io {
            path: p.clone(),
            message: e.to_string(),
        }),
        None => std::io::stdout().write_all(bytes).map_err(|e| Error::Io {
            path: "<stdout>".into(),
            message: e.to_string(),
        }),
    }
}
