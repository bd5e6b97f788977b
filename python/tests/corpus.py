"""A deterministic text corpus for the loader's tests and its benchmark
(tools/bench_loader.py): JSONL documents of mixed lengths (a word to
thousands), some non-ASCII (accents, CJK, Cyrillic, Greek, Arabic, emoji
beyond the BMP), tabs and newlines inside the text, written both as raw
UTF-8 and as JSON's \\u escapes (surrogate pairs for the emoji), with other
fields around the text; and a byte-level BPE tokenizer trained on it with
Hugging Face's `tokenizers`."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import List

SYLLABLES = ["ka", "to", "ri", "ne", "mu", "sa", "lo", "vi", "de", "pa", "qu", "ex", "th",
             "ing", "ion", "str", "an", "el", "or", "um"]
FOREIGN = ["café", "naïve", "Straße", "mañana", "façade", "日本語", "中文", "東京", "русский",
           "привет", "Ελληνικά", "العربية", "עברית", "😀", "🚀", "𝄞", "ﬁ", "e\u0301"]
PUNCT = [",", ".", "!", "?", ";", ":", "—", "\"", "'", "(", ")"]


def _vocabulary(rng: random.Random, n: int = 3000) -> List[str]:
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))))
    return sorted(words) + FOREIGN * 20


def _length(rng: random.Random) -> int:
    """Words in a document: most short, some long, a few longer than a row."""
    r = rng.random()
    if r < 0.55:
        return rng.randint(1, 40)
    if r < 0.9:
        return rng.randint(40, 400)
    return rng.randint(400, 4000)


def _text(rng: random.Random, words: List[str]) -> str:
    out = []
    for w in rng.choices(words, k=_length(rng)):
        r = rng.random()
        if r < 0.08:
            w += rng.choice(PUNCT)
        elif r < 0.1:
            w = w.capitalize()
        out.append(w)
        r = rng.random()
        out.append("\n" if r < 0.01 else "\t" if r < 0.012 else " ")
    return "".join(out[:-1])


def write_corpus(path: Path, min_bytes: int, seed: int = 0) -> List[str]:
    """Writes documents to `path` (JSONL) until it holds `min_bytes`; returns
    their texts in file order."""
    rng = random.Random(seed)
    words = _vocabulary(rng)
    texts: List[str] = []
    size = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        while size < min_bytes:
            i = len(texts)
            text = "" if i % 997 == 13 else _text(rng, words)  # a few empty documents
            if i % 3 == 0:
                line = json.dumps({"id": i, "text": text}, ensure_ascii=False)
            elif i % 3 == 1:
                line = json.dumps({"text": text, "meta": {"source": "test", "n": [i, None]}})
            else:
                line = json.dumps({"lang": "xx", "text": text, "score": i / 7}, ensure_ascii=False)
            f.write(line + "\n")
            size += len(line.encode("utf-8")) + 1
            texts.append(text)
    return texts


def train_tokenizer(texts: List[str], path: Path, vocab_size: int = 4096) -> None:
    """A byte-level BPE with NFC normalization and `<s>`/`</s>`, trained on
    `texts`, saved as tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.save(str(path))


# A word-level language tiny's vocabulary of 64 holds: 60 words, <s>, </s>
# and <unk>.
WORDS = ["w%02d" % i for i in range(60)]


def write_word_corpus(root: Path, documents: int = 400, seed: int = 0) -> None:
    """`root/corpus.jsonl`, documents of 1 to 29 words in which each word is
    mostly followed by the next (something to learn), and
    `root/tokenizer.json`, a word-level tokenizer of 63 ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<s>": 0, "</s>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(root / "tokenizer.json"))
    rng = random.Random(seed)
    with open(root / "corpus.jsonl", "w") as f:
        for _ in range(documents):
            start, n = rng.randrange(60), rng.randint(1, 29)
            words = [WORDS[(start + k) % 60] for k in range(n)]
            f.write(json.dumps({"text": " ".join(words)}) + "\n")
