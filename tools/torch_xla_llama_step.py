#!/usr/bin/env python3
"""Dump a Hugging Face LlamaForCausalLM training step as torch-xla prints it.

A tiny Llama (hlatc's `tiny` shapes, `use_cache=False`) takes one AdamW
step on XLA's CPU backend, and XLA's `--xla_dump_to` writes the module it
compiled for that step. Two variants:

- `--variant nxd` (the default), the fixture for hlatc's passes on imported
  HLO (train/tests/it/passes_on_xla.rs). The causal mask is built on the host, as
  NxD builds `triu(ones(S, S))`, and passed as a 4-D float attention mask,
  so the module reads it as an entry parameter: only `hlatc opt --bind` can
  tell the passes that it is causal. The mask's values are written beside
  the dump, with a non-causal mask of the same shape for the negative
  check. Writes OUT/torch_xla_llama_step.hlo, OUT/causal_mask.safetensors,
  OUT/noncausal_mask.safetensors (the mask parameter's name is the tensor
  name) and OUT/README.md saying which parameter the mask is.
- `--variant causal`: the usual training call, `model(input_ids,
  labels=...)`, so Hugging Face builds the mask itself (its packed-sequence
  check is a cumsum, which torch-xla lowers to `reduce-window`). The step
  is synced with an explicit list of outputs (the loss, every parameter,
  then each parameter's optimizer moments; AdamW counts steps on the host),
  so the module's parameters are
  known: their values are read before the step, in the module's parameter
  order, and the outputs after it. Writes
  OUT/torch_xla_llama_step.causal.hlo (text),
  OUT/torch_xla_llama_step.causal.hlo.pb (the `xla.HloProto` that
  `--xla_dump_hlo_as_proto` writes), and
  OUT/torch_xla_llama_step.causal.{inputs,outputs}.safetensors (`arg0`...
  and `out0`..., as torch-xla computed them on XLA CPU).

    python3 -m venv /tmp/txla && /tmp/txla/bin/pip install -r tools/torch_xla_requirements.txt
    /tmp/txla/bin/python tools/torch_xla_llama_step.py --out tests/fixtures/torch_xla
    /tmp/txla/bin/python tools/torch_xla_llama_step.py --variant causal --out tests/fixtures/torch_xla
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


SAFETENSORS_DTYPES = {"float32": "F32", "float64": "F64", "int64": "I64", "int32": "I32", "bool": "BOOL"}


def named_arrays(prefix, arrays):
    """{prefix0: (dtype, shape, bytes), ...} in order, little-endian."""
    out = {}
    for i, a in enumerate(arrays):
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        out[f"{prefix}{i}"] = (SAFETENSORS_DTYPES[a.dtype.name], a.shape, a.tobytes())
    return out


def entry_parameter_shapes(text):
    """The entry computation's parameter shapes, by parameter number."""
    entry = text[text.index("\nENTRY"):]
    params = re.findall(r"= (\S+) parameter\((\d+)\)", entry)
    return [shape for shape, _ in sorted(params, key=lambda p: int(p[1]))]


HLO_TYPES = {"float32": "f32", "float64": "f64", "int64": "s64", "int32": "s32", "bool": "pred"}


def hlo_shape(a):
    return f"{HLO_TYPES[a.dtype.name]}[{','.join(map(str, a.shape))}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--variant", choices=["nxd", "causal"], default="nxd")
    ap.add_argument("--seq", type=int, default=8)
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()

    dump = tempfile.mkdtemp(prefix="txla-dump-")
    os.environ["PJRT_DEVICE"] = "CPU"
    flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text"
    if args.variant == "causal":
        flags += " --xla_dump_hlo_as_proto"
    os.environ["XLA_FLAGS"] = flags
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
    os.makedirs(args.out, exist_ok=True)
    if args.variant == "nxd":
        nxd_step(args, dump, model, opt, tokens, np, torch, xm)
    else:
        causal_step(args, dump, model, opt, tokens, np, torch)


def step_module(dump, suffix):
    """The largest module XLA compiled is the training step."""
    texts = glob.glob(os.path.join(dump, "*before_optimizations.txt"))
    step = max(texts, key=os.path.getsize)
    return step[: -len(".txt")] + suffix


def nxd_step(args, dump, model, opt, tokens, np, torch, xm):
    b, s = args.batch, args.seq
    dev = tokens.device
    # NxD's way: the causal mask is built on the host and fed in.
    causal = np.triu(np.full((s, s), -1e9, dtype=np.float32), k=1)
    mask = torch.from_numpy(np.broadcast_to(causal, (b, 1, s, s)).copy()).to(dev)
    out = model(input_ids=tokens, attention_mask=mask, labels=tokens)
    out.loss.backward()
    opt.step()
    xm.mark_step()

    step = step_module(dump, ".txt")
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
            "The `causal` variant (torch_xla_llama_step.causal.*, `--variant causal`) is the "
            "usual call without a mask, dumped as text and as the xla.HloProto, with the "
            "values of its parameters before the step and of its outputs after it.\n"
        )
    print(f"wrote {args.out}: {os.path.basename(step)}, mask parameter {name}")


def causal_step(args, dump, model, opt, tokens, np, torch):
    import torch_xla

    out = model(input_ids=tokens, labels=tokens)
    out.loss.backward()
    opt.step()
    params = list(model.parameters())
    # AdamW keeps each `step` count on the host: only device tensors are
    # the module's outputs.
    state = [t for p in params for t in opt.state[p].values() if isinstance(t, torch.Tensor) and t.device.type == "xla"]
    outputs = [out.loss] + params + state
    # The device data the step reads, in the order of the module's
    # parameters (what torch-xla's dynamo bridge relies on); read before the
    # step, which donates their buffers.
    _, values = torch_xla._XLAC._get_tensors_xla_device_data_node(outputs)
    inputs = [v.detach().cpu().numpy() for v in values]
    torch_xla._XLAC._xla_sync_multi(outputs, [], True, True)
    results = [o.detach().cpu().numpy() for o in outputs]

    text_path = step_module(dump, ".txt")
    shapes = [re.sub(r"\{[^}]*\}", "", p) for p in entry_parameter_shapes(open(text_path).read())]
    got = [hlo_shape(a) for a in inputs]
    if shapes != got:
        raise SystemExit(f"the step's parameters are {shapes}, the values read are {got}")
    stem = os.path.join(args.out, "torch_xla_llama_step.causal")
    shutil.copy(text_path, stem + ".hlo")
    shutil.copy(step_module(dump, ".hlo.pb"), stem + ".hlo.pb")
    write_safetensors(stem + ".inputs.safetensors", named_arrays("arg", inputs))
    write_safetensors(stem + ".outputs.safetensors", named_arrays("out", results))
    windows = open(text_path).read().count(" reduce-window(")
    print(f"wrote {stem}.*: {len(inputs)} parameters, {len(results)} outputs, {windows} reduce-window")


if __name__ == "__main__":
    main()
