"""Trains hlatc's `tiny` model for 100 steps from Python on XLA CPU with
hlatc's own runtime, and plots its loss curve.

    pip install ./python
    python examples/train_tiny.py [loss.png]

The data is a language to learn: each token is followed by perm[token].
The loss starts at ln(64) = 4.16 and falls below 0.1.
"""

import sys

import numpy as np

import hlatc


def batches(steps, batch=8, seq=16, vocab=64, seed=0):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(vocab)
    for _ in range(steps):
        seqs = np.empty((batch, seq + 1), dtype=np.int32)
        seqs[:, 0] = rng.integers(0, vocab, size=batch)
        for j in range(1, seq + 1):
            seqs[:, j] = perm[seqs[:, j - 1]]
        yield seqs[:, :-1], seqs[:, 1:]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "train_tiny.png"
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=100)
    print(step, f"compiled in {sum(v for k, v in step.summary.items() if k.endswith('_ms')):.1f} ms")
    trainer = hlatc.Trainer(step, seed=0)
    stats = []
    for i, (tokens, targets) in enumerate(batches(100)):
        stats.append(trainer.step(tokens, targets))
        if i % 10 == 0 or i == 99:
            print(f"step {i + 1:3}: loss {stats[-1]['loss']:.4f}")
    hlatc.plot_metrics({"tiny, hlatc runtime": stats}, out, title="tiny: loss by step")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
