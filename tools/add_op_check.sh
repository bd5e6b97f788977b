#!/usr/bin/env bash
# What adding an op to the IR makes a contributor write: copies the tracked
# tree to a scratch folder, adds a made-up op with a hand-written attribute
# (`MadeUp { width: i64 }`) to `Op`, type-checks the compiler crate, and
# counts the compile errors by the place that must now handle the op. Each
# place that matches over `Op` exhaustively fails; one that did not would
# be missing from the list.
#
#   tools/add_op_check.sh [SCRATCH_DIR]
#
# Exits 1 unless the printer, the readers, the proto writer, the shape
# rule, the gradient table (which gives each op its backward rule) and the
# op table all fail.
# The text parser and the proto reader dispatch on the opcode's spelling,
# alike; how they read every op is stated once (`formats/read_by.rs`),
# which is what fails for them, and each checks what it read against that
# statement in debug builds. A row without a parser fixture fails the test
# `round_trip::every_opcode_is_covered_by_the_fixtures`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="${1:-$(mktemp -d)}"
ws="$scratch/ws"
rm -rf "$ws"
mkdir -p "$ws"
(cd "$root" && git ls-files -z -- Cargo.toml Cargo.lock compiler filetest) |
    (cd "$root" && xargs -0 cp --parents -t "$ws")
# A workspace of the compiler crate and its test harness alone.
cat > "$ws/Cargo.toml" <<'EOF'
[workspace]
members = ["compiler", "filetest"]
resolver = "2"
EOF
sed -n '/^\[workspace.package\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
sed -n '/^\[workspace.dependencies\]/,/^\[/p' "$root/Cargo.toml" | sed '$d' >> "$ws/Cargo.toml"
python3 - "$ws/compiler/src/ir/op/mod.rs" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read()
i = s.index("pub enum Op {")
j = s.index("\n", i)
s = s[: j + 1] + "    /// A made-up op with a hand-written attribute.\n    MadeUp { width: i64 },\n" + s[j + 1 :]
open(p, "w").write(s)
EOF
log="$scratch/check.log"
(cd "$ws" && CARGO_TARGET_DIR="$scratch/target" cargo check -p hlatc-compiler \
    --message-format short 2>&1 || true) > "$log"
count() { grep -c "^compiler/src/$1.*error\[E0004\]" "$log" || true; }
status=0
printf '%-44s %s\n' "place" "errors"
for place in \
    "formats/text/printer.rs:text printer" \
    "formats/read_by.rs:text parser and proto reader" \
    "formats/proto/emit.rs:proto writer" \
    "analysis/shape_inference/mod.rs:shape rule" \
    "graph/autodiff/rules/gradient.rs:gradient table (the rule, what it saves)" \
    "ir/op/description.rs:op table (opcode, arity, traits)" \
    "ir/op/mod.rs:operands and called computations"; do
    file="${place%%:*}"
    n="$(count "$file")"
    printf '%-44s %s\n' "${place#*:}" "$n"
    if [ "$n" -eq 0 ]; then status=1; fi
done
others="$( (grep "error\[E0004\]" "$log" || true) | (grep -v -e printer.rs -e emit.rs -e read_by.rs \
    -e shape_inference/mod.rs -e rules/gradient.rs -e op/description.rs \
    -e op/mod.rs || true) | wc -l)"
printf '%-44s %s\n' "elsewhere" "$others"
printf '%-44s %s\n' "in all" "$(grep -c 'error\[E0004\]' "$log" || true)"
exit "$status"
