#!/usr/bin/env python3
"""Writes the NKI flash-attention fixture: two HLO modules, each one
`AwsNeuronCustomNativeKernel` custom call to NKI's `flash_fwd` or
`flash_attn_bwd`, and the calling convention that imports them as
`--kernel attention=imported:nki_flash_attention.json`.

The modules have the form the NKI guide to JAX shows
(aws-neuron-sdk nki/guides/framework_custom_op.rst): the custom call with
`api_version=API_VERSION_STATUS_RETURNING` and a `backend_config` that is
base64 of a JSON object (`kernel_version`, `klir_binary`, `func_name`,
`grid`, `has_collectives`; `mac_count` as newer NKI writes it). The
kernels' operands and results are as nki-samples' attention.py states
them: q and k `[b, h, d, s]`, v `[b, h, s, d]` for the forward and
`[b, h, d, s]` for the backward, the output `[b, h, s, d]`, the
log-sum-exp `[b, h, 128, s / 128]`, and a seed `s32[1]` (axlearn passes
`[1]`; it is read only with dropout).

NKI is not installable here, so nothing here was compiled by NKI: the
`klir_binary` path names no artifact, and neuronx-cc would stop at
NCC_EVRF059 for it. On a Neuron machine, `jax.jit(f).lower(...)` of a
function calling the real kernels gives modules of this form with a real
config; the convention file stays the same. What hlatc proves with this
fixture is the glue: the layouts, the residual, the bundle's form, the
pre-flight, and on XLA CPU the step with hlatc's references of the two
kernels in their place.

Stdlib only. Pinned by its arguments: the defaults write the committed
fixture (tiny's attention at batch 1, sequence 512, f32).

    python3 tools/nki_flash_fixture.py --out tests/fixtures/kernels
"""

import argparse
import base64
import json
import os

LSE_ROWS = 128


def shape(ty, dims):
    layout = ",".join(str(i) for i in reversed(range(len(dims))))
    return f"{ty}[{','.join(str(d) for d in dims)}]{{{layout}}}"


def config(func_name, grid, inputs, outputs, macs):
    body = {
        "kernel_version": 1,
        "klir_binary": {
            "binary": f"/tmp/hlatc-fixture-not-a-kernel/{func_name}.klir",
            "input_names": inputs,
            "output_names": outputs,
        },
        "func_name": func_name,
        "grid": grid,
        "has_collectives": False,
        "mac_count": macs,
    }
    return base64.b64encode(json.dumps(body).encode()).decode()


def module(name, params, results, func_name, grid, macs):
    """One custom call over `params` (name, type, dims) and a seed."""
    lines = [f"HloModule {name}", "", "ENTRY main {"]
    for k, (p, ty, dims) in enumerate(params):
        lines.append(f"  {p} = {shape(ty, dims)} parameter({k})")
    lines.append("  seed = s32[1]{0} constant({1})")
    operands = [p for p, _, _ in params] + ["seed"]
    result = "(" + ", ".join(shape(ty, dims) for _, ty, dims in results) + ")"
    cfg = config(func_name, grid, operands, [r for r, _, _ in results], macs)
    lines.append(
        f"  ROOT {func_name} = {result} custom-call({', '.join(operands)}), "
        f'custom_call_target="AwsNeuronCustomNativeKernel", '
        f"api_version=API_VERSION_STATUS_RETURNING, "
        f'backend_config="{cfg}"'
    )
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--dtype", default="f32")
    a = ap.parse_args()
    if a.seq % 512 or a.head_dim > 128:
        ap.error("flash_fwd takes sequences of a multiple of 512 and head_dim up to 128")
    b, h, d, s, ty = a.batch, a.heads, a.head_dim, a.seq, a.dtype
    by_dim = [b, h, d, s]
    by_seq = [b, h, s, d]
    lse = [b, h, LSE_ROWS, s // LSE_ROWS]
    grid = [b, h]
    pairs = b * h * s * s * d
    fwd = module(
        "nki_flash_fwd",
        [("q", ty, by_dim), ("k", ty, by_dim), ("v", ty, by_seq)],
        [("o", ty, by_seq), ("lse", "f32", lse)],
        "flash_fwd",
        grid,
        2 * pairs,
    )
    bwd = module(
        "nki_flash_bwd",
        [
            ("q", ty, by_dim),
            ("k", ty, by_dim),
            ("v", ty, by_dim),
            ("o", ty, by_dim),
            ("dy", ty, by_dim),
            ("lse", "f32", lse),
        ],
        [("dq", ty, by_dim), ("dk", ty, by_dim), ("dv", ty, by_dim)],
        "flash_attn_bwd",
        grid,
        5 * pairs,
    )
    convention = {
        "point": "attention",
        "layout": "batch,heads,head_dim,seq",
        "masks": ["causal"],
        "forward": {
            "module": "nki_flash_fwd.hlo",
            "parameters": ["q", "k", "v"],
            "results": ["output", "residual:lse"],
            "layouts": {
                "v": "batch,heads,seq,head_dim",
                "output": "batch,heads,seq,head_dim",
            },
        },
        "backward": {
            "module": "nki_flash_bwd.hlo",
            "parameters": ["q", "k", "v", "output", "d_output", "residual:lse"],
            "results": ["d_q", "d_k", "d_v"],
        },
        "source": "tools/nki_flash_fixture.py: NKI's flash_fwd and flash_attn_bwd "
        "custom calls in the documented form; the config names no compiled kernel",
    }
    os.makedirs(a.out, exist_ok=True)
    for name, text in [
        ("nki_flash_fwd.hlo", fwd),
        ("nki_flash_bwd.hlo", bwd),
        ("nki_flash_attention.json", json.dumps(convention, indent=2) + "\n"),
    ]:
        with open(os.path.join(a.out, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
