"""`hlatc.Trainer` against JAX running the same HLO, step by step,
interleaved in one process: the model of issue 62 (4 layers, d 256, seq
256, batch 8, `bf16-mixed`), as TP 2 x DP 2 on 4 XLA CPU devices and on one
device.

Three engines run each round:
- `hlatc`: `hlatc.Trainer`, on the XLA CPU PJRT plugin hlatc's runtime
  loads (`xla-cpu-pjrt` 0.0.1);
- `jax-plugin`: `hlatc.jax.Trainer` on that same plugin, which JAX loads as
  a PJRT plugin: the same XLA build and devices, so what differs is the
  engine around the program;
- `jax`: `hlatc.jax.Trainer` on jaxlib's own CPU client, another build of
  XLA.

Each round runs one step of each engine on the same batch, the order
rotating from round to round so that none always runs on a warmer cache or
a quieter machine; the first round (compiles, first touches) is left out.
Every step's statistics must agree between the engines within 1e-3
relative (the same program and inputs; jaxlib's XLA fuses and rounds
differently: 3.5e-5 on the first grad norm, 1.4e-4 on the third of TP 2 x
DP 2; `python/tests/test_jax.py` allows 1e-5 on the loss); the script
fails otherwise and prints the largest difference. That hlatc's losses did
not move is checked against its own earlier runs, to the bit (`hlatc train
--save-state` of either commit, compared by sha256; benches/README.md).

Usage: python benches/trainer_vs_jax.py [ROUNDS] [LAYOUT...]
LAYOUT is tp2dp2 or one (both by default). HLATC_BIN is not needed: the
Python package carries the runtime. The plugin is found as hlatc's runtime
finds it ($HLATC_PJRT_PLUGIN, else the repository's .cache/). JAX needs 4
CPU devices on each client, which the script asks for before JAX starts.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Dict, List, Tuple

import os

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
DEVICES = 4
PLUGIN = "xlacpu"
# The plugin hlatc's runtime takes (runtime/src/plugin.rs's order): the
# default, then the older one, unless HLATC_PJRT_PLUGIN names another.
_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PLUGIN_FILE = os.environ.get("HLATC_PJRT_PLUGIN") or next(
    (p for p in (os.path.join(_ROOT, ".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"),
                 os.path.join(_ROOT, ".cache/xla-cpu-pjrt/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"))
     if os.path.exists(p)),
    os.path.join(_ROOT, ".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"))


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
    world = tp * dp
    step = hlatc.compile_step(config=CONFIG, target="cpu", batch_size=BATCH, seq_len=SEQ,
                              tp=tp, dp=dp)
    engines = {
        "hlatc": hlatc.Trainer(step),
        "jax-plugin": hlatc.jax.Trainer(step, devices=jax.devices(PLUGIN)[:world]),
        "jax": hlatc.jax.Trainer(step, devices=jax.devices("cpu")[:world]),
    }
    names = list(engines)
    rng = np.random.default_rng(0)
    times: Dict[str, List[float]] = {name: [] for name in names}
    worst = 0.0
    for r in range(rounds + 1):
        tokens, targets = batch(rng)
        order = names[r % len(names):] + names[:r % len(names)]
        stats = {}
        for name in order:
            seconds, stats[name] = timed(lambda t=engines[name]: t.step(tokens, targets))
            if r > 0:
                times[name].append(seconds)
        ours = {k: float(v) for k, v in stats["hlatc"].items()}
        for name in names[1:]:
            theirs = {k: float(v) for k, v in stats[name].items()}
            rel = max(abs(ours[k] - theirs[k]) / max(abs(theirs[k]), 1e-30) for k in ours)
            worst = max(worst, rel)
            if rel > 1e-3:
                raise SystemExit(f"{layout} step {r + 1}: hlatc {ours} against {name} {theirs}")
        print(f"{layout} step {r + 1}: loss " + ", ".join(
            f"{name} {float(stats[name]['loss'])!r}" for name in names), flush=True)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    for name in names:
        v = times[name]
        print(f"{layout}: {name} median {med[name]:.1f} ms "
              f"({min(v) * 1e3:.1f}-{max(v) * 1e3:.1f})", flush=True)
    print(f"{layout}: hlatc.Trainer {med['hlatc'] / med['jax-plugin']:.3f}x JAX's step time on "
          f"the same plugin, {med['hlatc'] / med['jax']:.3f}x on jaxlib's CPU client, over "
          f"{rounds} rounds; statistics within {worst:.1e} relative", flush=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    layouts = sys.argv[2:] or list(LAYOUTS)
    import jax

    from jax._src import xla_bridge

    jax.config.update("jax_num_cpu_devices", DEVICES)
    if not os.path.isfile(PLUGIN_FILE):
        raise SystemExit(f"no CPU plugin at {PLUGIN_FILE}: run scripts/fetch-xla-cpu-plugin.sh "
                         "or set HLATC_PJRT_PLUGIN")
    # `jax._src` is JAX's private API: the public way to load a PJRT plugin
    # is a `jax_plugins` package, which the plugin's wheel does not carry.
    xla_bridge.register_plugin(PLUGIN, library_path=PLUGIN_FILE,
                               options={"cpu_device_count": DEVICES})
    for layout in layouts:
        compare(layout, rounds)


if __name__ == "__main__":
    main()
