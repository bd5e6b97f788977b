"""What compiling from Python costs over the CLI: the 7B (and 70B) step
compiled and its bundle written, from `hlatc.compile_step(...).write_bundle`
and as `hlatc compile` reports its own `compile total`, medians of N runs.

Usage: python python/bench/compile_overhead.py [HLATC_BIN] [N]
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hlatc


def python_ms(model: str, out: Path) -> float:
    t = time.perf_counter()
    hlatc.compile_step(model=model).write_bundle(out)
    return (time.perf_counter() - t) * 1e3


def cli_ms(binary: str, model: str, out: Path) -> float:
    text = subprocess.run([binary, "compile", "--model", model, "--out", str(out)],
                          capture_output=True, text=True, check=True).stdout
    return float(re.search(r"compile total ([0-9.]+) ms", text).group(1))


def main() -> None:
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/hlatc"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    with tempfile.TemporaryDirectory() as d:
        for model in ("hlat-7b", "hlat-70b"):
            py = statistics.median(python_ms(model, Path(d) / "py") for _ in range(n))
            cli = statistics.median(cli_ms(binary, model, Path(d) / "cli") for _ in range(n))
            print(f"{model}: Python {py:.1f} ms, CLI {cli:.1f} ms, "
                  f"Python costs {100 * (py / cli - 1):+.1f}% (median of {n})")


if __name__ == "__main__":
    main()
