"""One process of the distributed tests (test_jax_distributed.py), started by
`python -m hlatc.launch`: trains tiny at TP 2 x DP 2 with hlatc.jax.Trainer
and writes what the test compares.

    worker.py OUT [--forms replicas,partitions,partitions+input] [--steps N] [--save-at K]
              [--die-at I] [--resume-from DIR] [--timed-steps M]
              [--layout pp=2,tp=2 --grad-accum M]

Every process writes OUT/stats-<process>.json (its statistics per step);
process 0 writes OUT/<form>.npz: the whole state after --save-at steps
(`saved/NAME`), after the last step (`final/NAME`) and its Hugging Face
parameters (`hf/NAME`). With --die-at I, process 1 kills itself (SIGKILL)
before step I+1 (0-based I). --layout and --grad-accum replace LAYOUT (a
pipeline-parallel step: `pp=2,tp=2` and 2 micro-batches).
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
from language import batches  # noqa: E402

# The layout and recipe the tests compare with hlatc.Trainer.
OPTIONS = dict(model="tiny", target="cpu", batch_size=8, seq_len=16, precision="fp32",
               lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=20)
LAYOUT = dict(tp=2, dp=2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--forms", default="replicas")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--save-at", type=int, default=None)
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--die-at", type=int, default=None)
    p.add_argument("--resume-from", default=None)
    p.add_argument("--timed-steps", type=int, default=0)
    p.add_argument("--layout", default=None)
    p.add_argument("--grad-accum", type=int, default=1)
    a = p.parse_args()
    layout = LAYOUT
    if a.layout:
        layout = {k: int(v) for k, v in (kv.split("=") for kv in a.layout.split(","))}

    hlatc.jax.initialize()
    import jax

    me = jax.process_index()
    data = list(batches(a.steps + a.timed_steps))
    for form in a.forms.split(","):
        # FORM or FORM+input: the SPMD form, and the rank read from an input.
        spmd = {} if form == "replicas" else {"spmd": form.split("+")[0]}
        if form.endswith("+input"):
            spmd["rank_source"] = "input"
        step = hlatc.compile_step(**OPTIONS, **layout, **spmd, grad_accum=a.grad_accum)
        trainer = hlatc.jax.Trainer(step, seed=0)
        first = 0
        if a.resume_from:
            trainer.load(a.resume_from)
            first = trainer.steps_done
        stats, saved = [], {}
        for i in range(first, a.steps):
            if a.die_at == i and me == 1:
                print(f"process {me}: killing myself before step {i + 1}", flush=True)
                with open(os.path.join(a.out, "killed-at"), "w") as f:
                    f.write(repr(time.time()))
                os.kill(os.getpid(), signal.SIGKILL)
            before = trainer._state[trainer.local_ranks[0]]
            stats.append(trainer.step(*data[i]))
            # The carried state's buffers were donated to the step.
            donated = all(v.is_deleted() for v in before.values())
            if a.save_at == i + 1:
                saved = trainer.state()
                if a.checkpoint:
                    trainer.save(a.checkpoint)
        final = trainer.state()
        hf = trainer.hugging_face_params()
        # Timed after the state is taken, so the compared run is untouched;
        # the first step (compiles nothing more, but warms caches) untimed.
        seconds = None
        if a.timed_steps:
            trainer.step(*data[a.steps])
            start = time.perf_counter()
            for i in range(a.steps + 1, a.steps + a.timed_steps):
                trainer.step(*data[i])
            seconds = time.perf_counter() - start
        with open(os.path.join(a.out, f"stats-{form}-{me}.json"), "w") as f:
            json.dump({"stats": stats, "steps_done": trainer.steps_done, "donated": donated,
                       "local_ranks": trainer.local_ranks, "timed_steps": a.timed_steps - 1,
                       "seconds": seconds}, f)
        if me == 0:
            arrays = {f"final/{k}": v for k, v in final.items()}
            arrays.update({f"saved/{k}": v for k, v in saved.items()})
            arrays.update({f"hf/{k}": v for k, v in hf.items()})
            np.savez(os.path.join(a.out, f"{form}.npz"), **arrays)


if __name__ == "__main__":
    main()
