#!/usr/bin/env python3
"""Files that import each other in circles, and arrows back up, in every
crate of the workspace.

    tools/import_cycles.py [ROOT]            # each circle and arrow, a table per crate, the counts
    tools/import_cycles.py [ROOT] --count    # the counts alone
    tools/import_cycles.py [ROOT] --check    # exit 1 on any circle, or an arrow back
                                             # up in CHECKED_ARROWS

What is an import. A file imports the file that defines the item a path
names: `crate::a::b::Item`, `super::x::Item`, `self::x::Item`, `child::Item`
(a module the file declares), `m::Item` where a private `use` bound `m` to
one of the crate's modules, or a branch of a `use` group. The path is walked
down to the deepest module that is a file, and its next segment, when that
file does not define it but re-exports it (`pub use error::Error;`, `pub
use x::*`), is followed to where it is defined: `crate::Error` with
`pub use error::Error;` in `lib.rs` is an import of `error.rs`. Not imports:
`mod x;` declarations, `pub use` re-exports themselves, a `use` that only
names a module (`use crate::bundle;` imports what `bundle::X` later names),
paths into other crates, and `#[cfg(test)] mod x { ... }` bodies. A glob
`use super::*` imports the parent's file (its re-exports not followed).

What is counted.
- An arrow back up: an import of an ancestor module's own item (`super::X`,
  `crate::X` defined in `lib.rs` or a parent `mod.rs`, not re-exported
  there) by a file the ancestor in turn imports, directly or through other
  files: the two are in one circle through the parent. A child naming its
  parent's item when the parent imports nothing of it is not counted.
- A circle: a strongly connected group of more than one file, with arrows
  back up left out of the graph (each of them is listed on its own).
With both at 0 no file reaches itself by imports.

What `--check` refuses. Any circle, in any crate, and any arrow back up
in a crate of CHECKED_ARROWS (train/ alone: the other crates' arrows back
up are listed and counted, not refused, until they are taken apart too).

Written for issue 50's before/after count, extended for issue 61 (parent
and child files took no part before, and re-exports hid where an item
lives). It reads source text, so an import by a macro's expansion is not
seen.
"""
import os
import re
import sys
from collections import defaultdict

CRATE_ROOTS = ["src", "compiler/src", "passes/src", "models/src", "runtime/src", "step/src",
               "artifacts/src", "train/src",
               "python/src", "filetest/src"]
# The crates whose arrows back up `--check` refuses (issue 61's train/;
# the others' are reported).
CHECKED_ARROWS = ["step/src", "artifacts/src", "train/src"]
def _blank(text):
    """`text` with every character but its line breaks a space."""
    return re.sub(r"[^\n]", " ", text)


def _literal_end(src, i):
    """Where the string, byte string, raw string or char literal starting
    at `i` ends (one past its closing quote), or None when `i` starts
    none (a lifetime's `'`, an identifier that merely begins with `r`).
    Escapes are skipped whole, `\\` before a line break included: a
    string continued at a line's end runs on to its real closing quote."""
    j = i
    if src.startswith(("br", "rb"), j):
        j += 2
    elif src[j] in "rb":
        j += 1
    raw = "r" in src[i:j]
    if raw:
        k = j
        while k < len(src) and src[k] == "#":
            k += 1
        if k >= len(src) or src[k] != '"':
            return None
        close = '"' + "#" * (k - j)
        end = src.find(close, k + 1)
        return len(src) if end < 0 else end + len(close)
    if j < len(src) and src[j] == '"':
        k = j + 1
        while k < len(src) and src[k] != '"':
            k += 2 if src[k] == "\\" else 1
        return min(k + 1, len(src))
    if j < len(src) and src[j] == "'":
        # a char literal: an escape, or one character, then `'`; anything
        # else (`'a`, `'static`) is a lifetime or a label
        if src.startswith("\\", j + 1):
            k = j + 3
            while k < len(src) and src[k] != "'" and src[k] != "\n":
                k += 1
            return k + 1 if k < len(src) and src[k] == "'" else None
        if j + 2 < len(src) and src[j + 2] == "'" and src[j + 1] != "\n":
            return j + 3
    return None


