"""`hlatc.Trainer` against JAX running the same HLO on the same devices,
step by step, interleaved in one process: the model of issue 62 (4 layers,
d 256, seq 256, batch 8, `bf16-mixed`), as TP 2 x DP 2 on 4 XLA CPU
devices and on one device.

Each round runs one step of each engine on the same batch, the order
alternating from round to round so that neither always runs on a warmer
cache or a quieter machine; the first round (compiles, first touches) is
left out. Every step's statistics must agree between the engines within
1e-3 relative (the same program and inputs, compiled by two builds of XLA:
the CPU plugin's and jaxlib's, whose fusion choices round differently: 3.5e-5 on the first grad norm, 1.4e-4 on the third
of TP 2 x DP 2; `python/tests/test_jax.py` allows 1e-5 on the loss); the script fails otherwise and
prints the largest difference. That hlatc's losses did not move is
checked against its own earlier runs, to the bit (`hlatc train
--save-state` of either commit, compared by sha256; benches/README.md).

Usage: python benches/trainer_vs_jax.py [ROUNDS] [LAYOUT...]
LAYOUT is tp2dp2 or one (both by default). HLATC_BIN is not needed: the
Python package carries the runtime. JAX needs 4 CPU devices, which the
script asks for before JAX starts.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

import numpy as np

import hlatc
import hlatc.jax

CONFIG = {
    "model_type": "llama",
    "vocab_size": 4096,
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "max_position_embeddings": 256,
}
BATCH, SEQ = 8, 256
LAYOUTS = {"tp2dp2": (2, 2), "one": (1, 1)}


def batch(rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
    tokens = rng.integers(0, CONFIG["vocab_size"], size=(BATCH, SEQ), dtype=np.int32)
    return tokens, np.roll(tokens, -1, axis=1)


def timed(step: Callable[[], Dict[str, float]]) -> Tuple[float, Dict[str, float]]:
    t = time.perf_counter()
    stats = step()
    return time.perf_counter() - t, stats


def compare(layout: str, rounds: int) -> None:
    import jax

    tp, dp = LAYOUTS[layout]
    step = hlatc.compile_step(config=CONFIG, target="cpu", batch_size=BATCH, seq_len=SEQ,
                              tp=tp, dp=dp)
    ours = hlatc.Trainer(step)
    theirs = hlatc.jax.Trainer(step, devices=jax.devices()[: tp * dp])
    rng = np.random.default_rng(0)
    times: Dict[str, List[float]] = {"hlatc": [], "jax": []}
    worst = 0.0
    for r in range(rounds + 1):
        tokens, targets = batch(rng)
        engines = [("hlatc", ours), ("jax", theirs)]
        if r % 2:
            engines.reverse()
        stats = {}
        for name, trainer in engines:
            seconds, stats[name] = timed(lambda t=trainer: t.step(tokens, targets))
            if r > 0:
                times[name].append(seconds)
        a, b = ({k: float(v) for k, v in stats[n].items()} for n in ("hlatc", "jax"))
        rel = max(abs(a[k] - b[k]) / max(abs(b[k]), 1e-30) for k in a)
        worst = max(worst, rel)
        if rel > 1e-3:
            raise SystemExit(f"{layout} step {r + 1}: hlatc {a} against JAX {b}")
        print(f"{layout} step {r + 1}: loss hlatc {a['loss']!r}, JAX {b['loss']!r}", flush=True)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    spread = {k: (min(v) * 1e3, max(v) * 1e3) for k, v in times.items()}
    print(f"{layout}: hlatc.Trainer median {med['hlatc']:.1f} ms "
          f"({spread['hlatc'][0]:.1f}-{spread['hlatc'][1]:.1f}), JAX {med['jax']:.1f} ms "
          f"({spread['jax'][0]:.1f}-{spread['jax'][1]:.1f}): "
          f"{med['hlatc'] / med['jax']:.3f}x JAX's step time over {rounds} rounds; statistics "
          f"within {worst:.1e} relative", flush=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    layouts = sys.argv[2:] or list(LAYOUTS)
    import jax

    jax.config.update("jax_num_cpu_devices", 4)
    for layout in layouts:
        compare(layout, rounds)


if __name__ == "__main__":
    main()
