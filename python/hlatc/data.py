"""hlatc's data loader: text (JSONL, plain lines or paragraphs) or token-id
files, streamed, shuffled through a document buffer, tokenized with a
Hugging Face `tokenizer.json` and packed into rows, on threads of its own so
a step does not wait for it. It is the loader `hlatc train --corpus` runs
(the Rust train crate's), so the same corpus and settings give the same
batches from Python and from the CLI, and each resumes the other's position.

    import hlatc
    step = hlatc.compile_step(model="tiny", target="cpu", packed=True)
    loader = hlatc.data.Loader.for_step(step, "data/*.jsonl", tokenizer="tokenizer.json")
    trainer = hlatc.Trainer(step)
    for batch in loader:                  # {"tokens", "targets", "segment_ids"}: int32 [rows, seq]
        trainer.step(**batch)

A text document becomes `[BOS] + encode(text, add_special_tokens=False) +
[EOS]`, each special token the tokenizer's own (found by name: `<s>`,
`<|begin_of_text|>`, `</s>`, `<|endoftext|>`, ...) unless named or turned off.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Type, Union)

import numpy as np

from . import _args, _hlatc
from ._arrays import dict_to_numpy
from ._types import Array, Format, Packing, PathLike, RawDtype, Special

if TYPE_CHECKING:
    from . import Step

#: A path, a glob (its matches sorted) or a list of them.
Sources = Union[PathLike, Sequence[PathLike]]
#: A loader's position: `Loader.position()`'s JSON text, or its list of
#: per-replica positions (JSON objects or their texts).
Position = Union[str, bytes, Sequence[Union[str, Dict[str, Any]]]]

__all__ = [
    "Loader",
    "LoaderStats",
    "DataError",
    "Sources",
    "Position",
    "Format",
    "Packing",
    "RawDtype",
    "Special",
]

DataError = _hlatc.DataError


@dataclass(frozen=True)
class LoaderStats:
    """What a loader has packed since its start (counted on across a resume).

    `efficiency` is the fraction of the rows' slots that hold a token (1.0
    for a fully packed row); `wait_seconds` is how long `next_batch` has
    waited for the pipeline since this loader (or its last `seek`) opened:
    near 0 when the loader keeps ahead of the steps."""

    rows: int
    slots: int
    filled: int
    documents: int
    batches: int
    efficiency: float
    documents_per_row: float
    wait_seconds: float


def _sources(sources: Sources) -> List[str]:
    if isinstance(sources, (str, os.PathLike)):
        return [os.fspath(sources)]
    accepted = "a path or glob (str or os.PathLike), or a list of them"
    if isinstance(sources, (bytes, Mapping)) or not isinstance(sources, Iterable):
        raise _hlatc.argument_error("sources", sources, accepted, of_type=True)
    return [_args.path("sources", s, accepted) for s in sources]


def _position_text(position: Position) -> str:
    """A position as the JSON array the native loader takes."""
    if isinstance(position, bytes):
        return position.decode("utf-8")
    if isinstance(position, str):
        return position
    return json.dumps([json.loads(p) if isinstance(p, str) else p for p in position])


class Loader:
    """Batches of packed rows, as NumPy arrays ready for `Trainer.step(**batch)`.

    An iterator of dicts: `tokens`, `targets` and, with `packing="segments"`,
    `segment_ids`, each `int32 [rows, seq_len]`. `rows` is `batch_size` (the
    global batch), or the owned replicas' share of it with `owned_replicas`.
    With `epochs=None` it never ends; with a number of passes it stops after
    the last (its last row and batch padded)."""

    def __init__(
        self,
        sources: Sources,
        *,
        seq_len: int,
        batch_size: int,
        vocab_size: int,
        replicas: int = 1,
        owned_replicas: Optional[Sequence[int]] = None,
        tokenizer: Optional[PathLike] = None,
        text_field: str = "text",
        format: Optional[Format] = None,
        packing: Packing = "segments",
        shuffle_buffer: int = 1024,
        seed: int = 0,
        epochs: Optional[int] = None,
        bos: Special = True,
        eos: Special = True,
        eos_id: Optional[int] = None,
        raw_dtype: RawDtype = "u16",
        position: Optional[Position] = None,
    ) -> None:
        """Opens `sources` (files or glob patterns, read in the order given,
        each glob's matches sorted) for global batches of `batch_size` rows of
        `seq_len` tokens over a vocabulary of `vocab_size`.

        `replicas` DP replicas each read their own shard of the documents for
        their `batch_size / replicas` rows; a batch is their rows one after
        another, the order a step's replicas take them. `owned_replicas`
        opens only those replicas (a process of a multi-process run: its
        batches hold only their rows). `tokenizer` is a Hugging Face
        `tokenizer.json` (text needs one; one with more ids than
        `vocab_size` is refused). `format` is every file's format (`"jsonl"`,
        `"lines"`: a document a line, `"paragraphs"`: documents between blank
        lines, `"token-ids"`: `hlatc train --corpus-format`'s names), each
        file's by its extension when None (`.jsonl`/`.json`/`.ndjson` JSONL,
        `.bin`/`.npy` token ids, anything else lines); `text_field` the JSONL
        field holding the text. `packing="segments"` numbers each row's
        documents (a packed step's `segment_ids`); `"concat"` concatenates
        them. `shuffle_buffer` documents are drawn from at random (1 keeps
        the corpus' order), from `seed`. `bos`/`eos`: True for the
        tokenizer's own, False or None for none, or a token's text;
        `eos_id` ends a document in a token-id file, whose ids are
        `raw_dtype` (`.bin`). `position` (`position()` of a loader of the
        same settings) goes on from there.

        The files, the tokenizer and the settings are checked before it
        returns; a bad record raises `DataError` (naming the file and line)
        with the batch that reaches it."""
        for name, value in (("seq_len", seq_len), ("batch_size", batch_size),
                            ("vocab_size", vocab_size), ("replicas", replicas)):
            _args.check_int(name, value, 1, "an int 1 or more")
        _args.check_int("shuffle_buffer", shuffle_buffer, 1,
                        "an int 1 or more (1 keeps the corpus' order)")
        _args.check_int("seed", seed, 0, "an int 0 or more")
        if epochs is not None:
            _args.check_int("epochs", epochs, 1, "an int 1 or more, or None (no end)")
        if eos_id is not None:
            _args.check_int("eos_id", eos_id, 0, "a token id, an int 0 or more")
            if eos_id >= vocab_size:
                raise _hlatc.argument_error(
                    "eos_id", eos_id, f"a token id of the vocabulary of {vocab_size} (ids 0 to "
                    f"{vocab_size - 1})", of_type=False)
        for r in owned_replicas or []:
            _args.check_int("owned_replicas", r, 0, f"replica indices, 0 to {replicas - 1}")
        # What the run's identity records of the data (its checkpoints').
        self._source_paths = _sources(sources)
        self._tokenizer_path = None if tokenizer is None else _args.path("tokenizer", tokenizer)
        self._native = _hlatc.Loader(
            self._source_paths,
            vocab_size=vocab_size,
            batch_size=batch_size,
            seq_len=seq_len,
            replicas=replicas,
            owned=None if owned_replicas is None else [int(r) for r in owned_replicas],
            tokenizer=self._tokenizer_path,
            text_field=text_field,
            format=format,
            packing=packing,
            shuffle_buffer=shuffle_buffer,
            seed=seed,
            epochs=epochs,
            bos=bos,
            eos=eos,
            eos_id=eos_id,
            raw_dtype=raw_dtype,
            position=None if position is None else _position_text(position),
        )

    @classmethod
    def for_step(
        cls,
        step: "Step",
        sources: Sources,
        *,
        owned_replicas: Optional[Sequence[int]] = None,
        packing: Optional[Packing] = None,
        tokenizer: Optional[PathLike] = None,
        text_field: str = "text",
        format: Optional[Format] = None,
        shuffle_buffer: int = 1024,
        seed: int = 0,
        epochs: Optional[int] = None,
        bos: Special = True,
        eos: Special = True,
        eos_id: Optional[int] = None,
        raw_dtype: RawDtype = "u16",
        position: Optional[Position] = None,
    ) -> "Loader":
        """A loader for `step` (an `hlatc.Step`): its global batch size,
        sequence length, vocabulary and DP replicas, and segment packing for
        a packed step (`compile_step(packed=True)`), concatenation otherwise
        (another `packing` raises `UsageError`). The other keywords are
        `Loader`'s (`tokenizer`, `seed`, `position`, ...)."""
        _args.check_step(step)
        layout = _hlatc.data_layout(step._native)
        want: Packing = "segments" if layout["packed"] else "concat"
        if packing is not None and packing != want:
            raise _args.usage_error(
                _args.UsageKind.CONFLICT,
                f"packing={packing!r}: the step was compiled "
                + ("packed, so it takes segment ids: packing='segments'" if layout["packed"]
                   else "unpacked, so it takes no segment ids: packing='concat'"),
                argument="packing",
            )
        return cls(
            sources,
            seq_len=layout["seq_len"],
            batch_size=layout["batch_size"],
            vocab_size=layout["vocab_size"],
            replicas=layout["replicas"],
            owned_replicas=owned_replicas,
            tokenizer=tokenizer,
            text_field=text_field,
            format=format,
            packing=want,
            shuffle_buffer=shuffle_buffer,
            seed=seed,
            epochs=epochs,
            bos=bos,
            eos=eos,
            eos_id=eos_id,
            raw_dtype=raw_dtype,
            position=position,
        )

    def __iter__(self) -> Iterator[Dict[str, Array]]:
        return self

    def __next__(self) -> Dict[str, Array]:
        batch = self.next_batch()
        if batch is None:
            raise StopIteration
        return batch

    def next_batch(self) -> Optional[Dict[str, Array]]:
        """The next batch, or None after the last pass. The GIL is released
        while it waits for the loader's threads."""
        raw = self._native.next_batch()
        return None if raw is None else dict_to_numpy(raw)

    def position(self) -> str:
        """Where the loader is, after the last batch it gave: a JSON array of
        the owned replicas' positions (a checkpoint's `loader.json`). A loader
        opened there (`position=`, or `seek`) gives the batches this one would
        have given next."""
        return self._native.position()

    def seek(self, position: Position) -> None:
        """Goes on from `position` (`position()` of a loader of the same
        corpus, settings and owned replicas; another raises `DataError`
        naming the setting that differs)."""
        self._native.seek(_position_text(position))

    @property
    def stats(self) -> LoaderStats:
        """What the loader has packed so far, and how long it made steps wait."""
        return LoaderStats(**self._native.stats())

    @property
    def batch_size(self) -> int:
        """Rows of each batch this loader gives (its owned replicas' rows)."""
        return self._native.rows_per_replica * len(self._native.owned)

    @property
    def seq_len(self) -> int:
        return self._native.seq_len

    @property
    def replicas(self) -> int:
        """The DP replicas the global batch is divided over."""
        return self._native.replicas

    @property
    def owned_replicas(self) -> List[int]:
        """The replicas whose rows this loader makes, in batch order."""
        return self._native.owned

    @property
    def packing(self) -> Packing:
        return self._native.packing

    @property
    def tokenizer_vocab_size(self) -> Optional[int]:
        """How many ids the tokenizer has (None without one)."""
        return self._native.tokenizer_vocab

    def close(self) -> None:
        """Stops the loader's threads; it gives no batch after."""
        self._native.close()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Loader(batch_size={self.batch_size}, seq_len={self.seq_len}, "
                f"replicas={self.replicas}, owned_replicas={self.owned_replicas}, "
                f"packing={self.packing!r})")
