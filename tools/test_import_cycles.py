#!/usr/bin/env python3
"""Tests of tools/import_cycles.py: the check sees a planted circle, even
behind the literals and comments that once cut a file's reading short.

    python3 tools/test_import_cycles.py
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_cycles import analyse, strip_comments  # noqa: E402

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "import_cycles.py")

# Each of these came before the import that closes the circle; a reader
# that took any of them for the start of a string never reaches it.
TRAPS = {
    "continued string": 'const A: &str = "first line \\\n    second line";',
    "string holding a comment opener": 'const B: &str = "http://x /* not a comment";',
    "raw string with quotes": 'const C: &str = r#"say "hi" \\"#;',
    "char literal of a quote": "const D: char = '\"';",
    "escaped quote char": "const E: char = '\\'';",
    "lifetime": "fn f<'a>(x: &'a str) -> &'a str { x }",
    "comment holding a quote": '// a " in a comment',
    "nested block comment": '/* outer /* inner " */ still comment " */',
}


def plant(root, trap):
    """A crate under ROOT/src whose a.rs and b.rs import each other, the
    trap written in a.rs before its import."""
    src = os.path.join(root, "src")
    os.makedirs(src)
    files = {
        "lib.rs": "mod a;\nmod b;\n",
        "a.rs": f"{trap}\nuse crate::b::Bee;\npub struct Ay;\nfn g(_: Bee) {{}}\n",
        "b.rs": "use crate::a::Ay;\npub struct Bee;\nfn h(_: Ay) {}\n",
    }
    for name, text in files.items():
        with open(os.path.join(src, name), "w") as fh:
            fh.write(text)


class SeesCircles(unittest.TestCase):
    def test_each_trap_leaves_the_circle_visible(self):
        for name, trap in TRAPS.items():
            with self.subTest(trap=name), tempfile.TemporaryDirectory() as root:
                plant(root, trap)
                circles, _, _, _ = analyse(root)
                self.assertEqual(circles, [["src/a.rs", "src/b.rs"]])

    def test_check_exits_1_on_a_circle_and_0_without(self):
        with tempfile.TemporaryDirectory() as root:
            plant(root, TRAPS["continued string"])
            run = subprocess.run([sys.executable, TOOL, root, "--check"], capture_output=True, text=True)
            self.assertEqual(run.returncode, 1, run.stdout)
            self.assertIn("import circles: 1", run.stdout)
            with open(os.path.join(root, "src", "b.rs"), "w") as fh:
                fh.write("pub struct Bee;\n")
            run = subprocess.run([sys.executable, TOOL, root, "--check"], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stdout)
            self.assertIn("import circles: 0", run.stdout)


class Blanking(unittest.TestCase):
    def test_keeps_every_character_position_and_line(self):
        text = "\n".join(TRAPS.values())
        self.assertEqual(len(strip_comments(text)), len(text))
        self.assertEqual(strip_comments(text).count("\n"), text.count("\n"))

    def test_blanks_literal_contents_and_comments_only(self):
        src = textwrap.dedent(
            """\
            let s = "use crate::x::Y; \\
                more"; // use crate::z::W;
            let c = r##"a "# b"##; let q = '"'; use crate::k::K;
            """
        )
        out = strip_comments(src)
        self.assertNotIn("crate::x", out)
        self.assertNotIn("crate::z", out)
        self.assertIn("use crate::k::K;", out)
        self.assertIn('r##"', out)
        self.assertIn('"##', out)


if __name__ == "__main__":
    unittest.main()
