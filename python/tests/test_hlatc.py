"""The Python package against the CLI and against itself: the same bytes
as `hlatc compile`, the same outputs as `hlatc run`, a model that trains,
and every exception raised by a real bad input with its fields."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hlatc
from language import batches

ROOT = Path(__file__).resolve().parents[2]


def cli() -> str:
    """The hlatc binary the tests compare with: $HLATC_BIN (scripts/test.sh
    sets it), else the newest one built in target/."""
    env = os.environ.get("HLATC_BIN")
    if env:
        return env
    built = [p for p in ROOT.glob("target/*/hlatc") if p.is_file()]
    assert built, "build the hlatc binary first (cargo build), or set HLATC_BIN"
    return str(max(built, key=lambda p: p.stat().st_mtime))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli(), *args], capture_output=True, text=True, check=True)


def files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def read_safetensors(path: Path) -> dict:
    """A safetensors file as NumPy arrays (the format: an 8-byte header
    length, a JSON header, then the data)."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
              "U64": np.uint64, "BF16": ml_dtypes.bfloat16}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        data = raw[8 + n + a : 8 + n + b]
        out[name] = np.frombuffer(data, dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


@pytest.mark.parametrize(
    "model,options,flags",
    [
        ("tiny", {}, []),
        ("tiny", {"precision": "bf16-pure", "target": "cpu", "tp": 2, "sequence_parallel": True},
         ["--precision", "bf16-pure", "--target", "cpu", "--tp", "2", "--sequence-parallel"]),
        ("hlat-7b", {}, []),
        ("tiny", {"tp": 2, "dp": 2, "batch_size": 2, "replica_groups": "iota"},
         ["--tp", "2", "--dp", "2", "--batch-size", "2", "--replica-groups", "iota"]),
    ],
)
def test_bundles_equal_the_clis(tmp_path, model, options, flags):
    step = hlatc.compile_step(model=model, **options)
    step.write_bundle(tmp_path / "py")
    run_cli("compile", "--model", model, *flags, "--out", str(tmp_path / "cli"))
    ours, theirs = files(tmp_path / "py"), files(tmp_path / "cli")
    assert sorted(ours) == sorted(theirs)
    for name in ours:
        assert ours[name] == theirs[name], f"{model}: {name} differs"
    assert step.hlo_proto == theirs["model.hlo_module.pb"]
    assert step.hlo_text == theirs["model.hlo.txt"].decode()
    assert step.manifest == json.loads(theirs["manifest.json"])
    if options.get("replica_groups") == "iota":
        assert "replica_groups=[2,2]<=[4]" in step.hlo_text


def test_the_signature_and_summary_describe_the_step():
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=2, seq_len=8)
    names = [t.name for t in step.inputs]
    assert names[0] == "model.embed_tokens.weight"
    tokens = next(t for t in step.inputs if t.role == "tokens")
    assert (tokens.shape, tokens.dtype) == ([2, 8], "s32")
    assert [t.name for t in step.outputs[:3]] == ["loss", "grad_norm", "learning_rate"]
    s = step.summary
    assert s["model"] == "tiny" and s["parameters"] == 19_616
    assert s["instructions"] == step.module().instruction_count
    assert step.world_size == 1
    marked = hlatc.compile_step(model="tiny", seq_len=8, module_markers=True)
    assert marked.hlo_text.count('custom_call_target="AwsNeuronModuleMarkerStart-Forward"') == 2
    assert marked.manifest["config"]["module_markers"] is True


def test_run_matches_hlatc_run_exactly(tmp_path):
    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=8)
    step.write_bundle(tmp_path / "b")
    # `hlatc run BUNDLE` makes every input from its role with --seed 0, as
    # init_state(0) and example_batch(0) do.
    run_cli("run", str(tmp_path / "b"), "--outputs", str(tmp_path / "out.safetensors"))
    theirs = read_safetensors(tmp_path / "out.safetensors")
    ours = step.run({**step.init_state(0), **step.example_batch(0)})
    assert sorted(ours) == sorted(theirs)
    for name, value in ours.items():
        np.testing.assert_array_equal(value, theirs[name], err_msg=name)
    assert abs(float(ours["loss"]) - np.log(64)) < 0.1 * np.log(64)


def test_bf16_state_is_ml_dtypes_bfloat16():
    step = hlatc.compile_step(model="tiny", target="cpu", precision="bf16-pure", seq_len=4)
    state = step.init_state(seed=3)
    w = state["model.embed_tokens.weight"]
    assert w.dtype == ml_dtypes.bfloat16 and w.shape == (64, 32)
    out = step.run({**state, **step.example_batch()})
    assert out["model.embed_tokens.weight"].dtype == ml_dtypes.bfloat16
    assert np.isfinite(out["loss"])


