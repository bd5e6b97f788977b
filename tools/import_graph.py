#!/usr/bin/env python3
"""Draws a crate's imports between its top-level modules (or layers).

    tools/import_graph.py compiler/src [--depth 1|2]

Prints each module's imports, the cycles (strongly connected components with
more than one module) and, given the layer order in LAYERS, every arrow that
points back up the pipeline. Used for the before/after figures of the layout
change; `compiler/tests/it/layering.rs` enforces the same rule in CI.
"""
import os
import re
import sys
from collections import defaultdict

from import_cycles import paths_in, strip_comments, strongly_connected

LAYERS = ["util", "ir", "analysis", "formats", "graph"]


def use_targets(src):
    """Every path a file names from its crate root, as its first two
    segments: `crate::a::b`, and each branch of `use crate::{a::x, b::{y, z}}`."""
    out = []
    for segs in paths_in(src):
        if segs[0] == "crate" and len(segs) > 1 and re.match(r"[a-z_]", segs[1]):
            out.append((segs[1], segs[2] if len(segs) > 2 and re.match(r"[a-z_]", segs[2]) else None))
    return out


def module_of(root, path, depth):
    rel = os.path.relpath(path, root)
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return "::".join(parts[:depth]) if parts else "lib"


def main():
    root = sys.argv[1]
    depth = int(sys.argv[sys.argv.index("--depth") + 1]) if "--depth" in sys.argv else 1
    edges = defaultdict(set)
    mods = set()
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(dirpath, f)
            me = module_of(root, p, depth)
            if me in ("", "lib"):
                continue
            mods.add(me)
            with open(p) as fh:
                src = strip_comments(fh.read())
            for a, b in use_targets(src):
                tgt = a if depth == 1 or b is None else f"{a}::{b}"
                # a crate-root re-export names no module
                if a[0].isupper():
                    continue
                if tgt.split("::")[0] != me.split("::")[0] or depth > 1:
                    if tgt != me and not me.startswith(tgt + "::") and not tgt.startswith(me + "::"):
                        edges[me].add(tgt)
    for m in sorted(mods):
        print(f"{m} -> {' '.join(sorted(edges[m]))}")
    sccs = strongly_connected(edges, mods)
    # count elementary 2-cycles as well for the headline
    pairs = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
    print(f"\nstrongly connected groups: {len(sccs)}")
    for c in sccs:
        print("  " + " <-> ".join(c))
    print(f"mutual imports (a -> b and b -> a): {len(pairs)}")
    for a, b in pairs:
        print(f"  {a} <-> {b}")
    if all(m.split("::")[0] in LAYERS for m in mods):
        back = [(a, b) for a in edges for b in edges[a]
                if b.split("::")[0] in LAYERS and LAYERS.index(b.split("::")[0]) > LAYERS.index(a.split("::")[0])]
        print(f"arrows back up the pipeline ({' < '.join(LAYERS)}): {len(back)}")
        for a, b in sorted(back):
            print(f"  {a} -> {b}")


if __name__ == "__main__":
    main()
