//! The `hlatc` command line.

mod cli;

/// A compile is ~10^5 small allocations and frees; mimalloc makes it about
/// a quarter faster than glibc's malloc (benches/compile.rs uses it too).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // clap would print help and usage errors itself and ignore a failed
    // write; render them here so a full or closed stream is still reported.
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let text = e.render().to_string();
            let written = if e.use_stderr() {
                std::io::stderr().lock().write_all(text.as_bytes())
            } else {
                std::io::stdout().lock().write_all(text.as_bytes())
            };
            return match written {
                Ok(()) => ExitCode::from(e.exit_code() as u8),
                Err(w) if w.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(_) => ExitCode::FAILURE,
            };
        }
    };
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
