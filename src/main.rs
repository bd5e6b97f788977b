//! The `hlatc` command line.

mod cli;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                // thiserror messages already embed their sources; print only
                // causes that add something.
                if !e.to_string().contains(&s.to_string()) {
                    eprintln!("  caused by: {s}");
                }
                source = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
