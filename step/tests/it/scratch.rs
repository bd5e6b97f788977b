//! A fresh directory for one test, shared by every crate's integration
//! tests (each includes this file): named by the crate, the process and
//! the test, so no two runs or tests meet.

/// A fresh, empty directory for the test `name`, under the system's
/// temporary one.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let crate_name = env!("CARGO_PKG_NAME");
    let d = std::env::temp_dir().join(format!("{crate_name}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
