"""One training step of small random Hugging Face models, in PyTorch, as
fixtures for hlatc's parity tests (train/tests/it/hf_parity.rs).

The step runs in float64, so the comparison tests the function rather than
two float32 summation orders (some gradients here are cancellations of much
larger terms, which float32 resolves only to about 1e-4 of their size).

For each case, `transformers` itself builds the model from its config class
and writes `config.json` (`save_pretrained`, so the layout is whatever the
installed `transformers` writes: version 5 writes `rope_parameters`). Then,
in float32 on the CPU:

  loss     = cross_entropy(logits, targets, ignore_index=-100), mean
             (+ router_aux_loss_coef * aux_loss for a mixture of experts,
             aux_loss being the model's own load_balancing_loss_func value)
  grads    = d loss / d every parameter
  clip     = torch.nn.utils.clip_grad_norm_(params, 1.0)
  updated  = one torch.optim.AdamW step (lr 1e-2, betas 0.9/0.95, eps 1e-8,
             weight decay 0.1 on every parameter)

Files per case, under tests/fixtures/hf/<case>/: config.json,
weights.safetensors (Hugging Face names; a tied LM head is not repeated),
batch.safetensors (tokens, targets: int32 [batch, seq]) and
reference.safetensors (loss, grad_norm, grad.<name>, updated.<name>; for a
mixture of experts also ce_loss and aux_loss, so loss = ce_loss +
router_aux_loss_coef * aux_loss).

Every tensor name is a checkpoint name, as save_pretrained writes it: one
tensor per expert even where transformers fuses a layer's experts in memory
(see to_checkpoint; the script checks its names and bits against
save_pretrained's file).

Mixture-of-experts cases: Mixtral (every layer sparse), Qwen2-MoE (a
shared expert with a sigmoid gate; layer 0 sparse, layer 1 dense) and
Qwen3-MoE with and without renormalised top-k weights. Their routers must
not be near a tie (a top-k choice that rounding could flip), so a case's
seed moves on until the k-th and (k+1)-th router probabilities of every
token and layer are more than 1e-3 apart.

Usage: pip install -r tools/hf_requirements.txt && python tools/hf_reference.py [CASE...]
(every case when none is named).
"""

import json
import os
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "hf")
BATCH, SEQ = 2, 8
LR, BETAS, EPS, WD, CLIP = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0

SMALL = dict(
    vocab_size=48,
    hidden_size=16,
    intermediate_size=24,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=2,
    max_position_embeddings=32,
    rms_norm_eps=1e-5,
    # Larger than the usual 0.02, so attention is peaked rather than uniform
    # and no gradient is a near-cancellation that only rounding resolves.
    initializer_range=0.3,
)

# Mixture of experts: the loss includes the load-balancing term, weighted
# more than the usual 0.02 so that its gradient is not lost in the rest.
MOE = dict(output_router_logits=True, router_aux_loss_coef=0.1)

LLAMA3 = dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
              original_max_position_embeddings=8)

