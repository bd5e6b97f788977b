"""hlatc's MXFP8 on XLA CPU against the numpy reference of OCP MX v1.0
(`mx_reference.py`), bit for bit.

`hlatc opt --passes amp --precision mxfp8` quantizes a dot's operands in MX
blocks along their contracting dimension, as the `mxfp8` preset does in a
training step. Against an identity matrix, whose blocks are exact, a dot
returns its left operand's blocks read back: the quantization alone, which
must equal the reference's bit for bit, edge blocks included. A dot of
random operands must equal the reference's dot within the bound of f32
accumulation.

XLA CPU flushes f32 subnormals to zero, as operands and as results, so the
reference is compared with its operands and results flushed the same way:
the one place where XLA CPU's arithmetic, not hlatc's, differs from the
spec's.
"""

from pathlib import Path

import numpy as np
import ml_dtypes
import pytest

from mx_reference import dequantize_mx, mx_dot, quantize_mx
from test_hlatc import read_safetensors, run_cli

K = 64


def _module(m: int, k: int, n: int) -> str:
    return (
        "HloModule mx\n\n"
        "ENTRY e {\n"
        f"  a = f32[{m},{k}] parameter(0)\n"
        f"  b = f32[{k},{n}] parameter(1)\n"
        f"  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
        "}\n"
    )


def _write_safetensors(path: Path, tensors: dict) -> None:
    from safetensors.numpy import save_file

    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(path))


def _run_mx_dot(tmp_path: Path, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`a . b` as hlatc's mxfp8 amp computes it on XLA CPU."""
    src = tmp_path / "dot.hlo"
    src.write_text(_module(a.shape[0], a.shape[1], b.shape[1]))
    quantized = tmp_path / "dot_mx.hlo"
    opt = run_cli("opt", "--passes", "amp", "--precision", "mxfp8", str(src), "-o", str(quantized))
    assert "1 of them with operands in MX blocks" in opt.stderr, opt.stderr
    text = quantized.read_text()
    assert "f8e4m3fn" in text and "mx_blocks" in text
    inputs = tmp_path / "in.safetensors"
    _write_safetensors(inputs, {"arg0": a, "arg1": b})
    out = tmp_path / "out.safetensors"
    run_cli("run", str(quantized), "--inputs", str(inputs), "--outputs", str(out))
    return read_safetensors(out)["out0"]


def _bf16_exact(x: np.ndarray) -> np.ndarray:
    """`x` rounded to bf16 and back: `amp` rounds a dot's operands to bf16
    before the blocks, as QuantizeMX takes bf16."""
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def _edge_rows() -> np.ndarray:
    """Rows of two blocks each, each row an edge case of the rules."""
    rows = []
    rng = np.random.default_rng(7)

    def row(first, second=None):
        second = rng.standard_normal(32) if second is None else second
        rows.append(np.concatenate([first, second]).astype(np.float32))

    row(np.zeros(32))  # an all-zero block: the smallest scale, zeros
    row(np.full(32, -0.0))  # negative zeros
    row(np.full(32, 448.0))  # the element's largest normal at scale 1
    row(np.r_[512.0, np.full(31, 3.0)])  # amax exactly a power of two
    row(np.r_[256.0, 255.0, -1.0, np.full(29, 1e-3)])  # tiny values beside a large one
    row(np.r_[1.0, 2.0**-9, 2.0**-10, 3 * 2.0**-11, np.full(28, 2.0**-12)])  # subnormal elements
    row(np.r_[1023.99994, np.full(31, 0.5)])  # amax just below a power of two
    row(np.r_[2.0**-120, 2.0**-125, np.zeros(30)])  # amax below E8M0's range: clamped
    row(np.r_[3.0e38, -1.0, np.zeros(30)])  # the top of f32's range
    row(np.r_[np.float32(2.0**-130), np.zeros(31)])  # an f32-subnormal amax
    return _bf16_exact(np.stack(rows))


F32_MIN_NORMAL = np.float32(2.0**-126)


def _flushed(x: np.ndarray) -> np.ndarray:
    """`x` with f32 subnormals as XLA CPU reads and writes them: zero."""
    return np.where(np.abs(x) < F32_MIN_NORMAL, np.float32(0), x).astype(np.float32)


def _compare_rows(got: np.ndarray, want: np.ndarray) -> None:
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    bad = np.argwhere(~same)
    assert bad.size == 0, [
        (tuple(i), float(got[tuple(i)]), float(want[tuple(i)])) for i in bad[:8]
    ]


def test_blocks_equal_the_reference_bit_for_bit(tmp_path):
    rng = np.random.default_rng(0)
    # Random blocks over many binades, and the edge rows.
    scale = 2.0 ** rng.integers(-30, 30, size=(48, 1))
    random = _bf16_exact(rng.standard_normal((48, K)) * scale)
    a = np.concatenate([random, _edge_rows()])
    got = _run_mx_dot(tmp_path, a, np.eye(K, dtype=np.float32))
    codes, scales = quantize_mx(_flushed(a), axis=1)
    want = _flushed(dequantize_mx(codes, scales, axis=1))
    _compare_rows(got, want)
    # The clamped scale reads back values down to 2^-125 exactly.
    assert got[-3, 0] == np.float32(2.0**-120) and got[-3, 1] == np.float32(2.0**-125)
    # The quantization really happened: most random values moved.
    assert np.mean(got[:48] != a[:48]) > 0.5


def test_a_nan_or_an_infinity_makes_its_block_nan(tmp_path):
    a = np.ones((2, K), dtype=np.float32)
    a[0, 3] = np.nan
    a[1, 40] = np.inf
    codes, scales = quantize_mx(a, axis=1)
    assert scales[0, 0] == 0xFF and scales[1, 1] == 0xFF
    got = _run_mx_dot(tmp_path, a, np.eye(K, dtype=np.float32))
    # Against the identity, a NaN anywhere in a row reaches every output
    # of the row (NaN x 0 is NaN): each row is NaN throughout.
    assert np.isnan(got).all()


def test_random_dots_equal_the_reference_within_f32_accumulation(tmp_path):
    rng = np.random.default_rng(1)
    m, k, n = 16, 128, 24
    a = _bf16_exact(rng.standard_normal((m, k)))
    b = _bf16_exact(rng.standard_normal((k, n)) * 0.01)
    got = _run_mx_dot(tmp_path, a, b).astype(np.float64)
    want = mx_dot(a, b, lhs_contracting=1, rhs_contracting=0)
    # Each product of dequantized values is exact in f32; the k-term sum
    # rounds at most k times by 2^-24 of the running magnitude.
    ad = dequantize_mx(*quantize_mx(a, axis=1), axis=1, dtype=np.float64)
    bd = dequantize_mx(*quantize_mx(b, axis=0), axis=0, dtype=np.float64)
    bound = k * 2.0**-24 * (np.abs(ad) @ np.abs(bd))
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)
    # Not bf16's dot: MX moved the answer by more than that bound.
    plain = a.astype(np.float64) @ b.astype(np.float64)
    assert np.max(np.abs(plain - want)) > np.max(bound)
