#!/usr/bin/env bash
# What adding an implementation of attention makes a contributor write:
# copies the tracked tree to a scratch folder, adds a made-up
# implementation (`MadeUp`) to `ImplKind` and to `AttentionKernel`,
# type-checks the models crate, and counts the compile errors by the
# place that must now handle it. Each place that matches over either
# exhaustively fails; one that did not would be missing from the list
# (ARCHITECTURE.md, "Recipe: add a kernel implementation").
#
#   tools/add_kernel_check.sh [SCRATCH_DIR]
#
# Exits 1 unless what the implementation is (`models/src/kernels.rs`: its
# name, summary, argument, how it takes context parallelism, what it
# imports) and how the forward computes it (`models/src/llama.rs`: what it
# reads besides q, k and v, built once for every layer) both fail, and
# nothing else does. The two other places of the recipe are not forced by
# the compiler: its builder in `compiler/src/graph/`, for an
# implementation with a graph of its own, and its place in a target's
# priority (`step/src/kernel_choice.rs`), for one a target takes unasked.
# A kind listed at no point, or listed and not made, fails the test
# `kernels::every_implementation_is_a_points_and_each_is_made`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${1:-$(mktemp -d)}"
ws="$scratch/ws"
rm -rf "$ws"
mkdir -p "$ws"
(cd "$root" && git ls-files -z -- Cargo.toml Cargo.lock compiler filetest models) |
    (cd "$root" && xargs -0 cp --parents -t "$ws")
# A workspace of the models crate and the compiler it builds on (with the
# compiler's test harness, which its manifest names) alone.
cat > "$ws/Cargo.toml" <<'EOF'
[workspace]
members = ["compiler", "filetest", "models"]
resolver = "2"
EOF
sed -n '/^\[workspace.package\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
sed -n '/^\[workspace.dependencies\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
python3 - "$ws/models/src/kernels.rs" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
for head in ("pub enum ImplKind {", "pub enum AttentionKernel {"):
    i = s.index(head)
    j = s.index("\n", i)
    s = s[: j + 1] + "    /// A made-up implementation.\n    MadeUp,\n" + s[j + 1 :]
open(p, "w").write(s)
EOF
log="$scratch/check.log"
(cd "$ws" && CARGO_TARGET_DIR="$scratch/target" cargo check -p hlatc-models \
    --message-format short 2>&1 || true) > "$log"
count() { grep -c "^models/src/$1.*error\[E0004\]" "$log" || true; }
status=0
printf '%-44s %s\n' "place" "errors"
for place in \
    "kernels.rs:what it is (name, summary, argument, forms)" \
    "llama.rs:how the forward computes it"; do
    file="${place%%:*}"
    n="$(count "$file")"
    printf '%-44s %s\n' "${place#*:}" "$n"
    if [ "$n" -eq 0 ]; then status=1; fi
done
others="$( (grep "error\[E0004\]" "$log" || true) | (grep -v -e models/src/kernels.rs \
    -e models/src/llama.rs || true) | wc -l)"
printf '%-44s %s\n' "elsewhere" "$others"
printf '%-44s %s\n' "in all" "$(grep -c 'error\[E0004\]' "$log" || true)"
if [ "$others" -ne 0 ]; then status=1; fi
# Anything but the matches it must fail (a scratch copy that does not
# build for another reason proves nothing).
if grep "error\[" "$log" | grep -qv "E0004"; then
    grep "error\[" "$log" | grep -v "E0004" >&2 || true
    echo "error: the scratch copy fails for another reason than the matches" >&2
    status=1
fi
exit "$status"