def strip_comments(src, strings=True):
    """`src` with its comments (and, unless `strings` is false, its string
    and char literals' contents) blanked, every line where it was.

    A small lexer, not a pattern: a comment's text can hold quotes, a
    string can hold `//` and `/*`, a string can run over lines (continued
    by `\\` at a line's end, or not), and raw strings hold unescaped
    quotes. A pattern that missed one of these read the rest of a file as
    one string and cut it short (issue 91)."""
    out, i, n = [], 0, len(src)
    while i < n:
        ch = src[i]
        if src.startswith("//", i):
            end = src.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        if src.startswith("/*", i):
            depth, k = 1, i + 2
            while k < n and depth:
                if src.startswith("/*", k):
                    depth, k = depth + 1, k + 2
                elif src.startswith("*/", k):
                    depth, k = depth - 1, k + 2
                else:
                    k += 1
            out.append(_blank(src[i:k]))
            i = k
            continue
        starts_word = i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")
        if ch in "\"'" or (ch in "rb" and starts_word):
            end = _literal_end(src, i)
            if end is not None:
                literal = src[i:end]
                if strings:
                    # the opening (`r##"`, `b'`) and closing (`"##`, `'`) kept
                    quote = min(k for k in (literal.find('"'), literal.find("'")) if k >= 0)
                    tail = 1 + literal[:quote].count("#")
                    literal = (literal[: quote + 1] + _blank(literal[quote + 1 : len(literal) - tail])
                               + literal[len(literal) - tail :])
                out.append(literal)
                i = end
                continue
        out.append(ch)
        i += 1
    return "".join(out)


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


def paths_in(src, pattern=PATH, texts=False):
    """Each path `pattern` finds in `src`, as its segments (with the path's
    text, one leaf of a `use` group, when `texts`)."""
    for m in pattern.finditer(src):
        text = m.group(0)
        # a `{...}` group may hold nested braces the regex cut short
        if text.count("{") != text.count("}"):
            text = src[m.start() : closing(src, src.index("{", m.start())) + 1]
        for p in expand(text):
            segs = [s for s in p.split("::") if s]
            yield (segs, p) if texts else segs


USE = re.compile(r"(\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]+);")
ITEM = r"\b(?:fn|struct|enum|union|const|static|type|trait|mod)\s+{}\b|macro_rules!\s*{}\b"


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
        self.src = {}  # module -> its text, comments, strings and tests blanked
        self.reexports = {}  # module -> {name: segments, or "*": [segments...]}
        self.aliases = {}  # module -> {local name: absolute module path}
        for mod, path in self.files.items():
            with open(path) as fh:
                self.src[mod] = without_test_modules(strip_comments(fh.read()))
        for mod in self.files:
            self.reexports[mod] = self._reexports(mod)
        for mod in self.files:
            self.aliases[mod] = self._aliases(mod)

    def module_of(self, path):
        rel = os.path.relpath(path, self.root)[:-3].split(os.sep)
        if rel[-1] in ("mod", "lib", "main"):
            rel = rel[:-1]
        return tuple(rel)

    def children(self, mod):
        return {m[-1] for m in self.files if len(m) == len(mod) + 1 and m[: len(mod)] == mod}

    def uses(self, mod, public):
        """`mod`'s `use` statements that are (or are not) re-exports, each
        as its leaves: (segments, the name it binds)."""
        for m in USE.finditer(self.src[mod]):
            if bool(m.group(1)) != public:
                continue
            # `a as b` kept through `expand`, which drops spaces
            for p in expand(re.sub(r"\s+as\s+", "@", m.group(2))):
                p, _, name = p.partition("@")
                segs = [s for s in p.split("::") if s]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                if segs:
                    yield segs, name or segs[-1]

    def _reexports(self, mod):
        table = {}
        for segs, name in self.uses(mod, public=True):
            if segs[-1] == "*":
                table.setdefault("*", []).append(segs[:-1])
            else:
                table[name] = segs
        return table

    def _aliases(self, mod):
        """Local names a private `use` binds to one of the crate's modules."""
        table = {}
        for segs, name in self.uses(mod, public=False):
            if segs[-1] == "*":
                continue
            absolute = self.absolute(mod, segs, aliases=False)
            if absolute is not None and absolute[0] in self.files and not absolute[1]:
                table[name] = absolute[0]
        return table

    def absolute(self, me, segs, aliases=True):
        """(the deepest module file `segs` reaches from `me`, the segments
        left after it), or None for a path into another crate."""
        head, rest = segs[0], segs[1:]
        if head == "crate":
            base = ()
        elif head == "self":
            base = me
        elif head == "super":
            base = me[:-1]
            while rest and rest[0] == "super":
                base, rest = base[:-1], rest[1:]
        elif me + (head,) in self.files:
            base = me + (head,)
        elif aliases and head in self.aliases.get(me, {}):
            base = self.aliases[me][head]
        else:
            return None
        mod = base
        while rest and mod + (rest[0],) in self.files:
            mod, rest = mod + (rest[0],), rest[1:]
        if rest and rest[0] == "self":
            rest = rest[1:]
        return mod, rest

    def defines(self, mod, name):
        return re.search(ITEM.format(re.escape(name), re.escape(name)), self.src[mod]) is not None

    def owner(self, me, segs, seen=0):
        """The file whose own item `segs` names from `me`, following `pub
        use` re-exports; None for another crate's item or a module named
        whole (`use crate::a;` binds a name, it uses nothing yet)."""
        found = self.absolute(me, segs)
        if found is None or seen > 20:
            return None
        mod, rest = found
        if not rest:
            return None
        table = self.reexports[mod]
        name = rest[0]
        if name != "*" and name in table and not self.defines(mod, name):
            return self.owner(mod, table[name] + rest[1:], seen + 1)
        if name != "*" and not self.defines(mod, name):
            for glob in table.get("*", ()):
                target = self.absolute(mod, glob)
                if target and not target[1] and target[0] in self.files:
                    if self.defines(target[0], name) or name in self.reexports[target[0]]:
                        return self.owner(mod, glob + rest, seen + 1)
        return mod

    def imports(self, me):
        """(path text, the file whose item it names) for every import of
        `me`'s: paths from `crate`, `super`, `self`, a child module or a
        name a private `use` binds to a module; `pub use` re-exports are
        left out (they import nothing for the file itself)."""
        src = USE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)) if m.group(1) else m.group(0),
                      self.src[me])
        heads = sorted(self.children(me) | set(self.aliases[me]))
        pattern = PATH
        if heads:
            pattern = re.compile(r"(?<![\w:])(crate|super|self|" + "|".join(heads) + r")"
                                 r"((?:::(?:[A-Za-z_][A-Za-z0-9_]*|\*|\{[^;]*?\}))+)")
        for segs, text in paths_in(src, pattern, texts=True):
            owner = self.owner(me, segs)
            if owner is not None and owner != me:
                yield text, owner


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


