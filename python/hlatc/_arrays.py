"""NumPy arrays to and from the native module's `(dtype, shape, data)`
triples: `dtype` XLA's type name, `data` a 1-D NumPy array over the
tensor's little-endian row-major bytes.

Neither direction copies here: a caller's array is viewed as its bytes
(only an array that is not C-contiguous, or not little-endian, is copied
first), and the Rust core copies those bytes once into its tensor; a
tensor coming back is an array over the buffer Rust hands NumPy, viewed
as its dtype and shape."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

import ml_dtypes
import numpy as np
import numpy.typing as npt

from . import _hlatc

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

#: A tensor handed to the native module: a view of its bytes.
RawIn = Tuple[str, Sequence[int], npt.NDArray[np.uint8]]
#: A tensor the native module gives back: an array over its buffer.
RawOut = Tuple[str, List[int], npt.NDArray[Any]]
Raw = Union[RawIn, RawOut]


def to_numpy(raw: Raw) -> npt.NDArray[Any]:
    """The tensor of a triple: a view of the array Rust made, no copy."""
    dtype, shape, data = raw
    if dtype not in _DTYPES:
        raise TypeError(f"hlatc: no NumPy dtype for XLA type {dtype}")
    return data.view(_DTYPES[dtype]).reshape(tuple(shape))


def to_raw(name: str, value: npt.ArrayLike) -> RawIn:
    """A triple from anything `np.asarray` takes: its bytes viewed, not copied."""
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        a = np.asarray(None)
    if a.dtype not in _NAMES:
        raise _hlatc.argument_error(
            name, value, "an array of a type hlatc has (NumPy "
            f"{', '.join(str(d) for d in _NAMES)})", of_type=True)
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    # Not np.ascontiguousarray: it makes a 0-d array 1-d.
    if not a.flags.c_contiguous:
        a = a.copy(order="C")
    return (_NAMES[a.dtype], tuple(int(d) for d in a.shape), a.reshape(-1).view(np.uint8))


def dict_to_numpy(d: Mapping[str, RawOut]) -> Dict[str, npt.NDArray[Any]]:
    return {k: to_numpy(v) for k, v in d.items()}


def dict_to_raw(d: Mapping[str, npt.ArrayLike], argument: str) -> Dict[str, RawIn]:
    """The tensors of `d`, the argument `argument`: a dict of arrays by
    name, refused naming it when it is not."""
    if not isinstance(d, Mapping) or not all(isinstance(k, str) for k in d):
        raise _hlatc.argument_error(argument, d, "a dict of arrays by name (str)", of_type=True)
    return {k: to_raw(f"{argument}[{k!r}]", v) for k, v in d.items()}


def list_of_dicts_to_raw(ds: Sequence[Mapping[str, npt.ArrayLike]],
                         argument: str) -> List[Dict[str, RawIn]]:
    """`dict_to_raw` of each of `ds` (one per rank), refused naming it
    when it is not a list."""
    if isinstance(ds, (str, bytes, Mapping)) or not isinstance(ds, Sequence):
        raise _hlatc.argument_error(argument, ds, "a list of dicts of arrays, one per rank",
                                    of_type=True)
    return [dict_to_raw(d, f"{argument}[{i}]") for i, d in enumerate(ds)]
