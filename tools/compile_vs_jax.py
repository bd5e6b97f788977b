#!/usr/bin/env python3
"""hlatc's compile of HLAT-7B (and 70B) against JAX lowering the same 7B step.

    python3 tools/compile_vs_jax.py --hlatc target/release/hlatc [--rounds 5]

Each round, interleaved so that both sides see the same machine load:

- JAX traces and lowers tools/jax_llama_step.py's 7B training step (f32,
  batch 1 x 4096, AdamW in the graph) from abstract shapes, and converts it
  to HLO text (`lowered.as_text(dialect="hlo")`): the first point at which
  JAX holds what hlatc writes. A fresh closure each round, so JAX's tracing
  cache never answers;
- `hlatc compile --model hlat-7b --target neuron` runs as a whole process
  (graph, autodiff, optimizer, the neuron pipeline, pre-flight, proto and
  text, sha256, a bundle written and synced), once with `--precision fp32`
  (JAX's step) and once with the default `bf16-mixed`;
- the same for `--model hlat-70b`, for the 70B : 7B ratio;
- `hlat-70b` with `--precision bf16-master` on one device and on 2,048
  ranks (TP 32 x DP 64, sequence parallelism, ZeRO-1, batch 64: the
  layout the memory plan fits), for the compile's growth with the world.

Prints each round and the medians, and the ratios the issue asks for:
JAX's lowering over hlatc's 7B wall time, hlatc's 70B over its 7B, and
the 2,048-rank 70B over the one-device 70B. `--no-jax` times hlatc alone
(no jax needed). Otherwise needs jax (pip install -r tools/requirements.txt).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def jax_lowering_seconds():
    import jax
    import jax.numpy as jnp
    import jax_llama_step as ref

    c = ref.PRESETS["7b"]
    step = ref.make_step(c)
    spec = [jax.ShapeDtypeStruct(s, jnp.float32) for _, s in ref.param_shapes(c)] * 3
    tok = (c["batch"], c["seq"])
    spec += [
        jax.ShapeDtypeStruct((), jnp.float32),
        jax.ShapeDtypeStruct(tok, jnp.int32),
        jax.ShapeDtypeStruct(tok, jnp.int32),
    ]
    t0 = time.perf_counter()
    lowered = jax.jit(step).lower(*spec)
    t1 = time.perf_counter()
    text = lowered.as_text(dialect="hlo")
    t2 = time.perf_counter()
    assert "ENTRY" in text
    return t1 - t0, t2 - t0


def hlatc_seconds(binary, out, *args):
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([binary, "compile", *args, "--target", "neuron", "--out", out], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hlatc", required=True, help="the hlatc binary (a release build)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None, help="where the bundles go (default: a temporary folder, removed)")
    ap.add_argument("--no-jax", action="store_true", help="time hlatc's compiles only")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="hlatc-compile-vs-jax-")
    cases = {
        "hlatc 7B fp32": ["--model", "hlat-7b", "--precision", "fp32"],
        "hlatc 7B bf16-mixed": ["--model", "hlat-7b"],
        "hlatc 70B fp32": ["--model", "hlat-70b", "--precision", "fp32"],
        "hlatc 70B bf16-mixed": ["--model", "hlat-70b"],
        "hlatc 70B bf16-master": ["--model", "hlat-70b", "--precision", "bf16-master"],
        "hlatc 70B bf16-master 2048 ranks": [
            "--model", "hlat-70b", "--precision", "bf16-master", "--tp", "32", "--dp", "64",
            "--batch-size", "64", "--sequence-parallel", "--zero1",
        ],
    }
    jax_cases = [] if a.no_jax else ["jax lower", "jax lower + hlo text"]
    times = {**{k: [] for k in jax_cases}, **{k: [] for k in cases}}
    try:
        if not a.no_jax:
            jax_lowering_seconds()  # imports and JAX's one-time set-up, not counted
        for r in range(a.rounds):
            if not a.no_jax:
                lower, text = jax_lowering_seconds()
                times["jax lower"].append(lower)
                times["jax lower + hlo text"].append(text)
            for name, args in cases.items():
                times[name].append(hlatc_seconds(a.hlatc, os.path.join(work, "bundle"), *args))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms" for k, v in times.items()), flush=True)
    finally:
        if a.out is None:
            shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print("medians: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items()))
    for p in ("fp32", "bf16-mixed"):
        if not a.no_jax:
            jax = med["jax lower + hlo text"]
            print(f"JAX's 7B lowering (to HLO text) / hlatc's 7B compile ({p}): {jax / med['hlatc 7B ' + p]:.1f}x "
                  f"(lowering alone: {med['jax lower'] / med['hlatc 7B ' + p]:.1f}x)")
        print(f"hlatc 70B / 7B ({p}): {med['hlatc 70B ' + p] / med['hlatc 7B ' + p]:.2f}x")
    wide, one = med["hlatc 70B bf16-master 2048 ranks"], med["hlatc 70B bf16-master"]
    print(f"hlatc 70B on 2,048 ranks / on one device (bf16-master): {wide / one:.2f}x")


if __name__ == "__main__":
    main()
