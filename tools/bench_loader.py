#!/usr/bin/env python3
"""hlatc's data loader against Hugging Face's `tokenizers` on one machine, in
one run: tokens per second through `hlatc.data.Loader` (reading, the default
shuffle, tokenizing and packing a JSONL corpus into rows, wall clock from
opening the loader to its last batch) and through `Tokenizer.encode_batch`
on the same texts (already in memory: tokenization alone), and through
`encode_batch_fast` (the same without character offsets). Prints each and
the ratios.

    python tools/bench_loader.py [--mb 12] [--seq-len 2048] [--batch-size 16] [--repeat 3]
                                 [--corpus FILE.jsonl --tokenizer tokenizer.json]

Without --corpus it writes the tests' corpus (python/tests/corpus.py: mixed
lengths, some non-ASCII) of --mb megabytes and trains a byte-level BPE of
--vocab ids on a fifth of it, in a temporary directory. Needs `pip install
./python` and `tokenizers` (tools/requirements.txt). Each figure is the best
of --repeat runs; RAYON_NUM_THREADS bounds both sides' threads alike.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python" / "tests"))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def time_loader(corpus: Path, tokenizer: Path, vocab: int, seq_len: int,
                batch_size: int) -> tuple:
    import hlatc

    start = time.perf_counter()
    with hlatc.data.Loader(corpus, seq_len=seq_len, batch_size=batch_size, vocab_size=vocab,
                           tokenizer=tokenizer, epochs=1) as loader:
        for _ in loader:
            pass
        seconds = time.perf_counter() - start
        stats = loader.stats
    return seconds, stats


def time_encode_batch(texts: list, tokenizer: Path, fast: bool = False) -> tuple:
    """`encode_batch` (or `encode_batch_fast`, which skips the character
    offsets Python's `encode_batch` computes and the loader never needs)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer))
    encode = tok.encode_batch_fast if fast else tok.encode_batch
    start = time.perf_counter()
    encodings = encode(texts, add_special_tokens=False)
    seconds = time.perf_counter() - start
    return seconds, sum(len(e.ids) for e in encodings)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=12.0, help="corpus size to write (MB)")
    p.add_argument("--vocab", type=int, default=32000, help="BPE ids to train")
    p.add_argument("--corpus", type=Path, help="a JSONL corpus (text in 'text') instead")
    p.add_argument("--tokenizer", type=Path, help="its tokenizer.json")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if a.corpus:
            corpus, tokenizer = a.corpus, a.tokenizer
            if tokenizer is None:
                p.error("--corpus needs --tokenizer")
            with open(corpus, encoding="utf-8") as f:
                texts = [json.loads(line)["text"] for line in f if line.strip()]
        else:
            from corpus import train_tokenizer, write_corpus

            corpus, tokenizer = Path(tmp) / "corpus.jsonl", Path(tmp) / "tokenizer.json"
            t = time.perf_counter()
            texts = write_corpus(corpus, int(a.mb * 1e6))
            train_tokenizer(texts[: max(len(texts) // 5, 1)], tokenizer, vocab_size=a.vocab)
            print(f"corpus: {corpus.stat().st_size / 1e6:.1f} MB, {len(texts)} documents, "
                  f"tokenizer trained in {time.perf_counter() - t:.1f} s")
        from tokenizers import Tokenizer

        vocab = Tokenizer.from_file(str(tokenizer)).get_vocab_size()
        size = corpus.stat().st_size
        ours, theirs, fast = [], [], []
        for _ in range(a.repeat):
            ours.append(time_loader(corpus, tokenizer, vocab, a.seq_len, a.batch_size))
            theirs.append(time_encode_batch(texts, tokenizer))
            fast.append(time_encode_batch(texts, tokenizer, fast=True))
        loader_s, stats = min(ours, key=lambda r: r[0])
        encode_s, encoded = min(theirs, key=lambda r: r[0])
        fast_s, _ = min(fast, key=lambda r: r[0])

    print(f"machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}; "
          f"RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}")
    print(f"corpus: {size / 1e6:.1f} MB; {encoded} ids without BOS/EOS, {stats.filled} packed "
          f"({stats.rows} rows of {a.seq_len}, efficiency {stats.efficiency:.4f})")
    # The same ids on every side: the loader's BOS and EOS are not counted.
    loader_rate, encode_rate, fast_rate = encoded / loader_s, encoded / encode_s, encoded / fast_s
    print(f"hlatc.data.Loader (read, shuffle 1024, tokenize, pack): {loader_s:.2f} s, "
          f"{loader_rate / 1e6:.2f} M tokens/s, {size / 1e6 / loader_s:.1f} MB/s")
    print(f"tokenizers encode_batch (tokenize only):            {encode_s:.2f} s, "
          f"{encode_rate / 1e6:.2f} M tokens/s, {size / 1e6 / encode_s:.1f} MB/s")
    print(f"tokenizers encode_batch_fast (no offsets):        {fast_s:.2f} s, "
          f"{fast_rate / 1e6:.2f} M tokens/s, {size / 1e6 / fast_s:.1f} MB/s")
    print(f"loader / encode_batch: {loader_rate / encode_rate:.2f}x; "
          f"loader / encode_batch_fast: {loader_rate / fast_rate:.2f}x (best of {a.repeat})")


if __name__ == "__main__":
    main()
