"""The typed API: every Literal type lists the names the Rust core takes,
the public signatures are the native module's with no `**kwargs`, every
exception is an `hlatc.Error` and the builtin it means (raised by real bad
inputs), and tensors cross without copies where none is needed."""

from __future__ import annotations

import inspect
from pathlib import Path
import typing

import ml_dtypes
import numpy as np
import pytest

import hlatc
import hlatc.data
import hlatc.jax
from hlatc import _hlatc, _types
from hlatc._arrays import to_numpy, to_raw


def test_every_literal_type_lists_the_names_the_core_takes():
    core = _hlatc.choices()
    assert sorted(core) == sorted(_types.CHOICES)
    for option, literal in _types.CHOICES.items():
        assert list(typing.get_args(literal)) == core[option], option


def params(f):
    return inspect.signature(f).parameters


def test_compile_step_declares_the_option_tables_keywords():
    # The wrapper declares the table's keywords (tests/it/option_surfaces.rs
    # writes them); the native function reads each by its option's kind and
    # refuses a keyword the table lacks, as Python refuses one.
    public = params(hlatc.compile_step)
    listed = [s[1] for s in _hlatc.compile_spellings() if s[1] is not None]
    assert list(public) == listed
    assert all(p.kind == p.KEYWORD_ONLY for p in public.values())
    native = params(_hlatc.compile_step)
    assert [p.kind for p in native.values()] == [inspect.Parameter.VAR_KEYWORD]
    with pytest.raises(TypeError, match="unexpected keyword argument 'tensor_parallel'"):
        _hlatc.compile_step(tensor_parallel=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'tensor_parallel'"):
        hlatc.compile_step(tensor_parallel=2)  # type: ignore[call-arg]
    hints = typing.get_type_hints(hlatc.compile_step)
    assert hints["precision"] == _types.Precision
    assert hints["target"] == _types.Target
    assert hints["model"] == typing.Optional[_types.Model]


def test_loader_keywords_are_the_loaders_everywhere():
    init = params(hlatc.data.Loader.__init__)
    fixed = {"self", "sources", "seq_len", "batch_size", "vocab_size", "replicas"}
    for_step = params(hlatc.data.Loader.for_step)
    assert set(for_step) - {"cls", "step", "sources"} == set(init) - fixed
    for name in set(init) - fixed - {"packing"}:
        assert for_step[name].default == init[name].default, name
    loader = params(hlatc.jax.Trainer.loader)
    assert set(loader) - {"self", "sources"} == set(for_step) - {
        "cls", "step", "sources", "owned_replicas", "packing"}
    for f in (hlatc.data.Loader.__init__, hlatc.data.Loader.for_step, hlatc.jax.Trainer.loader,
              hlatc.Trainer.fit, hlatc.jax.Trainer.fit):
        assert not any(p.kind == p.VAR_KEYWORD for p in params(f).values()), f


# Each class's builtin, as docs/src/python.md's table gives it.
BUILTINS = {
    "HloSyntaxError": ValueError,
    "ConfigError": ValueError,
    "BatchError": ValueError,
    "FileError": OSError,
    "ProtoError": ValueError,
    "VerifyError": ValueError,
    "PassError": ValueError,
    "NeuronRefusedError": ValueError,
    "RunError": RuntimeError,
    "UsageError": ValueError,
    "DataError": ValueError,
    "CheckpointError": OSError,
    "InternalError": RuntimeError,
}


def test_every_exception_is_an_error_and_its_builtin():
    names = [n for n in hlatc.__all__ if n.endswith("Error") and n != "Error"]
    # IdentityError, Python's, is a UsageError that names the fields.
    python_made = {"IdentityError": hlatc.UsageError}
    # An argument of another type: a UsageError that is also a TypeError.
    refined = {"UsageTypeError": (hlatc.UsageError, TypeError)}
    assert sorted(names) == sorted([*BUILTINS, *python_made, *refined])
    for name, base in python_made.items():
        cls = getattr(hlatc, name)
        assert cls.__bases__ == (base,) and cls.__module__ == "hlatc", name
        assert issubclass(cls, hlatc.Error) and not hasattr(_hlatc, name)
    for name, bases in refined.items():
        cls = getattr(hlatc, name)
        assert cls.__bases__ == bases and cls.__module__ == "hlatc", name
        assert cls is getattr(_hlatc, name) and str(cls("a message")) == "a message"
        assert cls.argument is None
    for name, builtin in BUILTINS.items():
        cls = getattr(hlatc, name)
        assert cls.__bases__ == (hlatc.Error, builtin), name
        assert cls.__module__ == "hlatc" and cls is getattr(_hlatc, name)
        e = cls("a message")
        assert str(e) == "a message", name
    assert hlatc.Error.__bases__ == (Exception,)


def test_the_errors_that_were_the_base_class_have_their_own():
    # A grad_accum that does not divide the batch and an SPMD choice on
    # one device were a bare hlatc.Error.
    with pytest.raises(ValueError) as e:
        hlatc.compile_step(model="tiny", target="cpu", spmd="partitions")
    assert type(e.value) is hlatc.ConfigError and e.value.key == "spmd"
    assert "runs on one device" in str(e.value)
    with pytest.raises(ValueError) as e:
        hlatc.compile_step(model="tiny", target="cpu", batch_size=2, grad_accum=3)
    assert type(e.value) is hlatc.ConfigError and e.value.key == "grad_accum"
    assert "grad_accum=3 must be at least 2 and divide" in str(e.value)
    with pytest.raises(ValueError) as e:
        hlatc.compile_step(model="tiny", target="cpu", pp_send="permute")
    assert type(e.value) is hlatc.ConfigError and e.value.key == "pp_send"
    assert "it needs pp=2 or more" in str(e.value)
    with pytest.raises(ValueError) as e:
        hlatc.compile_step(model="tiny", target="cpu", beta1=1.5)
    assert e.value.code == "option.beta1"
    # Named: the value and the range it is outside, which no field holds.
    assert "beta1=1.5: must be in [0, 1)" in str(e.value)


def test_each_error_is_caught_as_its_builtin(tmp_path):
    with pytest.raises(ValueError) as e:
        hlatc.compile_step(model="tiny", target="gpu")  # type: ignore[arg-type]
    assert (type(e.value), e.value.code) == (hlatc.ConfigError, "option.target")
    # Named: the targets there are, which no field holds.
    assert "(known: neuron, cpu)" in str(e.value)
    with pytest.raises(OSError) as e:
        hlatc.load_module(tmp_path / "missing.hlo")
    assert isinstance(e.value, hlatc.FileError) and e.value.errno is None
    with pytest.raises(ValueError) as e:
        hlatc.load_module(b"HloModule m\nENTRY e {\n  ROOT x = f32[2] bogus()\n}\n")
    assert isinstance(e.value, hlatc.HloSyntaxError)

    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=4)
    state, batch = step.init_state(), step.example_batch()
    # A tensor of another shape than the step's: the inputs do not fit the
    # program (was a RunError).
    name = next(t.name for t in step.inputs if t.role == "parameter")
    with pytest.raises(ValueError) as e:
        step.run({**state, **batch, name: np.zeros((3,), state[name].dtype)})
    assert isinstance(e.value, hlatc.UsageError) and e.value.category == "invalid"
    batch["targets"][0, 3] = -5
    with pytest.raises(ValueError) as e:
        step.run({**state, **batch})
    assert isinstance(e.value, hlatc.BatchError)
    assert (e.value.input, e.value.row, e.value.column, e.value.value) == ("targets", 0, 3, -5)
    assert e.value.rank is None

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(OSError) as e:
        _hlatc.RunCheckpoints(str(blocker / "ckpt"), 3,
                              _hlatc.RunIdentity.from_json('{"fields": {}}', "a run"), [])
    assert isinstance(e.value, hlatc.CheckpointError) and e.value.path.startswith(str(blocker))


