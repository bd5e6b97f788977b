"""Arguments the Python side checks itself, refused as the native module
refuses its own (`_hlatc.argument_error`, the same words and classes): a
`UsageTypeError` (also a `TypeError`) for a value of another type, a
`UsageError` (a `ValueError`) for one out of range, each naming the
argument in its message and its `argument`. Its other refusals are made
by `usage_error`, each with its category (`UsageKind`)."""

from __future__ import annotations

import enum
import os
from typing import Any, Optional

import numpy as np

from . import _hlatc


class UsageKind(enum.Enum):
    """A usage error's category, as `UsageError.category` names it: Rust's
    `hlatc::usage::UsageKind` (`_hlatc.USAGE_CATEGORIES`, which a test holds
    these to), so that a refusal made here is sorted as the native
    module's."""

    #: A value outside the range its option or input takes.
    OUT_OF_RANGE = "out_of_range"
    #: Options, or an option and what it is given, that do not fit together.
    CONFLICT = "conflict"
    #: Something hlatc does not do (on this platform, or yet).
    UNSUPPORTED = "unsupported"
    #: A name, tensor or program asked for that is not there.
    NOT_FOUND = "not_found"
    #: Input that is not what it should be: a shape, a type, a malformed value.
    INVALID = "invalid"


def usage_error(kind: UsageKind, message: str, argument: Optional[str] = None,
                code: Optional[str] = None) -> _hlatc.UsageError:
    """`UsageError(message)` of category `kind`, naming `argument` where one
    argument is at fault, its `code` the CLI's for a usage error of that
    kind (`usage.conflict`), as the native module codes its own, or `code`
    (one of `_hlatc.PYTHON_CODES`) where the refusal is a case of its own.
    The class takes its message alone, as `ValueError` does: the fields are
    set on the instance."""
    assert code is None or code in _hlatc.PYTHON_CODES, code
    error = _hlatc.UsageError(message)
    error.category = kind.value
    error.argument = argument
    error.code = code or f"usage.{kind.value}"
    return error


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
