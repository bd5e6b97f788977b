#!/usr/bin/env bash
# Everything the tests need, then every check: formatting, lints, all
# tests. This is the README's test command and what CI runs.
#
#   scripts/test.sh          the exhaustive sweeps sampled (the day's seed)
#   scripts/test.sh --full   every sweep whole (HLATC_FULL_SWEEP=1)
#
# The sweeps over exhaustive sets (XLA's 4,147 test modules, the fuzzer's
# generated ones) walk a sample drawn from a seed that changes every day
# and is printed with a failure; HLATC_SWEEP_SEED=N draws a day's sample
# again (docs/src/correctness.md, "Sampled sweeps").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for arg in "$@"; do
    case "$arg" in
        --full) export HLATC_FULL_SWEEP=1 ;;
        *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
    esac
done

# The XLA CPU PJRT plugin (runtime tests run emitted HLO on it): the
# default, or the older one with HLATC_TEST_PLUGIN=xla-cpu-pjrt (the suite
# passes on both; docs/src/runtime.md, "Which plugin").
case "${HLATC_TEST_PLUGIN:-jax-pjrt-cpu}" in
    jax-pjrt-cpu) plugin_rel=".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so" ;;
    xla-cpu-pjrt) plugin_rel=".cache/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ;;
    *) echo "HLATC_TEST_PLUGIN is jax-pjrt-cpu or xla-cpu-pjrt" >&2; exit 2 ;;
esac
scripts/fetch-xla-cpu-plugin.sh jax-pjrt-cpu
# The memory plan's tests measure it against the older one's buffer
# assignment, whichever plugin the rest run on (tests/it/memory_plan.rs).
scripts/fetch-xla-cpu-plugin.sh xla-cpu-pjrt
export HLATC_PJRT_PLUGIN="${HLATC_PJRT_PLUGIN:-$PWD/$plugin_rel}"
# XLA's own HLO parser, through jaxlib, for tests/it/xla_crosscheck.rs.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -r tools/requirements.txt

cargo fmt --all -- --check

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
# hlatc-python, the Python package's native module, is a workspace member
# built (and so linted) by maturin below, with this same environment.
cargo build --workspace --exclude hlatc-python --all-targets --profile ci

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
# The `ci` profile optimizes hlatc's library crates too (Cargo.toml).
if cargo nextest --version >/dev/null 2>&1; then
    # One process per test, both cores busy to the end (.config/nextest.toml).
    # hlatc-python is a Python extension, built and tested below by pip.
    cargo nextest run --workspace --exclude hlatc-python --cargo-profile ci --no-fail-fast
    cargo test --workspace --exclude hlatc-python --doc --profile ci
else
    cargo test --workspace --exclude hlatc-python --profile ci
fi

# Adding an op is checked by the compiler: a made-up op in a scratch copy
# of the compiler must fail to compile in every place that handles ops
# (printer, parser, proto writer and reader, shape rule, backward rule, op
# table); the script exits 1 if one of them would let it through. It
# type-checks on one core (about 30 s from a clean clone), beside the
# wheel's build and the type checks below, which leave the other core
# idle for most of their time.
add_op_log="$TMPDIR/add-op-check.log"
tools/add_op_check.sh target/add-op-check >"$add_op_log" 2>&1 &
add_op_pid=$!

# The Python package: `pip install ./python` (maturin builds the Rust
# core) into a virtual environment of its own that sees the JAX installed
# above, then its tests against the CLI built above. Built in the `ci`
# profile, in the same target/ as the tests: the hlatc crates it links are
# the ones just built, and only pyo3 and the extension itself compile. A
# user's `pip install ./python` builds the same code in the release profile.
python3 -m venv --system-site-packages .cache/python-venv
MATURIN_PEP517_ARGS="--profile ci" \
    .cache/python-venv/bin/python -m pip install --quiet --disable-pip-version-check "./python[test]"
# The types: the native module's stubs against the module built
# (stubtest: every name, parameter and default), and a user's typed code
# over the public API under `mypy --strict` (the `test` extra pins mypy).
.cache/python-venv/bin/python -m mypy.stubtest hlatc._hlatc \
    --mypy-config-file python/pyproject.toml
.cache/python-venv/bin/python -m mypy --strict --config-file python/pyproject.toml \
    python/tests/typed_usage.py
add_op_status=0
wait "$add_op_pid" || add_op_status=$?
cat "$add_op_log"
if [ "$add_op_status" -ne 0 ]; then
    echo "error: tools/add_op_check.sh failed (exit $add_op_status)" >&2
    exit "$add_op_status"
fi
# On every core (pytest-xdist, the `test` extra): a module's tests that
# share what is costly to make, or start processes of their own, are one
# group each (`xdist_group`), run on one worker.
HLATC_BIN="$PWD/target/ci/hlatc" .cache/python-venv/bin/python -m pytest -q \
    -n auto --dist loadgroup python/tests

# hlatc.jax on the oldest JAX of its range (python/pyproject.toml's `jax`
# extra): the engine's, launcher's and checkpoint tests under JAX 0.7.0,
# installed beside the newest and put first on the path.
jax_oldest="$PWD/.cache/jax-oldest"
if [ ! -d "$jax_oldest/jax-0.7.0.dist-info" ] || [ ! -d "$jax_oldest/jaxlib-0.7.0.dist-info" ]; then
    rm -rf "$jax_oldest"
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --no-deps --target "$jax_oldest" -r tools/requirements-jax-oldest.txt
fi
PYTHONPATH="$jax_oldest" HLATC_BIN="$PWD/target/ci/hlatc" .cache/python-venv/bin/python -m pytest -q \
    -n auto --dist loadgroup python/tests/test_jax.py python/tests/test_jax_distributed.py \
    python/tests/test_launch_failures.py

# No two files of a crate import each other round a circle.
python3 tools/import_cycles.py --check
