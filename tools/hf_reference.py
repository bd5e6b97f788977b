"""One training step of small random Hugging Face models, in PyTorch, as
fixtures for hlatc's parity tests (tests/it/hf_parity.rs).

The step runs in float64, so the comparison tests the function rather than
two float32 summation orders (some gradients here are cancellations of much
larger terms, which float32 resolves only to about 1e-4 of their size).

For each case, `transformers` itself builds the model from its config class
and writes `config.json` (`save_pretrained`, so the layout is whatever the
installed `transformers` writes: version 5 writes `rope_parameters`). Then,
in float32 on the CPU:

  loss     = cross_entropy(logits, targets, ignore_index=-100), mean
  grads    = d loss / d every parameter
  clip     = torch.nn.utils.clip_grad_norm_(params, 1.0)
  updated  = one torch.optim.AdamW step (lr 1e-2, betas 0.9/0.95, eps 1e-8,
             weight decay 0.1 on every parameter)

Files per case, under tests/fixtures/hf/<case>/: config.json,
weights.safetensors (Hugging Face names; a tied LM head is not repeated),
batch.safetensors (tokens, targets: int32 [batch, seq]) and
reference.safetensors (loss, grad_norm, grad.<name>, updated.<name>).

Usage: pip install -r tools/hf_requirements.txt && python tools/hf_reference.py [CASE...]
(every case when none is named).
"""

import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

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
}

IGNORED = {"mistral_window"}

# Packed rows: documents laid end to end, a segment id per token. The
# reference runs every document on its own (positions from 0) and averages
# the loss over all counted targets, which is what packing must equal.
PACKED = {"llama_packed": [[1, 1, 1, 2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 2, 2, 3]]}
CASES["llama_packed"] = CASES["llama31"]


def case(name, config_class, kwargs):
    torch.manual_seed(sum(map(ord, name)))
    config = config_class(**kwargs)
    config._attn_implementation = "eager"
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").float()
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
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    names = {id(p): n for n, p in model.named_parameters()}
    params = dict(model.named_parameters())
    save_file({n: p.detach().clone().contiguous() for n, p in params.items()}, os.path.join(d, "weights.safetensors"))
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
        logits = model(input_ids=tokens).logits
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, config.vocab_size), targets.reshape(-1), ignore_index=-100)
    loss.backward()
    ref = {"loss": loss.detach().reshape(())}
    for n, p in params.items():
        ref["grad." + n] = p.grad.detach().clone()
    ref["grad_norm"] = torch.nn.utils.clip_grad_norm_(list(params.values()), CLIP).detach().reshape(())
    opt = torch.optim.AdamW(params.values(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WD)
    opt.step()
    for n, p in params.items():
        ref["updated." + n] = p.detach().clone()
    save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(d, "reference.safetensors"))
    print(f"{name}: loss {loss.item():.6f}, {len(params)} tensors -> {d}")


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
