"""A run's identity in its checkpoints (`hlatc.Trainer.fit`'s `run.json`,
the file `hlatc train` writes, `hlatc.jax.Trainer`'s `COMPLETE`): a resume or load of
another run's checkpoint is refused naming each differing field with both
values, unless `allow_changes` names it; the same data copied elsewhere is
the same run; a layout change still resumes."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

import hlatc
from corpus import write_word_corpus

SHAPE = dict(target="cpu", batch_size=4, seq_len=16, packed=True)
# tiny's model config as a config file gives it (the keys hlatc reads).
KEYS = ["model_type", "vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
        "num_key_value_heads", "head_dim", "num_hidden_layers", "rms_norm_eps", "rope_theta",
        "tie_word_embeddings", "max_position_embeddings"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity-data")
    write_word_corpus(root)
    return root


@pytest.fixture(scope="module")
def step():
    return hlatc.compile_step(model="tiny", **SHAPE)


def tiny_config(step, **changes):
    return {**{k: step.config["model"][k] for k in KEYS}, **changes}


def loader(step, corpus: Path, tokenizer: Path):
    return hlatc.data.Loader.for_step(step, corpus, tokenizer=tokenizer, seed=3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, step, data):
    """Two steps of tiny (bf16-mixed, rope_theta 10000) checkpointed."""
    d = tmp_path_factory.mktemp("identity-ckpt") / "ckpt"
    hlatc.Trainer(step).fit(loader(step, data / "corpus.jsonl", data / "tokenizer.json"), 2,
                            checkpoint_dir=d)
    return d


def resume(step, saved: Path, tmp_path: Path, corpus: Path, tokenizer: Path, steps: int = 3,
           **kw):
    d = tmp_path / "ckpt"
    shutil.copytree(saved, d)
    trainer = hlatc.Trainer(step)
    metrics = trainer.fit(loader(step, corpus, tokenizer), steps, checkpoint_dir=d, **kw)
    return trainer, metrics, d


def test_fit_records_the_runs_identity(saved, step, data):
    identity = json.loads((saved / "step-00000002" / "run.json").read_text())
    fields = identity["fields"]
    assert fields["model.rope_theta"] == "10000.0"
    assert fields["precision"] == "bf16-mixed" and fields["rounding"] == "state-updates"
    assert float(fields["schedule.max_lr"]) == step.config["optimizer"]["max_lr"]
    import hashlib
    assert fields["tokenizer"] == "sha256:" + hashlib.sha256(
        (data / "tokenizer.json").read_bytes()).hexdigest()
    assert fields["corpus"].startswith("1 file, ") and " sha256 " in fields["corpus"]
    assert fields["layout"].endswith("grad-accum 1")
    assert "allowed_changes" not in identity


def test_another_rope_theta_is_refused_naming_it(saved, step, data, tmp_path):
    other = hlatc.compile_step(config=tiny_config(step, rope_theta=500000.0), **SHAPE)
    with pytest.raises(hlatc.IdentityError) as e:
        resume(other, saved, tmp_path, data / "corpus.jsonl", data / "tokenizer.json")
    assert "was written by another run: model.rope_theta is 10000.0 in the checkpoint, " \
           "500000.0 now" in str(e.value)
    assert "name each field (or its group) in allow_changes" in str(e.value)
    assert e.value.fields == {"model.rope_theta": ("10000.0", "500000.0")}
    assert isinstance(e.value, hlatc.UsageError) and e.value.category == "conflict"
    # What `hlatc train --checkpoint-dir` prints for a resume of another run.
    assert e.value.code == "run_checkpoint.identity.changed"


def test_another_precision_is_refused_naming_it(saved, step, data, tmp_path):
    fp32 = hlatc.compile_step(model="tiny", precision="fp32", **SHAPE)
    with pytest.raises(hlatc.IdentityError) as e:
        resume(fp32, saved, tmp_path, data / "corpus.jsonl", data / "tokenizer.json")
    assert e.value.fields == {"precision": ("bf16-mixed", "fp32")}


def test_an_allowed_change_resumes_warns_and_is_recorded(saved, step, data, tmp_path):
    other = hlatc.compile_step(config=tiny_config(step, rope_theta=500000.0), **SHAPE)
    # A warning has no code: its words (the field, its old value) are its content.
    with pytest.warns(hlatc.IdentityWarning,
                      match="model.rope_theta changed on purpose .*: 10000.0 in the checkpoint"):
        trainer, metrics, d = resume(other, saved, tmp_path, data / "corpus.jsonl",
                                     data / "tokenizer.json", allow_changes=["model"])
    assert trainer.steps_done == 3 and [m["step"] for m in metrics] == [1, 2, 3]
    identity = json.loads((d / "step-00000003" / "run.json").read_text())
    assert identity["fields"]["model.rope_theta"] == "500000.0"
    assert identity["allowed_changes"] == [
        {"step": 2, "field": "model.rope_theta", "was": "10000.0", "now": "500000.0"}]
    with pytest.raises(hlatc.UsageError) as e:
        resume(other, saved, tmp_path / "x", data / "corpus.jsonl", data / "tokenizer.json",
               allow_changes=["rope_theta"])
    assert (e.value.argument, e.value.category) == ("allow_changes", "not_found")


def test_a_misspelt_allowed_change_is_refused_on_a_fresh_directory_too(step, data, tmp_path):
    # It was accepted until a resume read it, as the CLI does not.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.Trainer(step).fit(loader(step, data / "corpus.jsonl", data / "tokenizer.json"), 1,
                                checkpoint_dir=tmp_path / "fresh", allow_changes=["precisoin"])
    assert (e.value.argument, e.value.category) == ("allow_changes", "not_found")
    assert not list((tmp_path / "fresh").glob("step-*"))


def test_the_data_is_known_by_content_not_path(saved, step, data, tmp_path):
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(data / "corpus.jsonl", copy / "corpus.jsonl")
    shutil.copy(data / "tokenizer.json", copy / "tokenizer.json")
    # The same files elsewhere: the same run's identity. (The loader's
    # position still names its files by path: the loader's own check.)
    from hlatc import _identity

    here = _identity.of_step(step, loader(step, data / "corpus.jsonl", data / "tokenizer.json"))
    there = _identity.of_step(step, loader(step, copy / "corpus.jsonl", copy / "tokenizer.json"))
    assert here == there and " sha256 " in here.fields["corpus"]
    # The tokenizer rewritten at the same path: another run.
    tok = json.loads((copy / "tokenizer.json").read_text())
    (copy / "tokenizer.json").write_text(json.dumps(tok, indent=3))
    with pytest.raises(hlatc.IdentityError) as e:
        resume(step, saved, tmp_path / "b", copy / "corpus.jsonl", copy / "tokenizer.json")
    import hashlib

    def sha256_of(path: Path) -> str:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()

    assert e.value.fields == {"tokenizer": (sha256_of(data / "tokenizer.json"),
                                            sha256_of(copy / "tokenizer.json"))}
    shutil.copy(data / "tokenizer.json", copy / "tokenizer.json")
    with open(copy / "corpus.jsonl", "a") as f:
        f.write(json.dumps({"text": "one more document"}) + "\n")
    with pytest.raises(hlatc.IdentityError) as e:
        resume(step, saved, tmp_path / "c", copy / "corpus.jsonl", copy / "tokenizer.json")
    assert list(e.value.fields) == ["corpus"]


def test_a_layout_change_still_resumes(saved, step, data, tmp_path):
    tp2 = hlatc.compile_step(model="tiny", tp=2, **SHAPE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", hlatc.IdentityWarning)
        trainer, _, d = resume(tp2, saved, tmp_path, data / "corpus.jsonl",
                               data / "tokenizer.json")
    assert trainer.steps_done == 3
    identity = json.loads((d / "step-00000003" / "run.json").read_text())
    assert identity["fields"]["layout"].startswith("TP 2") or "2" in identity["fields"]["layout"]
    assert "allowed_changes" not in identity


def test_jax_trainer_load_checks_the_identity_its_marker_records(step, tmp_path):
    pytest.importorskip("jax", reason="the jax extra: pip install ./python[jax]")
    import hlatc.jax

    options = dict(SHAPE, packed=False, precision="fp32")
    theta = hlatc.compile_step(model="tiny", **options)
    trainer = hlatc.jax.Trainer(theta, seed=0)
    tokens = [[1 + (i + r) % 60 for i in range(16)] for r in range(4)]
    trainer.step(tokens, tokens)
    trainer.save(tmp_path / "ckpt")
    record = json.loads((tmp_path / "ckpt" / "COMPLETE").read_text())
    assert record["identity"]["fields"]["model.rope_theta"] == "10000.0"
    assert record["identity"]["fields"]["precision"] == "fp32"
    assert "tokenizer" not in record["identity"]["fields"]  # saved without a loader

    other = hlatc.compile_step(config=tiny_config(step, rope_theta=500000.0), **options)
    again = hlatc.jax.Trainer(other, seed=1)
    # Before: it loaded, and its COMPLETE recorded the old rope_theta.
    with pytest.raises(hlatc.IdentityError) as e:
        again.load(tmp_path / "ckpt")
    assert e.value.fields == {"model.rope_theta": ("10000.0", "500000.0")}
    assert again.steps_done == 0
    with pytest.warns(hlatc.IdentityWarning):
        again.load(tmp_path / "ckpt", allow_changes=["model"])
    assert again.steps_done == 1
    again.save(tmp_path / "changed")
    changed = json.loads((tmp_path / "changed" / "COMPLETE").read_text())["identity"]
    assert changed["fields"]["model.rope_theta"] == "500000.0"
    assert [c["field"] for c in changed["allowed_changes"]] == ["model.rope_theta"]

    bf16 = hlatc.jax.Trainer(hlatc.compile_step(model="tiny", **dict(options,
                                                                       precision="bf16-mixed")))
    with pytest.raises(hlatc.IdentityError) as e:
        bf16.load(tmp_path / "ckpt")
    assert e.value.fields == {"precision": ("fp32", "bf16-mixed")}
    assert e.value.code == "artifact.identity.changed"

    # Unclear errors made clear: a missing directory, a file for a directory.
    with pytest.raises(hlatc.FileError) as e:
        trainer.load(tmp_path / "missing")
    assert (e.value.code, e.value.path) == ("sharded_checkpoint.no_directory",
                                            str(tmp_path / "missing"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(hlatc.FileError) as e:
        trainer.save(tmp_path / "afile")
    assert (e.value.code, e.value.path) == ("sharded_checkpoint.save_into_file",
                                            str(tmp_path / "afile"))
    with pytest.raises(hlatc.FileError) as e:
        trainer.load(tmp_path / "afile")
    assert (e.value.code, e.value.path) == ("sharded_checkpoint.not_directory",
                                            str(tmp_path / "afile"))


def test_a_fit_from_other_starting_weights_is_refused_naming_init(saved, step, data, tmp_path):
    # What the weights started from (issue 74): the seed of hlatc's
    # initialization, as `hlatc train --seed` records it, or a state's
    # content hash after `resume`.
    fields = json.loads((saved / "step-00000002" / "run.json").read_text())["fields"]
    assert fields["init"] == "hlatc's initialization, seed 0"
    d = tmp_path / "ckpt"
    shutil.copytree(saved, d)
    corpus, tokenizer = data / "corpus.jsonl", data / "tokenizer.json"
    with pytest.raises(hlatc.IdentityError) as e:
        hlatc.Trainer(step, seed=5).fit(loader(step, corpus, tokenizer), 3, checkpoint_dir=d)
    assert e.value.fields == {
        "init": ("hlatc's initialization, seed 0", "hlatc's initialization, seed 5")}
    other = hlatc.Trainer(step, seed=5)
    other.resume(hlatc.Trainer(step, seed=7).state())
    with pytest.raises(hlatc.IdentityError) as e:
        other.fit(loader(step, corpus, tokenizer), 3, checkpoint_dir=d)
    assert list(e.value.fields) == ["init"]
    assert e.value.fields["init"][0] == "hlatc's initialization, seed 0"
    assert e.value.fields["init"][1].startswith("a state, sha256:")
    # The same start resumes; allowed by name, another does too.
    hlatc.Trainer(step, seed=0).fit(loader(step, corpus, tokenizer), 3, checkpoint_dir=d)
    # A warning has no code: its words (the field allowed) are its content.
    with pytest.warns(hlatc.IdentityWarning, match="init changed on purpose"):
        hlatc.Trainer(step, seed=5).fit(loader(step, corpus, tokenizer), 4, checkpoint_dir=d,
                                        allow_changes=["init"])


def test_the_identity_class_is_what_hlatc_train_writes(data, tmp_path):
    # `hlatc train` and `RunIdentity.of_step` on the same step, data and
    # seed: the same fields, and `to_json` the CLI's `run.json`, byte for byte.
    import subprocess

    from hlatc import _hlatc, _identity
    from test_hlatc import cli

    recipe = dict(batch_size=4, seq_len=16, precision="bf16-mixed", lr_max=1e-2, lr_min=1e-3,
                  warmup_steps=1, total_steps=2)
    step = hlatc.compile_step(model="tiny", target="cpu", packed=True, **recipe)
    corpus, tok = data / "corpus.jsonl", data / "tokenizer.json"
    flags = ["train", "--model", "tiny", "--steps", "2", "--seed", "4", "--corpus", str(corpus),
             "--tokenizer", str(tok), "--checkpoint-dir", str(tmp_path / "cli")]
    for k, v in recipe.items():
        flags += ["--" + k.replace("_", "-"), str(v)]
    done = subprocess.run([cli(), *flags], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "cli" / "step-00000002" / "run.json").read_text()
    written = _hlatc.RunIdentity.from_json(text, "run.json")
    mine = _identity.of_step(step, hlatc.data.Loader.for_step(step, corpus, tokenizer=tok),
                             (4, None))
    assert mine.fields == written.fields == json.loads(text)["fields"]
    assert mine == written and mine.to_json() == text and mine.allowed_changes == []
    assert mine.fields["init"] == "hlatc's initialization, seed 4"
    # The names allow_changes may use: the groups, then each field.
    assert mine.names == list(_hlatc.IDENTITY_GROUPS) + sorted(mine.fields)
    # A record with a field hlatc does not know is refused naming it.
    with pytest.raises(hlatc.CheckpointError) as e:
        _hlatc.RunIdentity.from_json('{"fields": {}, "fieldz": {}}', "run.json")
    assert e.value.code == "artifact.identity.malformed"
    # Named: the field, which only the message holds.
    assert "`fieldz`" in str(e.value)


def test_a_check_with_the_data_on_one_side_only_passes_and_keeps_it(step, data):
    from hlatc import _hlatc, _identity

    with_data = _identity.of_step(step, loader(step, data / "corpus.jsonl",
                                               data / "tokenizer.json"))
    without = _identity.of_step(step)
    assert {"tokenizer", "corpus"} <= set(with_data.fields)
    assert not {"tokenizer", "corpus"} & set(without.fields)
    # A load without a loader of a checkpoint that records the data, and a
    # resume with the data of one saved without: each side's data kept.
    with warnings.catch_warnings():
        warnings.simplefilter("error", hlatc.IdentityWarning)
        assert _identity.check(with_data, without, "ckpt", None, 2) == with_data
        assert _identity.check(without, with_data, "ckpt", None, 2) == with_data
    checked, changes = without.check(with_data, [], 2, "ckpt")
    assert checked.fields == with_data.fields and changes == []
    # Recorded on both sides, the data is compared.
    other = json.loads(with_data.to_json())
    other["fields"]["corpus"] = "2 files, 10 bytes, sha256 0000000000000000"
    other_id = _hlatc.RunIdentity.from_json(json.dumps(other), "ckpt/run.json")
    with pytest.raises(hlatc.IdentityError) as e:
        _identity.check(other_id, with_data, "ckpt", None, 2)
    assert list(e.value.fields) == ["corpus"]
    assert e.value.code == "artifact.identity.changed"
    assert e.value.fields["corpus"][0] == "2 files, 10 bytes, sha256 0000000000000000"
    # A warning has no code: its words (the checkpoint, the field) are its content.
    with pytest.warns(hlatc.IdentityWarning, match="ckpt: resuming with corpus changed"):
        checked = _identity.check(other_id, with_data, "ckpt", ["corpus"], 2)
    assert checked.allowed_changes == [{"step": 2, "field": "corpus", "was": other["fields"][
        "corpus"], "now": with_data.fields["corpus"]}]
    assert without.with_allowed_changes_of(checked).allowed_changes == checked.allowed_changes
