#!/usr/bin/env python3
"""The tiny Llama training step as JAX's --xla_dump_to writes it.

    python3 tools/jax_dump.py --out tests/fixtures/jax

Runs the step of tools/jax_llama_step.py on the same inputs with
XLA_FLAGS=--xla_dump_to set, and copies XLA's `before_optimizations.txt`
of the step, unedited, to OUT/llama_tiny_step.dump.hlo. Unlike
`lowered.as_text()`, a dump carries what current JAX prints: the
stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames),
`stack_frame_id` in metadata, and the SPMD propagation flags. Its inputs
and outputs are llama_tiny_step.{inputs,outputs}.safetensors, which
jax_llama_step.py writes for the same step.
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile

DUMP = tempfile.mkdtemp(prefix="hlatc-jax-dump-")
# Before JAX starts its backend.
os.environ["XLA_FLAGS"] = f"--xla_dump_to={DUMP}"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402, F401

from jax_llama_step import PRESETS, make_step, param_shapes  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    c = PRESETS["tiny"]
    shapes = param_shapes(c)
    step = make_step(c)
    tok_shape = (c["batch"], c["seq"])
    # The same inputs as jax_llama_step.py.
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(s) * (1.0 if len(s) == 1 else 0.1)).astype(np.float32) for _, s in shapes]
    params = [p + 1.0 if p.ndim == 1 else p for p in params]
    m = [(rng.standard_normal(s) * 1e-3).astype(np.float32) for _, s in shapes]
    v = [np.abs(rng.standard_normal(s) * 1e-4).astype(np.float32) for _, s in shapes]
    count = np.array(3.0, dtype=np.float32)
    tokens = rng.integers(0, c["vocab"], size=tok_shape).astype(np.int32)
    targets = rng.integers(0, c["vocab"], size=tok_shape).astype(np.int32)
    args = params + m + v + [count, tokens, targets]
    outs = jax.jit(step)(*args)
    jax.block_until_ready(outs)
    found = sorted(glob.glob(os.path.join(DUMP, "*jit_step*before_optimizations.txt")))
    if len(found) != 1:
        sys.exit(f"expected one dump of the step in {DUMP}, found {found}")
    dest = os.path.join(a.out, "llama_tiny_step.dump.hlo")
    shutil.copyfile(found[0], dest)
    shutil.rmtree(DUMP)
    print(f"wrote {dest} (jax {jax.__version__}), loss {float(outs[0]):.6f}")


if __name__ == "__main__":
    main()
