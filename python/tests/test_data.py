"""hlatc.data.Loader against Hugging Face's `tokenizers` (id for id over a
10 MB corpus), its packing, its positions, its errors; and Trainer.fit's
checkpoints: a run stopped and resumed ends byte for byte where one that
never stopped ends, passing over torn and corrupt checkpoints with a
warning."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import hlatc
from corpus import train_tokenizer, write_corpus, write_word_corpus

tokenizers = pytest.importorskip("tokenizers", reason="pip install -r tools/requirements.txt")

# Under pytest-xdist (scripts/test.sh) the module's tests share one worker,
# so its corpus and tokenizer (the module's fixtures) are made once.
pytestmark = pytest.mark.xdist_group("corpus")

IGNORE = -100
CORPUS_BYTES = 10_500_000


# ---------------------------------------------------------------- the corpus


class Corpus:
    def __init__(self, root: Path) -> None:
        self.path = root / "corpus.jsonl"
        self.texts = write_corpus(self.path, CORPUS_BYTES)
        self.tokenizer = root / "tokenizer.json"
        # Trained on the first fifth: enough merges that most of the
        # corpus is several bytes a token, and some of it is not.
        train_tokenizer(self.texts[: len(self.texts) // 5], self.tokenizer, vocab_size=4096)
        tok = tokenizers.Tokenizer.from_file(str(self.tokenizer))
        self.vocab = tok.get_vocab_size()
        self.bos, self.eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
        # The BOS/EOS policy: [BOS] + encode(text, add_special_tokens=False) + [EOS].
        encodings = tok.encode_batch(self.texts, add_special_tokens=False)
        self.docs = [[self.bos, *e.ids, self.eos] for e in encodings]
        self.stream = np.fromiter((t for d in self.docs for t in d), dtype=np.int64)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return Corpus(tmp_path_factory.mktemp("corpus"))


def loader(corpus: Corpus, **kw) -> hlatc.data.Loader:
    args = dict(seq_len=512, batch_size=8, vocab_size=4096, tokenizer=corpus.tokenizer)
    args.update(kw)
    return hlatc.data.Loader(corpus.path, **args)


def first_difference(corpus: Corpus, got: np.ndarray) -> str:
    """The first document whose ids differ, in words."""
    at = 0
    for i, doc in enumerate(corpus.docs):
        mine = got[at : at + len(doc)].tolist()
        if mine != doc:
            k = next(j for j, (a, b) in enumerate(zip(mine, doc)) if a != b)
            return (f"document {i} (line {i + 1}) differs at id {k}: hlatc {mine[k:k + 8]}, "
                    f"tokenizers {doc[k:k + 8]}; text {corpus.texts[i][:80]!r}")
        at += len(doc)
    return "the streams differ past the last document"


# ---------------------------------------------------------------- tokenization


def test_corpus_is_large_and_mixed(corpus):
    assert corpus.path.stat().st_size >= 10_000_000
    lengths = np.array([len(d) for d in corpus.docs])
    assert lengths.min() == 2 and lengths.max() > 4000  # an empty document; one past a row
    assert any(ord(c) > 0xFFFF for t in corpus.texts[:50] for c in t)  # beyond the BMP
    assert "\\ud83d" in corpus.path.read_text(encoding="utf-8")  # an escaped surrogate pair
    assert corpus.vocab == 4096 and (corpus.bos, corpus.eos) == (0, 1)


def test_every_document_has_the_ids_tokenizers_gives_it(corpus):
    # Concatenated rows, the corpus' order, one pass: the rows are the
    # documents one after another.
    with loader(corpus, seq_len=2048, batch_size=16, packing="concat", shuffle_buffer=1,
                epochs=1) as data:
        assert data.tokenizer_vocab_size == corpus.vocab
        batches = list(data)
        stats = data.stats
    tokens = np.concatenate([b["tokens"].reshape(-1) for b in batches])
    targets = np.concatenate([b["targets"].reshape(-1) for b in batches])
    assert set(batches[0]) == {"tokens", "targets"}
    assert all(b["tokens"].dtype == np.int32 and b["tokens"].shape == (16, 2048) for b in batches)
    n = len(corpus.stream)
    assert stats.filled == n and stats.batches == len(batches)
    if not np.array_equal(tokens[:n], corpus.stream):
        pytest.fail(first_difference(corpus, tokens[:n]))
    assert not tokens[n:].any()  # the last row's and batch's padding
    # Concatenation: each token's target is the next token of the stream,
    # across rows and batches, but where a row ends with a document's end
    # (the packer has not read the next document yet: ignored); the
    # corpus' last token has none.
    want = np.append(corpus.stream[1:], IGNORE)
    row_ends_a_document = (np.arange(n) % 2048 == 2047) & (corpus.stream == corpus.eos)
    assert 0 < row_ends_a_document.sum() < 10
    want[row_ends_a_document] = IGNORE
    assert np.array_equal(targets[:n], want)
    assert (targets[n:] == IGNORE).all()


def test_segments_pack_shuffled_documents_into_full_rows(corpus):
    with loader(corpus, epochs=1) as data:  # the default shuffle
        batches = list(data)
        stats = data.stats
    tokens = np.concatenate([b["tokens"] for b in batches])
    targets = np.concatenate([b["targets"] for b in batches])
    segments = np.concatenate([b["segment_ids"] for b in batches])
    assert stats.efficiency >= 0.99, stats
    assert stats.filled == len(corpus.stream) and stats.rows == len(tokens)
    assert stats.documents_per_row > 1.5  # short documents share rows
    # Every id of every document, none twice, in another order.
    filled = tokens[segments > 0]
    assert np.array_equal(np.bincount(filled, minlength=4096),
                          np.bincount(corpus.stream, minlength=4096))
    assert not np.array_equal(filled[:1000], corpus.stream[:1000])
    # Each row numbers its documents from 1, padding 0 at its end only;
    # a target is the next token of the same document, else ignored.
    # The pass's last batch is made up with empty rows, and only it.
    used = segments[:, 0] > 0
    assert used[: len(used) - 8].all() and not used[int(used.sum()):].any()
    assert (segments[used, 0] == 1).all()
    step = np.diff(segments, axis=1)
    assert np.isin(step[segments[:, 1:] > 0], [0, 1]).all()
    assert not (segments[:, 1:] > 0)[segments[:, :-1] == 0].any()
    same = (segments[:, 1:] == segments[:, :-1]) & (segments[:, 1:] > 0)
    assert np.array_equal(targets[:, :-1][same], tokens[:, 1:][same])
    assert (targets[:, :-1][~same] == IGNORE).all()
    assert (targets[segments == 0] == IGNORE).all()


def test_special_tokens_can_be_named_or_left_out(tmp_path, corpus):
    small = write(tmp_path / "small.jsonl",
                  "".join(json.dumps({"text": t}) + "\n" for t in corpus.texts[1:4]))
    docs = corpus.docs[1:4]

    def stream(**kw):
        with hlatc.data.Loader(small, seq_len=64, batch_size=1, vocab_size=4096,
                               tokenizer=corpus.tokenizer, packing="concat", shuffle_buffer=1,
                               epochs=1, **kw) as data:
            return np.concatenate([b["tokens"].reshape(-1) for b in data])[: data.stats.filled]

    body = [t for d in docs for t in d[1:-1]]
    assert stream(bos=None, eos=False).tolist() == body
    assert stream(bos=False).tolist() == [t for d in docs for t in d[1:]]
    assert stream(bos="</s>", eos="<s>").tolist() == [t for d in docs for t in [1, *d[1:-1], 0]]


def test_waiting_for_a_batch_releases_the_gil(corpus):
    import threading

    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    # One batch of a fifth of the corpus: a second or more of tokenizing.
    with loader(corpus, seq_len=2048, batch_size=128, packing="concat") as data:
        thread = threading.Thread(target=spin)
        thread.start()
        try:
            before = count[0]
            data.next_batch()
            during = count[0] - before
        finally:
            stop.set()
            thread.join()
        assert data.stats.wait_seconds > 0.2
    assert during > 100_000, during  # held, the GIL would have stopped it


# ---------------------------------------------------------------- positions


def batches_equal(a, b) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_a_loader_opened_at_a_position_gives_the_batches_one_that_never_stopped_gives(corpus):
    kw = dict(seq_len=256, batch_size=8, replicas=2, seed=5, shuffle_buffer=128)
    with loader(corpus, **kw) as a:
        for _ in range(5):
            a.next_batch()
        saved = a.position()
        ahead = [a.next_batch() for _ in range(4)]
        after = a.stats
        a.seek(saved)  # the same loader, sent back
        assert all(batches_equal(a.next_batch(), want) for want in ahead)
    positions = json.loads(saved)
    assert len(positions) == 2 and [p["fingerprint"]["shard"]["index"] for p in positions] == [0, 1]
    with loader(corpus, position=saved, **kw) as b:
        for want in ahead:
            assert batches_equal(b.next_batch(), want)
        assert b.stats.batches == after.batches == 9
        assert b.stats.filled == after.filled
    with loader(corpus, position=[json.dumps(p) for p in positions], **kw) as c:
        assert batches_equal(c.next_batch(), ahead[0])
    with pytest.raises(hlatc.DataError) as e:
        loader(corpus, position=saved, **{**kw, "seed": 6})
    assert isinstance(e.value, ValueError)
    assert e.value.code == "loader.position"
    # Named: the setting that differs, which no field holds.
    assert "seed" in str(e.value)


def test_a_position_past_the_end_of_a_pass_resumes_in_the_next(tmp_path, corpus):
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps({"text": t}) + "\n" for t in corpus.texts[:30]),
                     encoding="utf-8")
    kw = dict(seq_len=128, batch_size=4, shuffle_buffer=8)
    with hlatc.data.Loader(small, vocab_size=4096, tokenizer=corpus.tokenizer, **kw) as a:
        while json.loads(a.position())[0]["cursor"]["epoch"] < 1:
            a.next_batch()
        for _ in range(3):
            a.next_batch()
        saved = a.position()
        ahead = [a.next_batch() for _ in range(5)]
    with hlatc.data.Loader(small, vocab_size=4096, tokenizer=corpus.tokenizer, position=saved,
                           **kw) as b:
        assert all(batches_equal(b.next_batch(), want) for want in ahead)


# ---------------------------------------------------------------- errors


def write(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


def first_batch(path: Path, corpus: Corpus, **kw):
    with hlatc.data.Loader(path, seq_len=16, batch_size=2, vocab_size=4096,
                           tokenizer=corpus.tokenizer, **kw) as data:
        return data.next_batch()


def test_a_malformed_jsonl_line_is_named_by_file_line_and_column(tmp_path, corpus):
    path = write(tmp_path / "bad.jsonl",
                 '{"text": "one"}\n{"text": "two"}\n\n{"text": "three",}\n{"text": "four"}\n')
    with pytest.raises(hlatc.DataError) as e:
        first_batch(path, corpus)
    assert (e.value.path, e.value.line, e.value.column) == (str(path), 4, 18)
    assert f"{path}:4:18: malformed JSON" in str(e.value)


def test_text_that_is_not_utf8_is_named_by_its_byte_offset(tmp_path, corpus):
    path = write(tmp_path / "bad.txt", b"first line\nsecond \xff line\nthird\n")
    with pytest.raises(hlatc.DataError) as e:
        first_batch(path, corpus)
    assert (e.value.path, e.value.offset) == (str(path), 18)
    assert "byte 18 is not UTF-8" in str(e.value)


def test_a_record_without_the_text_field_is_named(tmp_path, corpus):
    path = write(tmp_path / "bad.jsonl", '{"text": "one"}\n{"content": "two"}\n')
    with pytest.raises(hlatc.DataError) as e:
        first_batch(path, corpus)
    assert (e.value.path, e.value.line, e.value.field) == (str(path), 2, "text")
    with pytest.raises(hlatc.DataError) as e:
        first_batch(path, corpus, text_field="content")
    assert (e.value.line, e.value.field) == (1, "content")


def test_a_tokenizer_larger_than_the_vocabulary_is_refused_at_construction(corpus):
    with pytest.raises(hlatc.DataError) as e:
        loader(corpus, vocab_size=1000)
    assert (e.value.tokenizer_vocab, e.value.model_vocab) == (4096, 1000)
    assert "4096 ids, more than the model's vocabulary of 1000" in str(e.value)
    assert e.value.path == str(corpus.tokenizer)


def test_an_empty_corpus_raises_instead_of_looping(tmp_path, corpus):
    empty = write(tmp_path / "empty.jsonl", b"")
    with pytest.raises(hlatc.DataError) as e:
        first_batch(empty, corpus)  # epochs=None: it would go on for ever
    assert (e.value.code, e.value.path) == ("loader.empty_corpus", str(empty))
    one = write(tmp_path / "one.jsonl", '{"text": "only one"}\n')
    with hlatc.data.Loader(one, seq_len=16, batch_size=2, replicas=2, vocab_size=4096,
                           tokenizer=corpus.tokenizer) as data:
        with pytest.raises(hlatc.DataError) as e:
            data.next_batch()
        assert (e.value.code, e.value.path) == ("loader.empty_corpus", str(one))
        # Named: the empty shard, which no field holds.
        assert "for shard 1 of 2" in str(e.value)


def test_settings_are_refused_by_name(tmp_path, corpus):
    with pytest.raises(hlatc.DataError) as e:
        hlatc.data.Loader(tmp_path / "nothing-*.jsonl", seq_len=8, batch_size=2, vocab_size=64)
    assert e.value.path == str(tmp_path / "nothing-*.jsonl")
    with pytest.raises(hlatc.DataError) as e:
        loader(corpus, batch_size=6, replicas=4)
    assert e.value.setting == "batch_size"
    with pytest.raises(hlatc.UsageError) as e:
        loader(corpus, format="parquet")
    assert (e.value.argument, e.value.category) == ("format", "out_of_range")
    with pytest.raises(hlatc.DataError) as e:
        loader(corpus, tokenizer=None)
    assert (e.value.code, e.value.path) == ("loader.needs_tokenizer", str(corpus.path))
    with pytest.raises(hlatc.DataError) as e:
        loader(corpus, bos="<no such token>")
    assert e.value.path == str(corpus.tokenizer)


# ---------------------------------------------------------------- Trainer.fit


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    write_word_corpus(root)
    return root


@pytest.fixture(scope="module")
def tiny_step():
    return hlatc.compile_step(model="tiny", target="cpu", batch_size=4, seq_len=16, packed=True)


def tiny_loader(step, data: Path) -> hlatc.data.Loader:
    return hlatc.data.Loader.for_step(step, data / "corpus.jsonl",
                                      tokenizer=data / "tokenizer.json", seed=3)


def checkpoints(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("step-"))


class Stop(Exception):
    pass


def test_for_step_takes_the_step_s_shape(tiny_step, tiny_data):
    with tiny_loader(tiny_step, tiny_data) as data:
        shape = (data.batch_size, data.seq_len, data.replicas, data.packing)
        assert shape == (4, 16, 1, "segments")
        batch = data.next_batch()
    assert batch["segment_ids"].shape == (4, 16)
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.data.Loader.for_step(tiny_step, tiny_data / "corpus.jsonl",
                                   tokenizer=tiny_data / "tokenizer.json", packing="concat")
    assert (e.value.argument, e.value.category) == ("packing", "conflict")


def test_fit_resumed_after_a_crash_ends_byte_for_byte_where_an_unbroken_run_ends(
        tmp_path, tiny_step, tiny_data):
    whole = hlatc.Trainer(tiny_step, seed=1)
    want = whole.fit(tiny_loader(tiny_step, tiny_data), 7, checkpoint_dir=tmp_path / "a",
                     checkpoint_every=2)
    assert [m["step"] for m in want] == list(range(1, 8))
    assert want[-1]["loss"] < want[0]["loss"]
    assert checkpoints(tmp_path / "a") == ["step-00000004", "step-00000006", "step-00000007"]
    want_state = whole._native.state_safetensors()
    want_files = {p.name: p.read_bytes() for p in (tmp_path / "a" / "step-00000007").iterdir()}

    # Killed (an exception from on_step) after step 5: the checkpoint of
    # step 4 is the newest.
    def crash(row):
        if row["step"] == 5:
            raise Stop()

    with pytest.raises(Stop):
        hlatc.Trainer(tiny_step, seed=1).fit(tiny_loader(tiny_step, tiny_data), 7,
                                             checkpoint_dir=tmp_path / "b", checkpoint_every=2,
                                             on_step=crash)
    assert checkpoints(tmp_path / "b") == ["step-00000002", "step-00000004"]

    # Started again from scratch, the same call: it resumes at step 4.
    seen = []
    again = hlatc.Trainer(tiny_step, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to skip
        got = again.fit(tiny_loader(tiny_step, tiny_data), 7, checkpoint_dir=tmp_path / "b",
                        checkpoint_every=2, on_step=lambda row: seen.append(row["step"]))
    assert seen == [5, 6, 7]
    assert got == want
    assert again._native.state_safetensors() == want_state
    got_files = {p.name: p.read_bytes() for p in (tmp_path / "b" / "step-00000007").iterdir()}
    assert got_files == want_files  # state, loader position, metrics and COMPLETE

    # A checkpoint's state file is `state()`, which `resume` takes.
    from hlatc._arrays import dict_to_numpy

    saved = tmp_path / "b" / "step-00000007" / "state.safetensors"
    resumed = hlatc.Trainer(tiny_step)
    resumed.resume(dict_to_numpy(hlatc._hlatc.read_safetensors(str(saved))))
    assert resumed.steps_done == 7
    assert resumed._native.state_safetensors() == want_state
    # Done: a third call trains nothing.
    done = hlatc.Trainer(tiny_step, seed=1)
    assert done.fit(tiny_loader(tiny_step, tiny_data), 7, checkpoint_dir=tmp_path / "b") == want
    assert done.steps_done == 7


def test_fit_skips_torn_and_corrupt_checkpoints_with_a_warning(tmp_path, tiny_step, tiny_data):
    d = tmp_path / "ckpt"
    whole = hlatc.Trainer(tiny_step, seed=2)
    want = whole.fit(tiny_loader(tiny_step, tiny_data), 6, checkpoint_dir=d, checkpoint_every=2,
                     keep=3)
    want_state = whole._native.state_safetensors()
    assert checkpoints(d) == ["step-00000002", "step-00000004", "step-00000006"]
    # A crash while step 6 was marked complete; a disk that changed step 4.
    (d / "step-00000006" / "COMPLETE").unlink()
    state4 = d / "step-00000004" / "state.safetensors"
    raw = bytearray(state4.read_bytes())
    raw[-1] ^= 1
    state4.write_bytes(bytes(raw))

    again = hlatc.Trainer(tiny_step, seed=2)
    seen = []
    with pytest.warns(hlatc.CheckpointWarning) as caught:
        got = again.fit(tiny_loader(tiny_step, tiny_data), 6, checkpoint_dir=d,
                        checkpoint_every=2, on_step=lambda row: seen.append(row["step"]))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2, messages
    assert "step-00000006" in messages[0] and "no COMPLETE marker" in messages[0]
    assert "step-00000004" in messages[1] and "checksum" in messages[1]
    assert seen == [3, 4, 5, 6]  # from step 2's checkpoint
    assert got == want
    assert again._native.state_safetensors() == want_state
    # The torn and corrupt ones were replaced by complete saves; keep=3.
    assert checkpoints(d) == ["step-00000002", "step-00000004", "step-00000006"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hlatc.Trainer(tiny_step, seed=2).fit(tiny_loader(tiny_step, tiny_data), 6,
                                             checkpoint_dir=d)


def test_fit_without_checkpoints_and_its_arguments(tmp_path, tiny_step, tiny_data):
    trainer = hlatc.Trainer(tiny_step)
    stops = trainer.fit(tiny_loader(tiny_step, tiny_data), 10, on_step=lambda row: row["step"] < 2)
    assert [m["step"] for m in stops] == [1, 2] and trainer.steps_done == 2
    with pytest.raises(hlatc.UsageError) as e:
        trainer.fit(tiny_loader(tiny_step, tiny_data), 3, checkpoint_dir=tmp_path,
                    checkpoint_every=0)
    assert (e.value.argument, e.value.category) == ("checkpoint_every", "out_of_range")
    # A directory that cannot be made is a CheckpointError (an OSError).
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(hlatc.CheckpointError) as e:
        trainer.fit(tiny_loader(tiny_step, tiny_data), 3, checkpoint_dir=blocker / "ckpt")
    assert isinstance(e.value, OSError) and e.value.path == str(blocker / "ckpt")


def test_fit_holds_its_checkpoint_directory_while_it_runs(tmp_path, tiny_step, tiny_data):
    # hlatc train's lock (`hlatc::fit::checkpoints`): one run saves into a
    # directory at a time; the run's end lets it go, also when it raised.
    d = tmp_path / "ckpt"
    refused = []

    def second_run(row):
        with pytest.raises(hlatc.UsageError) as e:
            hlatc.Trainer(tiny_step).fit(tiny_loader(tiny_step, tiny_data), 2, checkpoint_dir=d)
        refused.append((e.value.category, str(e.value)))
        raise Stop()

    with pytest.raises(Stop):
        hlatc.Trainer(tiny_step).fit(tiny_loader(tiny_step, tiny_data), 2, checkpoint_dir=d,
                                     checkpoint_every=1, on_step=second_run)
    [(category, message)] = refused
    assert category == "conflict" and f"pid {os.getpid()}" in message
    # The one that raised let it go: the same call resumes at step 1.
    seen = []
    hlatc.Trainer(tiny_step).fit(tiny_loader(tiny_step, tiny_data), 2, checkpoint_dir=d,
                                 on_step=lambda row: seen.append(row["step"]))
    assert seen == [2] and checkpoints(d) == ["step-00000001", "step-00000002"]


def test_fit_stops_at_a_diverged_loss_with_hlatc_trains_error(tmp_path, tiny_data):
    # The rule and the message are hlatc train's (RunError::check_loss): a
    # loss that is not finite raises before its step is saved.
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=4, seq_len=16, packed=True,
                              lr_max=1e9, warmup_steps=1)
    trainer = hlatc.Trainer(step)
    seen = []
    with pytest.raises(hlatc.RunError) as e:
        trainer.fit(tiny_loader(step, tiny_data), 20, checkpoint_dir=tmp_path / "ckpt",
                    checkpoint_every=1, on_step=lambda row: seen.append(row["step"]) is None)
    diverged = len(seen) + 1
    assert str(e.value) in (f"step {diverged}: the loss is NaN; training diverged",
                            f"step {diverged}: the loss is inf; training diverged")
    assert checkpoints(tmp_path / "ckpt") == [f"step-{s:08d}" for s in seen]


# ---------------------------------------------------------------- the CLI


def cli_with_checkpoints():
    """The hlatc binary (as test_hlatc.py finds it), if its `train` has
    --checkpoint-dir."""
    import subprocess

    from test_hlatc import cli

    exe = cli()
    usage = subprocess.run([exe, "train", "--help"], capture_output=True, text=True).stdout
    if "--checkpoint-dir" not in usage:
        pytest.skip(f"{exe} predates hlatc train --checkpoint-dir")
    return exe


def test_the_cli_and_python_resume_each_other_s_checkpoints(tmp_path, tiny_data):
    import subprocess

    exe = cli_with_checkpoints()
    # `hlatc train`'s step and recipe, spelled out on both sides; one seed
    # for the initialization, the rounding and the loader, as the CLI has.
    recipe = dict(batch_size=4, seq_len=16, precision="bf16-mixed", remat="core-attention",
                  lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
    step = hlatc.compile_step(model="tiny", target="cpu", packed=True, **recipe)
    corpus, tok = str(tiny_data / "corpus.jsonl"), str(tiny_data / "tokenizer.json")
    flags = ["train", "--model", "tiny", "--steps", "6", "--seed", "4", "--corpus", corpus,
             "--tokenizer", tok, "--checkpoint-every", "2"]
    for k, v in recipe.items():
        flags += ["--" + k.replace("_", "-"), str(v)]

    def python_fit(d, **kw):
        trainer = hlatc.Trainer(step, seed=4)
        loader = hlatc.data.Loader.for_step(step, corpus, tokenizer=tok, seed=4)
        return trainer.fit(loader, 6, checkpoint_dir=d, checkpoint_every=2, **kw)

    def run_cli(d, *more):
        done = subprocess.run([exe, *flags, "--checkpoint-dir", str(d), *more],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    def files(d):
        # Every file, the run's identity (run.json) among them: both record
        # it through the one Rust type.
        return {p.name: p.read_bytes() for p in (d / "step-00000006").iterdir()}

    python_fit(tmp_path / "py")
    run_cli(tmp_path / "cli")
    assert files(tmp_path / "cli") == files(tmp_path / "py")  # the same run, the same bytes

    # The CLI stops after step 4; Python goes on from its checkpoint.
    run_cli(tmp_path / "a", "--stop-after", "4")
    seen = []
    python_fit(tmp_path / "a", on_step=lambda row: seen.append(row["step"]))
    assert seen == [5, 6]
    assert files(tmp_path / "a") == files(tmp_path / "py")

    # Python stops after step 4; the CLI goes on from its checkpoint.
    python_fit(tmp_path / "b", on_step=lambda row: row["step"] < 4)
    out = run_cli(tmp_path / "b")
    assert "resuming at step 4" in out, out
    assert files(tmp_path / "b") == files(tmp_path / "py")
