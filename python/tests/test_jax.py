"""hlatc's step run by JAX against hlatc's own runtime, and trained."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hlatc
from language import batches

jax = pytest.importorskip("jax", reason="the jax extra: pip install ./python[jax]")


def test_jax_runs_the_step_as_hlatc_does_for_three_steps():
    step = hlatc.compile_step(model="tiny", seq_len=8, batch_size=2)  # for Neuron: lowered for JAX
    fn = hlatc.jax.load(step)
    state = step.init_state(seed=1)
    ours = dict(state)
    theirs = {k: jax.numpy.asarray(v) for k, v in state.items()}
    worst = 0.0
    for i in range(3):
        batch = step.example_batch(seed=i)
        a = step.run({**ours, **batch})
        b = fn({**theirs, **batch})
        for name, want in a.items():
            got = np.asarray(b[name]).astype(np.float64)
            want = want.astype(np.float64)
            scale = max(np.max(np.abs(want)), 1e-30)
            worst = max(worst, float(np.max(np.abs(got - want)) / scale))
        ours = {k: a[k] for k in state}
        theirs = {k: b[k] for k in state}
    print(f"worst relative difference over 3 steps: {worst:.2e}")
    assert worst <= 1e-6, worst
    assert int(ours["step"]) == 3


def test_state_buffers_are_donated():
    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=4)
    fn = hlatc.jax.load(step)
    state = {k: jax.device_put(v) for k, v in step.init_state().items()}
    out = fn({**state, **step.example_batch()})
    assert state["model.embed_tokens.weight"].is_deleted()
    assert not out["model.embed_tokens.weight"].is_deleted()


def test_jax_trains_tiny():
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=8, seq_len=16,
                              lr_max=1e-2, lr_min=1e-3, warmup_steps=10, total_steps=100)
    fn = hlatc.jax.load(step)
    state = step.init_state(seed=0)
    losses = []
    for tokens, targets in batches(100):
        out = fn({**state, "tokens": tokens, "targets": targets})
        losses.append(float(out["loss"]))
        state = {k: out[k] for k in state}
    assert losses[-1] < losses[0] / 2, losses[::10]


def test_a_world_size_other_than_the_devices_is_refused_by_name():
    step = hlatc.compile_step(model="tiny", target="cpu", tp=2)
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.load(step)
    assert (e.value.argument, e.value.category) == (None, "conflict")
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.load(step, devices=jax.devices()[:1])
    assert (e.value.argument, e.value.category) == ("devices", "conflict")
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.load(step, devices=jax.devices()[:1] * 2)
    assert (e.value.argument, e.value.category) == ("devices", "invalid")


def test_jax_fit_resumes_from_its_newest_complete_checkpoint(tmp_path):
    from corpus import write_word_corpus

    write_word_corpus(tmp_path)
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=4, seq_len=16, packed=True,
                              precision="fp32")

    def loader(trainer):
        return trainer.loader(tmp_path / "corpus.jsonl", tokenizer=tmp_path / "tokenizer.json")

    whole = hlatc.jax.Trainer(step, seed=1)
    want = whole.fit(loader(whole), 6, checkpoint_dir=tmp_path / "a", checkpoint_every=2)
    want_state = whole.state()
    d = tmp_path / "a" / "step-00000006"
    marker = json.loads((d / "COMPLETE").read_text())
    assert sorted(marker["files"]) == ["loader-replica-00000.json", "metrics.csv",
                                       "rank-00000.safetensors"]
    assert marker["steps_done"] == 6
    # hlatc's runtime on the same batches: the same run, to rounding.
    ours = hlatc.Trainer(step, seed=1).fit(
        hlatc.data.Loader.for_step(step, tmp_path / "corpus.jsonl",
                                   tokenizer=tmp_path / "tokenizer.json"), 6)
    assert [m["step"] for m in want] == list(range(1, 7))
    np.testing.assert_allclose([m["loss"] for m in want], [m["loss"] for m in ours], rtol=1e-5)

    class Stop(Exception):
        pass

    def crash(row):
        if row["step"] == 5:
            raise Stop()

    b = tmp_path / "b"
    with pytest.raises(Stop):
        first = hlatc.jax.Trainer(step, seed=1)
        first.fit(loader(first), 6, checkpoint_dir=b, checkpoint_every=2, on_step=crash)
    # A save torn at step 4 (its marker never written): step 2 is the newest.
    (b / "step-00000004" / "COMPLETE").unlink()
    again = hlatc.jax.Trainer(step, seed=1)
    # A warning has no code: its words (the checkpoint skipped, and why) are its content.
    with pytest.warns(hlatc.CheckpointWarning, match="step-00000004: no COMPLETE marker"):
        got = again.fit(loader(again), 6, checkpoint_dir=b, checkpoint_every=2)
    assert got == want
    state = again.state()
    assert all(np.array_equal(state[k], want_state[k]) for k in want_state)
    assert sorted(p.name for p in b.iterdir()) == ["step-00000002", "step-00000004",
                                                   "step-00000006"]


def test_a_run_measured_with_jax_joins_a_calibration_file(tmp_path, monkeypatch):
    step = hlatc.compile_step(model="tiny", target="cpu", batch_size=4, seq_len=16,
                              precision="fp32")
    trainer = hlatc.jax.Trainer(step, seed=1)
    runs = tmp_path / "runs.csv"
    with pytest.raises(hlatc.UsageError) as e:
        trainer.append_measured_run(runs, model="tiny", instance="trn1.32xlarge", nodes=1)
    assert (e.value.argument, e.value.category) == ("skip", "out_of_range")
    for tokens, targets in batches(3, batch=4):
        trainer.step(tokens, targets)
    # One device does not fill a trn1 node's 32 cores: no row is written.
    with pytest.raises(hlatc.UsageError) as e:
        trainer.append_measured_run(runs, model="tiny", instance="trn1.32xlarge", nodes=1)
    assert (e.value.argument, e.value.category) == ("nodes", "conflict")
    assert not runs.exists()
    # What it hands the calibration file: the step's layout and its rate.
    written = []
    monkeypatch.setattr(hlatc, "append_measured_run", lambda path, **kw: written.append(kw))
    rate = trainer.append_measured_run(runs, model="tiny", instance="trn1.32xlarge", nodes=1,
                                       sdk="cpu", source="test")
    [kw] = written
    assert kw.pop("seq_per_s") == rate > 0
    assert kw == dict(model="tiny", instance="trn1.32xlarge", nodes=1, tp=1, pp=1, dp=1,
                      sequence_parallel=False, zero1=False, remat="core-attention",
                      micro_batch=4, precision="fp32", global_batch=4, seq_len=16, sdk="cpu",
                      source="test")


# A mixture of experts over TP, DP and EP, run by JAX on four XLA CPU
# devices of a fresh process (the device count is fixed when JAX starts),
# against hlatc's own runtime on one device.
MOE_RUN = """
import json, sys
import jax
import hlatc, hlatc.jax
from language import batches
options = dict(model="tiny-moe", target="cpu", batch_size=4, seq_len=16, precision="fp32",
               lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
one = hlatc.Trainer(hlatc.compile_step(**options), seed=0)
layouts = [dict(tp=2, sequence_parallel=True, dp=2, ep=2),
           dict(dp=4, ep=2, zero1=True, ep_exchange="all-gather", capacity_factor=1.0)]
runs = [hlatc.jax.Trainer(hlatc.compile_step(**options, **layout), seed=0,
                          devices=jax.devices()[:4]) for layout in layouts]
same = hlatc.Trainer(hlatc.compile_step(**options, capacity_factor=1.0), seed=0)
out = []
for tokens, targets in batches(3, batch=4):
    out.append([float(one.step(tokens, targets)["loss"]), float(same.step(tokens, targets)["loss"])]
               + [float(r.step(tokens, targets)["loss"]) for r in runs])
print(json.dumps(out))
"""


def on_four_devices(script: str) -> list[list[float]]:
    """What `script` prints last, as JSON, run in a fresh process whose JAX
    has four XLA CPU devices (the count is fixed when JAX starts)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
                        " --xla_backend_optimization_level=0").strip()
    done = subprocess.run([sys.executable, "-c", script], cwd=here, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_mixture_of_experts_over_tp_dp_and_ep_runs_on_jax_as_on_one_device():
    for one, capped, tp_ep, ep_zero1 in on_four_devices(MOE_RUN):
        assert abs(tp_ep - one) <= 1e-5 * abs(one), (one, tp_ep)
        assert abs(ep_zero1 - capped) <= 1e-5 * abs(capped), (capped, ep_zero1)


# Layouts run by JAX on four XLA CPU devices of a fresh process, and one
# on hlatc's own runtime, against one device: each step's loss.
LAYOUTS_RUN = """
import json
import jax
import hlatc, hlatc.jax
from language import batches
options = dict(model="tiny", target="cpu", batch_size=4, seq_len=16, precision="fp32",
               lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
one = hlatc.Trainer(hlatc.compile_step(**options), seed=0)
ours = hlatc.Trainer(hlatc.compile_step(**options, **OURS), seed=0)
runs = [hlatc.jax.Trainer(hlatc.compile_step(**options, **layout), seed=0,
                          devices=jax.devices()[:4]) for layout in LAYOUTS]
out = []
for tokens, targets in batches(3, batch=4):
    out.append([float(one.step(tokens, targets)["loss"]), float(ours.step(tokens, targets)["loss"])]
               + [float(r.step(tokens, targets)["loss"]) for r in runs])
print(json.dumps(out))
"""


def assert_layouts_follow_one_device(ours: str, layouts: str) -> None:
    """`ours` (a dict's source) on hlatc's runtime and each of `layouts`
    (a list's) on JAX's four devices take one device's steps."""
    script = LAYOUTS_RUN.replace("**OURS", f"**{ours}").replace("in LAYOUTS", f"in {layouts}")
    rows = on_four_devices(script)
    assert len(rows) == 3 and rows[2][0] < rows[0][0]
    # f32 on both sides, the sums in other orders: within a few roundings
    # of a loss near 4 (its f32 spacing 4.8e-7), far from a wrong step.
    for one, *divided in rows:
        for got in divided:
            assert abs(got - one) <= 1e-5 * abs(one), (one, divided)


def test_fsdp_and_hsdp_run_on_jax_as_on_one_device():
    assert_layouts_follow_one_device(
        "dict(fsdp=2)",
        "[dict(fsdp=4), dict(dp=4, fsdp=2), dict(tp=2, sequence_parallel=True, fsdp=2),"
        " dict(fsdp=4, reshard='always')]")


def test_context_parallelism_runs_on_jax_as_on_one_device():
    # Head-tail chunks over four CP ranks, with ZeRO-1 over DP x CP, with
    # TP and SP, and with looped attention.
    assert_layouts_follow_one_device(
        "dict(cp=2)",
        "[dict(cp=4), dict(dp=2, cp=2, zero1=True),"
        " dict(tp=2, sequence_parallel=True, cp=2, kernels={'attention': 'looped:4'})]")
