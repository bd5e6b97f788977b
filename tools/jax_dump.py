#!/usr/bin/env python3
"""The tiny Llama training step as JAX's --xla_dump_to writes it.

    python3 tools/jax_dump.py --out tests/fixtures/jax [--variant NAME]

Runs the step of tools/jax_llama_step.py on the same inputs with
XLA_FLAGS=--xla_dump_to set, and copies XLA's `before_optimizations.txt`
of the step, unedited, to OUT/llama_tiny_step[.VARIANT].dump.hlo. Unlike
`lowered.as_text()`, a dump carries what current JAX prints: the
stack-frame tables (FileNames, FunctionNames, FileLocations, StackFrames),
`stack_frame_id` in metadata, and the SPMD propagation flags.

Variants, all computing the same step on the same inputs (so the
unrolled step's llama_tiny_step.{inputs,outputs}.safetensors, which
jax_llama_step.py writes, serve them all):

  unrolled  the layers one after another (the default)
  scan      the layers as one jax.lax.scan over stacked parameters: a
            while loop in HLO
  remat     unrolled, each layer under jax.checkpoint
  sharded   over 8 CPU devices (a 2 x 4 mesh: batch over "data", heads,
            FFN and vocabulary over "model"), before XLA partitions it;
            also copies the program XLA partitions and optimizes it into
            (`after_optimizations.txt`, one device's part, with its
            collectives) to llama_tiny_step.sharded.partitioned.hlo
"""
import argparse
import glob
import os
import shutil
import sys
import tempfile

VARIANTS = ["unrolled", "scan", "remat", "sharded"]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", default="unrolled", choices=VARIANTS)
    return ap.parse_args()


ARGS = parse_args()
DUMP = tempfile.mkdtemp(prefix="hlatc-jax-dump-")
# Before JAX starts its backend.
flags = [f"--xla_dump_to={DUMP}"]
if ARGS.variant == "sharded":
    flags.append("--xla_force_host_platform_device_count=8")
os.environ["XLA_FLAGS"] = " ".join(flags)


sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

from jax_llama_step import PRESETS, make_step, param_shapes, step_inputs  # noqa: E402


def param_spec(name):
    """How a parameter (and its Adam moments) is laid over the mesh."""
    if name.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight", "up_proj.weight")):
        return P("model", None)
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        return P(None, "model")
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return P("model", None)
    return P()


def sharded_jit(c, step):
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    params = [NamedSharding(mesh, param_spec(n)) for n, _ in param_shapes(c)]
    scalar = NamedSharding(mesh, P())
    batch = NamedSharding(mesh, P("data", None))
    ins = params * 3 + [scalar, batch, batch]
    outs = [scalar] + params * 3
    return jax.jit(step, in_shardings=tuple(ins), out_shardings=tuple(outs))


def copy_one(pattern, dest):
    found = sorted(glob.glob(os.path.join(DUMP, pattern)))
    if len(found) != 1:
        sys.exit(f"expected one {pattern} in {DUMP}, found {found}")
    shutil.copyfile(found[0], dest)
    print(f"wrote {dest}")


def main():
    c = PRESETS["tiny"]
    v = ARGS.variant
    step = make_step(c, scan=v == "scan", remat=v == "remat")
    args = step_inputs(c)
    jitted = sharded_jit(c, step) if v == "sharded" else jax.jit(step)
    outs = jitted(*args)
    jax.block_until_ready(outs)
    stem = "llama_tiny_step" + ("" if v == "unrolled" else f".{v}")
    copy_one("*jit_step*before_optimizations.txt", os.path.join(ARGS.out, f"{stem}.dump.hlo"))
    if v == "sharded":
        copy_one("*jit_step*after_optimizations.txt", os.path.join(ARGS.out, f"{stem}.partitioned.hlo"))
    shutil.rmtree(DUMP)
    print(f"jax {jax.__version__}, loss {float(outs[0]):.6f}")


if __name__ == "__main__":
    main()
