#!/usr/bin/env bash
# The fast tier: what a developer runs while working, in about two minutes
# on a warm build (2-core VM). Formatting, the lints and every Rust test but
# the slow ones (the conformance sweep, the 70B plan, --verify of the 7B
# recipe, the fault and parity runs: tests/it/support.rs,
# skip_slow_tests), with the build, flags and caches of scripts/test.sh,
# so one warms the other.
#
# It downloads nothing and leaves out the Python package (its wheel takes
# minutes to build): run scripts/test.sh, the README's test command and
# CI's, once first, and before you commit.
#
#   scripts/test-fast.sh              every crate's fast tests
#   scripts/test-fast.sh -p hlatc-passes   one crate (any cargo nextest filter)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/test-env.sh
hlatc_test_plugin
export HLATC_PJRT_PLUGIN="${HLATC_PJRT_PLUGIN:-$PWD/$plugin_rel}"
if [ ! -f "$HLATC_PJRT_PLUGIN" ]; then
    echo "error: no XLA CPU plugin at $HLATC_PJRT_PLUGIN: run scripts/test.sh once (it fetches it)" >&2
    exit 1
fi
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "error: the fast tier runs cargo nextest (cargo install cargo-nextest --locked)" >&2
    exit 1
fi
cargo fmt --all -- --check
hlatc_test_build_env
cargo build --workspace --exclude hlatc-python --all-targets --profile ci
hlatc_test_run_env
unset RUN_SLOW_TESTS
if [ "$#" -eq 0 ]; then
    set -- --workspace --exclude hlatc-python
fi
cargo nextest run --cargo-profile ci --no-fail-fast "$@"