CASES = {
    # Llama 3.1: llama3 RoPE scaling, GQA, theta 500000.
    "llama31": (transformers.LlamaConfig, dict(SMALL, rope_parameters=dict(LLAMA3, rope_theta=500000.0))),
    # Llama 3.2: the same, with tied embeddings.
    "llama32_tied": (transformers.LlamaConfig, dict(SMALL, tie_word_embeddings=True,
                                                     rope_parameters=dict(LLAMA3, rope_theta=500000.0))),
    # Linear position interpolation, and biases on attention and MLP.
    "llama_bias_linear": (transformers.LlamaConfig, dict(SMALL, attention_bias=True, mlp_bias=True,
                                                          rope_parameters=dict(rope_type="linear", factor=2.0, rope_theta=10000.0))),
    # An explicit head_dim unlike hidden/heads (16 / 4 = 4; here 8).
    "head_dim": (transformers.LlamaConfig, dict(SMALL, head_dim=8)),
    # Mistral with a window shorter than the sequence; some targets ignored.
    "mistral_window": (transformers.MistralConfig, dict(SMALL, sliding_window=3)),
    # Dynamic NTK over a sequence (8) past max_position_embeddings (4):
    # the base grows with the length, the one case where a longer
    # sequence is defined.
    "llama_dynamic_long": (transformers.LlamaConfig, dict(SMALL, max_position_embeddings=4,
                                                           rope_parameters=dict(rope_type="dynamic", factor=2.0, rope_theta=10000.0))),
    # Qwen2: q/k/v biases.
    "qwen2": (transformers.Qwen2Config, dict(SMALL, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))),
    # Qwen3: RMSNorm of every q and k head; head_dim set (its default is 128).
    "qwen3": (transformers.Qwen3Config, dict(SMALL, head_dim=8, attention_bias=False)),
    # Mixtral: every layer a mixture of 4 experts, top 2, weights renormalised.
    "mixtral": (transformers.MixtralConfig, dict(SMALL, num_local_experts=4, num_experts_per_tok=2,
                                                 router_jitter_noise=0.0, **MOE)),
    # Qwen2-MoE: top 2 of 4 without renormalising, plus a gated shared expert;
    # layer 1 is listed as dense (mlp_only_layers), so one layer of each kind.
    "qwen2_moe": (transformers.Qwen2MoeConfig, dict(SMALL, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
                                                    shared_expert_intermediate_size=20, decoder_sparse_step=1,
                                                    mlp_only_layers=[1], norm_topk_prob=False,
                                                    use_sliding_window=False, **MOE)),
}
# Qwen3-MoE, every layer sparse, with and without renormalised top-k weights.
for _name, _norm in (("qwen3_moe_norm", True), ("qwen3_moe", False)):
    CASES[_name] = (transformers.Qwen3MoeConfig, dict(SMALL, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
                                                      head_dim=8, decoder_sparse_step=1, mlp_only_layers=[],
                                                      norm_topk_prob=_norm, **MOE))

IGNORED = {"mistral_window"}

# Packed rows: documents laid end to end, a segment id per token. The
# reference runs every document on its own (positions from 0) and averages
# the loss over all counted targets, which is what packing must equal.
PACKED = {"llama_packed": [[1, 1, 1, 2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 2, 2, 3]]}
CASES["llama_packed"] = CASES["llama31"]


# Checkpoint names and layouts. transformers 5 holds a layer's experts fused
# in memory (experts.gate_up_proj [E, 2I, H], each expert's gate rows then
# its up rows; experts.down_proj [E, H, I]), but save_pretrained writes one
# tensor per expert, as the checkpoints on the Hub are (the reverse of
# conversion_mapping.py: Chunk(dim=1), then split dim 0; no transpose).
# hlatc reads checkpoints, so the fixtures name every tensor that way:
#   Mixtral:   layers.N.block_sparse_moe.gate.weight [E, H] and
#              layers.N.block_sparse_moe.experts.e.{w1 (gate), w3 (up), w2 (down)}.weight
#   Qwen MoE:  layers.N.mlp.gate.weight [E, H],
#              layers.N.mlp.experts.e.{gate,up,down}_proj.weight
#              (Qwen2-MoE also mlp.shared_expert.*_proj.weight, mlp.shared_expert_gate.weight [1, H]).
EXPERT_NAMES = {"mixtral": ("w1", "w3", "w2")}


def to_checkpoint(model_type, tensors):
    gate, up, down = EXPERT_NAMES.get(model_type, ("gate_proj", "up_proj", "down_proj"))
    out = {}
    for n, t in tensors.items():
        if model_type == "mixtral":
            n = n.replace(".mlp.", ".block_sparse_moe.")
        if n.endswith(".experts.gate_up_proj"):
            for e, (g, u) in enumerate(zip(*t.chunk(2, dim=1))):
                out[n.replace("gate_up_proj", f"{e}.{gate}.weight")] = g.clone()
                out[n.replace("gate_up_proj", f"{e}.{up}.weight")] = u.clone()
        elif n.endswith(".experts.down_proj"):
            for e, d in enumerate(t):
                out[n.replace("down_proj", f"{e}.{down}.weight")] = d.clone()
        else:
            out[n] = t
    return out


