"""hlatc.jax across processes: tiny at TP 2 x DP 2 on two local processes of
two XLA CPU devices each (gloo), started by `python -m hlatc.launch`,
against hlatc's own runtime; a process killed mid-run, the launcher's
report, and a resume from the last complete checkpoint; a pipeline-parallel
step (PP 2 x TP 2) on one process of four devices and on two of two.

Three launches for the first (each a few seconds of JAX start-up and
compile), shared between the assertions by module-scoped fixtures, and one
for each pipeline run. Every subprocess runs under a timeout; only
127.0.0.1 is used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hlatc
from language import batches

jax = pytest.importorskip("jax", reason="the jax extra: pip install ./python[jax]")

# Under pytest-xdist (scripts/test.sh), every test that starts processes of
# its own runs on one worker, one at a time: two jobs of gloo peers and
# timed stops at once on two cores are what the tests must not measure.
pytestmark = pytest.mark.xdist_group("processes")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from distributed_worker import LAYOUT, OPTIONS  # noqa: E402

# The replica form with replica-id (hlatc's runtime's), the partition form
# with partition-id, and the partition form reading the rank from an input
# (what jax-neuronx would be given: see docs/src/python.md).
FORMS = ["replicas", "partitions", "partitions+input"]

STEPS, SAVE_AT, TIMED = 6, 3, 11
LAUNCH_TIMEOUT = 120
# As scripts/test.sh compiles every program: XLA CPU's backend at
# optimization level 0 and its legacy emitters compile the step in about a
# tenth of the time (1 s, not 11 s, two processes on two cores), and
# compute the same values. Kept if the caller's XLA_FLAGS already say.
FAST_XLA = ["--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false"]


def worker_env() -> dict:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "").split()
    for f in FAST_XLA:
        if not any(g.startswith(f.split("=")[0]) for g in flags):
            flags.append(f)
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def launch(out: Path, *args: str, timeout: float = LAUNCH_TIMEOUT, processes: int = 2,
           devices: int = 2) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "hlatc.launch", "--processes", str(processes),
           "--devices-per-process", str(devices), "--timeout", str(timeout - 10),
           str(HERE / "distributed_worker.py"), str(out), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE,
                          env=worker_env())


def stats_of(out: Path, form: str, process: int) -> dict:
    return json.loads((out / f"stats-{form}-{process}.json").read_text())


def arrays(out: Path, form: str, prefix: str) -> dict:
    with np.load(out / f"{form}.npz") as z:
        return {k[len(prefix) + 1:]: z[k] for k in z.files if k.startswith(prefix + "/")}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Six steps in each SPMD form, the state after step 3 and step 6, then
    10 timed steps."""
    out = tmp_path_factory.mktemp("uninterrupted")
    done = launch(out, "--forms", ",".join(FORMS), "--steps", str(STEPS),
                  "--save-at", str(SAVE_AT), "--timed-steps", str(TIMED))
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """The same run, checkpointed after step 3, with process 1 killed
    before step 5: how long the launcher took to stop process 0, and what it
    said."""
    out = tmp_path_factory.mktemp("killed")
    done = launch(out, "--steps", str(STEPS), "--save-at", str(SAVE_AT),
                  "--checkpoint", str(out / "ckpt"), "--die-at", "4")
    # What the launcher said, should process 1 never reach its death.
    assert (out / "killed-at").exists(), (
        f"process 1 did not reach step 5 (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return out, done, time.time() - float((out / "killed-at").read_text())


@pytest.fixture(scope="module")
def hlatc_sharded():
    """hlatc's own runtime on the same layout, in this process: its
    trainer after the same steps, and its steps per second."""
    trainer = hlatc.Trainer(hlatc.compile_step(**OPTIONS, **LAYOUT), seed=0)
    data = list(batches(STEPS + TIMED))
    for t, y in data[:STEPS]:
        trainer.step(t, y)
    state = trainer.state()
    trainer.step(*data[STEPS])
    start = time.perf_counter()
    for t, y in data[STEPS + 1:]:
        trainer.step(t, y)
    return state, (TIMED - 1) / (time.perf_counter() - start)


@pytest.mark.parametrize("form", FORMS)
def test_two_processes_train_as_one_device_does(uninterrupted, hlatc_sharded, form):
    single = hlatc.Trainer(hlatc.compile_step(**OPTIONS), seed=0)
    want = [single.step(t, y) for t, y in batches(STEPS)]
    ours = [stats_of(uninterrupted, form, p) for p in (0, 1)]
    assert ours[0]["local_ranks"] == [0, 1] and ours[1]["local_ranks"] == [2, 3]
    # Every process reports the same statistics, as every rank computes them.
    assert ours[0]["stats"] == ours[1]["stats"]
    for i, (got, exp) in enumerate(zip(ours[0]["stats"], want)):
        for k in ("loss", "grad_norm", "learning_rate"):
            assert abs(got[k] - exp[k]) <= 1e-5 * abs(exp[k]), (form, i, k, got[k], exp[k])
    assert ours[0]["steps_done"] == STEPS + TIMED
    hf, exp_hf = arrays(uninterrupted, form, "hf"), single.hugging_face_params()
    assert sorted(hf) == sorted(exp_hf)
    for name, e in exp_hf.items():
        e, g = e.astype(np.float64), hf[name].astype(np.float64)
        assert np.linalg.norm(g - e) <= 1e-5 * np.linalg.norm(e), (form, name)
    assert ours[0]["donated"] and ours[1]["donated"]
    # The whole state is the same tensors as hlatc's TP 2 x DP 2 run gathers.
    final, expected = arrays(uninterrupted, form, "final"), hlatc_sharded[0]
    assert sorted(final) == sorted(expected)
    for name, e in expected.items():
        e, g = e.astype(np.float64), final[name].astype(np.float64)
        assert np.linalg.norm(g - e) <= 1e-5 * max(np.linalg.norm(e), 1e-30), (form, name)


def test_steps_per_second_against_hlatcs_runtime(uninterrupted, hlatc_sharded):
    """Measured, printed for the record (pytest -s): the same 10 steps of
    the same layout, JAX's processes against hlatc's runtime in this one
    (both after one untimed step). Asserts only that both ran."""
    ours = hlatc_sharded[1]
    for form in FORMS:
        s = stats_of(uninterrupted, form, 0)
        theirs = s["timed_steps"] / s["seconds"]
        print(f"\nTP 2 x DP 2 tiny, steps/s: JAX on 2 processes x 2 CPU devices ({form}) "
              f"{theirs:.1f}, hlatc.Trainer in one process {ours:.1f}, ratio {theirs / ours:.2f}")
        assert theirs > 0 and ours > 0


def test_a_lost_process_stops_the_run_by_name(killed):
    out, done, seconds = killed
    assert done.returncode != 0
    assert "process 1 of 2" in done.stderr and "signal SIGKILL" in done.stderr, done.stderr
    print(f"\nthe launcher stopped the survivor and exited {seconds:.1f} s after the kill")
    assert seconds < 60
    # Process 1 died before its 5th step; the checkpoint of step 3 is complete.
    assert (out / "ckpt" / "COMPLETE").is_file()
    record = json.loads((out / "ckpt" / "COMPLETE").read_text())
    assert record["steps_done"] == SAVE_AT and sorted(record["files"]) == [
        f"rank-{r:05}.safetensors" for r in range(4)]


def test_resuming_the_last_checkpoint_is_the_run_that_never_stopped(killed, uninterrupted,
                                                                    tmp_path):
    out, _, _ = killed
    done = launch(tmp_path, "--steps", str(STEPS), "--resume-from", str(out / "ckpt"))
    assert done.returncode == 0, done.stdout + done.stderr
    resumed = stats_of(tmp_path, "replicas", 0)
    assert len(resumed["stats"]) == STEPS - SAVE_AT
    assert resumed["stats"] == stats_of(uninterrupted, "replicas", 0)["stats"][SAVE_AT:]
    got, want = arrays(tmp_path, "replicas", "final"), arrays(uninterrupted, "replicas", "final")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name


def cli_binary() -> str:
    """$HLATC_BIN, else the newest hlatc built in target/ (skips without)."""
    binary = os.environ.get("HLATC_BIN")
    if not binary:
        built = [p for p in ROOT.glob("target/*/hlatc") if p.is_file()]
        if not built:
            pytest.skip("no hlatc binary (set HLATC_BIN)")
        binary = str(max(built, key=lambda p: p.stat().st_mtime))
    return binary


def test_hlatc_unshard_joins_the_checkpoint(killed, uninterrupted, tmp_path):
    out, _, _ = killed
    whole = tmp_path / "whole.safetensors"
    subprocess.run([cli_binary(), "unshard", "--model", "tiny", "--target", "cpu", "--precision", "fp32",
                    "--tp", "2", "--dp", "2", str(out / "ckpt"), "--out", str(whole)],
                   check=True, capture_output=True, timeout=60)
    joined = hlatc._hlatc.read_safetensors(str(whole))
    want = arrays(uninterrupted, "replicas", "saved")
    assert sorted(joined) == sorted(want)
    for name, (_, _, data) in joined.items():
        assert data.tobytes() == want[name].tobytes(), name


def test_mismatches_and_incomplete_checkpoints_are_refused(killed, tmp_path):
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.load(hlatc.compile_step(**OPTIONS, **LAYOUT))
    assert e.value.category == "conflict"
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.jax.Trainer(hlatc.compile_step(**OPTIONS, grad_accum=2))
    assert e.value.category == "unsupported"
    one = hlatc.jax.Trainer(hlatc.compile_step(**OPTIONS), seed=0)
    with pytest.raises(hlatc.UsageError) as e:
        one.load(killed[0] / "ckpt")
    assert e.value.category == "conflict"
    one.step(*next(batches(1)))
    one.save(tmp_path / "one")
    again = hlatc.jax.Trainer(hlatc.compile_step(**OPTIONS), seed=1)
    again.load(tmp_path / "one")
    assert again.steps_done == 1
    (tmp_path / "one" / "COMPLETE").unlink()
    with pytest.raises(hlatc.FileError) as e:
        again.load(tmp_path / "one")
    assert (e.value.code, e.value.path) == ("sharded_checkpoint.no_marker",
                                            str(tmp_path / "one" / "COMPLETE"))
    shutil.copytree(killed[0] / "ckpt", tmp_path / "changed")
    with open(tmp_path / "changed" / "rank-00000.safetensors", "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\x01")
    four = tmp_path / "changed"
    record = json.loads((four / "COMPLETE").read_text())
    record["world_size"] = 1
    record["files"] = {"rank-00000.safetensors": record["files"]["rank-00000.safetensors"]}
    (four / "COMPLETE").write_text(json.dumps(record))
    with pytest.raises(hlatc.FileError) as e:
        again.load(four)
    assert (e.value.code, e.value.path) == ("sharded_checkpoint.changed",
                                            str(four / "rank-00000.safetensors"))


def test_the_launcher_names_a_failed_process_and_bounds_the_run(tmp_path):
    """No JAX here: a process that exits 3 while the other sleeps, and a
    run past --timeout."""
    script = tmp_path / "s.py"
    script.write_text("import os, sys, time\n"
                      "if os.environ['HLATC_PROCESS_ID'] == '1' and len(sys.argv) > 1:\n"
                      "    sys.exit(3)\n"
                      "time.sleep(60)\n")
    base = [sys.executable, "-m", "hlatc.launch", "--processes", "2"]
    start = time.monotonic()
    done = subprocess.run([*base, str(script), "fail"], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 15
    assert done.returncode == 3
    assert "process 1 of 2" in done.stderr and "exit status 3" in done.stderr, done.stderr
    start = time.monotonic()
    done = subprocess.run([*base, "--timeout", "1", str(script)], capture_output=True, text=True,
                          timeout=30)
    assert time.monotonic() - start < 15
    assert done.returncode == 124 and "--timeout 1 s passed" in done.stderr, done.stderr


def launch_fit(out: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "hlatc.launch", "--processes", "2", "--devices-per-process", "2",
           "--timeout", str(LAUNCH_TIMEOUT - 10), str(HERE / "fit_worker.py"), str(out), str(data),
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT, cwd=HERE,
                          env=worker_env())


def test_fit_across_processes_each_reading_its_replica_resumes_as_one_run(tmp_path):
    from corpus import write_word_corpus
    from fit_worker import OPTIONS as FIT

    data = tmp_path / "data"
    data.mkdir()
    write_word_corpus(data)
    whole = tmp_path / "whole"
    done = launch_fit(whole, data)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = [json.loads((whole / f"fit-{p}.json").read_text()) for p in (0, 1)]
    # Each process read its own replica: half the global batch of 8 rows.
    assert [(r["replicas"], r["batch_size"]) for r in runs] == [([0], 4), ([1], 4)]
    assert runs[0]["metrics"] == runs[1]["metrics"]
    want = runs[0]["metrics"]

    # hlatc's runtime in one process, on the global batch of both replicas'
    # loaders: the same batches, so the same run.
    step = hlatc.compile_step(**FIT)
    loader = hlatc.data.Loader.for_step(step, data / "corpus.jsonl",
                                        tokenizer=data / "tokenizer.json")
    assert loader.owned_replicas == [0, 1] and loader.batch_size == 8
    ours = hlatc.Trainer(step, seed=0).fit(loader, 6)
    for key in ("loss", "grad_norm"):
        np.testing.assert_allclose([m[key] for m in want], [m[key] for m in ours], rtol=1e-5)

    # Both processes stop after step 5; the checkpoint of step 4 has each
    # replica's position, written by the process that reads it.
    broken = tmp_path / "broken"
    done = launch_fit(broken, data, "--crash-at", "5")
    assert done.returncode != 0
    assert "stopping after step 5" in done.stdout + done.stderr
    ckpt = broken / "ckpt"
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-00000002", "step-00000004"]
    marker = json.loads((ckpt / "step-00000004" / "COMPLETE").read_text())
    assert {"loader-replica-00000.json", "loader-replica-00001.json", "metrics.csv"} <= set(
        marker["files"])
    for replica in (0, 1):
        (position,) = json.loads((ckpt / "step-00000004" / f"loader-replica-{replica:05d}.json")
                                 .read_text())
        assert position["fingerprint"]["shard"] == {"index": replica, "count": 2}
        assert position["batches"] == 4

    done = launch_fit(broken, data)
    assert done.returncode == 0, done.stdout + done.stderr
    again = [json.loads((broken / f"fit-{p}.json").read_text()) for p in (0, 1)]
    assert again[0]["metrics"] == again[1]["metrics"] == want
    with np.load(whole / "fit.npz") as a, np.load(broken / "fit.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        assert all(np.array_equal(a[k], b[k]) for k in a.files)


# A pipeline-parallel step: tiny's 2 layers over 2 stages of TP 2, 2
# micro-batches a step (5 ticks).
PIPELINE = dict(pp=2, tp=2, grad_accum=2)
PIPELINE_STEPS, PIPELINE_SAVE_AT = 3, 2


@pytest.fixture(scope="module")
def pipelined_hlatc():
    """hlatc.Trainer (Rust, XLA CPU) on the pipelined step: its statistics,
    its whole state after PIPELINE_SAVE_AT steps and after the last, and
    its Hugging Face parameters."""
    trainer = hlatc.Trainer(hlatc.compile_step(**OPTIONS, **PIPELINE), seed=0)
    stats, saved = [], {}
    for i, (t, y) in enumerate(batches(PIPELINE_STEPS)):
        stats.append(trainer.step(t, y))
        if i + 1 == PIPELINE_SAVE_AT:
            saved = trainer.state()
    return stats, saved, trainer.state(), trainer.hugging_face_params()


def relative(got: np.ndarray, want: np.ndarray) -> float:
    """The difference by the tensor's norm (f64)."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    return float(np.linalg.norm(g - w) / max(np.linalg.norm(w), 1e-30))


# One process of four devices starts no gloo job and times nothing, so it
# need not wait for the "processes" group's worker: a group of its own.
@pytest.mark.parametrize("processes", [
    pytest.param(1, marks=pytest.mark.xdist_group("one-process")), 2])
def test_jax_drives_a_pipeline_as_hlatc_does(pipelined_hlatc, processes, tmp_path):
    """PP 2 x TP 2 on 4 devices, in one process or two of two (each
    running its stage: ranks 0-1 are stage 0), checkpointed after step 2."""
    ckpt = tmp_path / "ckpt"
    layout = ",".join(f"{k}={v}" for k, v in PIPELINE.items() if k != "grad_accum")
    done = launch(tmp_path, "--layout", layout, "--grad-accum", str(PIPELINE["grad_accum"]),
                  "--steps", str(PIPELINE_STEPS), "--save-at", str(PIPELINE_SAVE_AT),
                  "--checkpoint", str(ckpt), processes=processes, devices=4 // processes)
    assert done.returncode == 0, done.stdout + done.stderr
    want, want_saved, want_final, want_hf = pipelined_hlatc
    ours = [stats_of(tmp_path, "replicas", p) for p in range(processes)]
    ranks = [[0, 1, 2, 3]] if processes == 1 else [[0, 1], [2, 3]]
    assert [o["local_ranks"] for o in ours] == ranks
    assert all(o["stats"] == ours[0]["stats"] for o in ours)
    worst = {}
    for i, (got, exp) in enumerate(zip(ours[0]["stats"], want)):
        for k in ("loss", "grad_norm", "learning_rate"):
            worst[k] = max(worst.get(k, 0.0), abs(got[k] - exp[k]) / abs(exp[k]))
    assert len(ours[0]["stats"]) == PIPELINE_STEPS and all(d <= 1e-5 for d in worst.values()), \
        worst
    assert ours[0]["donated"]
    # Every tensor of the whole state (the whole model's names), and the
    # Hugging Face parameters.
    for prefix, expected in (("final", want_final), ("saved", want_saved), ("hf", want_hf)):
        got = arrays(tmp_path, "replicas", prefix)
        assert sorted(got) == sorted(expected), prefix
        worst[prefix] = max(relative(got[n], e) for n, e in expected.items())
    print(f"\nPP 2 x TP 2, JAX on {processes} process(es) against hlatc.Trainer, worst "
          f"relative difference: {worst}")
    assert all(d <= 1e-5 for d in worst.values()), worst
    # Its checkpoint is `hlatc shard --pp`'s rank files: `hlatc unshard`
    # joins them into the state of step 2, byte for byte.
    assert json.loads((ckpt / "COMPLETE").read_text())["config"]["parallel"]["pp"] == 2
    whole = tmp_path / "whole.safetensors"
    subprocess.run([cli_binary(), "unshard", "--model", "tiny", "--target", "cpu", "--precision",
                    "fp32", "--pp", "2", "--tp", "2", str(ckpt), "--out", str(whole)],
                   check=True, capture_output=True, timeout=60)
    joined = hlatc._hlatc.read_safetensors(str(whole))
    saved = arrays(tmp_path, "replicas", "saved")
    assert sorted(joined) == sorted(saved)
    for name, (_, _, data) in joined.items():
        assert data.tobytes() == saved[name].tobytes(), name
    # Loaded by a fresh run (its stage buffers zero), step 3 is the one
    # the run that never stopped took, byte for byte.
    again = tmp_path / "resumed"
    done = launch(again, "--layout", layout, "--grad-accum", str(PIPELINE["grad_accum"]),
                  "--steps", str(PIPELINE_STEPS), "--resume-from", str(ckpt),
                  processes=processes, devices=4 // processes)
    assert done.returncode == 0, done.stdout + done.stderr
    assert stats_of(again, "replicas", 0)["stats"] == ours[0]["stats"][PIPELINE_SAVE_AT:]
    got, want = arrays(again, "replicas", "final"), arrays(tmp_path, "replicas", "final")
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), name