def test_tiny_trains():
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=100)
    trainer = hlatc.Trainer(step, seed=0)
    # int64 ids, as torch writes them, converted to the step's s32.
    losses = [trainer.step(tokens, targets)["loss"]
              for tokens, targets in batches(100, dtype=np.int64)]
    assert trainer.steps_done == 100
    assert losses[-1] < losses[0] / 2, losses[::10]
    assert set(trainer.state()) == {t.name for t in step.inputs if t.role not in
                                    ("tokens", "targets")}
    assert "model.layers.0.self_attn.q_proj.weight" in trainer.hugging_face_params()


def test_the_tiny_mixture_of_experts_trains_and_exports_its_experts_one_by_one():
    step = hlatc.compile_step(model="tiny-moe", target="cpu", batch_size=8, seq_len=16,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=60)
    trainer = hlatc.Trainer(step, seed=0)
    losses = [trainer.step(tokens, targets)["loss"] for tokens, targets in batches(60)]
    assert losses[-1] < losses[0] / 2, losses[::10]
    # Stacked in the step, one tensor per expert under Mixtral's checkpoint names.
    shapes = {t.name: t.shape for t in step.inputs}
    assert shapes["model.layers.0.mlp.experts.gate_proj.weight"] == [4, 48, 32]
    exported = trainer.hugging_face_params()
    assert exported["model.layers.1.block_sparse_moe.experts.3.w2.weight"].shape == (32, 48)
    assert exported["model.layers.0.block_sparse_moe.gate.weight"].shape == (4, 32)
    assert not any("mlp.experts" in name for name in exported)
    # Stages of a mixture with its load-balancing loss are refused, naming
    # the config key that turns it off.
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(model="tiny-moe", target="cpu", pp=2, grad_accum=2, batch_size=2)
    assert (e.value.code, e.value.key) == ("artifact.step.parallel", "parallel")
    # Named: the config key that turns the loss off, which no field holds.
    assert "output_router_logits" in str(e.value)


