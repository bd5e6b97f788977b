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
source "$(dirname "${BASH_SOURCE[0]}")/scratch_check.sh"
scratch="${1:-$(mktemp -d)}"
# A workspace of the models crate and the compiler it builds on (with the
# compiler's test harness, which its manifest names) alone.
scratch_workspace "$scratch" compiler filetest models
plant_variant "$ws/models/src/kernels.rs" "MadeUp" "pub enum ImplKind {" "pub enum AttentionKernel {"
log="$scratch/check.log"
(cd "$ws" && CARGO_TARGET_DIR="$scratch/target" cargo check -p hlatc-models \
    --message-format short 2>&1 || true) > "$log"
count_places "$log" models \
    "kernels.rs:what it is (name, summary, argument, forms)" \
    "llama.rs:how the forward computes it"
