"""Pipeline parallelism from Python: `compile_step(pp=P)`'s four programs,
trained by `hlatc.Trainer` to the single-device step's values, the bundle
`hlatc compile --pp` writes, byte for byte, the state named as the whole
model's, and what is refused. hlatc.jax drives the same programs in
test_jax_distributed.py (it needs 4 JAX devices)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hlatc
from language import batches
from test_hlatc import run_cli

OPTIONS = dict(model="tiny", target="cpu", batch_size=8, seq_len=16, precision="fp32",
               lr_max=1e-2, lr_min=1e-3, warmup_steps=1, total_steps=6)
FLAGS = ["--model", "tiny", "--target", "cpu", "--batch-size", "8", "--seq-len", "16",
         "--precision", "fp32", "--lr-max", "0.01", "--lr-min", "0.001", "--warmup-steps", "1",
         "--total-steps", "6"]
STEPS = 3


def tree(d) -> dict:
    """Every file under `d` by its path in it, its bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def relative(got: np.ndarray, want: np.ndarray) -> float:
    """The difference by the tensor's norm (f64)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


@pytest.fixture(scope="module")
def single():
    """The single-device step on the same batches: its statistics per step
    and its state and Hugging Face parameters after the last."""
    trainer = hlatc.Trainer(hlatc.compile_step(**OPTIONS), seed=0)
    stats = [trainer.step(t, y) for t, y in batches(STEPS)]
    return stats, trainer.state(), trainer.hugging_face_params()


@pytest.mark.parametrize("layout", [
    dict(pp=2, grad_accum=4),
    dict(pp=2, tp=2, grad_accum=2),
    dict(pp=2, dp=2, zero1=True, grad_accum=2),
    dict(pp=2, tp=2, grad_accum=2, pp_send="all-gather", remat="none"),
], ids=["pp2-m4", "pp2-tp2-m2", "pp2-dp2-zero1-m2", "pp2-tp2-m2-all-gather"])
def test_a_pipelined_step_trains_as_the_single_device_step_does(single, layout):
    step = hlatc.compile_step(**OPTIONS, **layout)
    trainer = hlatc.Trainer(step, seed=0)
    want_stats, want_state, want_hf = single
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for (t, y), want in zip(batches(STEPS), want_stats):
        got = trainer.step(t, y)
        for k in worst:
            worst[k] = max(worst[k], abs(got[k] - want[k]) / abs(want[k]))
        assert got["learning_rate"] == pytest.approx(want["learning_rate"], rel=1e-6)
    assert trainer.steps_done == STEPS
    # The state names the layers as the whole model does: the single-device
    # step's tensors, each within 1e-5 of its norm.
    state, hf = trainer.state(), trainer.hugging_face_params()
    assert sorted(state) == sorted(want_state) and sorted(hf) == sorted(want_hf)
    worst["state"] = max(relative(state[n], w) for n, w in want_state.items())
    worst["hf"] = max(relative(hf[n], w) for n, w in want_hf.items())
    print(f"\n{layout}: worst relative difference from one device over {STEPS} steps: {worst}")
    assert all(d <= 1e-5 for d in worst.values()), worst


def test_a_pipelined_state_resumes_in_any_layout():
    pipelined = hlatc.compile_step(**OPTIONS, pp=2, tp=2, grad_accum=2)
    data = list(batches(4))
    through = hlatc.Trainer(pipelined, seed=0)
    for t, y in data:
        through.step(t, y)
    # Stopped after step 2 on one device, resumed in the pipeline: the same
    # run, to rounding.
    first = hlatc.Trainer(hlatc.compile_step(**OPTIONS), seed=0)
    for t, y in data[:2]:
        first.step(t, y)
    resumed = hlatc.Trainer(pipelined, seed=7)
    resumed.resume(first.state())
    assert resumed.steps_done == 2
    for t, y in data[2:]:
        resumed.step(t, y)
    want, got = through.state(), resumed.state()
    assert sorted(got) == sorted(want)
    assert max(relative(got[n], w) for n, w in want.items()) <= 1e-5
    # ... and back: the pipeline's state resumes on one device, and a state
    # of another model is refused by name.
    hlatc.Trainer(hlatc.compile_step(**OPTIONS), seed=0).resume(got)
    with pytest.raises(hlatc.UsageError) as e:
        resumed.resume({k: v for k, v in got.items() if k != "model.norm.weight"})
    assert (e.value.code, e.value.category) == ("artifact.state.missing_tensor", "not_found")
    # Named: the tensor, which no field holds (`argument` is None).
    assert "'model.norm.weight'" in str(e.value)


def test_the_bundle_is_the_clis_byte_for_byte(tmp_path):
    step = hlatc.compile_step(**OPTIONS, pp=2, tp=2, grad_accum=2)
    step.write_bundle(tmp_path / "py")
    run_cli("compile", *FLAGS, "--pp", "2", "--tp", "2", "--grad-accum", "2",
            "--out", str(tmp_path / "cli"))
    ours, theirs = tree(tmp_path / "py"), tree(tmp_path / "cli")
    assert sorted(ours) == sorted(theirs)
    assert {p.split("/")[0] for p in ours} == {"warm_up", "steady", "cool_down", "apply_step",
                                              "manifest.json"}
    for path, data in ours.items():
        assert data == theirs[path], path
    # Each program is the one the Step holds, and the schedule the manifest's.
    manifest = json.loads(theirs["manifest.json"])
    print(f"\n{len(ours)} files, {sum(map(len, ours.values()))} bytes, equal to the CLI's")
    assert manifest["format"] == "hlatc-bundle/2+pipeline"
    assert step.config == manifest["config"]
    for sub in ("warm_up", "steady", "cool_down", "apply_step"):
        program = getattr(step, sub)
        assert program.hlo_proto == (tmp_path / "cli" / sub / "model.hlo_module.pb").read_bytes()
        assert program.manifest == json.loads((tmp_path / "cli" / sub / "manifest.json").read_text())
    s = step.schedule
    assert s.ticks == manifest["schedule"]["ticks"] == 2 + 2 * 2 - 1
    assert s.bubble == manifest["schedule"]["bubble"] == pytest.approx(1 / 3)
    assert [[p, [a, z]] for p, a, z in s.phases()] == [
        [p["program"], p["ticks"]] for p in manifest["schedule"]["phases"]]


def test_a_pp_that_does_not_divide_the_layers_is_refused_naming_the_divisors():
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(**OPTIONS, pp=3)
    assert (e.value.code, e.value.key) == ("artifact.step.parallel", "parallel")
    assert "1, 2" in str(e.value)


def test_a_pipelined_step_shows_its_programs_and_schedule():
    step = hlatc.compile_step(**OPTIONS, pp=2, tp=2, grad_accum=2)
    assert (step.pp, step.grad_accum, step.world_size) == (2, 2, 4)
    assert step.micro_step is None
    one = hlatc.compile_step(**OPTIONS)
    assert (one.pp, one.schedule, one.warm_up, one.steady, one.cool_down) == (1, None, None, None,
                                                                              None)
    s = step.schedule
    assert (s.stages, s.micro_batches) == (2, 2)
    assert [s.phase(t) for t in range(s.ticks)] == ["warm_up", "warm_up", "steady", "cool_down",
                                                    "cool_down"]
    # Stage 1 runs micro-batch 0 forward at tick 1 and backward at tick 2.
    assert (s.forward_micro_batch(1, 1), s.backward_micro_batch(2, 1)) == (0, 0)
    assert s.backward_micro_batch(0, 0) is None
    with pytest.raises(hlatc.UsageError) as e:
        s.phase(5)
    assert (e.value.argument, e.value.category) == ("tick", "out_of_range")
    summary = step.summary
    assert (summary["pp"], summary["ticks"], summary["grad_accum"]) == (2, 5, 2)
    assert summary["steady"]["instructions"] == step.steady.summary["instructions"]
    # Each program measured on its own, a count and a time of its own.
    for name in ("warm_up", "steady", "cool_down", "apply_step"):
        assert summary[name]["instructions_built"] > 0, name
        assert summary[name]["passes_ms"] > 0, name
    assert summary["warm_up"]["instructions_built"] != summary["steady"]["instructions_built"]
    # Each program is one stage's, on every rank.
    steady = step.steady
    assert steady.world_size == 4
    roles = {t.name: t.role for t in steady.inputs}
    assert roles["tick"] == "tick" and roles["pipeline.activation_in"] == "stage_buffer"
    assert "model.layers.1.mlp.down_proj.weight" not in roles
    # What is one program's is asked of the programs; what names the whole
    # model is asked of the pipeline.
    for ask, category in [
        (lambda: step.hlo_text, "conflict"),
        (lambda: step.apply_step.init_state(), "conflict"),
        (lambda: steady.gather_state([{}]), "conflict"),
        (lambda: one.tick_batches(*next(batches(1))), "conflict"),
        # Not yet: each stage's slices of a Hugging Face checkpoint.
        (lambda: step.init_state(checkpoint="model.safetensors"), "unsupported"),
    ]:
        with pytest.raises(hlatc.UsageError) as e:
            ask()
        assert e.value.category == category, str(e.value)


def test_the_pipelined_steps_state_is_the_whole_models_divided_by_stage():
    step = hlatc.compile_step(**OPTIONS, pp=2, tp=2, grad_accum=2)
    trainer = hlatc.Trainer(step, seed=3)
    start = trainer.state()
    assert "model.layers.1.mlp.down_proj.weight" in start
    # Each rank starts from its stage's share of the whole model's
    # initialization, under the stage model's names.
    for r in range(4):
        shard, init = step.shard_state(start, r), step.init_state(seed=3, rank=r)
        assert sorted(shard) == sorted(init)
        assert all(np.array_equal(shard[n], init[n]) for n in init), r
    trainer.step(*next(batches(1)))
    trained = trainer.state()
    ranks = [step.shard_state(trained, r) for r in range(4)]
    # Rank 2 (stage 1, TP rank 0) holds the whole model's layer 1 as its
    # layer 0.
    norm = "model.layers.{}.input_layernorm.weight"
    assert not np.array_equal(trained[norm.format(0)], trained[norm.format(1)])
    assert np.array_equal(ranks[0][norm.format(0)], trained[norm.format(0)])
    assert np.array_equal(ranks[2][norm.format(0)], trained[norm.format(1)])
    joined = step.gather_state(ranks)
    assert sorted(joined) == sorted(trained)
    assert all(np.array_equal(joined[k], trained[k]) for k in trained)
    hf = step.hugging_face_params(trained)
    assert sorted(hf) == sorted(trainer.hugging_face_params())
    assert all(np.array_equal(hf[k], v) for k, v in trainer.hugging_face_params().items())
    with pytest.raises(hlatc.UsageError) as e:
        step.shard_state({**trained, "extra": trained["step"]}, 0)
    assert e.value.category == "not_found"
    # A tensor missing from the whole state is named as the whole model
    # names it, on the rank whose stage holds it.
    layer1 = "adam_m.model.layers.1.mlp.down_proj.weight"
    without = {k: v for k, v in trained.items() if k != layer1}
    assert sorted(step.shard_state(without, 0)) == sorted(ranks[0])
    # Named in each: the tensor, which no field holds (`argument` is None).
    with pytest.raises(hlatc.UsageError) as e:
        step.shard_state(without, 2)
    assert e.value.code == "artifact.state.missing_tensor" and f"'{layer1}'" in str(e.value)
    with pytest.raises(hlatc.UsageError) as e:
        step.hugging_face_params(without)
    assert e.value.code == "artifact.state.missing_tensor" and f"'{layer1}'" in str(e.value)
    with pytest.raises(hlatc.UsageError) as e:
        step.init_state(rank=4)
    assert e.value.category == "out_of_range"


def test_each_tick_takes_the_micro_batches_the_schedule_names():
    step = hlatc.compile_step(**OPTIONS, pp=2, dp=2, grad_accum=2)
    tokens, targets = next(batches(1))
    targets = targets.copy()
    targets[0, :3] = -100
    # Rank 3 is stage 1's rank of DP replica 1: rows 4-7, two a micro-batch.
    ticks = step.tick_batches(tokens, targets, rank=3)
    assert len(ticks) == 5
    rows = lambda a, m: a[4 + 2 * m:6 + 2 * m]  # noqa: E731
    zeros = np.zeros((2, 16), dtype=np.int32)
    for t, inputs in enumerate(ticks):
        assert int(inputs["tick"]) == t and int(inputs["token_count"]) == 8 * 16 - 3
        for name, m, of in (("tokens", t, tokens), ("backward_tokens", t - 3, tokens),
                            ("targets", t - 2, targets)):
            want = rows(of, m) if 0 <= m < 2 else zeros
            assert np.array_equal(inputs[name], want), (t, name)
    bad = tokens.copy()
    bad[1, 2] = 64
    with pytest.raises(hlatc.BatchError) as e:
        step.tick_batches(bad, targets, rank=0)
    assert (e.value.row, e.value.column, e.value.value) == (1, 2, 64)


def test_the_tick_plan_routes_each_programs_inputs_and_outputs_by_role():
    step = hlatc.compile_step(**OPTIONS, pp=2, grad_accum=2)
    plan, schedule = step.tick_plan, step.schedule
    assert plan is not None and schedule is not None
    assert plan.ticks == schedule.ticks == 5
    assert [plan.phase(t) for t in range(5)] == [schedule.phase(t) for t in range(5)]
    steady = step.steady
    buffers = [t.name for t in steady.inputs if t.role == "stage_buffer"]
    assert [b.name for b in plan.buffers] == buffers
    for phase in ("warm_up", "steady", "cool_down"):
        route, program = plan.routing(phase), getattr(step, phase)
        roles = {t.name: t.role for t in program.inputs}
        assert route.phase == phase and route.from_buffers == buffers
        assert route.from_batch == ["token_count", "tick", "tokens", "backward_tokens",
                                    "targets"]
        assert sorted(route.from_state + route.from_buffers + route.from_batch) == sorted(roles)
        assert {roles[n] for n in route.from_state} == {"parameter", "grad_accumulator"}
        assert route.to_state == [t.name for t in program.outputs
                                  if t.role == "grad_accumulator"]
        assert set(route.to_buffers) <= set(buffers)
        assert route.loss == "loss"
    with pytest.raises(hlatc.UsageError) as e:
        plan.phase(5)
    assert (e.value.argument, e.value.category) == ("tick", "out_of_range")
    with pytest.raises(hlatc.UsageError) as e:
        plan.routing("cooldown")  # type: ignore[arg-type]
    assert (e.value.argument, e.value.category) == ("phase", "out_of_range")
    assert hlatc.compile_step(**OPTIONS).tick_plan is None


def test_fit_trains_a_pipelined_step_and_resumes_it(tmp_path):
    from corpus import write_word_corpus

    write_word_corpus(tmp_path)
    step = hlatc.compile_step(**OPTIONS, pp=2, grad_accum=2)

    def loader():
        return hlatc.data.Loader.for_step(step, tmp_path / "corpus.jsonl",
                                          tokenizer=tmp_path / "tokenizer.json")

    want = hlatc.Trainer(step, seed=0).fit(loader(), 4)

    class Stop(Exception):
        pass

    def crash(row):
        if row["step"] == 3:
            raise Stop()

    with pytest.raises(Stop):
        hlatc.Trainer(step, seed=0).fit(loader(), 4, checkpoint_dir=tmp_path / "ckpt",
                                        checkpoint_every=2, on_step=crash)
    got = hlatc.Trainer(step, seed=0).fit(loader(), 4, checkpoint_dir=tmp_path / "ckpt",
                                          checkpoint_every=2)
    assert [m["step"] for m in got] == [1, 2, 3, 4]
    assert got == want


def test_the_jax_engine_refuses_what_it_cannot_start_a_pipeline_from():
    step = hlatc.compile_step(**OPTIONS, pp=2, grad_accum=2)
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.Trainer(step, init="model.safetensors")
    assert (e.value.argument, e.value.category) == ("init", "unsupported")
