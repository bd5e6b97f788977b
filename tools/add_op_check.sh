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
source "$(dirname "${BASH_SOURCE[0]}")/scratch_check.sh"
scratch="${1:-$(mktemp -d)}"
# A workspace of the compiler crate and its test harness alone.
scratch_workspace "$scratch" compiler filetest
plant_variant "$ws/compiler/src/ir/op/mod.rs" "MadeUp { width: i64 }" "pub enum Op {"
log="$scratch/check.log"
(cd "$ws" && CARGO_TARGET_DIR="$scratch/target" cargo check -p hlatc-compiler \
    --message-format short 2>&1 || true) > "$log"
count_places "$log" compiler \
    "formats/text/printer.rs:text printer" \
    "formats/read_by.rs:text parser and proto reader" \
    "formats/proto/emit.rs:proto writer" \
    "analysis/shape_inference/mod.rs:shape rule" \
    "graph/autodiff/rules/gradient.rs:gradient table (the rule, what it saves)" \
    "ir/op/description.rs:op table (opcode, arity, traits)" \
    "ir/op/mod.rs:operands and called computations"
