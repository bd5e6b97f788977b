#!/usr/bin/env python3
"""Counts of the contracts issue 50 asked the compiler, not people, to keep.

    tools/contract_counts.py [ROOT] [--list]

Prints, for the source tree at ROOT (the repository by default):

- error variants that carry a `String` (in enums deriving `thiserror::Error`
  or implementing `std::error::Error`), and the places that construct them
  (`Enum::Variant` named outside the enum's own declaration);
- string literals spelling an opcode of the op table, or a scope name of the
  model, outside the files that declare them;
- `_ =>` (or a catch-all binding) arms in a `match` whose other arms are
  `Op::` patterns: an op added later would fall into them unseen;
- import circles between files (tools/import_cycles.py);
- `contains("` in tests: assertions on sentences.

`--list` prints where each one is. Heuristics over source text (no type
information), so each figure is an upper bound on what it names; run it on
two trees and compare (`git worktree add /tmp/before <commit>`).
"""
import os
import re
import sys

from import_cycles import closing, cycles, strip_comments, without_test_modules

SKIP_DIRS = {"target", ".git", ".cache", "node_modules", "conformance"}


def rust_files(root):
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for f in files:
            if f.endswith(".rs"):
                yield os.path.join(dirpath, f)


def is_test_file(path):
    parts = path.split(os.sep)
    return "tests" in parts or "benches" in parts or "examples" in parts


def block_at(src, open_brace):
    """The text inside the brace at `open_brace`, and where it closes."""
    end = closing(src, open_brace)
    return src[open_brace + 1 : end], end


def top_level_items(body):
    """Splits an enum body or match body at its top-level commas."""
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        items.append(cur)
    return items


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


FREE_TEXT_FIELD = re.compile(r"\b(message|reason|detail|text|why)\s*:\s*String\b")


def string_error_variants(root, files):
    """Error variants that carry a sentence: a `String` field named as
    text (`message`, `reason`, ...) or a lone `String` (`Invalid(String)`).
    A `String` that names something (a tensor, a file, a key) is data."""
    enums = []  # (file, enum, variant, line)
    for path, src in files.items():
        code = strip_comments(src, strings=False)
        error_enums = set(re.findall(r"impl\s+(?:std::error::)?Error\s+for\s+(\w+)", code))
        for m in re.finditer(r"#\[derive\(([^)]*)\)\]\s*(?:#\[[^\]]*\]\s*)*pub(?:\([^)]*\))?\s+enum\s+(\w+)[^{]*\{", code):
            derives, name = m.group(1), m.group(2)
            if "Error" not in derives and name not in error_enums:
                continue
            body, _ = block_at(code, m.end() - 1)
            for item in top_level_items(body):
                item_clean = re.sub(r"#\[[^\]]*\]", "", item, flags=re.S).strip()
                vm = re.match(r"(\w+)\s*([({].*)?$", item_clean, flags=re.S)
                if not vm or not vm.group(2):
                    continue
                fields = vm.group(2)
                display = re.search(r'#\[error\("((?:[^"\\]|\\.)*)"', item)
                sentence = display is not None and re.fullmatch(r"(?:[^{]*: )?\{0\}", display.group(1))
                lone = re.fullmatch(r"\(\s*String\s*\)", fields.strip()) and sentence
                if FREE_TEXT_FIELD.search(fields) or lone:
                    pos = m.end() + body.find(item)
                    enums.append((path, name, vm.group(1), line_of(code, pos)))
    sites = []
    if enums:
        names = "|".join(re.escape(f"{e}::{v}") for (_, e, v, _) in enums)
        pat = re.compile(r"\b(" + names + r")\b\s*([({])")
        for p, src in files.items():
            code = strip_comments(src, strings=False)
            for m in pat.finditer(code):
                # a pattern (a match arm, `if let`, `matches!`) reads it
                open_at = m.end() - 1
                end = closing(code, open_at)
                if re.match(r"\s*(=>|\||\))", code[end + 1 : end + 8]) or re.search(
                        r"(matches!\(|if let |while let )[^;{]*$", code[max(0, m.start() - 60) : m.start()]):
                    continue
                sites.append((p, m.group(1), line_of(code, m.start())))
    return enums, sites


