#!/usr/bin/env python3
"""Files that import each other in circles, in every crate of the workspace.

    tools/import_cycles.py [ROOT]            # the circles, then their count
    tools/import_cycles.py [ROOT] --count    # the count alone
    tools/import_cycles.py [ROOT] --check    # exit 1 if there is any

A file imports another when it names an item of that file's module by a
path: `crate::a::b::Item`, `super::x::Item`, `self::x::Item`, or a branch of
a `use` group. A path is resolved to the deepest module that is a file, so
`crate::ir::op::Op` is an import of `ir/op/mod.rs`. A module's own
`mod child;` declarations and the crate root's re-exports are not imports.
A circle is a strongly connected group of more than one file; a file and its
parent module (`mod.rs` reaching into a child it declares, the child naming
its parent's items) are one place and not counted as a circle. Written for
issue 50's before/after count; it reads source text, so an import by a
macro's expansion is not seen.
"""
import os
import re
import sys
from collections import defaultdict

CRATE_ROOTS = ["src", "compiler/src", "passes/src", "models/src", "runtime/src", "train/src",
               "python/src", "filetest/src"]


def strip_comments(src, strings=True):
    """`src` with its comments (and, unless `strings` is false, its string
    literals' contents) blanked, every line where it was."""
    src = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), src)
    src = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), src, flags=re.S)
    if strings:
        # string literals hold paths in docs and messages, not imports
        src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    return src


def closing(src, at):
    """The index of the bracket that closes the one at `at` (the end of
    `src` when none does), skipping string literals."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack, j = [], at
    while j < len(src):
        ch = src[j]
        if ch == '"':
            j += 1
            while j < len(src) and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
        elif ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return j
        j += 1
    return len(src)


def without_test_modules(src):
    """`src` with its `#[cfg(test)] mod x { ... }` bodies blanked (lines
    kept): a unit test naming a sibling is not the module importing it."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", src):
        if m.start() < i:
            continue
        out.append(src[i : m.start()])
        j = closing(src, m.end() - 1)
        out.append(re.sub(r"[^\n]", " ", src[m.start() : j + 1]))
        i = j + 1
    out.append(src[i:])
    return "".join(out)


def expand(path_text):
    """`a::{b, c::{d}}` -> [a::b, a::c::d]."""
    path_text = re.sub(r"\s+", "", path_text)
    m = re.match(r"^(.*?)\{(.*)\}$", path_text)
    if not m:
        return [path_text]
    prefix, body = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        if p:
            out.extend(expand(prefix + p))
    return out


PATH = re.compile(r"\b(crate|super|self)((?:::(?:[A-Za-z_][A-Za-z0-9_]*|\{[^;]*?\}))+)")


def paths_in(src):
    for m in PATH.finditer(src):
        text = m.group(0)
        # a `{...}` group may hold nested braces the regex cut short
        if text.count("{") != text.count("}"):
            text = src[m.start() : closing(src, src.index("{", m.start())) + 1]
        for p in expand(text):
            yield [s for s in p.split("::") if s]


class Crate:
    def __init__(self, root):
        self.root = root
        self.files = {}  # module path tuple -> file
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f.endswith(".rs"):
                    p = os.path.join(dirpath, f)
                    rel = os.path.relpath(p, root)[:-3].split(os.sep)
                    if rel[-1] in ("mod", "lib", "main"):
                        rel = rel[:-1]
                    self.files[tuple(rel)] = p

    def module_of(self, path):
        rel = os.path.relpath(path, self.root)[:-3].split(os.sep)
        if rel[-1] in ("mod", "lib", "main"):
            rel = rel[:-1]
        return tuple(rel)

    def resolve(self, me, segs):
        head, rest = segs[0], segs[1:]
        if head == "crate":
            base = ()
        elif head == "self":
            base = me
        else:
            base = me[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        mod = base
        for s in rest:
            if mod + (s,) in self.files:
                mod = mod + (s,)
            else:
                break
        return mod


def strongly_connected(edges, nodes):
    """The groups of more than one node that reach each other (Tarjan)."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(100000)
    for v in sorted(set(nodes) | set(edges)):
        if v not in index:
            visit(v)
    return sccs


def cycles(root_dir):
    edges = defaultdict(set)
    nodes = set()
    for cr in CRATE_ROOTS:
        croot = os.path.join(root_dir, cr)
        if not os.path.isdir(croot):
            continue
        crate = Crate(croot)
        for mod, path in crate.files.items():
            node = os.path.relpath(path, root_dir)
            nodes.add(node)
            with open(path) as fh:
                src = without_test_modules(strip_comments(fh.read()))
            for segs in paths_in(src):
                tgt = crate.resolve(mod, segs)
                if tgt == () or tgt == mod:
                    continue
                # parent and child modules are one place
                if tgt == mod[: len(tgt)] or mod == tgt[: len(mod)]:
                    continue
                edges[node].add(os.path.relpath(crate.files[tgt], root_dir))
    return sorted(strongly_connected(edges, nodes)), edges


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    sccs, edges = cycles(root)
    if "--count" not in sys.argv:
        for c in sccs:
            print("circle:")
            for f in c:
                inside = sorted(t for t in edges[f] if t in c)
                print(f"  {f} -> {', '.join(inside)}")
    print(f"import circles: {len(sccs)}")
    if "--check" in sys.argv and sccs:
        sys.exit(1)


if __name__ == "__main__":
    main()