def ancestor(a, b):
    """Whether module `a` is `b`'s parent, or its parent's, and so on."""
    return len(a) < len(b) and b[: len(a)] == a


def graph(root_dir):
    """Every file's imports: {file: {imported file: [path texts]}}, and
    each file's crate directory and module path."""
    edges = defaultdict(lambda: defaultdict(list))
    where = {}
    for cr in CRATE_ROOTS:
        croot = os.path.join(root_dir, cr)
        if not os.path.isdir(croot):
            continue
        crate = Crate(croot)
        for mod, path in crate.files.items():
            node = os.path.relpath(path, root_dir)
            where[node] = (cr, mod)
            for text, owner in crate.imports(mod):
                target = os.path.relpath(crate.files[owner], root_dir)
                if text not in edges[node][target]:
                    edges[node][target].append(text)
    return edges, where


def analyse(root_dir):
    """(circles, arrows back up, edges, where): circles as sorted lists of
    files; arrows back up as (file, ancestor file, [path texts])."""
    edges, where = graph(root_dir)
    nodes = set(where)
    plain = {
        f: {t for t in ts if not ancestor(where[t][1], where[f][1])}
        for f, ts in edges.items()
    }
    circles = sorted(strongly_connected(plain, nodes))
    group = {}
    for i, c in enumerate(strongly_connected({f: set(ts) for f, ts in edges.items()}, nodes)):
        for f in c:
            group[f] = i
    arrows = sorted(
        (f, t, texts)
        for f, ts in edges.items()
        for t, texts in ts.items()
        if ancestor(where[t][1], where[f][1]) and f in group and group.get(t) == group[f]
    )
    return circles, arrows, edges, where


def cycles(root_dir):
    """The circles, and every file's imported files (for contract_counts.py)."""
    circles, _, edges, _ = analyse(root_dir)
    return circles, {f: set(ts) for f, ts in edges.items()}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.join(os.path.dirname(__file__), "..")
    circles, arrows, edges, where = analyse(root)
    if "--count" not in sys.argv:
        for c in circles:
            print("circle:")
            for f in c:
                inside = sorted(t for t in edges[f] if t in c)
                print(f"  {f} -> {', '.join(inside)}")
        for f, t, texts in arrows:
            print(f"arrow back up: {f} -> {t} ({', '.join(texts)})")
        print("per crate (circles, arrows back up):")
        for cr in CRATE_ROOTS:
            n_c = sum(1 for c in circles if where[c[0]][0] == cr)
            n_a = sum(1 for f, _, _ in arrows if where[f][0] == cr)
            print(f"  {cr:<14} {n_c} {n_a}")
    print(f"import circles: {len(circles)}")
    print(f"arrows back up: {len(arrows)}")
    over = sorted({where[c[0]][0] for c in circles})
    checked = [a for a in arrows if where[a[0]][0] in CHECKED_ARROWS]
    if "--check" in sys.argv and (over or checked):
        sys.exit(1)


if __name__ == "__main__":
    main()
