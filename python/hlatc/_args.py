"""Arguments the Python side checks itself, refused as the native module
refuses its own (`_hlatc.argument_error`, the same words and classes): a
`UsageTypeError` (also a `TypeError`) for a value of another type, a
`UsageError` (a `ValueError`) for one out of range, each naming the
argument in its message and its `argument`."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _hlatc


def check_int(name: str, value: Any, least: int, accepted: str) -> None:
    """`value`, the argument `name`, is an int of `least` or more
    (`accepted` says so in words); bool is no count."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise _hlatc.argument_error(name, value, accepted, of_type=True)
    if value < least:
        raise _hlatc.argument_error(name, value, accepted, of_type=False)


def path(name: str, value: Any, accepted: str = "a path (str or os.PathLike)") -> str:
    """`value`, the argument `name`, as a path."""
    if not isinstance(value, (str, os.PathLike)):
        raise _hlatc.argument_error(name, value, accepted, of_type=True)
    return os.fspath(value)


def check_step(value: Any) -> None:
    """`value`, the argument `step`, is an `hlatc.Step`."""
    from . import Step

    if not isinstance(value, Step):
        raise _hlatc.argument_error("step", value, "an hlatc.Step (compile_step's)",
                                    of_type=True)
