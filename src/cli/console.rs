//! Every line the CLI prints goes through here, so a closed pipe or a full
//! disk on standard output or error is an error value, never a panic
//! (`println!` panics on both).

use hlatc::Error;
use std::io::Write;

/// A duration in milliseconds, as every timing the CLI prints is given.
pub fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn output_error(stream: &'static str, e: std::io::Error) -> Error {
    Error::Output {
        stream,
        kind: e.kind(),
        message: e.to_string(),
    }
}

/// Writes to standard output.
pub fn out_bytes(bytes: &[u8]) -> Result<(), Error> {
    let mut o = std::io::stdout().lock();
    o.write_all(bytes)
        .and_then(|()| o.flush())
        .map_err(|e| output_error("standard output", e))
}

/// A line of results on standard output.
pub fn out_line(args: std::fmt::Arguments) -> Result<(), Error> {
    out_bytes(format!("{args}\n").as_bytes())
}

/// A line of progress or diagnostics on standard error.
pub fn note_line(args: std::fmt::Arguments) -> Result<(), Error> {
    writeln!(std::io::stderr().lock(), "{args}").map_err(|e| output_error("standard error", e))
}

/// `out!("...", args)`: `println!` that returns a `Result`.
macro_rules! out {
    ($($t:tt)*) => { $crate::cli::console::out_line(format_args!($($t)*)) };
}

/// `note!("...", args)`: `eprintln!` that returns a `Result`.
macro_rules! note {
    ($($t:tt)*) => { $crate::cli::console::note_line(format_args!($($t)*)) };
}

pub(crate) use {note, out};
