#!/usr/bin/env python3
"""An attention kernel brought from JAX: the `imported` fixture of issue 70.

    python3 tools/jax_blocked_attention.py --out tests/fixtures/kernels

Writes OUT/blocked_attention_fwd.hlo and OUT/blocked_attention_bwd.hlo:
the HLO text JAX lowers (`jax.jit(f).lower(...).as_text(dialect="hlo")`,
JAX as tools/requirements.txt pins it) of causal attention computed a
tile of keys at a time with a running max and sum (the flash algorithm,
written independently of hlatc's own `blocked`), and of its `jax.vjp`,
for the shapes of tiny's step (4 sequences of 16, 4 heads of 8, q, k and
v as [batch, heads, seq, head_dim], f32), and OUT/blocked_attention.json,
the calling convention `--kernel attention=imported:FILE` reads:

- forward (q, k, v) -> output;
- backward (q, k, v, d_output) -> (d_q, d_k, d_v): the vjp recomputes the
  forward from q, k and v, so the forward keeps no residual.
"""
import argparse
import json
import os

import jax
import jax.numpy as jnp

BATCH, HEADS, SEQ, HEAD_DIM, TILE = 4, 4, 16, 8, 4


def attention(q, k, v):
    """Causal attention over [B, H, S, D], keys a tile at a time."""
    scale = 1.0 / (HEAD_DIM ** 0.5)
    rows = jnp.arange(SEQ)[:, None]
    m = jnp.full(q.shape[:3], -jnp.inf, q.dtype)
    l = jnp.zeros(q.shape[:3], q.dtype)
    o = jnp.zeros(q.shape, q.dtype)
    for j in range(SEQ // TILE):
        kj = k[:, :, j * TILE:(j + 1) * TILE]
        vj = v[:, :, j * TILE:(j + 1) * TILE]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, kj) * scale
        cols = j * TILE + jnp.arange(TILE)[None, :]
        s = jnp.where(rows >= cols, s, -1e9)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[..., None])
        alpha = jnp.exp(m - m_new)
        l = alpha * l + p.sum(-1)
        o = alpha[..., None] * o + jnp.einsum("bhqk,bhkd->bhqd", p, vj)
        m = m_new
    return o / l[..., None]


def backward(q, k, v, d_output):
    _, vjp = jax.vjp(attention, q, k, v)
    return vjp(d_output)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    x = jax.ShapeDtypeStruct((BATCH, HEADS, SEQ, HEAD_DIM), jnp.float32)
    modules = {
        "blocked_attention_fwd.hlo": jax.jit(attention).lower(x, x, x),
        "blocked_attention_bwd.hlo": jax.jit(backward).lower(x, x, x, x),
    }
    for name, lowered in modules.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
    convention = {
        "point": "attention",
        "layout": "batch,heads,seq,head_dim",
        "masks": ["causal"],
        "forward": {
            "module": "blocked_attention_fwd.hlo",
            "parameters": ["q", "k", "v"],
            "results": ["output"],
        },
        "backward": {
            "module": "blocked_attention_bwd.hlo",
            "parameters": ["q", "k", "v", "d_output"],
            "results": ["d_q", "d_k", "d_v"],
        },
        "source": f"tools/jax_blocked_attention.py, JAX {jax.__version__}",
    }
    with open(os.path.join(out, "blocked_attention.json"), "w") as f:
        json.dump(convention, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
