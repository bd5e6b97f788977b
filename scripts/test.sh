#!/usr/bin/env bash
# Everything the tests need, then every check: formatting, lints, all tests.
# This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The XLA CPU PJRT plugin (runtime tests run emitted HLO on it).
scripts/fetch-xla-cpu-plugin.sh
# XLA's own HLO parser, through jaxlib, for tests/it/xla_crosscheck.rs.
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -r tools/requirements.txt

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
