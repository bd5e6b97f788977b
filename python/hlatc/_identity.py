"""A run's identity: what defines the run a checkpoint belongs to, recorded
with it and checked when a run resumes from it or loads it.

The identity is the CLI's own (`hlatc::run_identity` in Rust, reached
through the native module), so `hlatc.Trainer.fit` writes the `run.json`
that `hlatc train --checkpoint-dir` writes, byte for byte, and each reads
the other's: a flat map of fields (`model.rope_theta`, `precision`,
`rounding`, `optimizer.beta2`, `schedule.max_lr`, `tokenizer` (its content
hash), `corpus` (a fingerprint of its files' content), `init` (what the
weights started from: the seed of hlatc's initialization, or the content
hash of the checkpoint or state they were read from; compared where both
sides record it), `layout`) and the changes resumes were allowed to make. A resume whose identity differs is
refused with `IdentityError`, naming each field with both values, unless
`allow_changes` names the field or its group (`model`, `precision`,
`rounding`, `optimizer`, `schedule`, `tokenizer`, `corpus`, `data`,
`init`); each change
allowed is kept in the identity, which every later checkpoint carries on.
The layout is recorded, not refused: the state converts between layouts
(a per-rank checkpoint of `hlatc.jax.Trainer` checks its own).
"""

from __future__ import annotations

import hashlib
import json
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


def of_step(step: Any, loader: Any = None, start: Start = (None, None)) -> Dict[str, Any]:
    """The identity of a run of `step` (an `hlatc.Step`) on `loader`'s data
    (None: the data unknown) from `start`, as `hlatc train` records it."""
    tokenizer = getattr(loader, "_tokenizer_path", None) if loader is not None else None
    sources = getattr(loader, "_source_paths", None) if loader is not None else None
    seed, init = start
    text = _hlatc.run_identity(step._native, tokenizer,
                               None if sources is None else [str(s) for s in sources],
                               seed, init)
    value: Dict[str, Any] = json.loads(text)
    return value


def check_allow(allow: Optional[Iterable[str]], current: Optional[Dict[str, Any]] = None
                ) -> List[str]:
    """`allow` as a list; with `current`, each name checked against its
    fields and their groups (a misspelt one would silently allow nothing)."""
    names = [] if allow is None else ([allow] if isinstance(allow, str) else list(allow))
    if current is not None:
        known = _hlatc.identity_names(json.dumps(current))
        for name in names:
            if name not in known:
                groups = ", ".join(
                    n for n in known if "." not in n and n in _hlatc.IDENTITY_GROUPS)
                raise _args.usage_error(
                    _args.UsageKind.NOT_FOUND,
                    f"allow_changes: {name!r} is not a field of a run's identity; name a field "
                    f"(model.rope_theta, precision, ...) or a group ({groups})",
                    argument="allow_changes")
    return names


#: The fields of the data, which a run without a loader does not know.
DATA_FIELDS = ("tokenizer", "corpus")



def check(recorded: Optional[Dict[str, Any]], current: Dict[str, Any], where: str,
          allow: Optional[Iterable[str]], step: int) -> Dict[str, Any]:
    """`current` checked against the identity `recorded` in checkpoint
    `where` (None: a checkpoint that records none, not checked):
    IdentityError naming each differing field not in `allow`. The identity
    to record from now on: `current`, with the changes allowed kept."""
    allowed = check_allow(allow, current)
    if recorded is None:
        return current
    # The data's fields are left out where the data was not known (a save
    # or load without a loader): not compared, the known side kept.
    mine, theirs = dict(current["fields"]), dict(recorded.get("fields", {}))
    for field in DATA_FIELDS:
        if field in theirs and field not in mine:
            mine[field] = theirs[field]
        elif field in mine and field not in theirs:
            theirs[field] = mine[field]
    current = {**current, "fields": mine}
    recorded = {**recorded, "fields": theirs}
    ok, text, changes = _hlatc.check_run_identity(
        json.dumps(current), json.dumps(recorded), allowed, step, where)
    if not ok:
        raise IdentityError(text, {field: (saved, now) for field, saved, now in changes})
    for field, saved, now in changes:
        warnings.warn(f"{where}: resuming with {field} changed on purpose (allow_changes): "
                      f"{saved} in the checkpoint, {now} in this run", IdentityWarning,
                      stacklevel=4)
    value: Dict[str, Any] = json.loads(text)
    return value
