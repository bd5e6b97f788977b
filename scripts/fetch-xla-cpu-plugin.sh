#!/usr/bin/env bash
# Fetches the official OpenXLA CPU PJRT plugin (PyPI: xla-cpu-pjrt==0.0.1) into
# .cache/xla-cpu-pjrt/, where hlatc's runtime and tests look for it.
#
# Needs python3 with pip and access to PyPI. Idempotent: an install whose
# files match the sha256 and size the wheel's RECORD lists is kept; anything
# else (an interrupted download, a truncated or edited .so) is fetched again.
# The wheel is unpacked into a temporary folder, checked against its RECORD,
# and only then moved into place, so .cache never holds a half-written plugin.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.cache/xla-cpu-pjrt"
so="$dest/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
version="0.0.1"

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
    echo "xla-cpu-pjrt plugin present and matches its RECORD: $so"
    exit 0
  fi
  echo "xla-cpu-pjrt install in $dest is incomplete or damaged ($problem); fetching it again" >&2
fi

mkdir -p "$root/.cache"
work="$(mktemp -d "$root/.cache/xla-cpu-pjrt.tmp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
echo "downloading xla-cpu-pjrt==$version from PyPI ..."
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  "xla-cpu-pjrt==$version" -d "$work/wheel"
wheel="$(ls "$work"/wheel/xla_cpu_pjrt-"$version"-*.whl | head -n1)"
python3 -m zipfile -e "$wheel" "$work/unpacked"
if [[ ! -f "$work/unpacked/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ]]; then
  echo "error: $wheel did not contain xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" >&2
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
echo "xla-cpu-pjrt plugin installed and checked against its RECORD: $so ($(du -h "$so" | cut -f1))"