def op_table_spellings(root):
    desc = os.path.join(root, "compiler/src/ir/op")
    names = set()
    for f in os.listdir(desc) if os.path.isdir(desc) else []:
        if f.endswith(".rs"):
            src = open(os.path.join(desc, f)).read()
            names |= set(re.findall(r'opcode:\s*"([a-z0-9-]+)"', src))
            names |= set(re.findall(r'=>\s*"([a-z][a-z0-9-]*)"', src))
    # spellings of one short word would match unrelated text; keep the
    # hyphenated and the op-looking ones the table has
    return {n for n in names if len(n) > 2}


SCOPE_FILES = ("compiler/src/graph/scope.rs", "compiler/src/build/scope.rs")


def scope_names(root):
    names = set()
    for f in SCOPE_FILES:
        p = os.path.join(root, f)
        if os.path.exists(p):
            names |= set(re.findall(r'pub const \w+: &str = "([a-z_./]+)"', open(p).read()))
    return names


def literal_sites(root, files, words, declaring):
    out = []
    if not words:
        return out
    for path, src in files.items():
        rel = os.path.relpath(path, root)
        if rel.startswith(declaring) or is_test_file(rel):
            continue
        code = without_test_modules(strip_comments(src, strings=False))
        for m in re.finditer(r'"([a-z][a-z0-9_./-]*)"', code):
            if m.group(1) in words:
                out.append((rel, m.group(1), line_of(code, m.start())))
    return out


def wildcard_op_arms(root, files):
    out = []
    for path, src in files.items():
        code = strip_comments(src, strings=False)
        for m in re.finditer(r"\bmatch\b[^{;]*\{", code):
            body, _ = block_at(code, m.end() - 1)
            arms = top_level_items(re.sub(r"=>\s*\{", "=> {", body))
            pats = []
            for a in arms:
                if "=>" in a:
                    pats.append(a.split("=>")[0].strip())
            if not any(re.match(r"(&?\s*)?Op::", p) for p in pats):
                continue
            for p in pats:
                if re.fullmatch(r"_|[a-z_][a-z0-9_]*", p.split(" if ")[0].strip()):
                    out.append((os.path.relpath(path, root), line_of(code, m.start())))
                    break
    return out


def contains_assertions(root, files):
    out = []
    for path, src in files.items():
        rel = os.path.relpath(path, root)
        text = src if is_test_file(rel) else "".join(
            src[m.start() : block_at(src, m.end() - 1)[1]]
            for m in re.finditer(r"#\[cfg\(test\)\]\s*mod\s+\w+\s*\{", src))
        for m in re.finditer(r'contains\("', text):
            out.append(rel)
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    listing = "--list" in sys.argv
    files = {p: open(p, encoding="utf-8", errors="replace").read() for p in rust_files(root)}
    enums, sites = string_error_variants(root, files)
    opcodes = op_table_spellings(root)
    op_lits = literal_sites(root, files, opcodes, "compiler/src/ir/op")
    # The scope names of this checkout, so that two trees are counted
    # against the same words.
    scopes = scope_names(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    scope_lits = literal_sites(root, files, scopes, SCOPE_FILES[0].rsplit("/", 1)[0])
    arms = wildcard_op_arms(root, files)
    circles = len(cycles(root)[0])
    contains = contains_assertions(root, files)
    rows = [
        ("free-text error variants (a sentence as a String)", len(enums)),
        ("  their construction sites", len(sites)),
        ("opcode string literals outside the op table", len(op_lits)),
        ("scope string literals outside graph/scope.rs", len(scope_lits)),
        ("`_ =>` arms in matches over Op", len(arms)),
        ("import circles", circles),
        ('`contains("` in tests', len(contains)),
    ]
    for name, n in rows:
        print(f"{name:<48} {n}")
    if listing:
        print("\n# free-text error variants")
        for p, e, v, l in enums:
            print(f"{os.path.relpath(p, root)}:{l}: {e}::{v}")
        print("\n# opcode literals")
        for p, w, l in op_lits:
            print(f"{p}:{l}: \"{w}\"")
        print("\n# scope literals")
        for p, w, l in scope_lits:
            print(f"{p}:{l}: \"{w}\"")
        print("\n# `_ =>` arms over Op")
        for p, l in arms:
            print(f"{p}:{l}")


if __name__ == "__main__":
    main()
