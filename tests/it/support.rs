//! What the CLI tests share: running the `hlatc` binary and reading what
//! it printed.

use std::process::{Command, Output};

/// `hlatc args...`, run to the end.
pub fn hlatc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hlatc"))
        .args(args)
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
