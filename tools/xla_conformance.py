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
{"error": <XLA's message>}. hlatc's conformance test (tests/it/conformance.rs)
checks that hlatc's two forms give XLA the same program shape, instruction
count, scheduling and shardings as the original.

Where DIR/NAME.run exists (the modules the test runs), it also writes
DIR/NAME.xla.pb: XLA's own HloModuleProto of the original, which the test
runs on XLA CPU beside hlatc's reading, with the same inputs.
"""
import glob
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    text = lambda p: xc.hlo.hlo_module_from_text(open(p).read())
    proto = lambda p: xc.hlo.HloModule.from_serialized_hlo_module_proto(open(p, "rb").read())
    for orig in sorted(glob.glob(os.path.join(d, "*.orig.txt"))):
        name = os.path.basename(orig)[: -len(".orig.txt")]
        base = os.path.join(d, name)
        runs = os.path.exists(base + ".run")
        forms = {
            "orig": read(orig, text, base + ".xla.pb" if runs else None),
            "text": read(base + ".hlatc.txt", text),
            "proto": read(base + ".hlatc.pb", proto),
        }
        print(json.dumps({"name": name, "forms": forms}), flush=True)


if __name__ == "__main__":
    main()
