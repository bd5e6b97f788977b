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


sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402, F401

from jax_llama_step import PRESETS, make_step, step_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    c = PRESETS["tiny"]
    step = make_step(c)
    args = step_inputs(c)
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
