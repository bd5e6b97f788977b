#!/usr/bin/env bash
# Fetches the official OpenXLA CPU PJRT plugin (PyPI: xla-cpu-pjrt==0.0.1) into
# .cache/xla-cpu-pjrt/, where hlatc's runtime and tests look for it.
# Needs python3 with pip and access to PyPI. Idempotent: does nothing when the
# plugin is already there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.cache/xla-cpu-pjrt"
so="$dest/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
version="0.0.1"
if [[ -f "$so" ]]; then
  echo "xla-cpu-pjrt plugin present: $so"
  exit 0
fi
mkdir -p "$dest/wheel"
echo "downloading xla-cpu-pjrt==$version from PyPI ..."
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  "xla-cpu-pjrt==$version" -d "$dest/wheel"
wheel="$(ls "$dest"/wheel/xla_cpu_pjrt-"$version"-*.whl | head -n1)"
python3 -m zipfile -e "$wheel" "$dest"
if [[ ! -f "$so" ]]; then
  echo "error: $wheel did not contain xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" >&2
  exit 1
fi
rm -rf "$dest/wheel"
echo "xla-cpu-pjrt plugin installed: $so ($(du -h "$so" | cut -f1))"
