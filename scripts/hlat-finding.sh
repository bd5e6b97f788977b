#!/usr/bin/env bash
# Reproduces the HLAT finding on XLA CPU and draws the picture in
# docs/src/hlat-finding.png (copy it there from OUT_DIR to update the docs):
# at LR 1e-5 (no weight decay, no clipping) Adam's updates fall below half
# a bf16 ulp of most weights; bf16 weights with round-to-nearest-even stall,
# stochastic rounding and f32 master weights keep learning.
#
#   scripts/hlat-finding.sh [OUT_DIR]     (default build/hlat-finding)
#
# Needs the CPU plugin (scripts/fetch-xla-cpu-plugin.sh). Takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/hlat-finding}
mkdir -p "$out"
cargo build --release --quiet
hlatc=target/release/hlatc
common=(--model tiny --steps 100 --seed 0 --lr-max 1e-5 --lr-min 1e-5 --weight-decay 0 --clip-norm 0)
"$hlatc" train "${common[@]}" --precision bf16-mixed --metrics "$out/bf16-mixed.csv"
"$hlatc" train "${common[@]}" --precision bf16-pure --metrics "$out/bf16-pure-sr.csv"
"$hlatc" train "${common[@]}" --precision bf16-pure --rounding rne --metrics "$out/bf16-pure-rne.csv"
"$hlatc" plot "$out/bf16-mixed.csv" "$out/bf16-pure-sr.csv" "$out/bf16-pure-rne.csv" \
  --label "bf16-mixed (f32 master weights)" \
  --label "bf16-pure, stochastic rounding" \
  --label "bf16-pure, round-to-nearest-even" \
  --title "tiny, LR 1e-5: updates below half a bf16 ulp" \
  --out "$out/hlat-finding.png"
for f in bf16-mixed bf16-pure-sr bf16-pure-rne; do
  awk -F, -v name="$f" 'NR == 2 { first = $2 } END { printf "%-14s loss %s -> %s, drop %.4f\n", name, first, $2, first - $2 }' "$out/$f.csv"
done
