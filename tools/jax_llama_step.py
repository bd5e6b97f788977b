#!/usr/bin/env python3
"""Dump a small Llama training step from JAX as HLO text, with inputs and outputs.

This is the independent reference for hlatc's HLO import and runtime:
the text is parsed by hlatc, run on XLA CPU through PJRT, and its outputs are
compared with the ones JAX computed here for the same inputs.

    python3 tools/jax_llama_step.py --out tests/fixtures/jax            # tiny fixture
    python3 tools/jax_llama_step.py --preset 7b --hlo-only --out DIR    # 7B text for the bench

Needs `pip install jax` (CPU). Safetensors files are written by hand so that no
other package is needed.
"""
import argparse
import json
import os
import struct

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", False)

PRESETS = {
    # vocab, d, layers, heads, kv_heads, ffn, seq, batch
    "tiny": dict(vocab=64, d=32, layers=2, heads=4, kv_heads=2, ffn=48, seq=8, batch=2),
    "7b": dict(vocab=32000, d=4096, layers=32, heads=32, kv_heads=32, ffn=11008, seq=4096, batch=1),
}


def param_shapes(c):
    hd = c["d"] // c["heads"]
    shapes = [("model.embed_tokens.weight", (c["vocab"], c["d"]))]
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        shapes += [
            (p + "input_layernorm.weight", (c["d"],)),
            (p + "self_attn.q_proj.weight", (c["heads"] * hd, c["d"])),
            (p + "self_attn.k_proj.weight", (c["kv_heads"] * hd, c["d"])),
            (p + "self_attn.v_proj.weight", (c["kv_heads"] * hd, c["d"])),
            (p + "self_attn.o_proj.weight", (c["d"], c["heads"] * hd)),
            (p + "post_attention_layernorm.weight", (c["d"],)),
            (p + "mlp.gate_proj.weight", (c["ffn"], c["d"])),
            (p + "mlp.up_proj.weight", (c["ffn"], c["d"])),
            (p + "mlp.down_proj.weight", (c["d"], c["ffn"])),
        ]
    shapes += [("model.norm.weight", (c["d"],)), ("lm_head.weight", (c["vocab"], c["d"]))]
    return shapes


def rms_norm(x, w, eps=1e-5):
    var = jnp.mean(x * x, axis=-1, keepdims=True)
    return x * jax.lax.rsqrt(var + eps) * w


def rope(x, theta=10000.0):
    # x: [B, S, H, hd]
    s, hd = x.shape[1], x.shape[3]
    inv = 1.0 / (theta ** (jnp.arange(0, hd, 2, dtype=jnp.float32) / hd))
    ang = jnp.arange(s, dtype=jnp.float32)[:, None] * inv[None, :]
    cos = jnp.concatenate([jnp.cos(ang)] * 2, axis=-1)[None, :, None, :]
    sin = jnp.concatenate([jnp.sin(ang)] * 2, axis=-1)[None, :, None, :]
    x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
    rot = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos + rot * sin


LAYER_KEYS = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
]


def decoder_layer(c, x, lp, mask):
    """One decoder layer over `x`, with its parameters `lp` by LAYER_KEYS."""
    hd = c["d"] // c["heads"]
    b, s, _ = x.shape
    h = rms_norm(x, lp["input_layernorm.weight"])
    qs = (h @ lp["self_attn.q_proj.weight"].T).reshape(b, s, c["heads"], hd)
    ks = (h @ lp["self_attn.k_proj.weight"].T).reshape(b, s, c["kv_heads"], hd)
    vs = (h @ lp["self_attn.v_proj.weight"].T).reshape(b, s, c["kv_heads"], hd)
    qs, ks = rope(qs), rope(ks)
    rep = c["heads"] // c["kv_heads"]
    ks = jnp.repeat(ks, rep, axis=2)
    vs = jnp.repeat(vs, rep, axis=2)
    scores = jnp.einsum("bqhd,bkhd->bhqk", qs, ks) / jnp.sqrt(jnp.float32(hd))
    scores = jnp.where(mask[None, None], scores, jnp.float32(-1e9))
    probs = jax.nn.softmax(scores, axis=-1)
    att = jnp.einsum("bhqk,bkhd->bqhd", probs, vs).reshape(b, s, c["heads"] * hd)
    x = x + att @ lp["self_attn.o_proj.weight"].T
    h = rms_norm(x, lp["post_attention_layernorm.weight"])
    g = h @ lp["mlp.gate_proj.weight"].T
    u = h @ lp["mlp.up_proj.weight"].T
    return x + (jax.nn.silu(g) * u) @ lp["mlp.down_proj.weight"].T


