"""hlatc's step run by JAX against hlatc's own runtime, and trained."""

from __future__ import annotations

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
    with pytest.raises(hlatc.UsageError, match=r"runs on 2 rank\(s\) but JAX has 1 device"):
        hlatc.jax.load(step)
    with pytest.raises(hlatc.UsageError, match=r"runs on 2 rank\(s\); 1 device\(s\) were given"):
        hlatc.jax.load(step, devices=jax.devices()[:1])
