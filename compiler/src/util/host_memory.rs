//! How much host memory a run may take. XLA CPU aborts the whole process
//! when an allocation fails, and hlatc's own input generation would grow
//! until the kernel kills it; both are refused here first, with the sizes.

/// Bytes of memory this process may still take: what the kernel says is
/// available (`MemAvailable` in `/proc/meminfo`), and no more than its
/// address-space limit (`ulimit -v`) leaves beside what it has mapped,
/// since past that an allocation fails however much memory is free.
/// `None` where neither can be read.
pub fn available_bytes() -> Option<u64> {
    match (mem_available(), address_space_left()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `MemAvailable` in `/proc/meminfo`.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    kib_field(&info, "MemAvailable:")
}

/// The soft address-space limit (`Max address space` in
/// `/proc/self/limits`) less the process's mapped size (`VmSize` in
/// `/proc/self/status`); `None` when unlimited or unreadable.
fn address_space_left() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mapped = kib_field(&status, "VmSize:")?;
    Some(soft.saturating_sub(mapped))
}

/// The value of a `Name:   123 kB` line, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Host bytes one run of `module` holds at least: every entry parameter and
/// the whole result. Known before compiling, so a run that cannot fit is
/// refused before XLA spends seconds compiling it.
pub fn module_bytes(module: &crate::Module) -> u64 {
    let result = module.entry_result_shape().map_or(0, |r| r.byte_size());
    module
        .entry_parameter_shapes()
        .iter()
        .fold(result, |acc, s| acc.saturating_add(s.byte_size()))
}

/// A size in words: `1.5 GB`, `12.0 MB`, `512 bytes`.
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{b} bytes"),
    }
}

/// A run that would take more host memory than there is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooLarge {
    #[error("{what} needs {} of host memory, but only {} is available", human(*.needed), human(*.available))]
    Exceeds {
        what: String,
        needed: u64,
        available: u64,
    },
    #[error("{what} needs {}, more than can be addressed", human(*.needed))]
    Unaddressable { what: String, needed: u64 },
}

/// Fails when `what` needs more than the available memory. Where the
/// available memory cannot be read, anything up to the size of the address
/// space passes.
pub fn ensure_fits(what: &str, bytes: u64) -> Result<(), TooLarge> {
    let available = available_bytes();
    if bytes <= available.unwrap_or(u64::MAX >> 1) {
        return Ok(());
    }
    let what = what.to_string();
    Err(match available {
        Some(available) => TooLarge::Exceeds {
            what,
            needed: bytes,
            available,
        },
        None => TooLarge::Unaddressable {
            what,
            needed: bytes,
        },
    })
}
