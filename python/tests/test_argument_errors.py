"""Arguments that used to fail unclearly (an OverflowError naming no
argument, `TypeError: not iterable`, a builtin TypeError) refused by name:
each an hlatc.UsageError naming the argument (its `argument`), a
UsageTypeError (also a TypeError) for another type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import hlatc
import hlatc.data
import hlatc.jax
from hlatc import _args, _hlatc


def loader(**changes):
    args = dict(seq_len=8, batch_size=2, vocab_size=64)
    args.update(changes)
    return hlatc.data.Loader("no-such-corpus.jsonl", **args)


@pytest.mark.parametrize("name, value", [
    ("batch_size", -1),
    ("batch_size", 0),
    ("seq_len", -8),
    ("vocab_size", 0),
    ("replicas", 0),
    ("shuffle_buffer", -1),
    ("seed", -1),
    ("epochs", 0),
    ("eos_id", -2),
    ("eos_id", 99999),
    ("owned_replicas", [-1]),
])
def test_loader_refuses_a_bad_int_by_name(name, value):
    # Before: batch_size=-1 was an OverflowError naming no argument.
    with pytest.raises(hlatc.UsageError) as e:
        loader(**{name: value})
    assert e.value.argument == name
    assert str(e.value).startswith(f"{name}="), str(e.value)
    assert isinstance(e.value, ValueError) and not isinstance(e.value, TypeError)


def test_loader_refuses_a_non_int_by_name():
    with pytest.raises(hlatc.UsageTypeError) as e:
        loader(batch_size=2.5)
    assert e.value.argument == "batch_size" and isinstance(e.value, TypeError)
    assert "2.5" in str(e.value) and "float" in str(e.value)


def test_compile_step_refuses_passes_that_are_not_names():
    # Before: TypeError: 'int' object is not iterable.
    for kw, value in (("passes", 123), ("passes", ["cse", 7]), ("disable_pass", 5)):
        with pytest.raises(hlatc.UsageTypeError) as e:
            hlatc.compile_step(model="tiny", target="cpu", **{kw: value})
        assert (e.value.category, e.value.argument) == ("invalid", kw)


# Every public function's arguments, tried as a new user might get them
# wrong: another type, a negative count, None, a list. Each is refused at
# the boundary by an hlatc.UsageError naming the argument: a UsageTypeError
# (also a TypeError) for a type hlatc does not take, a UsageError (a
# ValueError) for a value out of range. Before, most were a builtin
# TypeError, or an OverflowError naming no argument.

TINY = dict(model="tiny", target="cpu")


@pytest.fixture(scope="module")
def step():
    return hlatc.compile_step(**TINY)


@pytest.fixture(scope="module")
def pipeline():
    return hlatc.compile_step(**TINY, pp=2, grad_accum=2, batch_size=2)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("bundle") / "acc"
    hlatc.compile_step(**TINY, grad_accum=2, batch_size=2).write_bundle(d)
    return hlatc.Bundle(d)


def measured(**changes):
    args = dict(model="tiny", instance="trn1.32xlarge", nodes=1, tp=1, dp=1, seq_per_s=1.0,
                global_batch=8, seq_len=8)
    args.update(changes)
    return lambda tmp: hlatc.append_measured_run(args.pop("path", tmp / "runs.csv"), **args)


TYPE, RANGE = hlatc.UsageTypeError, hlatc.UsageError

CASES = {
    # compile_step: one native reader per keyword.
    "compile_step tp='2'": (lambda s, p, b, t: hlatc.compile_step(**TINY, tp="2"), TYPE, "tp"),
    "compile_step tp=[2]": (lambda s, p, b, t: hlatc.compile_step(**TINY, tp=[2]), TYPE, "tp"),
    "compile_step tp=2**70": (lambda s, p, b, t: hlatc.compile_step(**TINY, tp=2**70), RANGE,
                              "tp"),
    "compile_step tp=True": (lambda s, p, b, t: hlatc.compile_step(**TINY, tp=True), TYPE, "tp"),
    "compile_step grad_accum=None": (
        lambda s, p, b, t: hlatc.compile_step(**TINY, grad_accum=None), TYPE, "grad_accum"),
    "compile_step seq_len='8'": (lambda s, p, b, t: hlatc.compile_step(**TINY, seq_len="8"),
                                 TYPE, "seq_len"),
    "compile_step packed=1": (lambda s, p, b, t: hlatc.compile_step(**TINY, packed=1), TYPE,
                              "packed"),
    "compile_step lr_max='x'": (lambda s, p, b, t: hlatc.compile_step(**TINY, lr_max="x"), TYPE,
                                "lr_max"),
    "compile_step precision=5": (lambda s, p, b, t: hlatc.compile_step(**TINY, precision=5),
                                 TYPE, "precision"),
    "compile_step rounding=1": (lambda s, p, b, t: hlatc.compile_step(**TINY, rounding=1), TYPE,
                                "rounding"),
    "compile_step model=5": (lambda s, p, b, t: hlatc.compile_step(model=5), TYPE, "model"),
    "compile_step config=[1, 2]": (lambda s, p, b, t: hlatc.compile_step(config=[1, 2]), TYPE,
                                   "config"),
    "compile_step config={'a': object()}": (
        lambda s, p, b, t: hlatc.compile_step(config={"a": object()}), RANGE, "config"),
    "compile_step device_memory=-5": (
        lambda s, p, b, t: hlatc.compile_step(**TINY, device_memory=-5), RANGE, "device_memory"),
    "compile_step device_memory=1.5": (
        lambda s, p, b, t: hlatc.compile_step(**TINY, device_memory=1.5), TYPE, "device_memory"),
    "compile_step passes=123": (lambda s, p, b, t: hlatc.compile_step(**TINY, passes=123), TYPE,
                                "passes"),
    "plan layout='tp=2,tp=4'": (lambda s, p, b, t: hlatc.plan(model="tiny", layout="tp=2,tp=4"),
                                RANGE, "layout"),
    # plan and append_measured_run.
    "plan top=-1": (lambda s, p, b, t: hlatc.plan(model="tiny", top=-1), RANGE, "top"),
    "plan top=0": (lambda s, p, b, t: hlatc.plan(model="tiny", top=0), RANGE, "top"),
    "plan nodes='2'": (lambda s, p, b, t: hlatc.plan(model="tiny", nodes="2"), TYPE, "nodes"),
    "plan threads=-1": (lambda s, p, b, t: hlatc.plan(model="tiny", threads=-1), RANGE,
                        "threads"),
    "plan instance=3": (lambda s, p, b, t: hlatc.plan(model="tiny", instance=3), TYPE,
                        "instance"),
    "plan instance='x'": (lambda s, p, b, t: hlatc.plan(model="tiny", instance="x"), RANGE,
                          "instance"),
    "plan calibration=5": (lambda s, p, b, t: hlatc.plan(model="tiny", calibration=5), TYPE,
                           "calibration"),
    "append_measured_run path=None": (lambda s, p, b, t: measured(path=None)(t), TYPE, "path"),
    "append_measured_run tp='1'": (lambda s, p, b, t: measured(tp="1")(t), TYPE, "tp"),
    "append_measured_run sdk=3": (lambda s, p, b, t: measured(sdk=3)(t), TYPE, "sdk"),
    # A Step's methods.
    "Step.init_state rank=-1": (lambda s, p, b, t: s.init_state(rank=-1), RANGE, "rank"),
    "Step.init_state seed=-1": (lambda s, p, b, t: s.init_state(seed=-1), RANGE, "seed"),
    "Step.init_state seed='0'": (lambda s, p, b, t: s.init_state(seed="0"), TYPE, "seed"),
    "Step.init_state rank=None": (lambda s, p, b, t: s.init_state(rank=None), TYPE, "rank"),
    "Step.init_state checkpoint=5": (lambda s, p, b, t: s.init_state(checkpoint=5), TYPE,
                                     "checkpoint"),
    "Step.example_batch rank=-1": (lambda s, p, b, t: s.example_batch(rank=-1), RANGE, "rank"),
    "Step.example_batch seed=1.5": (lambda s, p, b, t: s.example_batch(seed=1.5), TYPE, "seed"),
    "Step.write_bundle(None)": (lambda s, p, b, t: s.write_bundle(None), TYPE, "path"),
    "Step.write_bundle(5)": (lambda s, p, b, t: s.write_bundle(5), TYPE, "path"),
    "Step.run([1, 2])": (lambda s, p, b, t: s.run([1, 2]), TYPE, "inputs"),
    "Step.run(None)": (lambda s, p, b, t: s.run(None), TYPE, "inputs"),
    "Step.run({'tokens': 'abc'})": (lambda s, p, b, t: s.run({"tokens": "abc"}), TYPE,
                                    "inputs['tokens']"),
    "Step.run_ranks({})": (lambda s, p, b, t: s.run_ranks({}), TYPE, "inputs"),
    "Step.rank_batch rank=-1": (lambda s, p, b, t: s.rank_batch([[1]], [[1]], rank=-1), RANGE,
                                "rank"),
    "Step.rank_batch tokens=None": (lambda s, p, b, t: s.rank_batch(None, [[1]]), TYPE,
                                    "tokens"),
    "Step.shard_state rank=-1": (lambda s, p, b, t: s.shard_state({}, -1), RANGE, "rank"),
    "Step.shard_state(None, 0)": (lambda s, p, b, t: s.shard_state(None, 0), TYPE, "state"),
    "Step.gather_state(None)": (lambda s, p, b, t: s.gather_state(None), TYPE, "per_rank"),
    "Step.gather_state([None])": (lambda s, p, b, t: s.gather_state([None]), TYPE,
                                  "per_rank[0]"),
    "Step.hugging_face_params([])": (lambda s, p, b, t: s.hugging_face_params([]), TYPE,
                                     "state"),
    "Step.tick_batches rank=-1": (lambda s, p, b, t: p.tick_batches([[1]], [[1]], rank=-1),
                                  RANGE, "rank"),
    # Trainer.
    "Trainer('x')": (lambda s, p, b, t: hlatc.Trainer("x"), TYPE, "step"),
    "Trainer seed=-1": (lambda s, p, b, t: hlatc.Trainer(s, seed=-1), RANGE, "seed"),
    "Trainer.step(None, None)": (lambda s, p, b, t: hlatc.Trainer(s).step(None, None), TYPE,
                                 "tokens"),
    "Trainer.resume([])": (lambda s, p, b, t: hlatc.Trainer(s).resume([]), TYPE, "state"),
    "Trainer.fit steps=-1": (lambda s, p, b, t: hlatc.Trainer(s).fit(None, -1), RANGE, "steps"),
    "Trainer.fit keep='3'": (lambda s, p, b, t: hlatc.Trainer(s).fit(None, 3, keep="3"), TYPE,
                             "keep"),
    "Trainer.fit(None, 2)": (lambda s, p, b, t: hlatc.Trainer(s).fit(None, 2), TYPE, "loader"),
    # A pipeline's schedule and tick plan.
    "Schedule.phase('0')": (lambda s, p, b, t: p.schedule.phase("0"), TYPE, "tick"),
    "Schedule.phase(-1)": (lambda s, p, b, t: p.schedule.phase(-1), RANGE, "tick"),
    "Schedule.forward_micro_batch stage=None": (
        lambda s, p, b, t: p.schedule.forward_micro_batch(0, None), TYPE, "stage"),
    "Schedule.backward_micro_batch stage=9": (
        lambda s, p, b, t: p.schedule.backward_micro_batch(0, 9), RANGE, "stage"),
    "TickPlan.phase(None)": (lambda s, p, b, t: p.tick_plan.phase(None), TYPE, "tick"),
    "TickPlan.routing(5)": (lambda s, p, b, t: p.tick_plan.routing(5), TYPE, "phase"),
    "TickPlan.routing('x')": (lambda s, p, b, t: p.tick_plan.routing("x"), RANGE, "phase"),
    # Modules, plots, bundles, the loader.
    "load_module(5)": (lambda s, p, b, t: hlatc.load_module(5), TYPE, "source"),
    "load_module(None)": (lambda s, p, b, t: hlatc.load_module(None), TYPE, "source"),
    "optimize('x')": (lambda s, p, b, t: hlatc.optimize("x"), TYPE, "module"),
    "optimize target=5": (lambda s, p, b, t: hlatc.optimize(s.module(), target=5), TYPE,
                          "target"),
    "optimize passes='cse'": (lambda s, p, b, t: hlatc.optimize(s.module(), passes="cse"), TYPE,
                              "passes"),
    "plot_metrics([])": (lambda s, p, b, t: hlatc.plot_metrics([], t / "p.png"), TYPE, "runs"),
    "plot_metrics path=None": (
        lambda s, p, b, t: hlatc.plot_metrics({"a": [{"loss": 1.0}]}, None), TYPE, "path"),
    "plot_metrics series=5": (
        lambda s, p, b, t: hlatc.plot_metrics({"a": [{"loss": 1.0}]}, t / "p.png", series=5),
        TYPE, "series"),
    "plot_metrics log_y=1": (
        lambda s, p, b, t: hlatc.plot_metrics({"a": [{"loss": 1.0}]}, t / "p.png", log_y=1),
        TYPE, "log_y"),
    "Bundle(None)": (lambda s, p, b, t: hlatc.Bundle(None), TYPE, "path"),
    "Bundle.inputs('nope')": (lambda s, p, b, t: b.inputs("nope"), RANGE, "program"),
    "Bundle.outputs(5)": (lambda s, p, b, t: b.outputs(5), TYPE, "program"),
    "Loader.for_step('x')": (lambda s, p, b, t: hlatc.data.Loader.for_step("x", "c.jsonl"), TYPE,
                             "step"),
    "hlatc.jax.load('x')": (lambda s, p, b, t: hlatc.jax.load("x"), TYPE, "step"),
    "hlatc.jax.Trainer('x')": (lambda s, p, b, t: hlatc.jax.Trainer("x"), TYPE, "step"),
    "Loader sources=5": (lambda s, p, b, t: hlatc.data.Loader(
        5, seq_len=8, batch_size=2, vocab_size=64), TYPE, "sources"),
    "Loader tokenizer=5": (lambda s, p, b, t: loader(tokenizer=5), TYPE, "tokenizer"),
    "Loader text_field=5": (lambda s, p, b, t: loader(text_field=5), TYPE, "text_field"),
    "Loader format=5": (lambda s, p, b, t: loader(format=5), TYPE, "format"),
    "Loader packing='x'": (lambda s, p, b, t: loader(packing="x"), RANGE, "packing"),
}

# Values the library refuses, named by their keyword (they were
# ConfigErrors, or UsageErrors without `argument`, in the CLI's words).
REFUSED_VALUES = [("tp", 0), ("dp", -2), ("pp", 0), ("ep", 0), ("batch_size", 0),
                  ("seq_len", -16), ("grad_accum", 0), ("lr_max", -1.0), ("lr_min", -1.0),
                  ("beta1", 1.5), ("beta2", -0.1), ("adam_eps", 0.0), ("weight_decay", -1.0),
                  ("clip_norm", float("nan")), ("warmup_steps", -1), ("total_steps", 0),
                  ("device_memory", "lots"), ("device_memory", "1KiB")]
for _name, _value in REFUSED_VALUES:
    CASES[f"compile_step {_name}={_value!r}"] = (
        lambda s, p, b, t, kw={_name: _value}: hlatc.compile_step(**TINY, **kw), RANGE, _name)


# A value of a type the argument does not take is invalid, one of its type
# out of range; but for these (a malformed value, a name not there).
CATEGORY = {
    "compile_step config={'a': object()}": "invalid",
    "compile_step device_memory='lots'": "invalid",
    "plan layout='tp=2,tp=4'": "invalid",
    "Bundle.inputs('nope')": "not_found",
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_argument_is_refused_by_name(case, step, pipeline, bundle, tmp_path):
    call, cls, argument = CASES[case]
    with pytest.raises(cls) as e:
        call(step, pipeline, bundle, tmp_path)
    assert isinstance(e.value, hlatc.UsageError), repr(e.value)
    assert isinstance(e.value, TypeError if cls is TYPE else ValueError), repr(e.value)
    assert e.value.argument == argument, repr(e.value)
    assert argument.split("[")[0] in str(e.value), str(e.value)
    want = CATEGORY.get(case, "invalid" if cls is TYPE else "out_of_range")
    assert e.value.category == want, repr(e.value)


def test_the_message_says_what_was_given_and_what_is_taken(step):
    with pytest.raises(hlatc.UsageTypeError) as e:
        hlatc.compile_step(**TINY, tp="2")  # type: ignore[arg-type]
    assert "'2'" in str(e.value) and "an int" in str(e.value) and "str" in str(e.value)
    with pytest.raises(hlatc.UsageError) as e:
        step.init_state(rank=-1)
    assert "-1" in str(e.value) and "0 or more" in str(e.value)
    # Not "expected bytes (an int)", which it said of a negative int.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(**TINY, device_memory=-5)
    assert "-5" in str(e.value) and "0 or more" in str(e.value)


def test_a_value_the_library_refuses_is_named_as_python_spells_it():
    # The library names the option by a typed name; Python writes it as its
    # keyword, not the CLI's flag, and says which value was given.
    for kwargs, start in [
        (dict(tp=0), "tp=0: must be at least 1"),
        (dict(adam_eps=-1.0), "adam_eps=-1: must be positive"),
        (dict(lr_max=1e-5, lr_min=1e-4), "lr_min=0.0001: must not exceed the peak learning rate"),
        (dict(seq_len=32), "seq_len=32: 32 exceeds max_position_embeddings = 16"),
    ]:
        with pytest.raises(hlatc.UsageError) as e:
            hlatc.compile_step(**TINY, **kwargs)  # type: ignore[arg-type]
        assert str(e.value).startswith(start), str(e.value)
        assert "--" not in str(e.value), str(e.value)
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.plan(model="tiny", layout="tp=2,tp=4")
    assert str(e.value) == "layout=\"tp=2,tp=4\": 'tp' is given twice", str(e.value)


def test_a_config_file_that_is_not_there_is_a_file_error_naming_it(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(hlatc.FileError) as e:
        hlatc.compile_step(config=missing)
    assert e.value.path == str(missing) and isinstance(e.value, OSError)
    assert "No such file" in str(e.value)


def test_an_unknown_name_of_a_fixed_set_is_a_config_error_naming_the_names():
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(**TINY, precision="fp8")  # type: ignore[arg-type]
    assert e.value.key == "precision"
    assert all(p in str(e.value) for p in hlatc._hlatc.choices()["precision"])
    # The code the CLI prints for the same name, for every option of a set.
    assert e.value.code == "option.precision"
    for keyword in ("reshard", "cp_exchange", "remat"):
        with pytest.raises(hlatc.ConfigError) as e:
            hlatc.compile_step(**TINY, **{keyword: "bogus"})
        assert (e.value.key, e.value.code) == (keyword, f"option.{keyword}")


def test_compile_step_and_plan_take_keywords_only():
    # The docs say keyword-only; `compile_step("tiny")` used to compile.
    with pytest.raises(TypeError, match="positional"):
        hlatc.compile_step("tiny")  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        hlatc._hlatc.compile_step("tiny")  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        hlatc.plan("tiny")  # type: ignore[misc]


def test_the_library_sorts_its_usage_errors_by_category():
    # hlatc::usage::UsageKind, as polars sorts its errors: a value out of
    # range, inputs that are not there, told apart without the sentence.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(model="tiny", target="cpu", tp=0)
    assert (e.value.category, e.value.argument) == ("out_of_range", "tp")
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=2, seq_len=8)
    with pytest.raises(hlatc.UsageError) as e:
        step.run({})
    assert e.value.category == "not_found" and e.value.argument is None


def test_the_python_side_names_the_categories_as_rust_does():
    # hlatc._args.UsageKind, which the Python side's refusals are made
    # with, against the Rust enum's names: in order, none missing.
    assert [k.value for k in _args.UsageKind] == _hlatc.USAGE_CATEGORIES
    error = _args.usage_error(_args.UsageKind.CONFLICT, "a message", argument="an_argument")
    assert type(error) is hlatc.UsageError and str(error) == "a message"
    assert (error.category, error.argument) == ("conflict", "an_argument")


# A refusal of each category, from the native layer and from the Python
# side's own checks (hlatc.jax's among them, refused before JAX is asked):
# each sorted as hlatc::usage::UsageKind sorts the library's, and told
# apart by `category` without reading the sentence.
CATEGORIES = {
    # The native layer's.
    "a rank below 0": (lambda s, p, b, t: s.init_state(rank=-1), "out_of_range", "rank"),
    "model and config": (lambda s, p, b, t: hlatc.compile_step(model="tiny", config={}),
                         "conflict", None),
    "a pipeline's state from a checkpoint": (
        lambda s, p, b, t: p.init_state(checkpoint=t / "model.safetensors"), "unsupported",
        None),
    "a metrics row without its loss": (
        lambda s, p, b, t: _hlatc.metrics_csv([{"step": 1.0}]), "not_found", None),
    "a layout that does not parse": (
        lambda s, p, b, t: hlatc.plan(model="tiny", layout="tp=2,tp=4"), "invalid", "layout"),
    # The Python side's own.
    "a negative seed": (lambda s, p, b, t: loader(seed=-1), "out_of_range", "seed"),
    "hlatc.jax.load devices and device": (
        lambda s, p, b, t: hlatc.jax.load(s, devices=[], device=object()), "conflict", None),
    "hlatc.jax.Trainer init of a pipeline": (
        lambda s, p, b, t: hlatc.jax.Trainer(p, init=t / "model.safetensors"), "unsupported",
        "init"),
    "a program the bundle has not": (lambda s, p, b, t: b.outputs("nope"), "not_found",
                                     "program"),
    "sources of another type": (lambda s, p, b, t: hlatc.data.Loader(
        5, seq_len=8, batch_size=2, vocab_size=64), "invalid", "sources"),
}


@pytest.mark.parametrize("case", list(CATEGORIES))
def test_each_category_is_raised(case, step, pipeline, bundle, tmp_path):
    call, category, argument = CATEGORIES[case]
    with pytest.raises(hlatc.UsageError) as e:
        call(step, pipeline, bundle, tmp_path)
    assert (e.value.category, e.value.argument) == (category, argument), repr(e.value)


def test_every_error_carries_the_code_the_cli_prints():
    # What the library refused: the code `hlatc compile` prints for it.
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(model="tiny", target="cpu", tp=3)
    assert e.value.code == "artifact.step.parallel"
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(model="tiny", target="cpu", tp=0)
    assert (e.value.code, e.value.category) == ("option.tp", "out_of_range")
    # What the Python layer refused before the library: its usage kind.
    with pytest.raises(hlatc.UsageTypeError) as e:
        hlatc.compile_step(model="tiny", target="cpu", tp="x")
    assert e.value.code == "usage.invalid"
    # Every class answers `code`; one raised without a code says None.
    assert hlatc.Error.code is None
    assert hlatc.Error("raised by hand").code is None


def _between(path: Path, block: str) -> str:
    text = path.read_text()
    begin, end = f"<!-- {block}:begin -->", f"<!-- {block}:end -->"
    return text[text.index(begin) + len(begin):text.index(end)]


def test_the_codes_only_python_raises_are_the_ones_python_md_lists_and_no_cli_code():
    docs = Path(__file__).parents[2] / "docs" / "src"
    listed = re.findall(r"^- `([a-z_.]+)`:", _between(docs / "python.md", "python-codes"),
                        re.MULTILINE)
    assert listed == list(_hlatc.PYTHON_CODES)
    # The CLI's list (cli.md's table, a group and its cases to a row).
    cli = set()
    table = _between(docs / "cli.md", "generated:error-codes")
    for group, cases in re.findall(r"^\| (\S+) \| (.*) \|$", table, re.MULTILINE):
        prefix = "" if group == "(none)" else group.strip("`")
        cli.update(prefix + c for c in re.findall(r"`([a-z_0-9]+)`", cases))
    assert "sharded_checkpoint.no_marker" in cli and "artifact.file" in cli
    assert not cli & set(_hlatc.PYTHON_CODES)
    # A refusal of the Python side's own takes one of them, and no other.
    assert _args.usage_error(_args.UsageKind.CONFLICT, "m", code="launch.port_taken").code == \
        "launch.port_taken"
    assert _args.usage_error(_args.UsageKind.CONFLICT, "m").code == "usage.conflict"
    with pytest.raises(AssertionError):
        _args.usage_error(_args.UsageKind.CONFLICT, "m", code="usage.made_up")
    assert hlatc.jax.PeerLostError("gone").code == "jax.peer_lost"


def test_context_parallel_layouts_it_cannot_take_are_refused_with_their_codes():
    cases = [
        (dict(seq_len=12, cp=4), hlatc.ConfigError, "artifact.step.parallel",
         "cp=4 with cp_balance=head-tail cuts each sequence into 8 equal chunks"),
        (dict(seq_len=16, cp=2, kernels={"attention": "blocked:4"}), hlatc.ConfigError,
         "artifact.step.context_kernel", "only the plain graph (attention=hlo) and looped"),
        (dict(seq_len=16, cp=2, kernels={"attention": "looped:8"}), hlatc.ConfigError,
         "artifact.step.context_tile", "a tile must lie within one chunk of 4 tokens"),
        (dict(seq_len=16, cp=0), hlatc.UsageError, "option.cp", "must be at least 1"),
        (dict(seq_len=16, cp=2, cp_exchange="ring"), hlatc.ConfigError,
         "artifact.step.ring_kernel", "only looped attention does"),
        (dict(seq_len=16, cp_exchange="ring"), hlatc.ConfigError, "artifact.step.parallel",
         "cp_exchange=ring needs cp above 1"),
    ]
    for options, kind, code, words in cases:
        with pytest.raises(kind) as e:
            hlatc.compile_step(model="tiny", target="cpu", **options)
        assert e.value.code == code and words in str(e.value), (options, repr(e.value))


def test_what_a_value_is_and_why_it_is_refused_is_said():
    # The entry that is not a str is named, with its type.
    with pytest.raises(hlatc.UsageTypeError) as e:
        hlatc.compile_step(**TINY, kernels={"attention": 8})  # type: ignore[dict-item]
    assert "the value of \"attention\" is int, not str" in str(e.value), str(e.value)
    # An int too wide for its field is out of range, not "not an int".
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.plan(model="tiny", global_batch=2**70)
    assert e.value.category == "out_of_range", repr(e.value)
    assert "is out of range" in str(e.value), str(e.value)
    # A kernel point the planner does not price is refused, not ignored.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.plan(model="tiny", kernels={"softmax": "hlo"})
    assert e.value.code == "kernel.not_priced", repr(e.value)
