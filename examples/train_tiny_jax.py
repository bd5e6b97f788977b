"""Trains hlatc's `tiny` model for 100 steps with JAX running hlatc's step
(compiled by JAX's XLA for JAX's default device, the state's buffers
donated), and plots its loss curve.

    pip install './python[jax]'
    python examples/train_tiny_jax.py [loss.png]
"""

import sys

import numpy as np

import hlatc
import hlatc.jax
from train_tiny import batches


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "train_tiny_jax.png"
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=100)
    fn = hlatc.jax.load(step)
    print(f"{step} on JAX device {fn.device}")
    state = step.init_state(seed=0)
    stats = []
    for i, (tokens, targets) in enumerate(batches(100)):
        outputs = fn({**state, "tokens": tokens, "targets": targets})
        state = {name: outputs[name] for name in state}
        stats.append({k: float(outputs[k]) for k in ("loss", "grad_norm", "learning_rate")})
        if i % 10 == 0 or i == 99:
            print(f"step {i + 1:3}: loss {stats[-1]['loss']:.4f}")
    hlatc.plot_metrics({"tiny, JAX": stats}, out, title="tiny on JAX: loss by step")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