def test_experts_split_over_tp_ranks_with_zero1_train_and_export_as_one_device():
    options = dict(model="tiny-moe", target="cpu", batch_size=4, seq_len=16, precision="fp32",
                   lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
    one = hlatc.Trainer(hlatc.compile_step(**options), seed=0)
    # ZeRO-1 divides the experts' state over the two replicas holding them.
    split = hlatc.compile_step(**options, tp=2, sequence_parallel=True, dp=4, ep=2, zero1=True)
    shapes = {t.name: t.shape for t in split.inputs}
    # Two of the four experts per EP rank, half of each expert's 48 columns.
    assert shapes["model.layers.0.mlp.experts.gate_proj.weight"] == [2, 24, 32]
    assert shapes["model.layers.0.mlp.experts.down_proj.weight"] == [2, 32, 24]
    sharded = hlatc.Trainer(split, seed=0)
    for tokens, targets in batches(4, batch=4):
        a, b = one.step(tokens, targets), sharded.step(tokens, targets)
        assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (a, b)
        # The routing over 2 sparse layers of 4 x 16 tokens, 2 experts each.
        assert a["routed_tokens"] == b["routed_tokens"] == 2 * 4 * 16 * 2, (a, b)
        assert a["dropped_tokens"] == b["dropped_tokens"] == 0.0
        assert a["expert_imbalance"] == b["expert_imbalance"] >= 1.0
    want, got = one.hugging_face_params(), sharded.hugging_face_params()
    assert sorted(want) == sorted(got)
    name = "model.layers.1.block_sparse_moe.experts.3.w2.weight"
    assert got[name].shape == (32, 48)
    for n in want:
        assert np.abs(want[n] - got[n]).max() <= 1e-4 * max(np.abs(want[n]).max(), 1e-6), n


def test_experts_over_ep_ranks_train_as_one_device_and_bad_layouts_are_refused():
    options = dict(model="tiny-moe", target="cpu", batch_size=8, seq_len=16, precision="fp32",
                   capacity_factor=1.0, lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
    one = hlatc.Trainer(hlatc.compile_step(**options), seed=0)
    for exchange in ("all-to-all", "all-gather"):
        ep = hlatc.compile_step(**options, dp=4, ep=2, ep_exchange=exchange)
        shapes = {t.name: t.shape for t in ep.inputs}
        assert shapes["model.layers.0.mlp.experts.gate_proj.weight"] == [2, 48, 32]
        sharded = hlatc.Trainer(ep, seed=0)
        for tokens, targets in batches(4):
            a = one.step(tokens, targets) if exchange == "all-to-all" else None
            b = sharded.step(tokens, targets)
            if a is not None:
                assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (a, b)
        if exchange == "all-to-all":
            # Four AdamW steps at lr 1e-2 make the ranks' other order of
            # summation up to 1.8e-5 of a tensor (the Rust tests' 1e-5 is
            # at lr 1e-3); a wrong expert would be off by its whole size.
            expected = one.hugging_face_params()
            for name, value in sharded.hugging_face_params().items():
                diff = np.linalg.norm(value - expected[name]) / np.linalg.norm(expected[name])
                assert diff < 1e-4, (name, diff)
    # The code stops at the layout's refusal (`artifact.step.parallel`), so
    # which rule refused is read from the message.
    for bad, key, code, rule in [
        (dict(dp=4, ep=3), "parallel", "artifact.step.parallel", "ep=3 does not divide dp=4"),
        (dict(dp=2, ep=1, ep_exchange="all-gather"), "parallel", "artifact.step.parallel",
         "needs ep above 1"),
        (dict(model="tiny", capacity_factor=None, dp=2, ep=2), "parallel",
         "artifact.step.parallel", "dense model"),
        (dict(model="tiny", capacity_factor=1.0), "capacity_factor", "artifact.step.capacity",
         "dense model"),
    ]:
        # Stays: one code (`artifact.step.parallel`) for several rules; the sentence tells which.
        with pytest.raises(hlatc.ConfigError, match=rule) as e:
            hlatc.compile_step(**{**options, **bad})
        assert (e.value.code, e.value.key) == (code, key), bad
    # A factor no model takes is the option's refusal, as tp=0 is.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(**{**options, "capacity_factor": 0.0})
    assert e.value.code == "option.capacity_factor" and e.value.argument == "capacity_factor"
    assert e.value.category == "out_of_range"
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(**options, dp=2, ep=2, ep_exchange="scatter")  # type: ignore[arg-type]
    assert (e.value.code, e.value.key) == ("option.ep_exchange", "ep_exchange")


def test_a_batch_of_other_rows_is_refused_naming_the_input():
    # It was read in part (8 rows into a 1-row step trained on the first)
    # or past its end (a panic inside the library).
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16)
    trainer = hlatc.Trainer(step, seed=0)
    good = np.zeros((8, 16), np.int32)
    for tokens, targets, bad in [(np.zeros((3, 16), np.int32), good, "tokens"),
                                 (good, np.zeros((4, 16), np.int32), "targets"),
                                 (np.zeros((8, 8), np.int32), good, "tokens")]:
        with pytest.raises(hlatc.BatchError) as e:
            trainer.step(tokens, targets)
        assert (e.value.code, e.value.input) == ("artifact.batch.shape", bad)
    assert trainer.steps_done == 0
    trainer.step(good, good)
    assert trainer.steps_done == 1


def test_a_resumed_trainer_continues_bit_for_bit_in_any_layout():
    options = dict(model="tiny", target="cpu", batch_size=8, seq_len=16, precision="bf16-master",
                   lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
    zero1 = hlatc.compile_step(**options, tp=2, dp=2, zero1=True)
    data = list(batches(6))
    through = hlatc.Trainer(zero1)
    for tokens, targets in data:
        through.step(tokens, targets)
    stopped = hlatc.Trainer(zero1)
    for tokens, targets in data[:3]:
        stopped.step(tokens, targets)
    saved = stopped.state()
    assert saved["step"] == 3
    resumed = hlatc.Trainer(zero1)
    resumed.resume(saved)
    for tokens, targets in data[3:]:
        resumed.step(tokens, targets)
    final, expected = resumed.state(), through.state()
    assert set(final) == set(expected)
    for name in expected:
        assert np.array_equal(final[name], expected[name]), name
    # The state is whole tensors: one device resumes the sharded run's.
    single = hlatc.Trainer(hlatc.compile_step(**options))
    single.resume(saved)
    assert single.steps_done == 3
    with pytest.raises(hlatc.UsageError) as e:
        single.resume({k: v for k, v in saved.items() if not k.startswith("master.model.norm")})
    assert e.value.category == "not_found"


def test_gradient_accumulation_is_two_programs_that_train_as_one(tmp_path):
    options = dict(model="tiny", target="cpu", batch_size=8, seq_len=16, precision="fp32",
                   lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6, tp=2, dp=2,
                   zero1=True)
    whole = hlatc.compile_step(**options)
    pair = hlatc.compile_step(**options, grad_accum=2)
    assert (whole.grad_accum, pair.grad_accum) == (1, 2)
    assert whole.micro_step is None and whole.apply_step is None
    micro, apply = pair.micro_step, pair.apply_step
    assert {"token_count", "grad.model.norm.weight"} <= {t.name for t in micro.inputs}
    assert "adam_m.model.norm.weight" in {t.name for t in apply.inputs}
    assert pair.summary["grad_accum"] == 2
    assert pair.summary["micro_step"]["instructions"] == micro.summary["instructions"]
    with pytest.raises(hlatc.UsageError) as e:
        pair.hlo_text
    assert e.value.category == "conflict"
    # A program of the pair is not a step to train on its own.
    assert micro.grad_accum == 1 and micro.summary["passes_ms"] is not None
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.Trainer(micro)
    assert e.value.category == "conflict"
    # A replica takes 4 of the 8 rows per step; each micro step half of them.
    assert {t.name: t.shape for t in micro.inputs}["tokens"] == [2, 16]
    # The same losses and state as the whole batch in one program (f32, to
    # the order of summation).
    one, two = hlatc.Trainer(whole), hlatc.Trainer(pair)
    for tokens, targets in batches(3):
        a, b = one.step(tokens, targets), two.step(tokens, targets)
        assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (a, b)
        assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-5 * abs(a["grad_norm"]), (a, b)
    expected, got = one.state(), two.state()
    for name in expected:
        e, g = expected[name].astype(np.float64), got[name].astype(np.float64)
        assert np.linalg.norm(g - e) <= 1e-5 * max(np.linalg.norm(e), 1e-30), name
    # The bundle `hlatc compile --grad-accum 2` writes, byte for byte.
    pair.write_bundle(tmp_path / "py")
    run_cli("compile", "--model", "tiny", "--target", "cpu", "--batch-size", "8", "--seq-len",
            "16", "--precision", "fp32", "--lr-max", "0.01", "--lr-min", "0.001", "--warmup-steps", "1",
            "--total-steps", "6", "--tp", "2", "--dp", "2", "--zero1", "--grad-accum", "2",
            "--out", str(tmp_path / "cli"))
    for sub in ("micro_step", "apply_step"):
        assert files(tmp_path / "py" / sub) == files(tmp_path / "cli" / sub), sub
    manifest = json.loads((tmp_path / "py" / "manifest.json").read_text())
    assert manifest["format"] == "hlatc-bundle/2+accumulation"
    assert manifest["micro_batches"] == 2


def test_compiling_releases_the_gil():
    ticks = []
    t = threading.Thread(target=lambda: hlatc.compile_step(model="hlat-70b"))
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    assert len(ticks) > 20, "the main thread ran while the 70B step compiled"


def test_modules_load_print_and_optimize(tmp_path):
    text = "HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  a = f32[4] add(p, p)\n  b = f32[4] add(p, p)\n  ROOT r = f32[4] multiply(a, b)\n}\n"
    m = hlatc.load_module(text.encode())
    assert m.name == "m" and m.instruction_count == 4
    again = hlatc.load_module(m.to_proto())
    assert again.to_text() == m.to_text()
    (tmp_path / "m.hlo").write_text(text)
    assert hlatc.load_module(tmp_path / "m.hlo").to_text() == m.to_text()
    cse = hlatc.optimize(m, passes=["cse", "dce"], target="cpu")
    assert cse.instruction_count == 3 and m.instruction_count == 4
    names = [n for n, _ in hlatc.passes()]
    assert "coalesce-linear" in names and "cse" in names


def test_every_exception_carries_its_fields(tmp_path):
    with pytest.raises(hlatc.HloSyntaxError) as e:
        hlatc.load_module(b"HloModule m\nENTRY e {\n  ROOT x = f32[2] bogus()\n}\n")
    assert (e.value.line, e.value.column) == (3, 19) and "bogus" in str(e.value)
    assert isinstance(e.value, hlatc.Error)

    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(config={"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
                                   "intermediate_size": 16, "num_hidden_layers": 1})
    assert e.value.key == "num_attention_heads" and e.value.source == "config (dict)"
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(model="tiny", precision="fp8")
    assert "unknown precision 'fp8'" in str(e.value)
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(model="tiny", tp=3)
    assert e.value.key == "parallel"

    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=4)
    batch = step.example_batch()
    batch["tokens"][0, 2] = 64
    with pytest.raises(hlatc.BatchError) as e:
        step.run({**step.init_state(), **batch})
    assert (e.value.input, e.value.row, e.value.column, e.value.value) == ("tokens", 0, 2, 64)

    with pytest.raises(hlatc.UsageError) as e:
        step.run(step.init_state())
    assert e.value.category == "not_found"

    with pytest.raises(hlatc.FileError) as e:
        hlatc.load_module(tmp_path / "missing.hlo")
    assert e.value.path.endswith("missing.hlo")
    with pytest.raises(hlatc.ProtoError):
        hlatc.load_module(b"\x0a\x03abc\xff\xff\xff")
    with pytest.raises(hlatc.VerifyError):
        hlatc.load_module(b"HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[3] negate(p)\n}\n")
    with pytest.raises(hlatc.PassError) as e:
        hlatc.optimize(hlatc.load_module(b"HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"),
                       passes=["no-such-pass"])
    assert "no-such-pass" in str(e.value)
    with pytest.raises(hlatc.RunError):
        huge = hlatc.compile_step(model="tiny", target="cpu", batch_size=10**12)
        hlatc.Trainer(huge)
    f64 = hlatc.compile_step(model="tiny", precision="fp64", seq_len=4)
    with pytest.raises(hlatc.NeuronRefusedError) as e:
        f64.write_bundle(tmp_path / "f64")
    first = e.value.findings[0]
    assert isinstance(first, hlatc.NeuronFinding)
    assert (first.code, first.rule, first.severity, first.file) == \
        ("[f64]", "f64", "refusal", "model.hlo.txt")
    assert first.line is not None and first.line > 1 and first.column is not None
    assert first.instruction and str(first).startswith(
        f"model.hlo.txt:{first.line}:{first.column}: instruction %{first.instruction}: [f64]")
    assert not (tmp_path / "f64").exists()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "keep.txt").write_text("mine")
    with pytest.raises(hlatc.FileError) as e:
        step.write_bundle(tmp_path / "b")
    assert (tmp_path / "b" / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("script", ["train_tiny.py", "train_tiny_jax.py",
                                    "train_tiny_distributed.py"])
def test_the_examples_train_and_plot(tmp_path, script):
    if script != "train_tiny.py":
        pytest.importorskip("jax")
    png = tmp_path / "loss.png"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(png)],
                          capture_output=True, text=True, cwd=ROOT / "examples", timeout=300)
    assert done.returncode == 0, done.stderr
    last = [l for l in done.stdout.splitlines() if l.startswith("step 100:")][0]
    assert float(last.split("loss")[1]) < 0.1, done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_rank_starts_from_its_slices_of_a_hugging_face_checkpoint(tmp_path):
    """Ranks of a TP 2 x DP 2 ZeRO-1 step read only their slices of a
    checkpoint; joined, they are the single-device step's state from the
    same tensors, byte for byte."""
    from hlatc import _hlatc
    from hlatc._arrays import to_raw

    single = hlatc.compile_step(model="tiny", target="cpu", precision="bf16-master", seq_len=8)
    sharded = hlatc.compile_step(model="tiny", target="cpu", precision="bf16-master", seq_len=8,
                                 tp=2, dp=2, zero1=True)
    hf = hlatc.Trainer(single, seed=3).hugging_face_params()
    path = tmp_path / "model.safetensors"
    _hlatc.write_safetensors(str(path), [(k, to_raw(k, v)) for k, v in hf.items()])

    ranks = [sharded.init_state(seed=0, rank=r, checkpoint=path) for r in range(4)]
    joined = sharded.gather_state(ranks)
    want = single.init_state(seed=0, checkpoint=path)
    assert sorted(joined) == sorted(want)
    for name, value in want.items():
        assert joined[name].dtype == value.dtype, name
        assert np.array_equal(joined[name], value), name
    # The single-device state from the file holds the trainer's own
    # parameters.
    params = [t.name for t in single.inputs if t.role == "parameter"]
    state = hlatc.Trainer(single, seed=3).state()
    for name in params:
        assert np.array_equal(want[name], state[name]), name

    del hf["model.norm.weight"]
    _hlatc.write_safetensors(str(path), [(k, to_raw(k, v)) for k, v in hf.items()])
    with pytest.raises(hlatc.UsageError) as e:
        sharded.init_state(rank=1, checkpoint=path)
    assert e.value.category == "not_found"
