"""NumPy arrays to and from the native module's (dtype, shape, bytes) triples."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Tuple

import ml_dtypes
import numpy as np

# XLA's type names and NumPy's dtypes for them.
_DTYPES = {
    "pred": np.dtype(np.bool_),
    "s8": np.dtype(np.int8),
    "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_NAMES = {dt: name for name, dt in _DTYPES.items()}

Raw = Tuple[str, Tuple[int, ...], bytes]


def to_numpy(raw: Raw) -> np.ndarray:
    """A NumPy array (owning its data) from a triple."""
    dtype, shape, data = raw
    if dtype not in _DTYPES:
        raise TypeError(f"hlatc: no NumPy dtype for XLA type {dtype}")
    return np.frombuffer(data, dtype=_DTYPES[dtype]).reshape(tuple(shape)).copy()


def to_raw(name: str, value: Any) -> Raw:
    """A triple from anything `np.asarray` takes."""
    # Not np.ascontiguousarray: it makes a 0-d array 1-d.
    a = np.asarray(value)
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    if a.dtype not in _NAMES:
        raise TypeError(
            f"hlatc: input '{name}' has dtype {a.dtype}, which hlatc has no type for "
            f"(known: {', '.join(str(d) for d in _NAMES)})"
        )
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return (_NAMES[a.dtype], tuple(int(d) for d in a.shape), a.tobytes())


def dict_to_numpy(d: Mapping[str, Raw]) -> Dict[str, np.ndarray]:
    return {k: to_numpy(v) for k, v in d.items()}


def dict_to_raw(d: Mapping[str, Any]) -> Dict[str, Raw]:
    return {k: to_raw(k, v) for k, v in d.items()}
