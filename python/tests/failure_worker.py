"""One process of the failure tests (test_launch_failures.py): trains tiny
at DP 2 (one device a process) with hlatc.jax.Trainer, and stops badly
when told to.

    failure_worker.py OUT MODE [--steps N] [--at K] [--victim P]

MODE: `raise` (process P raises ValueError before step K+1), `exit0`
(P calls sys.exit(0) there), `kill` (P kills itself with SIGKILL there),
`train` (no failure). Every process writes OUT/pid-<process> once joined,
OUT/step-<process> after each step, and, if it catches
hlatc.jax.PeerLostError, OUT/lost-<process>.json (its message and
`process`) and exits 0 (`--catch`).
"""

import argparse
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import hlatc  # noqa: E402
import hlatc.jax  # noqa: E402

OPTIONS = dict(model="tiny", target="cpu", batch_size=2, seq_len=8, precision="fp32",
               lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=1000)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("mode", choices=["raise", "exit0", "kill", "train"])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--at", type=int, default=2)
    p.add_argument("--victim", type=int, default=1)
    p.add_argument("--catch", action="store_true")
    a = p.parse_args()

    hlatc.jax.initialize()
    import jax

    me = jax.process_index()
    with open(os.path.join(a.out, f"pid-{me}"), "w") as f:
        f.write(str(os.getpid()))
    trainer = hlatc.jax.Trainer(hlatc.compile_step(**OPTIONS, dp=2), seed=0)
    rng = np.random.default_rng(0)
    try:
        for i in range(a.steps):
            if i == a.at and me == a.victim:
                if a.mode == "raise":
                    raise ValueError(f"boom in process {me} before step {i + 1}")
                if a.mode == "exit0":
                    sys.exit(0)
                if a.mode == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
            tokens = rng.integers(0, 64, size=(2, 8))
            trainer.step(tokens, np.roll(tokens, -1, axis=1))
            with open(os.path.join(a.out, f"step-{me}"), "w") as f:
                f.write(f"{i + 1} {time.time()!r}")
    except hlatc.jax.PeerLostError as e:
        if not a.catch:
            raise
        with open(os.path.join(a.out, f"lost-{me}.json"), "w") as f:
            json.dump({"message": str(e), "process": e.process, "time": time.time(),
                       "is_hlatc_error": isinstance(e, hlatc.Error)}, f)


if __name__ == "__main__":
    main()