def check_checkpoint(model, weights):
    """The fixture's weights are exactly what save_pretrained writes."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        saved = load_file(os.path.join(tmp, "model.safetensors"))
    assert saved.keys() == weights.keys(), sorted(saved.keys() ^ weights.keys())
    for n, t in saved.items():
        assert t.dtype == weights[n].dtype and torch.equal(t, weights[n]), n


def tie_gap(model, tokens, k):
    """Least gap between the k-th and (k+1)-th router probability, over
    every token of every sparse layer."""
    with torch.no_grad():
        logits = model(input_ids=tokens).router_logits
    probs = torch.cat(logits).double().softmax(-1).sort(-1, descending=True).values
    return (probs[:, k - 1] - probs[:, k]).min().item()


def build(name, config_class, kwargs, seed):
    torch.manual_seed(seed)
    config = config_class(**kwargs)
    config._attn_implementation = "eager"
    # Experts as a plain loop over experts, not the grouped_mm default: the
    # same sum, in the most obvious order.
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                          experts_implementation="eager").float()
    # Random biases and norms too, so every parameter's gradient is tested.
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith(".bias") or "norm" in n:
                p.add_(0.1 * torch.randn_like(p))
    tokens = torch.randint(0, config.vocab_size, (BATCH, SEQ))
    targets = torch.randint(0, config.vocab_size, (BATCH, SEQ))
    if name in IGNORED:
        targets[0, 2] = -100
        targets[1, 5:] = -100
    return config, model, tokens, targets


def case(name, config_class, kwargs):
    seed, gap = sum(map(ord, name)), None
    while True:
        config, model, tokens, targets = build(name, config_class, kwargs, seed)
        if not getattr(config, "output_router_logits", False):
            break
        gap = tie_gap(model, tokens, config.num_experts_per_tok)
        if gap > 1e-3:
            break
        print(f"{name}: seed {seed} routes a token at a near tie ({gap:.2e}), trying {seed + 1}", file=sys.stderr)
        seed += 1
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    names = {id(p): n for n, p in model.named_parameters()}
    params = dict(model.named_parameters())
    weights = to_checkpoint(config.model_type, {n: p.detach().clone().contiguous() for n, p in params.items()})
    check_checkpoint(model, weights)
    save_file(weights, os.path.join(d, "weights.safetensors"))
    save_file({"tokens": tokens.int(), "targets": targets.int()}, os.path.join(d, "batch.safetensors"))

    model = model.double()
    params = dict(model.named_parameters())
    if name in PACKED:
        segments = torch.tensor(PACKED[name], dtype=torch.int32)
        save_file({"tokens": tokens.int(), "targets": targets.int(), "segment_ids": segments},
                  os.path.join(d, "batch.safetensors"))
        total, count = 0.0, 0
        for row in range(BATCH):
            for doc in segments[row].unique().tolist():
                idx = (segments[row] == doc).nonzero().flatten()
                logits = model(input_ids=tokens[row, idx][None]).logits[0]
                total = total + torch.nn.functional.cross_entropy(
                    logits, targets[row, idx], ignore_index=-100, reduction="sum")
                count += int((targets[row, idx] != -100).sum())
        loss = total / count
    else:
        out = model(input_ids=tokens)
        loss = torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, config.vocab_size), targets.reshape(-1), ignore_index=-100)
    extra = {}
    if gap is not None:
        # What the model's forward adds to its loss given labels. With no
        # attention mask the balance is over every token of every sparse
        # layer. (transformers sums it in float32, as it does RMSNorm and the
        # router's softmax, whatever the model's dtype.)
        extra = {"ce_loss": loss, "aux_loss": out.aux_loss}
        loss = loss + config.router_aux_loss_coef * out.aux_loss
    loss.backward()
    ref = {"loss": loss.detach().reshape(())}
    ref.update({k: v.detach().double().reshape(()) for k, v in extra.items()})
    for n, p in params.items():
        ref["grad." + n] = p.grad.detach().clone()
    ref["grad_norm"] = torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP).detach().reshape(())
    opt = torch.optim.AdamW(params.values(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    opt.step()
    for n, p in params.items():
        ref["updated." + n] = p.detach().clone()
    for kind in ("grad.", "updated."):
        ref.update({kind + n: t for n, t in to_checkpoint(
            config.model_type, {n: ref.pop(kind + n) for n in params}).items()})
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(d, "reference.safetensors"))
    moe = f" (ce {extra['ce_loss'].item():.6f}, aux {extra['aux_loss'].item():.6f}; seed {seed}, tie gap {gap:.2e})" if extra else ""
    print(f"{name}: loss {loss.item():.6f}{moe}, {len(weights)} tensors -> {d}")


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}", file=sys.stderr)
    torch.use_deterministic_algorithms(True)
    wanted = sys.argv[1:] or list(CASES)
    unknown = [n for n in wanted if n not in CASES]
    if unknown:
        sys.exit(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    for name in wanted:
        cls, kwargs = CASES[name]
        case(name, cls, kwargs)


if __name__ == "__main__":
    main()
