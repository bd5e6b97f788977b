"""Arguments that used to fail unclearly (an OverflowError naming no
argument, `TypeError: not iterable`) refused by name."""

from __future__ import annotations

import pytest

import hlatc
import hlatc.data


def loader(**changes):
    args = dict(seq_len=8, batch_size=2, vocab_size=64)
    args.update(changes)
    return hlatc.data.Loader("no-such-corpus.jsonl", **args)


@pytest.mark.parametrize("name, value, said", [
    ("batch_size", -1, "Loader: batch_size=-1: must be 1 or more"),
    ("batch_size", 0, "Loader: batch_size=0: must be 1 or more"),
    ("seq_len", -8, "Loader: seq_len=-8: must be 1 or more"),
    ("vocab_size", 0, "Loader: vocab_size=0: must be 1 or more"),
    ("replicas", 0, "Loader: replicas=0: must be 1 or more"),
    ("shuffle_buffer", -1, "Loader: shuffle_buffer=-1: must be 1 or more"),
    ("seed", -1, "Loader: seed=-1: must be 0 or more"),
    ("epochs", 0, "Loader: epochs=0: must be 1 or more"),
    ("eos_id", -2, "Loader: eos_id=-2: must be a token id"),
    ("eos_id", 99999, "Loader: eos_id=99999: not in the vocabulary of 64"),
    ("owned_replicas", [-1], "Loader: owned_replicas=-1: a replica index"),
])
def test_loader_refuses_a_bad_int_by_name(name, value, said):
    # Before: batch_size=-1 was an OverflowError naming no argument.
    with pytest.raises(hlatc.UsageError) as e:
        loader(**{name: value})
    assert str(e.value).startswith(said), str(e.value)
    assert isinstance(e.value, ValueError)


def test_loader_refuses_a_non_int_by_name():
    with pytest.raises(TypeError, match="Loader: batch_size=2.5: an int, not float"):
        loader(batch_size=2.5)


def test_compile_step_refuses_passes_that_are_not_names():
    # Before: TypeError: 'int' object is not iterable.
    with pytest.raises(TypeError, match=r"compile_step: passes=123: a list of pass names"):
        hlatc.compile_step(model="tiny", target="cpu", passes=123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"compile_step: passes: 7 is not a pass name"):
        hlatc.compile_step(model="tiny", target="cpu", passes=["cse", 7])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"compile_step: disable_pass=5: a list of pass names"):
        hlatc.compile_step(model="tiny", target="cpu", disable_pass=5)  # type: ignore[arg-type]
