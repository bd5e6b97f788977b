//! The `hlatc` command line.

mod cli;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) if e.is_closed_stdout() => ExitCode::SUCCESS,
        Err(e) => {
            // If standard error itself is gone there is nobody to tell; the
            // exit status still says it failed.
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                // thiserror messages already embed their sources; print only
                // causes that add something.
                if !e.to_string().contains(&s.to_string()) {
                    let _ = writeln!(err, "  caused by: {s}");
                }
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
