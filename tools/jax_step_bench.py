#!/usr/bin/env python3
"""Dump JAX's training step for hlatc's `small` model as HLO text, in f32 and
in bf16-mixed, for the step-time comparison (`benches/step_runtime.rs`,
group `step_vs_jax`): the bench runs these modules and hlatc's own step on
the same PJRT plugin and reports both.

    .cache/python-venv/bin/python tools/jax_step_bench.py --out benches/data

writes `jax_small_step_fp32.hlo` and `jax_small_step_bf16_mixed.hlo`.

The step is the one hlatc builds with its default optimizer (HLAT's AdamW,
`step/src/optimizer.rs`): the model's mean next-token loss and its
gradients, the global gradient norm and clip at 1.0, warmup-then-cosine
learning rate from an s32 step count, AdamW with bias correction and
decoupled weight decay 0.1 on every parameter. It returns the loss, the
gradient norm, the learning rate, the new parameters, both moments and the
new step count; parameters, moments and the count are donated (the HLO
aliases them to their outputs), as hlatc's step aliases its state.

The model is `tools/jax_reference.py`'s, which the parity tests hold against
hlatc's: `Fp32` for `fp32`, and `Bf16Mixed` for `bf16-mixed` (f32 weights,
moments and optimizer; bf16 dot operands with f32 accumulation, forward and
backward; the ops between dots in bf16; norms, softmax, residual stream and
loss in f32; see docs/src/precision.md). q/k/v and gate/up are separate
dots, as Hugging Face and a JAX user write them (hlatc stores them fused).

The text is deterministic for a given jax (0.10.2 in `.cache/python-venv`):
the shapes are abstract, nothing random is drawn, and the location metadata
(which names this file's path and lines) is left out.
"""
import argparse
import os
import re

import jax
import jax.numpy as jnp
import numpy as np

from jax_reference import POLICIES, loss_fn, names_and_shapes

jax.config.update("jax_enable_x64", False)

# hlatc's `ModelConfig::small()` (models/src/config.rs) at batch 1 x 512.
SMALL = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_attention_heads=8,
             num_key_value_heads=4, num_hidden_layers=4, rms_norm_eps=1e-5, rope_theta=10000.0,
             tie_word_embeddings=False, max_position_embeddings=512)
BATCH, SEQ = 1, 512

# hlatc's `AdamWConfig::default()` (step/src/optimizer.rs).
ADAMW = dict(beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, clip_norm=1.0, max_lr=3e-4,
             min_lr=3e-5, warmup_steps=2000, total_steps=100_000)
CLIP_EPSILON = 1e-6


def schedule(t, o):
    """Linear warmup to max_lr, then cosine decay to min_lr (f32 `t`)."""
    warm = o["max_lr"] * (t / max(o["warmup_steps"], 1))
    span = max(o["total_steps"] - o["warmup_steps"], 1)
    progress = jnp.clip((t - o["warmup_steps"]) / span, 0.0, 1.0)
    decayed = o["min_lr"] + 0.5 * (o["max_lr"] - o["min_lr"]) * (jnp.cos(jnp.pi * progress) + 1.0)
    return jnp.where(t <= o["warmup_steps"], warm, decayed)


def make_step(c, pol, o=ADAMW):
    names = [n for n, _ in names_and_shapes(c)]
    n = len(names)

    def step(*args):
        params, m, v = args[:n], args[n:2 * n], args[2 * n:3 * n]
        count, tokens, targets = args[3 * n], args[3 * n + 1], args[3 * n + 2]
        loss, grads = jax.value_and_grad(
            lambda ps: loss_fn(c, dict(zip(names, ps)), tokens, targets, pol))(list(params))
        next_count = count + 1
        t = next_count.astype(jnp.float32)
        lr = schedule(t, o)
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in grads))
        scale = jnp.minimum(o["clip_norm"] / (norm + CLIP_EPSILON), 1.0)
        bc1 = 1.0 - o["beta1"] ** t
        bc2 = 1.0 - o["beta2"] ** t
        new_p, new_m, new_v = [], [], []
        for w, g, mi, vi in zip(params, grads, m, v):
            g = g * scale
            mi = o["beta1"] * mi + (1.0 - o["beta1"]) * g
            vi = o["beta2"] * vi + (1.0 - o["beta2"]) * (g * g)
            upd = (mi / bc1) / (jnp.sqrt(vi / bc2) + o["eps"]) + o["weight_decay"] * w
            new_p.append(w - lr * upd)
            new_m.append(mi)
            new_v.append(vi)
        return (loss, norm, lr, *new_p, *new_m, *new_v, next_count)

    return step, n


def step_hlo(c, pol):
    step, n = make_step(c, pol)
    shapes = [s for _, s in names_and_shapes(c)]
    spec = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes] * 3
    tok = (BATCH, SEQ)
    spec += [jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct(tok, jnp.int32),
             jax.ShapeDtypeStruct(tok, jnp.int32)]
    donated = tuple(range(3 * n + 1))
    text = jax.jit(step, donate_argnums=donated).lower(*spec).as_text(dialect="hlo")
    # Location metadata names this file's absolute path and line numbers;
    # the computation is the same without it.
    return re.sub(r", metadata=\{[^}]*\}", "", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    np.seterr(all="raise")
    for name, pol in POLICIES.items():
        path = os.path.join(a.out, f"jax_small_step_{name.replace('-', '_')}.hlo")
        with open(path, "w") as f:
            f.write(step_hlo(SMALL, pol))
        print(f"wrote {path} (jax {jax.__version__})")


if __name__ == "__main__":
    main()
