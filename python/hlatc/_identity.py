"""A run's identity: what defines the run a checkpoint belongs to, recorded
with it and checked when a run resumes from it or loads it.

The identity is the CLI's own, a class of the native module
(`_hlatc.RunIdentity`, `hlatc::run_identity` in Rust): its fields, the
names `allow_changes` may use (`_hlatc.IDENTITY_GROUPS` and each field)
and the comparison of two identities are Rust's, so `hlatc.Trainer.fit`
writes the `run.json` that `hlatc train --checkpoint-dir` writes, byte for
byte, and each reads the other's. A resume whose identity differs is
refused with `IdentityError`, naming each field with both values, unless
`allow_changes` names the field or its group; each change allowed is kept
in the identity, which every later checkpoint carries on. What the
weights started from and the data's fields are compared only where both
sides record them (a save or load without a loader knows no data), the
known side kept. The layout is recorded, not refused: the state converts
between layouts (a per-rank checkpoint of `hlatc.jax.Trainer` checks its
own). What is left here is Python's: the exception and warning classes,
the content hash of a state held as arrays, and the warnings.
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _args, _hlatc

class IdentityError(_hlatc.UsageError):
    """A checkpoint of another run: `fields` maps each differing field to
    (the checkpoint's value, this run's)."""

    def __init__(self, message: str, fields: Dict[str, Tuple[Any, Any]]) -> None:
        super().__init__(message)
        self.fields = fields
        # The run's identity against the checkpoint's, as the native
        # module sorts a resume of another run.
        self.category = _args.UsageKind.CONFLICT.value


IdentityError.__module__ = "hlatc"


class IdentityWarning(UserWarning):
    """A resume that changed a field of the run's identity on purpose
    (`allow_changes`)."""


IdentityWarning.__module__ = "hlatc"


#: What a trainer's weights started from: hlatc's initialization drawn
#: from a seed, or a description (`init_of_state`, `_hlatc.init_of_file`).
Start = Tuple[Optional[int], Optional[str]]


def init_of_state(raw: Mapping[str, Tuple[str, Sequence[int], Any]]) -> str:
    """What weights taken from a whole state start from: its content hash
    over every tensor's name, type, shape and bytes, in name order."""
    h = hashlib.sha256()
    for name in sorted(raw):
        ty, shape, data = raw[name]
        h.update(f"{name}\0{ty}\0{list(shape)}\0".encode("utf-8"))
        h.update(np.ascontiguousarray(data).view(np.uint8).tobytes())
    return f"a state, sha256:{h.hexdigest()}"


def of_step(step: Any, loader: Any = None, start: Start = (None, None)) -> _hlatc.RunIdentity:
    """The identity of a run of `step` (an `hlatc.Step`) on `loader`'s data
    (None: the data unknown, its fields left out) from `start`, as `hlatc
    train` records it."""
    tokenizer = getattr(loader, "_tokenizer_path", None) if loader is not None else None
    sources = getattr(loader, "_source_paths", None) if loader is not None else None
    seed, init = start
    return _hlatc.RunIdentity.of_step(step._native, tokenizer,
                                      None if sources is None else [str(s) for s in sources],
                                      seed, init)


def check_allow(allow: Optional[Iterable[str]], current: Optional[_hlatc.RunIdentity] = None
                ) -> List[str]:
    """`allow` as a list; with `current`, each name checked against its
    fields and their groups (a misspelt one would silently allow nothing)."""
    names = [] if allow is None else ([allow] if isinstance(allow, str) else list(allow))
    if current is not None:
        known = current.names
        for name in names:
            if name not in known:
                raise _args.usage_error(
                    _args.UsageKind.NOT_FOUND,
                    f"allow_changes: {name!r} is not a field of a run's identity; name a field "
                    f"(model.rope_theta, precision, ...) or a group "
                    f"({', '.join(_hlatc.IDENTITY_GROUPS)})",
                    argument="allow_changes")
    return names


def check(recorded: Optional[_hlatc.RunIdentity], current: _hlatc.RunIdentity, where: str,
          allow: Optional[Iterable[str]], step: int) -> _hlatc.RunIdentity:
    """`current` checked against the identity `recorded` in checkpoint
    `where` (None: a checkpoint that records none, not checked):
    IdentityError naming each differing field not in `allow` (the data's
    fields compared only where both sides record them). The identity to
    record from now on: `current`, with the changes allowed kept."""
    allowed = check_allow(allow, current)
    if recorded is None:
        return current
    checked, changes = current.check(recorded, allowed, step, where)
    for message in changes:
        warnings.warn(message, IdentityWarning, stacklevel=4)
    return checked
