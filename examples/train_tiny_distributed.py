"""Trains hlatc's `tiny` model at TP 2 x DP 2 on two processes of two XLA CPU
devices each, JAX running hlatc's step across them (collectives over
gloo), and plots its loss curve.

    pip install './python[jax]'
    python examples/train_tiny_distributed.py [loss.png]

Run directly, it starts itself under the launcher, as

    python -m hlatc.launch --processes 2 --devices-per-process 2 \\
        examples/train_tiny_distributed.py [loss.png]

Every process trains its two ranks on the same global batches and gets the
same statistics; process 0 prints them and draws the plot.
"""

import os
import sys

import hlatc
import hlatc.jax
from train_tiny import batches


def main():
    if "HLATC_NUM_PROCESSES" not in os.environ:
        from hlatc import launch

        return launch.main(["--processes", "2", "--devices-per-process", "2", "--timeout", "600",
                            os.path.abspath(__file__), *sys.argv[1:]])
    hlatc.jax.initialize()
    import jax

    out = sys.argv[1] if len(sys.argv) > 1 else "train_tiny_distributed.png"
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16, tp=2, dp=2,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=100)
    trainer = hlatc.jax.Trainer(step, seed=0)
    me = jax.process_index()
    if me == 0:
        print(f"{step}: ranks {trainer.local_ranks} here, of {jax.device_count()} devices "
              f"on {jax.process_count()} processes")
    stats = []
    for i, (tokens, targets) in enumerate(batches(100)):
        stats.append(trainer.step(tokens, targets))
        if me == 0 and (i % 10 == 0 or i == 99):
            print(f"step {i + 1:3}: loss {stats[-1]['loss']:.4f}", flush=True)
    if me == 0:
        hlatc.plot_metrics({"tiny, TP 2 x DP 2 on 2 JAX processes": stats}, out,
                           title="tiny across processes: loss by step")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
