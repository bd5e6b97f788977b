"""`hlatc.Bundle`: a bundle's tensors, flat, from its `manifest.json`.

A bundle's manifest lists each program's inputs and outputs, the decoder
layers' tensors as runs (`{"layers": [a, b], "index_stride": k, "each":
[...]}`: one entry a tensor, `{layer}` in its name, its index `k` apart
from one layer to the next); a bundle of several programs (gradient
accumulation's pair, a pipeline's four) lists them under `programs`, each
in its own folder with its own manifest. `Bundle` lists every tensor of
every program, one `BundleTensor` each, with the layer and parameter the
manifest states, as the library's reader of a bundle's manifests
(`hlatc._hlatc.ListedBundle`, the artifacts crate's `ListedBundle`) reads
them: this module only makes `BundleTensor`s of the entries it gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from . import _args, _hlatc
from ._types import PathLike


@dataclass(frozen=True)
class BundleTensor:
    """One input or output of one of a bundle's programs."""

    #: The program's name, its folder's: `"step"` for a bundle of one
    #: program, else `"micro_step"`, `"apply_step"`, `"warm_up"`, ...
    #: (`hlatc.Program`).
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
    # A manifest's entry that cannot be read: the CLI's reader of a bundle
    # refuses it as the artifacts' file error, and `ListedBundle` so codes
    # every bundle it cannot list.
    e.code = "artifact.file"
    return e


class Bundle:
    """The bundle `hlatc compile` or `Step.write_bundle` wrote at `path`: its
    manifest (`manifest`), its programs (`programs`) and every tensor of
    each, flat (`tensors`, also by iterating), in the manifest's order. A
    folder without a manifest, or one hlatc cannot read (a format this
    hlatc does not read among them), raises `FileError` naming the file.
    Bundles written before the programs' names were their folders' (`micro
    step`, `apply step`) read as `micro_step` and `apply_step`."""

    def __init__(self, path: PathLike) -> None:
        self.path = _args.path("path", path, "a bundle's directory (str or os.PathLike)")
        # The library's reader of a bundle's manifests (`ListedBundle`):
        # the folders, the formats, the programs and their listings.
        listed = _hlatc.ListedBundle(self.path)
        self.manifest: Dict[str, Any] = listed.manifest
        self.format: str = listed.format
        programs = listed.programs
        self.programs: List[str] = [p.name for p in programs]
        self.tensors: List[BundleTensor] = []
        for p in programs:
            for kind, entries in (("input", p.inputs), ("output", p.outputs)):
                try:
                    self.tensors.extend(_flat(p.name, kind, entries))
                except (AttributeError, KeyError, TypeError, ValueError) as e:
                    raise _error(f"{p.manifest}: an entry of '{kind}s' hlatc cannot read: {e!r}",
                                 p.manifest) from None

    def __iter__(self) -> Iterator[BundleTensor]:
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def inputs(self, program: Optional[str] = None) -> List[BundleTensor]:
        """The inputs of `program` (every program's when None); a program
        the bundle does not hold raises `UsageError` naming those it does."""
        self._check(program)
        return [t for t in self.tensors if t.kind == "input"
                and (program is None or t.program == program)]

    def outputs(self, program: Optional[str] = None) -> List[BundleTensor]:
        """The outputs of `program` (every program's when None); a program
        the bundle does not hold raises `UsageError` naming those it does."""
        self._check(program)
        return [t for t in self.tensors if t.kind == "output"
                and (program is None or t.program == program)]

    def _check(self, program: Optional[str]) -> None:
        if program is None or program in self.programs:
            return
        accepted = "None or a program of this bundle: " + ", ".join(self.programs)
        if not isinstance(program, str):
            raise _hlatc.argument_error("program", program, accepted, of_type=True)
        # A name the bundle does not hold, as the facade sorts a program a
        # step does not have: not found, not out of range.
        raise _args.usage_error(_args.UsageKind.NOT_FOUND,
                                f"program={program!r}: expected {accepted}", argument="program")

    def __repr__(self) -> str:
        return (f"Bundle({self.path!r}, format={self.format!r}, programs={self.programs}, "
                f"tensors={len(self.tensors)})")


def _flat(program: str, kind: str, entries: List[Dict[str, Any]]) -> Iterator[BundleTensor]:
    for t in entries:
        layer, parameter = t.get("layer"), t.get("parameter")
        yield BundleTensor(program=program, kind=kind, index=int(t["index"]),
                           name=str(t["name"]), shape=tuple(int(d) for d in t["shape"]),
                           dtype=str(t["dtype"]), role=str(t["role"]),
                           layer=None if layer is None else int(layer),
                           parameter=None if parameter is None else str(parameter))
