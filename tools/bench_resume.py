#!/usr/bin/env python3
"""What a resume at the end of a large corpus costs: a token-id file of
--gb gigabytes (`u16` ids, written once into --dir), streamed through
`hlatc.data.Loader` to the end of its pass, then opened --repeat times at
that position. Each open reads again every byte the loader consumed and
checks it against the position's record (docs/src/data.md, "What a
resume costs"); the time of each open is printed, with the page cache warm
(the file was just read) and, with --cold (root only), after dropping it.

    python tools/bench_resume.py --dir /var/tmp/hlatc-resume [--gb 10] [--repeat 3] [--cold]

Needs `pip install ./python`. The file is kept in --dir for the next run
(its size is checked, not its bytes); remove it by hand.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

SEQ_LEN = 8192
BATCH = 64
VOCAB = 32000


def write_corpus(path: Path, size: int) -> None:
    """`size` bytes of u16 ids below VOCAB, in 64 MiB chunks of a
    repeating pattern (the content does not change what a resume reads)."""
    chunk = bytes((i * 7919 % VOCAB).to_bytes(2, "little")[k] for i in range(1 << 15) for k in (0, 1))
    block = chunk * ((64 << 20) // len(chunk))
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def drop_page_cache() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, required=True, help="where the corpus file is kept")
    p.add_argument("--gb", type=float, default=10.0, help="the corpus' size in GB (1e9 bytes)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cold", action="store_true", help="also open once with the page cache dropped")
    a = p.parse_args()
    import hlatc

    a.dir.mkdir(parents=True, exist_ok=True)
    size = int(a.gb * 1e9) // (2 * SEQ_LEN) * (2 * SEQ_LEN)
    corpus = a.dir / f"corpus-{size}.bin"
    if not corpus.is_file() or corpus.stat().st_size != size:
        t = time.perf_counter()
        write_corpus(corpus, size)
        print(f"wrote {corpus} ({size / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s", file=sys.stderr)

    def loader(position=None):
        return hlatc.data.Loader(corpus, seq_len=SEQ_LEN, batch_size=BATCH, vocab_size=VOCAB,
                                 format="token-ids", raw_dtype="u16", epochs=1,
                                 position=position)

    t = time.perf_counter()
    batches = 0
    with loader() as l:
        for _ in l:
            batches += 1
        position = l.position()
    streamed = time.perf_counter() - t
    print(f"streamed {batches} batches ({size / 1e9:.2f} GB) in {streamed:.1f} s "
          f"({size / 1e9 / streamed:.2f} GB/s)")
    opens = []
    for _ in range(a.repeat):
        t = time.perf_counter()
        with loader(position):
            pass
        opens.append(time.perf_counter() - t)
    print("resume at the end, page cache warm: " + ", ".join(f"{s:.2f} s" for s in opens))
    if a.cold:
        drop_page_cache()
        t = time.perf_counter()
        with loader(position):
            pass
        print(f"resume at the end, page cache dropped: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
