#!/usr/bin/env python3
"""Dump a Hugging Face LlamaForCausalLM training step as torch-xla prints it.

The fixture for hlatc's passes on imported HLO (tests/passes_on_xla.rs): a
tiny Llama (hlatc's `tiny` shapes) takes one AdamW step on XLA's CPU
backend, and XLA's `--xla_dump_to` writes the module it compiled for that
step. The causal mask is built on the host, as NxD builds
`triu(ones(S, S))`, and passed as a 4-D float attention mask, so the module
reads it as an entry parameter: only `hlatc opt --bind` can tell the
passes that it is causal. The mask's values are written beside the dump,
with a non-causal mask of the same shape for the negative check.

    python3 -m venv /tmp/txla && /tmp/txla/bin/pip install -r tools/torch_xla_requirements.txt
    /tmp/txla/bin/python tools/torch_xla_llama_step.py --out tests/fixtures/torch_xla

Writes OUT/torch_xla_llama_step.hlo (the training step module, as XLA printed
it before optimization), OUT/causal_mask.safetensors and
OUT/noncausal_mask.safetensors, which hides the past instead of the
future (the mask parameter's name is the tensor name), and OUT/README.md saying which parameter the mask is.
"""
import argparse
import glob
import json
import os
import re
import shutil
import struct
import tempfile


def write_safetensors(path, tensors):
    """Writes {name: (dtype, shape, bytes)} without needing the package."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()

    dump = tempfile.mkdtemp(prefix="txla-dump-")
    os.environ["PJRT_DEVICE"] = "CPU"
    os.environ["XLA_FLAGS"] = f"--xla_dump_to={dump} --xla_dump_hlo_as_text"
    import numpy as np
    import torch
    import torch_xla.core.xla_model as xm
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=16,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        attn_implementation="eager",
        use_cache=False,
    )
    dev = xm.xla_device()
    model = LlamaForCausalLM(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    b, s = args.batch, args.seq
    tokens = torch.randint(0, 64, (b, s)).to(dev)
    # NxD's way: the causal mask is built on the host and fed in.
    causal = np.triu(np.full((s, s), -1e9, dtype=np.float32), k=1)
    mask = torch.from_numpy(np.broadcast_to(causal, (b, 1, s, s)).copy()).to(dev)
    out = model(input_ids=tokens, attention_mask=mask, labels=tokens)
    out.loss.backward()
    opt.step()
    xm.mark_step()

    # The largest module XLA compiled is the training step.
    texts = glob.glob(os.path.join(dump, "*before_optimizations.txt"))
    step = max(texts, key=os.path.getsize)
    os.makedirs(args.out, exist_ok=True)
    shutil.copy(step, os.path.join(args.out, "torch_xla_llama_step.hlo"))
    text = open(step).read()
    shape = f"f32[{b},1,{s},{s}]"
    params = re.findall(r"(\S+) = " + re.escape(shape) + r"(?:\{[^}]*\})? parameter\((\d+)\)", text)
    if len(params) != 1:
        raise SystemExit(f"expected one {shape} parameter (the mask), found {params}")
    name = params[0][0].lstrip("%")
    # Hides the past instead of the future: as large a mask, not causal.
    noncausal = np.tril(np.full((s, s), -1e9, dtype=np.float32), k=-1)
    for m, file in [(causal, "causal_mask"), (noncausal, "noncausal_mask")]:
        full = np.broadcast_to(m, (b, 1, s, s)).astype("<f4").copy()
        write_safetensors(os.path.join(args.out, file + ".safetensors"), {name: ("F32", full.shape, full.tobytes())})
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write(
            "Written by tools/torch_xla_llama_step.py: a Hugging Face LlamaForCausalLM "
            f"training step (torch {torch.__version__}) as torch-xla's XLA dump printed it before "
            f"optimization. The attention mask is entry parameter `{name}` ({shape}); "
            "causal_mask.safetensors holds the causal mask it was traced with, "
            "noncausal_mask.safetensors one that hides the past instead (not causal).\n"
        )
    print(f"wrote {args.out}: {os.path.basename(step)}, mask parameter {name}")


if __name__ == "__main__":
    main()
