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

# The XLA CPU PJRT plugin (runtime tests run emitted HLO on it), how the
# build lints and how the tests run: scripts/test-env.sh, shared with the
# fast tier (scripts/test-fast.sh).
source scripts/test-env.sh
hlatc_test_plugin
scripts/fetch-xla-cpu-plugin.sh jax-pjrt-cpu
# The memory plan's tests measure it against the older one's buffer
# assignment, whichever plugin the rest run on (train/tests/it/memory_plan.rs).
scripts/fetch-xla-cpu-plugin.sh xla-cpu-pjrt
export HLATC_PJRT_PLUGIN="${HLATC_PJRT_PLUGIN:-$PWD/$plugin_rel}"
# XLA's own HLO parser, through jaxlib, for tests/it/xla_crosscheck.rs.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -r tools/requirements.txt

cargo fmt --all -- --check

hlatc_test_build_env
# hlatc-python, the Python package's native module, is a workspace member
# built (and so linted) by maturin below, with this same environment.
cargo build --workspace --exclude hlatc-python --all-targets --profile ci

hlatc_test_run_env
# Every test: the slow ones too (tests/it/support.rs, skip_slow_tests).
export RUN_SLOW_TESTS=1
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
# Adding an implementation of attention is checked the same way
# (tools/add_kernel_check.sh: what it is and how the forward computes it
# must each fail to compile, and nothing else), after it on the same core.
add_op_log="$TMPDIR/add-op-check.log"
(tools/add_op_check.sh target/add-op-check && tools/add_kernel_check.sh target/add-kernel-check) \
    >"$add_op_log" 2>&1 &
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
    echo "error: tools/add_op_check.sh or tools/add_kernel_check.sh failed (exit $add_op_status)" >&2
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

# No two files of a crate import each other round a circle: the check's
# own tests first (it sees a planted circle behind every literal and
# comment form that once hid one), then the check.
python3 tools/test_import_cycles.py
python3 tools/import_cycles.py --check
