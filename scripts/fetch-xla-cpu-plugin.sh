#!/usr/bin/env bash
# Fetches XLA's CPU PJRT plugin into .cache/, where hlatc's runtime and tests
# look for it.
#
#   scripts/fetch-xla-cpu-plugin.sh                 the default: jaxlib 0.11's XLA
#   scripts/fetch-xla-cpu-plugin.sh xla-cpu-pjrt    the older one, kept as an option
#
# The default is `lammps-jax-pjrt-cpu` 0.11.2 (Apache-2.0; "XLA's CPU PJRT
# plugin ... built from the XLA of the jaxlib with the same version", PJRT C
# API 0.115) in .cache/jax-pjrt-cpu/. The older one is OpenXLA's
# `xla-cpu-pjrt` 0.0.1 (2025, PJRT C API 0.81) in .cache/xla-cpu-pjrt/. The
# runtime takes the first it finds in that order, or HLATC_PJRT_PLUGIN;
# docs/src/runtime.md ("Which plugin") says why the default changed: the old
# build computes some multi-threaded steps wrong.
#
# Needs python3 with pip and access to PyPI. Idempotent: an install whose
# files match the sha256 and size the wheel's RECORD lists is kept; anything
# else (an interrupted download, a truncated or edited .so) is fetched again.
# The wheel is unpacked into a temporary folder, checked against its RECORD,
# and only then moved into place, so .cache never holds a half-written plugin.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
which="${1:-jax-pjrt-cpu}"
case "$which" in
  jax-pjrt-cpu)
    package="lammps-jax-pjrt-cpu"; version="0.11.2"
    dest="$root/.cache/jax-pjrt-cpu"
    rel="lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so" ;;
  xla-cpu-pjrt)
    package="xla-cpu-pjrt"; version="0.0.1"
    dest="$root/.cache/xla-cpu-pjrt"
    rel="xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ;;
  *)
    echo "usage: scripts/fetch-xla-cpu-plugin.sh [jax-pjrt-cpu|xla-cpu-pjrt]" >&2
    exit 2 ;;
esac
so="$dest/$rel"

# Checks every file a wheel's RECORD names under $1 against its sha256 and
# size. Prints the first mismatch and fails.
check_record() {
  python3 - "$1" <<'PY'
import base64, csv, glob, hashlib, os, sys
root = sys.argv[1]
records = glob.glob(os.path.join(root, "*.dist-info", "RECORD"))
if len(records) != 1:
    sys.exit(f"no single *.dist-info/RECORD under {root}")
checked = 0
with open(records[0], newline="") as f:
    for row in csv.reader(f):
        if len(row) < 3 or not row[1]:
            continue  # RECORD lists itself without a hash
        path, digest, size = os.path.join(root, row[0]), row[1], row[2]
        algo, _, want = digest.partition("=")
        if not os.path.isfile(path):
            sys.exit(f"{row[0]}: missing")
        if size and os.path.getsize(path) != int(size):
            sys.exit(f"{row[0]}: {os.path.getsize(path)} bytes, RECORD says {size}")
        h = hashlib.new(algo)
        with open(path, "rb") as g:
            for chunk in iter(lambda: g.read(1 << 20), b""):
                h.update(chunk)
        got = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
        if got != want:
            sys.exit(f"{row[0]}: {algo} {got}, RECORD says {want}")
        checked += 1
if checked == 0:
    sys.exit("RECORD lists no files")
PY
}

if [[ -f "$so" ]]; then
  if problem="$(check_record "$dest" 2>&1)"; then
    echo "$package plugin present and matches its RECORD: $so"
    exit 0
  fi
  echo "$package install in $dest is incomplete or damaged ($problem); fetching it again" >&2
fi

mkdir -p "$root/.cache"
work="$(mktemp -d "$root/.cache/$which.tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "downloading $package==$version from PyPI ..."
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  "$package==$version" -d "$work/wheel"
wheel="$(ls "$work"/wheel/"${package//-/_}"-"$version"-*.whl | head -n1)"
python3 -m zipfile -e "$wheel" "$work/unpacked"
if [[ ! -f "$work/unpacked/$rel" ]]; then
  echo "error: $wheel did not contain $rel" >&2
  exit 1
fi
if ! problem="$(check_record "$work/unpacked" 2>&1)"; then
  echo "error: $wheel does not match its own RECORD: $problem" >&2
  exit 1
fi
# Swap the checked install in whole; the old one (if any) goes only after.
old="$work/old"
if [[ -e "$dest" ]]; then mv "$dest" "$old"; fi
mv "$work/unpacked" "$dest"
echo "$package plugin installed and checked against its RECORD: $so ($(du -h "$so" | cut -f1))"
