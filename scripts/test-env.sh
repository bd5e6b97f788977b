# What scripts/test.sh (every test, CI's) and scripts/test-fast.sh (the
# fast tier) share: which XLA CPU plugin the tests run on, how hlatc is
# built for them, and how the tests run. Sourced, not run; each part is a
# function the scripts call in order.

# Sets plugin_rel, the plugin's path in the clone.
hlatc_test_plugin() {
    # The XLA CPU PJRT plugin (runtime tests run emitted HLO on it): the
    # default, or the older one with HLATC_TEST_PLUGIN=xla-cpu-pjrt (the suite
    # passes on both; docs/src/runtime.md, "Which plugin").
    case "${HLATC_TEST_PLUGIN:-jax-pjrt-cpu}" in
        jax-pjrt-cpu) plugin_rel=".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so" ;;
        xla-cpu-pjrt) plugin_rel=".cache/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ;;
        *) echo "HLATC_TEST_PLUGIN is jax-pjrt-cpu or xla-cpu-pjrt" >&2; exit 2 ;;
    esac
}

# The build's environment: clippy's lints as the build compiles.
hlatc_test_build_env() {
    # Lints and the test build are one compile. clippy-driver is rustc with
    # Clippy's lints (what `cargo clippy` runs, without codegen); as the
    # workspace's rustc wrapper it lints each hlatc crate while compiling it for
    # the tests, so nothing is type-checked twice (clippy, then the build, took
    # 95 s + 108 s from a clean clone on a 2-core VM; this one build, 159 s to
    # 190 s over five clean clones, and 108 s to 119 s since the proc macros
    # and the root crate build unoptimized: Cargo.toml's `ci` profile).
    # Every target is built, benches included, as `cargo clippy --all-targets`
    # checks them. `-D warnings` makes any warning, rustc's or Clippy's, an
    # error. Dependencies are built by rustc itself, their lints capped.
    # Clippy compiles with MIR optimizations off (its lints read unoptimized
    # MIR); LLVM still optimizes at the `ci` profile's level, and the tests
    # check behaviour, which optimizations do not change.
    if ! clippy_driver="$(command -v clippy-driver)"; then
        echo "error: clippy-driver not found; install it with: rustup component add clippy" >&2
        exit 1
    fi
    export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
    export RUSTFLAGS="-D warnings ${RUSTFLAGS:-}"
}

# How the tests run: XLA's flags, the caches outside the clone, and a
# scratch folder removed however the run ends. Needs HLATC_PJRT_PLUGIN.
hlatc_test_run_env() {
    # Most of the tests' time is XLA CPU compiling programs with LLVM. Its
    # backend optimization level changes how fast the machine code runs, not
    # what it computes (no fast-math either way), and at 0 XLA compiles about
    # twice as fast; every comparison in the tests is between programs
    # compiled alike. At that level its legacy LLVM IR emitters compile a
    # small step in about half the time of its default MLIR fusion emitters
    # (the tests' XLA time: 265 s against 392 s of one core, 2-core VM), and
    # compute the same values. The runtime states the emitters in every
    # compile and refuses what each aborts on; the fuzzer compiles with the
    # default ones, which users run (docs/src/runtime.md).
    # A plugin without the emitters flag (jaxlib 0.11's XLA dropped it with the
    # legacy emitters) would abort on it in XLA_FLAGS, so it is set only where
    # the plugin defines it: by the runtime's own rule (runtime/src/plugin_flags.rs),
    # a flag's name between NUL bytes in the library.
    legacy_emitters=""
    if python3 -c 'import sys; sys.exit(b"\0xla_cpu_use_fusion_emitters\0" not in open(sys.argv[1], "rb").read())' "$HLATC_PJRT_PLUGIN"; then
        legacy_emitters="--xla_cpu_use_fusion_emitters=false"
    fi
    export XLA_FLAGS="--xla_backend_optimization_level=0 $legacy_emitters ${XLA_FLAGS:-}"
    # The tests compile about 1,900 distinct programs, most of them again in
    # every run: each compiled executable is kept on disk, outside the clone,
    # and loaded the next time, by any clone (docs/src/runtime.md, "Executable
    # cache"). Its key holds the module, the compile options, the plugin
    # file's sha256 (each clone fetches its own copy), XLA_FLAGS and the host
    # processor, so an executable another
    # plugin, other flags or another machine compiled is never loaded. JAX's
    # tests keep theirs beside it (JAX's persistent compilation cache, keyed
    # by JAX in the same way: the `jax.jit` programs; hlatc.jax compiles the
    # step itself, past JAX's cache). A warm cache takes the Rust tests from about
    # 260 s to about 110 s (2-core VM). Files no run has read for a week go.
    cache_root="${HLATC_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hlatc-tests}"
    mkdir -p "$cache_root/xla" "$cache_root/jax" "$cache_root/conformance" "$cache_root/mypy"
    find "$cache_root" -type f -atime +7 -delete
    export HLATC_XLA_CACHE_DIR="${HLATC_XLA_CACHE_DIR:-$cache_root/xla}"
    export JAX_COMPILATION_CACHE_DIR="${JAX_COMPILATION_CACHE_DIR:-$cache_root/jax}"
    export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0
    export JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0
    # XLA's parse of each conformance module hlatc wrote, kept by the bytes
    # parsed (tools/xla_conformance.py): about 20 s of the test's 36 s.
    export HLATC_CONFORMANCE_CACHE="${HLATC_CONFORMANCE_CACHE:-$cache_root/conformance}"
    # mypy's own cache (it checks each cached module against its source's hash):
    # the type checks below read numpy's and JAX's stubs again otherwise, 12 s.
    export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$cache_root/mypy}"
    # The tests' scratch files (bundles, checkpoints, weights: about 1.4 GB
    # over a run, in some 1,800 folders named after the test and process)
    # go under one folder of this run's, removed however the run ends, so
    # that no run leaves them in the machine's /tmp.
    TMPDIR="$(mktemp -d "${TMPDIR:-/tmp}/hlatc-test-run.XXXXXX")"
    export TMPDIR
    # Also stops what the script started in the background, should it stop first.
    trap 'jobs -p | xargs -r kill 2>/dev/null; rm -rf "$TMPDIR"' EXIT
}