def test_tensors_cross_without_copies():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    dtype, shape, data = to_raw("a", a)
    assert (dtype, shape, data.dtype, data.shape) == ("f32", (3, 4), np.uint8, (48,))
    assert np.shares_memory(data, a), "a contiguous array is passed as a view of its bytes"
    back = to_numpy((dtype, list(shape), data))
    assert np.shares_memory(back, a) and back.dtype == np.float32 and np.array_equal(back, a)
    # Only an array that is not C-contiguous is copied, once.
    t = a.T
    assert not np.shares_memory(to_raw("t", t)[2], a)
    assert np.array_equal(to_numpy(to_raw("t", t)), t)
    # 0-d and bf16 keep their shape and type.
    s = np.asarray(3, dtype=ml_dtypes.bfloat16)
    assert to_numpy(to_raw("s", s)).shape == () and to_raw("s", s)[0] == "bf16"

    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=4)
    trainer = hlatc.Trainer(step)
    state = trainer.state()
    for name, value in state.items():
        # An array over the buffer Rust made: NumPy owns it, it is writable
        # and it is the tensor's own (no other array shares it).
        assert value.flags.writeable and value.flags.c_contiguous, name
    again = hlatc.Trainer(step, seed=1)
    again.resume(state)
    for name, value in again.state().items():
        assert np.array_equal(value, state[name]), name


def test_every_compile_option_is_spelled_as_the_list_says():
    # hlatc::compile_step::spellings: the keywords of compile_step, in
    # order, and their defaults (the stub's are the same text,
    # tests/it/option_surfaces.rs); python.md names each keyword.
    # tests/it/cli.rs holds `hlatc compile` to the same list.
    listed = [s for s in _hlatc.compile_spellings() if s[1] is not None]
    wrapper = list(params(hlatc.compile_step).values())
    assert [p.name for p in wrapper] == [s[1] for s in listed]
    with open(Path(__file__).parents[2] / "docs" / "src" / "python.md") as f:
        book = f.read()
    for p, (flag, name, kind, value) in zip(wrapper, listed):
        if kind == "value":
            assert str(p.default) == value, (flag, p.default)
        else:
            assert p.default == {"off": False, "unset": None, "empty": ()}[kind], (flag, p.default)
        assert f"`{name}`" in book, f"docs/src/python.md does not name `{name}`"


def test_the_jax_engines_delegating_signatures_are_the_native_ones():
    # hlatc.jax.Trainer spells out fit and loader for type checkers, and
    # hands both on (to _fit.fit, and to Loader.for_step with its own
    # replicas and packing): a keyword or default changed on one side only
    # would pass the stubs and the tests of either engine alone.
    def spelled(f, leave_out=()):
        return [(p.name, p.kind, p.default) for p in params(f).values()
                if p.name not in leave_out]

    assert spelled(hlatc.jax.Trainer.fit) == spelled(hlatc.Trainer.fit)
    jax_loader = spelled(hlatc.jax.Trainer.loader, leave_out=("self",))
    for_step = spelled(hlatc.data.Loader.for_step, leave_out=("step", "owned_replicas", "packing"))
    assert jax_loader == for_step
