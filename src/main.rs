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
    cli::quiet_plugin_info();
    // clap would print help and usage errors itself and ignore a failed
    // write; render them here so a full or closed stream is still reported.
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let text = coded(&e);
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
            let _ = writeln!(err, "error[{}]: {e}", e.code());
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

/// clap's error with its code in front, as hlatc's own errors print theirs
/// (hlatc::error_code). A value an option of the table refuses is that
/// option's code (`option.tp`), as the library's refusal of it is, however
/// it was caught; any other flag's value is `cli.value_validation.FLAG`;
/// the rest is the kind of mistake clap found (`cli.unknown_argument`).
/// Help and version are not errors and print as they are.
fn coded(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let text = e.render().to_string();
    let Some(rest) = text.strip_prefix("error: ") else {
        return text;
    };
    let kind = hlatc::error_code::snake_case(&format!("{:?}", e.kind()));
    // clap names the argument as `--tp <N>`.
    let flag = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg
            .strip_prefix("--")
            .and_then(|a| a.split(' ').next())
            .map(str::to_string),
        _ => None,
    };
    let code = match (e.kind(), flag) {
        (ErrorKind::ValueValidation | ErrorKind::InvalidValue, Some(flag)) => {
            match hlatc::compile_step::spellings::CompileOption::from_flag(&flag) {
                Some(option) => format!("option.{}", option.keyword()),
                None => format!("cli.{kind}.{}", flag.replace('-', "_")),
            }
        }
        _ => format!("cli.{kind}"),
    };
    format!("error[{code}]: {rest}")
}
