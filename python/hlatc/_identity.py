"""A run's identity: what defines the run a checkpoint belongs to, recorded
with it and checked when a run resumes from it or loads it.

The fields (the names the CLI's checkpoints use too):

- `model`: the model config (`Step.config["model"]`);
- `precision`: the precision preset (`"bf16-mixed"`, `"fp32"`, ...);
- `rounding`: the rounding policy of the state updates (the manifest's);
- `optimizer`: AdamW's settings and the learning-rate schedule;
- `tokenizer_sha256`: the sha256 of the tokenizer file's content (None
  without a tokenizer, or when saved without a loader);
- `corpus_fingerprint`: a sha256 over each corpus file's size and sampled
  blocks of its content (None when saved without a loader);
- `layout`: TP, DP, PP, sequence parallelism and ZeRO-1. Recorded, not
  compared: the state converts between layouts (a per-rank checkpoint
  checks its own).

A field recorded as None, or missing (a checkpoint of an older hlatc), is
not compared. A resume whose identity differs is refused with
`IdentityError`, naming each field with both values, unless the caller
names the field in `allow_changes`; each change allowed is kept in the
identity's `changes` (the step, the field, both values), which every later
checkpoint of the run carries on.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _hlatc

FIELDS = ("model", "precision", "rounding", "optimizer", "tokenizer_sha256",
          "corpus_fingerprint", "layout")
#: The fields a resume must match (the layout converts).
COMPARED = FIELDS[:-1]
#: The file of the identity in a checkpoint of `hlatc.Trainer.fit`.
IDENTITY_FILE = "identity.json"

# Sampled blocks of a corpus file: whole up to 4 MiB, else its first and
# last MiB and 16 blocks of 64 KiB spread between.
WHOLE = 4 << 20
EDGE = 1 << 20
BLOCK = 64 << 10
BLOCKS = 16


class IdentityError(_hlatc.UsageError):
    """A checkpoint of another run: `fields` maps each differing field to
    (the checkpoint's value, this run's)."""

    def __init__(self, message: str, fields: Dict[str, Tuple[Any, Any]]) -> None:
        super().__init__(message)
        self.fields = fields


IdentityError.__module__ = "hlatc"


class IdentityWarning(UserWarning):
    """A resume that changed a field of the run's identity on purpose
    (`allow_changes`)."""


IdentityWarning.__module__ = "hlatc"


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def corpus_files(sources: Sequence[str]) -> List[str]:
    """The files `sources` names, as the loader reads them (each glob's
    matches sorted)."""
    out: List[str] = []
    for s in sources:
        if not os.path.exists(s) and glob.has_magic(s):
            out.extend(sorted(glob.glob(s)))
        else:
            out.append(s)
    return out


def corpus_fingerprint(sources: Sequence[str]) -> Optional[str]:
    """A sha256 over each file's size and content (sampled blocks of a file
    over 4 MiB), in order; not the paths, so a corpus copied elsewhere is
    the same. None if a file cannot be read (a FIFO, /dev/stdin)."""
    h = hashlib.sha256()
    for path in corpus_files(sources):
        try:
            st = os.stat(path)
            if not os.path.isfile(path):
                return None
            h.update(f"{st.st_size}\n".encode())
            with open(path, "rb") as f:
                if st.st_size <= WHOLE:
                    h.update(f.read())
                    continue
                h.update(f.read(EDGE))
                span = st.st_size - 2 * EDGE - BLOCK
                for k in range(BLOCKS):
                    f.seek(EDGE + span * k // (BLOCKS - 1))
                    h.update(f.read(BLOCK))
                f.seek(st.st_size - EDGE)
                h.update(f.read(EDGE))
        except OSError:
            return None
    return h.hexdigest()


def of_step(step: Any, loader: Any = None) -> Dict[str, Any]:
    """The identity of a run of `step` (an `hlatc.Step`) on `loader`'s data
    (None: the data unknown)."""
    config = step.config
    # A step of several programs (gradient accumulation's pair, a
    # pipeline's four) has no manifest of its own; its apply step's
    # precision is every program's.
    program = step.apply_step if (step.pp > 1 or step.grad_accum > 1) else step
    manifest = program.manifest
    parallel = dict(config.get("parallel", {}))
    parallel["pp"] = step.pp
    parallel["world_size"] = step.world_size
    identity: Dict[str, Any] = {
        "model": config["model"],
        "precision": config["precision"],
        "rounding": manifest.get("precision", {}).get("rounding_policy"),
        "optimizer": config["optimizer"],
        "tokenizer_sha256": None,
        "corpus_fingerprint": None,
        "layout": parallel,
    }
    if loader is not None:
        tokenizer = getattr(loader, "_tokenizer_path", None)
        if tokenizer is not None:
            identity["tokenizer_sha256"] = sha256_file(tokenizer)
        sources = getattr(loader, "_source_paths", None)
        if sources is not None:
            identity["corpus_fingerprint"] = corpus_fingerprint(sources)
    return identity


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else repr(value)


def _differences(field: str, old: Any, new: Any) -> List[str]:
    """Each difference of a field in words: a dict's by key."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new)):
            if old.get(k) != new.get(k):
                out.append(f"{field}.{k} is {_show(old.get(k))} in the checkpoint, "
                           f"{_show(new.get(k))} in this run")
        return out
    return [f"{field} is {_show(old)} in the checkpoint, {_show(new)} in this run"]


