#!/usr/bin/env python3
"""XLA's reading of the conformance modules and of what hlatc made of them.

    python3 tools/xla_conformance.py DIR

For every DIR/NAME.orig.txt (a module as XLA's tests wrote it) this parses,
with XLA's own parser (jaxlib), the original, DIR/NAME.hlatc.txt (hlatc's
printed text) and DIR/NAME.hlatc.pb (hlatc's HloModuleProto), and writes one
JSON line per module to stdout:

  {"name": NAME, "forms": {"orig": R, "text": R, "proto": R}}

where each R is {"layout": <entry_computation_layout>, "instructions": N,
"scheduled": <is_scheduled>, "shardings": [every `sharding={...}` as XLA
prints it, sorted]} or
{"error": <XLA's message>}. hlatc's conformance test (runtime/tests/it/conformance.rs)
checks that hlatc's two forms give XLA the same program shape, instruction
count, scheduling and shardings as the original.

Where DIR/NAME.run exists (the modules the test runs), it also writes
DIR/NAME.xla.pb: XLA's own HloModuleProto of the original, which the test
runs on XLA CPU beside hlatc's reading, with the same inputs.

With HLATC_CONFORMANCE_CACHE naming a directory (scripts/test.sh sets one
outside the clone), each reading is kept there under a sha256 of what
decides it: the file's bytes, how it is parsed, jaxlib's version and this
script's own text. A file read before, by any run, is not parsed again:
XLA's parse of a thousand modules three times is most of the test's time,
and every run reads the same originals and, unless hlatc changed, the same
forms of hlatc's.
"""
import functools
import glob
import hashlib
import json
import os
import re
import sys

from jax._src.lib import xla_client as xc

INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?[^\s=(){}]+\s*=\s*\S")
LAYOUT_KEY = "entry_computation_layout={"
SHARDING_KEY = "sharding={"


def braced(text, start):
    """The text of the braces that open just before `start`."""
    i, depth = start, 1
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start: i - 1]


def shardings(text):
    """Every instruction's sharding, sorted: XLA prints a module in an
    order of its own choosing among equally valid ones (it depends on the
    order of the text it read), so only which shardings occur, and how
    often, is compared."""
    out = []
    for line in text.splitlines():
        if not INSTRUCTION.match(line):
            continue
        start = line.find(", " + SHARDING_KEY)
        if start >= 0:
            out.append(braced(line, start + 2 + len(SHARDING_KEY)))
    return sorted(out)


def describe(module):
    text = module.to_string()
    header = text.split("\n", 1)[0]
    layout = None
    start = header.find(LAYOUT_KEY)
    if start >= 0:
        # The layout's own braces: other attributes may follow it.
        layout = braced(header, start + len(LAYOUT_KEY))
    count = sum(1 for line in text.splitlines() if INSTRUCTION.match(line))
    return {
        "layout": layout,
        "instructions": count,
        "scheduled": "is_scheduled=true" in header,
        "shardings": shardings(text),
    }


def read(path, parse, proto_to=None):
    try:
        module = parse(path)
        if proto_to:
            with open(proto_to, "wb") as f:
                f.write(module.as_serialized_hlo_module_proto())
        return describe(module)
    except Exception as e:  # XLA raises its own status errors
        return {"error": str(e).splitlines()[0][:300]}


@functools.lru_cache(maxsize=None)
def reader_identity():
    """This script's text and jaxlib's version: another of either reads
    every file again."""
    import jaxlib

    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest() + "\0" + jaxlib.__version__


def cache_key(kind, path, wants_proto):
    """What decides `read`'s answer for the file at `path`."""
    h = hashlib.sha256()
    h.update(f"{reader_identity()}\0{kind}\0{wants_proto}\0".encode())
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def cached_read(cache, kind, path, parse, proto_to=None):
    """`read`, kept in the directory `cache` (None: no cache)."""
    if cache is None:
        return read(path, parse, proto_to)
    base = os.path.join(cache, cache_key(kind, path, proto_to is not None))
    try:
        with open(base + ".json") as f:
            answer = json.load(f)
        if proto_to and "error" not in answer:
            with open(base + ".pb", "rb") as f:
                proto = f.read()
            with open(proto_to, "wb") as f:
                f.write(proto)
        return answer
    except (OSError, ValueError):
        pass  # not kept yet, or torn: read it again
    answer = read(path, parse, proto_to)
    tmp = f"{base}.{os.getpid()}.tmp"
    if proto_to and "error" not in answer:
        with open(proto_to, "rb") as f:
            proto = f.read()
        with open(tmp, "wb") as f:
            f.write(proto)
        os.replace(tmp, base + ".pb")
    # The answer last: where it is, its proto is too.
    with open(tmp, "w") as f:
        json.dump(answer, f)
    os.replace(tmp, base + ".json")
    return answer


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    cache = os.environ.get("HLATC_CONFORMANCE_CACHE") or None
    if cache:
        os.makedirs(cache, exist_ok=True)
    text = lambda p: xc.hlo.hlo_module_from_text(open(p).read())
    proto = lambda p: xc.hlo.HloModule.from_serialized_hlo_module_proto(open(p, "rb").read())
    for orig in sorted(glob.glob(os.path.join(d, "*.orig.txt"))):
        name = os.path.basename(orig)[: -len(".orig.txt")]
        base = os.path.join(d, name)
        runs = os.path.exists(base + ".run")
        forms = {
            "orig": cached_read(cache, "text", orig, text, base + ".xla.pb" if runs else None),
            "text": cached_read(cache, "text", base + ".hlatc.txt", text),
            "proto": cached_read(cache, "proto", base + ".hlatc.pb", proto),
        }
        print(json.dumps({"name": name, "forms": forms}), flush=True)


if __name__ == "__main__":
    main()
