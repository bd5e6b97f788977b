"""What tensors cost crossing between NumPy and the Rust core: a model
whose embedding is a 64 MiB f32 tensor (16384 x 1024), its whole training
state given back by `Trainer.state()` and taken in by `Trainer.resume()`,
best of N. The state is the parameters and both Adam moments, so three
64 MiB tensors each way dominate it.

Usage: python python/bench/array_crossing.py [N]

Run it against two installs (PYTHONPATH=... for one) to compare them in one
sitting: it uses only the public API.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import hlatc

CONFIG = {
    "model_type": "llama",
    "vocab_size": 16384,
    "hidden_size": 1024,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "tie_word_embeddings": True,
}


def best(n: int, f) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main(n: int) -> None:
    step = hlatc.compile_step(config=CONFIG, target="cpu", precision="fp32", seq_len=8)
    trainer = hlatc.Trainer(step)
    state = trainer.state()
    big = {k: v for k, v in state.items() if v.nbytes >= 64 << 20}
    total = sum(v.nbytes for v in state.values())
    print(f"state: {len(state)} tensors, {total / 2**20:.1f} MiB; "
          f"{len(big)} of 64 MiB: {sorted(big)}")
    out_ms = best(n, trainer.state)
    in_ms = best(n, lambda: trainer.resume(state))
    print(f"Trainer.state():  {out_ms:8.1f} ms  ({total / 2**20 / out_ms * 1e3:7.0f} MiB/s)")
    print(f"Trainer.resume(): {in_ms:8.1f} ms  ({total / 2**20 / in_ms * 1e3:7.0f} MiB/s)")
    again = trainer.state()
    assert all(np.array_equal(again[k], v) for k, v in state.items())


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
