#!/usr/bin/env python3
"""The narrow float formats as ml_dtypes (what XLA's literals use) defines them.

    python3 tools/minifloat_table.py > tests/fixtures/minifloat/ml_dtypes.tsv

Writes, for every format hlatc models, every code's value and how a spread
of f64 values rounds (ties to even; `overflow` where ml_dtypes gives an
infinity or NaN for a finite value that XLA's text reader refuses). Values
are written as the hex of their f64 bits, so nothing is lost in printing.
`float4_e2m1fn` has 16 codes (one per byte, in its low bits); the others 256.
compiler/tests/it/minifloat.rs checks hlatc's codec against this table.
"""
import struct

import ml_dtypes
import numpy as np

FORMATS = [
    "float8_e5m2",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e4m3b11fnuz",
    "float8_e3m4",
    "float8_e5m2fnuz",
    "float8_e4m3fnuz",
    "float4_e2m1fn",
    "float8_e8m0fnu",
]


def bits(v):
    return struct.pack(">d", float(v)).hex()


def code_count(dt):
    return 1 << ml_dtypes.finfo(dt).bits


def probes(dt):
    """Every code's value, the midpoints between neighbours (ties), points
    a quarter of the way between, and values past the largest."""
    codes = np.arange(code_count(dt), dtype=np.uint8).view(dt).astype(np.float64)
    finite = np.unique(codes[np.isfinite(codes)])
    mids = (finite[:-1] + finite[1:]) / 2
    quarter = finite[:-1] + (finite[1:] - finite[:-1]) / 4
    top = finite[-1]
    step = top - finite[-2]
    extra = [top + step * k / 8 for k in range(1, 12)] + [1e-30, -1e-30, 1e30, -1e30]
    return np.concatenate([finite, mids, quarter, extra, [np.inf, -np.inf, np.nan]])


def main():
    print("# format\tkind\tinput\toutput")
    for name in FORMATS:
        dt = getattr(ml_dtypes, name)
        short = name.replace("float8_", "f8").replace("float4_", "f4")
        for code in range(code_count(dt)):
            v = np.array([code], dtype=np.uint8).view(dt).astype(np.float64)[0]
            out = "nan" if np.isnan(v) else bits(v)
            print(f"{short}\tdecode\t{code:02x}\t{out}")
        for x in probes(dt):
            y = np.array([x], dtype=np.float64).astype(dt)
            code = int(y.view(np.uint8)[0])
            back = y.astype(np.float64)[0]
            if np.isfinite(x) and not np.isfinite(back):
                out = "overflow"
            else:
                out = f"{code:02x}"
            print(f"{short}\tencode\t{bits(x)}\t{out}")


if __name__ == "__main__":
    main()
