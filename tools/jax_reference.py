#!/usr/bin/env python3
"""Independent JAX implementation of hlatc's Llama model, for parity tests.

For each configuration it writes, under OUT/NAME/:
  config.json                 Hugging Face LlamaConfig fields
  weights.safetensors         parameters by Hugging Face name ([out, in])
  batch.safetensors           tokens, targets (int32 [batch, seq])
  reference.safetensors       loss and grad.<name> for every parameter (f32)
  reference_bf16_mixed.safetensors
                              the same under hlatc's bf16-mixed policy (class
                              Bf16Mixed): bf16 dots with f32 accumulation, f32
                              norms, softmax, residual stream and loss

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


class Fp32:
    """Every op in f32."""
    name = "fp32"

    @staticmethod
    def lin(x, w):
        return x @ w.T

    @staticmethod
    def bmm(spec, a, b):
        return jnp.einsum(spec, a, b)

    @staticmethod
    def low(x):
        return x

    wide = low
    sigmoid = staticmethod(jax.nn.sigmoid)


def _dot32(spec, a, b):
    # bf16 values widened to f32 multiply exactly; the sum accumulates in f32.
    return jnp.einsum(spec, a.astype(jnp.float32), b.astype(jnp.float32),
                      precision=jax.lax.Precision.HIGHEST)


def _transpose_spec(spec):
    """For 'x,y->z', the specs of dx ('z,y->x') and dy ('x,z->y')."""
    ins, out = spec.split("->")
    a, b = ins.split(",")
    return f"{out},{b}->{a}", f"{a},{out}->{b}"


def _low_dot(spec):
    """A dot whose operands are rounded to bf16 and whose products sum in f32,
    forward and backward (each backward dot rounds its operands too). The
    result is the f32 accumulator; each cotangent comes back in its operand's
    own type (an f32 operand gets the unrounded f32 sum)."""
    da_spec, db_spec = _transpose_spec(spec)
    bf = jnp.bfloat16

    @jax.custom_vjp
    def f(a, b):
        return _dot32(spec, a.astype(bf), b.astype(bf))

    def fwd(a, b):
        return f(a, b), (a, b)

    def bwd(res, g):
        a, b = res
        gb = g.astype(bf)
        return (_dot32(da_spec, gb, b.astype(bf)).astype(a.dtype),
                _dot32(db_spec, a.astype(bf), gb).astype(b.dtype))

    f.defvjp(fwd, bwd)
    return f


_LOW_DOTS = {}


@jax.custom_vjp
def _sigmoid_bf16(x):
    # The logistic of a bf16 value, rounded once. jaxlib's CPU emitter
    # evaluates a bf16 logistic in steps and misrounds about a quarter of
    # the results; XLA proper (as hlatc runs it) rounds the f32 result.
    return jax.nn.sigmoid(x.astype(jnp.float32)).astype(jnp.bfloat16)


def _sigmoid_bf16_fwd(x):
    s = _sigmoid_bf16(x)
    return s, s


def _sigmoid_bf16_bwd(s, g):
    # The derivative in bf16, as every op between dots computes.
    return (g * (s * (jnp.bfloat16(1) - s)),)


_sigmoid_bf16.defvjp(_sigmoid_bf16_fwd, _sigmoid_bf16_bwd)


class Bf16Mixed:
    """hlatc's bf16-mixed policy, written independently: dots take bf16
    operands and accumulate in f32 (forward and backward); the elementwise
    and layout ops between dots compute in bf16 (rotary application, score
    scale and mask, SiLU and the gate product); RMSNorm, softmax, the
    residual stream, the loss and every parameter stay f32."""
    name = "bf16-mixed"

    @staticmethod
    def lin(x, w):
        return Bf16Mixed.bmm("...i,oi->...o", x, w)

    @staticmethod
    def bmm(spec, a, b):
        if spec not in _LOW_DOTS:
            _LOW_DOTS[spec] = _low_dot(spec)
        return _LOW_DOTS[spec](a, b)

    @staticmethod
    def low(x):
        return x.astype(jnp.bfloat16)

    @staticmethod
    def wide(x):
        return x.astype(jnp.float32)

    sigmoid = staticmethod(_sigmoid_bf16)


POLICIES = {"fp32": Fp32, "bf16-mixed": Bf16Mixed}


def loss_fn(c, p, tokens, targets, pol=Fp32):
    d = c["hidden_size"]
    h_q, h_kv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // h_q
    b, s = tokens.shape
    eps = c["rms_norm_eps"]
    lo, wide = pol.low, pol.wide

    def norm(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w

    inv = 1.0 / (c["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    ang = np.arange(s, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    # The tables are f32 constants; rotary is applied in the activations' type.
    cos = lo(jnp.asarray(np.cos(ang), jnp.float32))[None, :, None, :]
    sin = lo(jnp.asarray(np.sin(ang), jnp.float32))[None, :, None, :]

    def rope(x):
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin

    def repeat_kv(x):
        # Broadcasting is exact in any type; its transpose (the sum over a
        # KV group) is a reduction, which stays f32.
        return lo(jnp.repeat(wide(x), h_q // h_kv, axis=2))

    causal = jnp.tril(jnp.ones((s, s), bool))
    scale = lo(jnp.float32(1.0 / np.sqrt(hd)))
    masked = lo(jnp.float32(-1e9))
    x = p["model.embed_tokens.weight"][tokens]
    for i in range(c["num_hidden_layers"]):
        L = f"model.layers.{i}."
        # One rounded copy of the norm's output feeds q, k and v, so their
        # input gradients meet (are summed) in bf16.
        h = lo(norm(x, p[L + "input_layernorm.weight"]))
        q = rope(lo(pol.lin(h, p[L + "self_attn.q_proj.weight"])).reshape(b, s, h_q, hd))
        k = rope(lo(pol.lin(h, p[L + "self_attn.k_proj.weight"])).reshape(b, s, h_kv, hd))
        v = lo(pol.lin(h, p[L + "self_attn.v_proj.weight"])).reshape(b, s, h_kv, hd)
        k, v = repeat_kv(k), repeat_kv(v)
        sc = lo(pol.bmm("bqhd,bkhd->bhqk", q, k)) * scale
        sc = jnp.where(causal[None, None], sc, masked)
        probs = jax.nn.softmax(wide(sc), axis=-1)
        att = lo(pol.bmm("bhqk,bkhd->bqhd", probs, v)).reshape(b, s, d)
        x = x + pol.lin(att, p[L + "self_attn.o_proj.weight"])
        h = lo(norm(x, p[L + "post_attention_layernorm.weight"]))
        g = lo(pol.lin(h, p[L + "mlp.gate_proj.weight"]))
        u = lo(pol.lin(h, p[L + "mlp.up_proj.weight"]))
        x = x + pol.lin(g * pol.sigmoid(g) * u, p[L + "mlp.down_proj.weight"])
    x = norm(x, p["model.norm.weight"])
    head = p["model.embed_tokens.weight"] if c["tie_word_embeddings"] else p["lm_head.weight"]
    logits = pol.lin(x, head)
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
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "architectures": ["LlamaForCausalLM"], **c}, f, indent=2)
            f.write("\n")
        write_safetensors(os.path.join(d, "weights.safetensors"), [(n, params[n]) for n, _ in shapes])
        write_safetensors(os.path.join(d, "batch.safetensors"), [("tokens", tokens), ("targets", targets)])
        for pol, file in [(Fp32, "reference.safetensors"), (Bf16Mixed, "reference_bf16_mixed.safetensors")]:
            loss, grads = jax.value_and_grad(lambda p: loss_fn(c, p, tokens, targets, pol))(params)
            ref = [("loss", np.asarray(loss, np.float32))]
            ref += [("grad." + n, np.asarray(grads[n], np.float32)) for n, _ in shapes]
            write_safetensors(os.path.join(d, file), ref)
            print(f"{name} {pol.name}: loss {float(loss):.6f}, {len(shapes)} parameters")


if __name__ == "__main__":
    main()