def check_allow(allow: Optional[Iterable[str]]) -> List[str]:
    names = [] if allow is None else ([allow] if isinstance(allow, str) else list(allow))
    for name in names:
        if name not in COMPARED:
            raise _hlatc.UsageError(
                f"allow_changes: {name!r} is not a field of a run's identity; the fields are "
                f"{', '.join(COMPARED)} (the layout needs none: it converts)")
    return names


def check(recorded: Optional[Dict[str, Any]], current: Dict[str, Any], where: str,
          allow: Optional[Iterable[str]], step: int) -> Dict[str, Any]:
    """`current` checked against the identity `recorded` in checkpoint
    `where` (None: a checkpoint that records none, not checked):
    IdentityError naming each differing field not in `allow`. The identity
    to record from now on: `current`, with the changes allowed kept."""
    allowed = check_allow(allow)
    out = dict(current)
    changes = list((recorded or {}).get("changes", []))
    if recorded is None:
        out["changes"] = changes
        return out
    differing: Dict[str, Tuple[Any, Any]] = {}
    for field in COMPARED:
        old, new = recorded.get(field), current.get(field)
        if old is None or new is None or old == new:
            continue
        differing[field] = (old, new)
    refused = {f: v for f, v in differing.items() if f not in allowed}
    if refused:
        lines = [d for f, (o, n) in refused.items() for d in _differences(f, o, n)]
        raise IdentityError(
            f"{where} is a checkpoint of another run: {'; '.join(lines)}. To resume it anyway, "
            f"name the field(s): allow_changes={sorted(refused)!r}", refused)
    for field, (old, new) in differing.items():
        warnings.warn(f"{where}: resuming with {field} changed on purpose (allow_changes): "
                      f"{'; '.join(_differences(field, old, new))}", IdentityWarning, stacklevel=4)
        changes.append({"step": step, "field": field, "checkpoint": old, "run": new})
    out["changes"] = changes
    return out


def to_bytes(identity: Dict[str, Any]) -> bytes:
    return (json.dumps(identity, indent=1, sort_keys=True) + "\n").encode("utf-8")


def from_bytes(data: bytes, where: str) -> Dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _hlatc.CheckpointError(f"{where}: not a run identity: {e}") from None
    if not isinstance(value, dict):
        raise _hlatc.CheckpointError(f"{where}: not a run identity (not a JSON object)")
    return value
