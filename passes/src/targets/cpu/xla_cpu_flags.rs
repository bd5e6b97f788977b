//! What the process's `XLA_FLAGS` choose of XLA CPU that hlatc's own checks
//! depend on. XLA reads the variable once per process, when the plugin first
//! needs its options, so it is read once here too.

use std::sync::OnceLock;

/// The flag that picks XLA CPU's code generator.
pub const FUSION_EMITTERS_FLAG: &str = "xla_cpu_use_fusion_emitters";

/// Which code generator XLA CPU emits fusions and elementwise code with.
///
/// The two compute the same values but abort on different valid modules:
/// the legacy emitters cannot address 2-bit elements in a pad, which the
/// fusion emitters compile (found by `runtime/tests/it/fuzz_xla` run with
/// each). The legacy ones compile small modules about twice as fast at
/// `--xla_backend_optimization_level=0`, what `scripts/test.sh` runs; at
/// XLA's default level, and for a 70B step at either, they are slower.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Emitters {
    /// The MLIR fusion emitters, XLA CPU's default.
    Fusion,
    /// The LLVM IR emitters, with `--xla_cpu_use_fusion_emitters=false`.
    Legacy,
}

impl Emitters {
    /// This process's, from its `XLA_FLAGS` (read once).
    pub fn of_process() -> Emitters {
        static OF_PROCESS: OnceLock<Emitters> = OnceLock::new();
        *OF_PROCESS.get_or_init(|| {
            std::env::var("XLA_FLAGS").map_or(Emitters::Fusion, |f| Emitters::from_flags(&f))
        })
    }

    /// The emitters `flags`, spelled as `XLA_FLAGS` holds them, choose: the
    /// last `--xla_cpu_use_fusion_emitters` decides, and `false` or `0` (in
    /// any case, as XLA parses it) picks the legacy ones.
    pub fn from_flags(flags: &str) -> Emitters {
        let value = settings(flags)
            .rev()
            .find(|&(name, _)| name == FUSION_EMITTERS_FLAG)
            .map(|(_, value)| value);
        match value {
            Some(v) if v == "0" || v.eq_ignore_ascii_case("false") => Emitters::Legacy,
            _ => Emitters::Fusion,
        }
    }
}

/// The flags `XLA_FLAGS`-style text sets, as XLA reads them: each
/// whitespace-separated `--name=value`, or `--name` (`true`), dashes
/// dropped, in order.
pub fn settings(flags: &str) -> impl DoubleEndedIterator<Item = (&str, &str)> {
    flags.split_whitespace().filter_map(|arg| {
        let arg = arg.trim_start_matches('-');
        let (name, value) = arg.split_once('=').unwrap_or((arg, "true"));
        (!name.is_empty()).then_some((name, value))
    })
}
