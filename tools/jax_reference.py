#!/usr/bin/env python3
"""Independent JAX implementation of hlatc's Llama model, for parity tests.

For each configuration it writes, under OUT/NAME/:
  config.json                 Hugging Face LlamaConfig fields
  weights.safetensors         parameters by Hugging Face name ([out, in])
  batch.safetensors           tokens, targets (int32 [batch, seq])
  reference.safetensors       loss and grad.<name> for every parameter (f32)

    python3 tools/jax_reference.py --out tests/fixtures/parity

The model is written from the Llama definition (pre-norm RMSNorm, rotary
embeddings with the rotate-half convention, causal attention with GQA by
repeating KV heads, SwiGLU, final norm, LM head tied or not, mean
cross-entropy over all tokens), not from hlatc's code.
"""
import argparse
import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from jax_llama_step import write_safetensors

CONFIGS = {
    # hlatc's `tiny` preset: GQA 4 query heads over 2 KV heads, untied.
    "tiny": dict(vocab_size=64, hidden_size=32, intermediate_size=48, num_attention_heads=4,
                 num_key_value_heads=2, num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                 tie_word_embeddings=False, max_position_embeddings=16),
    # Deeper GQA: 8 query heads share 2 KV heads (ratio 4), other theta/eps.
    "gqa": dict(vocab_size=48, hidden_size=64, intermediate_size=80, num_attention_heads=8,
                num_key_value_heads=2, num_hidden_layers=3, rms_norm_eps=1e-6, rope_theta=500000.0,
                tie_word_embeddings=False, max_position_embeddings=16),
    # Tied embeddings (LM head = embedding), multi-head attention.
    "tied": dict(vocab_size=40, hidden_size=24, intermediate_size=40, num_attention_heads=3,
                 num_key_value_heads=3, num_hidden_layers=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                 tie_word_embeddings=True, max_position_embeddings=16),
}
BATCH, SEQ = 2, 8


def names_and_shapes(c):
    d, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = d // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    out = [("model.embed_tokens.weight", (v, d))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)), (p + "self_attn.q_proj.weight", (q, d)),
                (p + "self_attn.k_proj.weight", (kv, d)), (p + "self_attn.v_proj.weight", (kv, d)),
                (p + "self_attn.o_proj.weight", (d, q)), (p + "post_attention_layernorm.weight", (d,)),
                (p + "mlp.gate_proj.weight", (f, d)), (p + "mlp.up_proj.weight", (f, d)),
                (p + "mlp.down_proj.weight", (d, f))]
    out.append(("model.norm.weight", (d,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (v, d)))
    return out


def loss_fn(c, p, tokens, targets):
    d = c["hidden_size"]
    h_q, h_kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // h_q
    b, s = tokens.shape
    eps = c["rms_norm_eps"]

    def norm(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w

    inv = 1.0 / (c["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    cos = jnp.asarray(np.cos(ang), jnp.float32)[None, :, None, :]
    sin = jnp.asarray(np.sin(ang), jnp.float32)[None, :, None, :]

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin

    causal = jnp.tril(jnp.ones((s, s), bool))
    x = p["model.embed_tokens.weight"][tokens]
    for i in range(c["num_hidden_layers"]):
        L = f"model.layers.{i}."
        h = norm(x, p[L + "input_layernorm.weight"])
        q = rope((h @ p[L + "self_attn.q_proj.weight"].T).reshape(b, s, h_q, hd))
        k = rope((h @ p[L + "self_attn.k_proj.weight"].T).reshape(b, s, h_kv, hd))
        v = (h @ p[L + "self_attn.v_proj.weight"].T).reshape(b, s, h_kv, hd)
        k = jnp.repeat(k, h_q // h_kv, axis=2)
        v = jnp.repeat(v, h_q // h_kv, axis=2)
        sc = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd)
        sc = jnp.where(causal[None, None], sc, -1e9)
        att = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(sc, axis=-1), v).reshape(b, s, d)
        x = x + att @ p[L + "self_attn.o_proj.weight"].T
        h = norm(x, p[L + "post_attention_layernorm.weight"])
        g = h @ p[L + "mlp.gate_proj.weight"].T
        u = h @ p[L + "mlp.up_proj.weight"].T
        x = x + (jax.nn.silu(g) * u) @ p[L + "mlp.down_proj.weight"].T
    x = norm(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if c["tie_word_embeddings"] else p["lm_head.weight"]
    logits = x @ head.T
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, targets[..., None], axis=-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    jax.config.update("jax_default_matmul_precision", "highest")
    for name, c in CONFIGS.items():
        rng = np.random.default_rng(sum(map(ord, name)))
        shapes = names_and_shapes(c)
        params = {}
        for n, shp in shapes:
            if len(shp) == 1:
                params[n] = (1.0 + 0.1 * rng.standard_normal(shp)).astype(np.float32)
            else:
                params[n] = (0.1 * rng.standard_normal(shp)).astype(np.float32)
        tokens = rng.integers(0, c["vocab_size"], (BATCH, SEQ)).astype(np.int32)
        targets = rng.integers(0, c["vocab_size"], (BATCH, SEQ)).astype(np.int32)
        loss, grads = jax.value_and_grad(lambda p: loss_fn(c, p, tokens, targets))(params)
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], **c}, f, indent=2)
            f.write("\n")
        write_safetensors(os.path.join(d, "weights.safetensors"), [(n, params[n]) for n, _ in shapes])
        write_safetensors(os.path.join(d, "batch.safetensors"), [("tokens", tokens), ("targets", targets)])
        ref = [("loss", np.asarray(loss, np.float32))] + [("grad." + n, np.asarray(grads[n])) for n, _ in shapes]
        write_safetensors(os.path.join(d, "reference.safetensors"), ref)
        print(f"{name}: loss {float(loss):.6f}, {len(shapes)} parameters")


if __name__ == "__main__":
    main()
