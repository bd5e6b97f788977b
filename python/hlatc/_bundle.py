"""`hlatc.Bundle`: a bundle's tensors, flat, from its `manifest.json`.

A bundle's manifest lists each program's inputs and outputs, the decoder
layers' tensors as runs (`{"layers": [a, b], "index_stride": k, "each":
[...]}`: one entry a tensor, `{layer}` in its name, its index `k` apart
from one layer to the next); a bundle of several programs (gradient
accumulation's pair, a pipeline's four) lists them under `programs`, each
in its own folder with its own manifest. `Bundle` expands the runs and
lists every tensor of every program, one `BundleTensor` each, with the
layer and parameter the manifest states (`hlatc._hlatc.expand_listing`,
the library's own reader of listings).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import _hlatc
from ._types import PathLike

FORMAT_PREFIX = "hlatc-bundle/"


@dataclass(frozen=True)
class BundleTensor:
    """One input or output of one of a bundle's programs."""

    #: The program's name: `"step"` for a bundle of one program, else the
    #: manifest's (`"micro step"`, `"apply step"`, `"warm_up"`, ...).
    program: str
    #: `"input"` or `"output"`.
    kind: str
    #: Its place among the program's inputs or outputs.
    index: int
    name: str
    shape: Tuple[int, ...]
    dtype: str
    role: str
    #: The decoder layer it belongs to (None for the others).
    layer: Optional[int] = None
    #: For a parameter, its master weight, Adam moments or gradient
    #: accumulator, the parameter's stored name (None for the others).
    parameter: Optional[str] = None


def _error(message: str, path: str) -> "_hlatc.FileError":
    e = _hlatc.FileError(message)
    e.path = path
    return e


class Bundle:
    """The bundle `hlatc compile` or `Step.write_bundle` wrote at `path`: its
    manifest (`manifest`), its programs (`programs`) and every tensor of
    each, flat (`tensors`, also by iterating), in the manifest's order. A
    folder without a manifest, or one hlatc cannot read, raises
    `FileError` naming the file."""

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        top = self._read(os.path.join(self.path, "manifest.json"))
        self.manifest: Dict[str, Any] = top
        self.format: str = top["format"]
        self.programs: List[str] = []
        self.tensors: List[BundleTensor] = []
        programs = top.get("programs")
        if programs is None:
            self._add("step", top, os.path.join(self.path, "manifest.json"))
            return
        for p in programs:
            where = os.path.join(self.path, str(p["dir"]), "manifest.json")
            self._add(str(p["name"]), self._read(where), where)

    def _read(self, where: str) -> Dict[str, Any]:
        if not os.path.isdir(self.path):
            raise _error(f"{self.path}: no such bundle directory" if not os.path.exists(self.path)
                         else f"{self.path}: not a directory, so not a bundle", self.path)
        try:
            with open(where, "rb") as f:
                manifest = json.loads(f.read().decode("utf-8"))
        except FileNotFoundError:
            raise _error(f"{where}: missing, so {self.path} is not a bundle", where) from None
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise _error(f"{where}: not a bundle manifest: {e}", where) from None
        found = manifest.get("format") if isinstance(manifest, dict) else None
        if not isinstance(found, str) or not found.startswith(FORMAT_PREFIX):
            raise _error(f"{where}: format {found!r}, not an {FORMAT_PREFIX}N manifest", where)
        return manifest  # type: ignore[no-any-return]

    def _add(self, program: str, manifest: Dict[str, Any], where: str) -> None:
        self.programs.append(program)
        for kind in ("input", "output"):
            entries = manifest.get(kind + "s")
            if not isinstance(entries, list):
                raise _error(f"{where}: no '{kind}s' list", where)
            try:
                self.tensors.extend(_flat(program, kind, entries))
            except (KeyError, TypeError, ValueError) as e:
                raise _error(f"{where}: an entry of '{kind}s' hlatc cannot read: {e!r}",
                             where) from None

    def __iter__(self) -> Iterator[BundleTensor]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def inputs(self, program: Optional[str] = None) -> List[BundleTensor]:
        """The inputs of `program` (every program's when None)."""
        return [t for t in self.tensors if t.kind == "input"
                and (program is None or t.program == program)]

    def outputs(self, program: Optional[str] = None) -> List[BundleTensor]:
        """The outputs of `program` (every program's when None)."""
        return [t for t in self.tensors if t.kind == "output"
                and (program is None or t.program == program)]

    def __repr__(self) -> str:
        return (f"Bundle({self.path!r}, format={self.format!r}, programs={self.programs}, "
                f"tensors={len(self.tensors)})")


def _flat(program: str, kind: str, entries: List[Any]) -> Iterator[BundleTensor]:
    for t in json.loads(_hlatc.expand_listing(json.dumps(entries))):
        layer, parameter = t.get("layer"), t.get("parameter")
        yield BundleTensor(program=program, kind=kind, index=int(t["index"]),
                           name=str(t["name"]), shape=tuple(int(d) for d in t["shape"]),
                           dtype=str(t["dtype"]), role=str(t["role"]),
                           layer=None if layer is None else int(layer),
                           parameter=None if parameter is None else str(parameter))