def forward_loss(c, params, tokens, targets, scan=False, remat=False):
    """The mean next-token loss. `scan` runs the layers as one
    `jax.lax.scan` over their stacked parameters (a while loop in HLO);
    `remat` wraps each layer in `jax.checkpoint`."""
    names = [n for n, _ in param_shapes(c)]
    p = dict(zip(names, params))
    x = p["model.embed_tokens.weight"][tokens]
    s = tokens.shape[1]
    mask = jnp.tril(jnp.ones((s, s), dtype=bool))
    layer = lambda x, lp: decoder_layer(c, x, lp, mask)  # noqa: E731
    if remat:
        layer = jax.checkpoint(layer)
    per_layer = [{k: p[f"model.layers.{i}.{k}"] for k in LAYER_KEYS} for i in range(c["layers"])]
    if scan:
        stacked = {k: jnp.stack([lp[k] for lp in per_layer]) for k in LAYER_KEYS}
        x, _ = jax.lax.scan(lambda x, lp: (layer(x, lp), None), x, stacked)
    else:
        for lp in per_layer:
            x = layer(x, lp)
    x = rms_norm(x, p["model.norm.weight"])
    logits = x @ p["lm_head.weight"].T
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(nll)


def make_step(c, lr=1e-2, b1=0.9, b2=0.95, eps=1e-8, wd=0.1, scan=False, remat=False):
    n = len(param_shapes(c))

    def step(*args):
        params, m, v = list(args[:n]), list(args[n : 2 * n]), list(args[2 * n : 3 * n])
        count, tokens, targets = args[3 * n], args[3 * n + 1], args[3 * n + 2]
        loss, grads = jax.value_and_grad(lambda ps: forward_loss(c, ps, tokens, targets, scan, remat))(params)
        t = count + 1.0
        new_p, new_m, new_v = [], [], []
        for w, g, mi, vi in zip(params, grads, m, v):
            mi = b1 * mi + (1 - b1) * g
            vi = b2 * vi + (1 - b2) * g * g
            mhat = mi / (1 - b1**t)
            vhat = vi / (1 - b2**t)
            w = w - lr * (mhat / (jnp.sqrt(vhat) + eps) + wd * w)
            new_p.append(w)
            new_m.append(mi)
            new_v.append(vi)
        return (loss, *new_p, *new_m, *new_v)

    return step


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    dt = {np.float32: "F32", np.int32: "I32"}
    for name, arr in tensors:
        arr = np.asarray(arr, order="C")  # ascontiguousarray would turn 0-d into 1-d
        raw = arr.tobytes()
        header[name] = {"dtype": dt[arr.dtype.type], "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def step_inputs(c):
    """The step's deterministic inputs: parameters, Adam moments, the step
    count, tokens and targets (seed 0)."""
    shapes = param_shapes(c)
    tok_shape = (c["batch"], c["seq"])
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(s) * (1.0 if len(s) == 1 else 0.1)).astype(np.float32) for _, s in shapes]
    params = [p + 1.0 if p.ndim == 1 else p for p in params]
    m = [(rng.standard_normal(s) * 1e-3).astype(np.float32) for _, s in shapes]
    v = [np.abs(rng.standard_normal(s) * 1e-4).astype(np.float32) for _, s in shapes]
    count = np.array(3.0, dtype=np.float32)
    tokens = rng.integers(0, c["vocab"], size=tok_shape).astype(np.int32)
    targets = rng.integers(0, c["vocab"], size=tok_shape).astype(np.int32)
    args = params + m + v + [count, tokens, targets]
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--hlo-only", action="store_true", help="lower with abstract shapes; write only the HLO text")
    a = ap.parse_args()
    c = PRESETS[a.preset]
    os.makedirs(a.out, exist_ok=True)
    shapes = param_shapes(c)
    step = make_step(c)
    tok_shape = (c["batch"], c["seq"])
    if a.hlo_only:
        spec = [jax.ShapeDtypeStruct(s, jnp.float32) for _, s in shapes] * 3
        spec += [jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct(tok_shape, jnp.int32), jax.ShapeDtypeStruct(tok_shape, jnp.int32)]
        text = jax.jit(step).lower(*spec).as_text(dialect="hlo")
        with open(os.path.join(a.out, f"llama_{a.preset}_step.hlo"), "w") as f:
            f.write(text)
        return
    args = step_inputs(c)
    lowered = jax.jit(step).lower(*args)
    text = lowered.as_text(dialect="hlo")
    outs = jax.jit(step)(*args)
    with open(os.path.join(a.out, f"llama_{a.preset}_step.hlo"), "w") as f:
        f.write(text)
    write_safetensors(os.path.join(a.out, f"llama_{a.preset}_step.inputs.safetensors"), [(f"arg{i}", x) for i, x in enumerate(args)])
    write_safetensors(os.path.join(a.out, f"llama_{a.preset}_step.outputs.safetensors"), [(f"out{i}", np.asarray(x)) for i, x in enumerate(outs)])
    print(f"wrote {a.out}: {len(args)} inputs, {len(outs)} outputs, loss {float(outs[0]):.6f}, jax {jax.__version__}")


if __name__ == "__main__":
    main()
