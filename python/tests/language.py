"""A language for the tests to learn: each token is followed by perm[token]."""

import numpy as np


def batches(steps, batch=8, seq=16, vocab=64, seed=0, dtype=np.int32):
    """`steps` batches of (tokens, targets), `[batch, seq]` each."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(vocab)
    for _ in range(steps):
        seqs = np.empty((batch, seq + 1), dtype=dtype)
        seqs[:, 0] = rng.integers(0, vocab, size=batch)
        for j in range(1, seq + 1):
            seqs[:, j] = perm[seqs[:, j - 1]]
        yield seqs[:, :-1], seqs[:, 1:]
