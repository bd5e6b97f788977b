"""One process of the distributed `fit` test (test_jax_distributed.py),
started by `python -m hlatc.launch`: tiny at TP 2 x DP 2 trained by
hlatc.jax.Trainer.fit from a loader of this process's replica only, with
checkpoints.

    fit_worker.py OUT DATA [--steps N] [--crash-at K]

DATA holds corpus.jsonl and tokenizer.json. Checkpoints go to OUT/ckpt.
Every process writes OUT/fit-<process>.json (its metrics and replicas);
process 0 writes OUT/fit.npz, the whole state after the run. With
--crash-at K, every process raises after step K (its checkpoint, if one was
due, saved).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import hlatc  # noqa: E402
import hlatc.jax  # noqa: E402

OPTIONS = dict(model="tiny", target="cpu", batch_size=8, seq_len=16, precision="fp32",
               packed=True, lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=20,
               tp=2, dp=2)


class Crash(Exception):
    pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("data")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--crash-at", type=int, default=None)
    a = p.parse_args()

    hlatc.jax.initialize()
    import jax

    me = jax.process_index()
    step = hlatc.compile_step(**OPTIONS)
    trainer = hlatc.jax.Trainer(step, seed=0)
    loader = trainer.loader(os.path.join(a.data, "corpus.jsonl"),
                            tokenizer=os.path.join(a.data, "tokenizer.json"))

    def on_step(row):
        if row["step"] == a.crash_at:
            raise Crash(f"process {me}: stopping after step {row['step']}")

    metrics = trainer.fit(loader, a.steps, checkpoint_dir=os.path.join(a.out, "ckpt"),
                          checkpoint_every=2, on_step=on_step)
    with open(os.path.join(a.out, f"fit-{me}.json"), "w") as f:
        json.dump({"metrics": metrics, "replicas": loader.owned_replicas,
                   "batch_size": loader.batch_size}, f)
    state = trainer.state()
    if me == 0:
        np.savez(os.path.join(a.out, "fit.npz"), **state)


if __name__ == "__main__":
    main()
