//! Subcommands. Each lives in its own module; this one declares the
//! interface clap parses and dispatches.

mod bundle_digest;
mod check;
mod compile;
mod console;
mod convert;
mod fmt;
mod kernel_args;
mod opt;
mod option_args;
mod pass_report;
mod passes;
mod plan;
mod plot;
mod run;
mod state;
mod train;
mod train_checkpoints;
mod train_data;

use clap::{Parser, Subcommand};
use hlatc::Error;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "hlatc",
    version,
    about = "Compile Llama-family training steps to XLA HLO for Trainium, and verify them on XLA CPU",
    long_about = "hlatc compiles a Llama-family model (a built-in preset or a Hugging Face config.json) \
into one XLA HLO program that does the whole training step: forward pass, backward pass (reverse-mode \
autodiff), global grad-norm clipping, the learning-rate schedule and the AdamW update. It writes a \
bundle neuronx-cc compiles unchanged, and runs the same HLO on XLA's CPU backend to prove it.\n\n\
It also reads and writes HLO from other stacks in both forms: text (what XLA, JAX and torch-xla \
print) and HloModuleProto (*.pb). Every module is verified when it is loaded.\n\n\
The CPU plugin is fetched once with scripts/fetch-xla-cpu-plugin.sh (or point HLATC_PJRT_PLUGIN \
at an XLA CPU PJRT plugin file).",
    after_help = "Examples:\n  \
hlatc compile --model hlat-7b --out build/7b --verify   bundle for neuronx-cc, checked on XLA CPU\n  \
hlatc compile --config config.json --out build/m      any Llama config.json\n  \
hlatc check dump.hlo --target trn2                     what neuronx-cc would refuse, by line\n  \
hlatc train --model tiny --steps 100                   train on XLA CPU (synthetic data)\n  \
hlatc train --metrics run.csv --plot loss.png          ... and draw its loss curve\n  \
hlatc plot a.csv b.csv --out loss.png                  several runs' curves in one PNG\n  \
hlatc fmt dump.txt                                     canonical HLO text of a JAX/XLA dump\n  \
hlatc convert model.hlo_module.pb -o m.txt             proto to text (and back, by extension)\n  \
hlatc opt m.txt --passes=cse,dce                       run passes by name\n  \
hlatc opt step.txt --bind mask=mask.safetensors        fold a mask fed as a parameter\n  \
hlatc passes                                           what each pass does; default pipelines\n  \
hlatc plan --model hlat-70b --nodes 32                 which layout to run, predicted\n  \
hlatc run m.txt --inputs in.safetensors --expect ref.safetensors\n  \
hlatc shard state.st --tp 2 --dp 2 --zero1 --out ranks/  a training state, one file per rank\n  \
hlatc unshard ranks/ --tp 2 --dp 2 --zero1 --out state.st  ... and back"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // A negative number after a flag is its value (`--lr-max -1`), so the
    // flag's own check names what is wrong with it, not clap's "unexpected
    // argument".
    #[command(allow_negative_numbers = true)]
    Compile(Box<compile::Args>),
    Check(check::Args),
    #[command(allow_negative_numbers = true)]
    Train(Box<train::Args>),
    Fmt(fmt::Args),
    Convert(convert::Args),
    Opt(opt::Args),
    Passes(passes::Args),
    #[command(allow_negative_numbers = true)]
    Plan(Box<plan::Args>),
    Plot(plot::Args),
    Run(run::Args),
    #[command(allow_negative_numbers = true)]
    Shard(state::ShardArgs),
    #[command(allow_negative_numbers = true)]
    Unshard(state::UnshardArgs),
}

/// Asks for the XLA plugin's own log lines on stderr: unset, they are
/// silenced.
pub const XLA_LOG_ENV: &str = "HLATC_XLA_LOG";

/// The CPU plugin logs on stderr as it loads and runs: the device count
/// it is given (an absl INFO line, with absl's warning that logging is
/// not initialized). hlatc says what it runs in its own notes, so those
/// lines are silenced unless [`XLA_LOG_ENV`] asks for them; a
/// `TF_CPP_MIN_LOG_LEVEL` the user set is kept. Called before the CLI
/// starts any thread.
pub fn quiet_plugin_info() {
    if std::env::var_os(XLA_LOG_ENV).is_none() && std::env::var_os("TF_CPP_MIN_LOG_LEVEL").is_none()
    {
        // No thread runs yet (the plugin, whose threads would read the
        // environment, is loaded later), so nothing reads the environment
        // while it changes.
        std::env::set_var("TF_CPP_MIN_LOG_LEVEL", "1");
    }
}

pub fn dispatch(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Compile(a) => compile::main(*a),
        Command::Check(a) => check::main(a),
        Command::Train(a) => train::main(*a),
        Command::Fmt(a) => fmt::main(a),
        Command::Convert(a) => convert::main(a),
        Command::Opt(a) => opt::main(a),
        Command::Passes(a) => passes::main(a),
        Command::Plan(a) => plan::main(*a),
        Command::Plot(a) => plot::main(a),
        Command::Run(a) => run::main(a),
        Command::Shard(a) => state::shard(a),
        Command::Unshard(a) => state::unshard(a),
    }
}

/// Reads a module for a command, and says on stderr what reading changed
/// (names made module-wide unique, as XLA makes them).
fn load(path: &std::path::Path) -> Result<hlatc::Module, Error> {
    let (m, notes) = hlatc::load_module_noted(path)?;
    for n in notes {
        console::note!("{}: {n}", path.display())?;
    }
    Ok(m)
}

/// Writes `module` in `format` to `path` (stdout for `None`), first saying
/// on stderr what that format cannot carry.
fn write_module(
    path: Option<&PathBuf>,
    module: &hlatc::Module,
    format: hlatc::Format,
) -> Result<(), Error> {
    for n in hlatc::unwritten(module, format) {
        console::note!("'{}': {n}", module.name)?;
    }
    write_output(path, &hlatc::module_bytes(module, format))
}

/// Writes to `path`, or to stdout for `None`.
fn write_output(path: Option<&PathBuf>, bytes: &[u8]) -> Result<(), Error> {
    match path {
        Some(p) => hlatc::runtime::atomic_file::write_atomic(p, bytes).map_err(|e| Error::io(p, e)),
        None => console::out_bytes(bytes),
    }
}
