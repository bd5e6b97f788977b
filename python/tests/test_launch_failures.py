"""How a JAX job of two processes ends when one of them fails: under
`python -m hlatc.launch` (the first to fail named with its exception's
last line, the other stopped within seconds, the launcher's status that
process's, every worker gone with a killed launcher, a taken port refused
before anything starts) and without it (`hlatc.jax.PeerLostError` naming
the lost process, not a raw gloo error and an abort).

Each run is tiny at DP 2 on two processes of one CPU device
(failure_worker.py), a few steps; every subprocess runs under a timeout,
on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import pytest

import hlatc

pytest.importorskip("jax", reason="the jax extra: pip install ./python[jax]")
import hlatc.jax  # noqa: E402

# Under pytest-xdist (scripts/test.sh), every test that starts processes of
# its own runs on one worker, one at a time: two jobs of gloo peers and
# timed stops at once on two cores are what the tests must not measure.
pytestmark = pytest.mark.xdist_group("processes")

HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "failure_worker.py")
TIMEOUT = 90
FAST_XLA = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def env() -> dict:
    e = dict(os.environ)
    e["XLA_FLAGS"] = f"{e.get('XLA_FLAGS', '')} {FAST_XLA}".strip()
    return e


def launch(out: Path, *args: str, port: Optional[int] = None) -> tuple:
    """The launcher's run of the worker: (result, seconds it took)."""
    cmd = [sys.executable, "-m", "hlatc.launch", "--processes", "2", "--timeout",
           str(TIMEOUT - 20)]
    if port is not None:
        cmd += ["--port", str(port)]
    start = time.monotonic()
    done = subprocess.run([*cmd, WORKER, str(out), *args], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=HERE, env=env())
    return done, time.monotonic() - start, time.time()


def last_step(out: Path, process: int) -> tuple:
    """(steps done, when) of a process, from its step file."""
    steps, at = (out / f"step-{process}").read_text().split()
    return int(steps), float(at)


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except ProcessLookupError:
        return False
    except OSError:
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def by_hand(out: Path, *args: str) -> List[subprocess.CompletedProcess]:
    """The two processes started without the launcher, with the
    environment set by hand."""
    e = env()
    e.update({"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{free_port()}",
              "HLATC_NUM_PROCESSES": "2", "HLATC_CPU_COLLECTIVES": "gloo"})
    for k in ("HLATC_LAUNCH_STATUS_DIR", "HLATC_LAUNCHER_PID"):
        e.pop(k, None)
    procs = [subprocess.Popen([sys.executable, WORKER, str(out), *args],
                              env={**e, "HLATC_PROCESS_ID": str(i)}, cwd=HERE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in (0, 1)]
    results = []
    try:
        for p in procs:
            stdout, stderr = p.communicate(timeout=TIMEOUT)
            results.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    return results


def test_a_taken_port_is_refused_before_any_process_starts(tmp_path, monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        done, seconds, _ = launch(tmp_path, "train", port=port)
        assert done.returncode == 2, done.stderr
        assert f"--port {port} is taken on this machine" in done.stderr, done.stderr
        assert "no process was started" in done.stderr
        assert not list(tmp_path.iterdir())  # no worker ran
        assert seconds < 20
        # Started by hand, process 0 says so before JAX's gRPC dies of it.
        monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", f"127.0.0.1:{port}")
        monkeypatch.setenv("HLATC_NUM_PROCESSES", "2")
        monkeypatch.setenv("HLATC_PROCESS_ID", "0")
        with pytest.raises(hlatc.UsageError) as e:
            hlatc.jax.initialize()
        assert (e.value.code, e.value.category) == ("launch.port_taken", "conflict")
        # Named: the port, which no field holds.
        assert f"port {port}, " in str(e.value)


def test_an_exception_names_its_process_and_stops_the_other_within_seconds(tmp_path):
    done, _, ended = launch(tmp_path, "raise", "--at", "2")
    assert done.returncode == 1, done.stderr
    assert ("process 1 of 2 (pid " in done.stderr and "failed first (exit status 1): "
            "ValueError: boom in process 1 before step 3; stopping the others" in done.stderr), \
        done.stderr
    # Process 0, stuck in step 3 waiting for process 1, learnt why.
    assert ("PeerLostError: process 1 of 2 failed: ValueError: boom in process 1 before step 3 "
            "while process 0 waited for it in step 3") in done.stderr
    assert "process 0 of 2" not in done.stderr.split("failed first")[0].rsplit("\n", 1)[-1]
    steps, at = last_step(tmp_path, 1)
    assert steps == 2 and last_step(tmp_path, 0)[0] == 2
    # Before: both processes aborted about 41 s later, process 0 blamed.
    print(f"\nthe launcher exited {ended - at:.1f} s after process 1's last step")
    assert ended - at < 10


def test_an_exception_in_process_0_names_process_0(tmp_path):
    done, _, ended = launch(tmp_path, "raise", "--at", "1", "--victim", "0")
    assert done.returncode == 1, done.stderr
    assert "hlatc.launch: process 0 of 2 (pid " in done.stderr
    assert "failed first (exit status 1): ValueError: boom in process 0 before step 2" \
        in done.stderr, done.stderr
    assert ended - last_step(tmp_path, 0)[1] < 10


def test_an_early_sys_exit_0_is_named_and_fails_the_run(tmp_path):
    done, _, ended = launch(tmp_path, "exit0", "--at", "2")
    assert done.returncode == 1, done.stderr
    assert ("failed first (exit status 1): process 1 ended (its script returned or called "
            "sys.exit) after 2 collective(s), while process 0 waited for it in step 3"
            ) in done.stderr, done.stderr
    assert done.stderr.count("failed first") == 1
    assert "hlatc.launch: process 1 of 2" in done.stderr
    assert ended - last_step(tmp_path, 1)[1] < 10


def test_the_launchers_status_is_the_killed_process_signal(tmp_path):
    done, _, ended = launch(tmp_path, "kill", "--at", "2")
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert ("hlatc.launch: process 1 of 2 (pid " in done.stderr
            and "failed first (signal SIGKILL)" in done.stderr), done.stderr
    assert ended - last_step(tmp_path, 1)[1] < 15


def test_workers_die_with_a_killed_launcher(tmp_path):
    cmd = [sys.executable, "-m", "hlatc.launch", "--processes", "2", "--timeout",
           str(TIMEOUT), WORKER, str(tmp_path), "train", "--steps", "100000"]
    launcher = subprocess.Popen(cmd, cwd=HERE, env=env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT / 2
        while not all((tmp_path / f"step-{i}").exists() for i in (0, 1)):
            assert launcher.poll() is None, "the launcher ended before training"
            assert time.monotonic() < deadline, "the workers never trained"
            time.sleep(0.1)
        pids = [int((tmp_path / f"pid-{i}").read_text()) for i in (0, 1)]
        assert all(alive(p) for p in pids)
        launcher.kill()
        launcher.wait(timeout=10)
        killed = time.monotonic()
        while any(alive(p) for p in pids) and time.monotonic() - killed < 10:
            time.sleep(0.05)
        # Before: both went on training.
        assert not any(alive(p) for p in pids), "a worker outlived its launcher"
        print(f"\nboth workers were gone {time.monotonic() - killed:.2f} s after the launcher")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(timeout=10)
        for i in (0, 1):
            f = tmp_path / f"pid-{i}"
            if f.exists() and alive(int(f.read_text())):
                os.kill(int(f.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("mode", ["kill", "raise", "exit0"])
def test_without_the_launcher_a_lost_peer_raises_naming_it(tmp_path, mode):
    p0, p1 = by_hand(tmp_path, mode, "--at", "2", "--catch")
    # Process 0 caught hlatc.jax.PeerLostError and ended normally: no raw
    # gloo error, no abort in JAX's shutdown.
    assert p0.returncode == 0, p0.stderr
    lost = json.loads((tmp_path / "lost-0.json").read_text())
    assert lost["process"] == 1 and lost["is_hlatc_error"]
    said = {
        "kill": f"process 1 of 2 (pid {(tmp_path / 'pid-1').read_text()}) is gone (killed, or "
                "it crashed) while process 0 waited for it in step 3",
        "raise": "process 1 of 2 failed: ValueError: boom in process 1 before step 3 while "
                 "process 0 waited for it in step 3",
        "exit0": "process 1 of 2 ended (its script returned or called sys.exit) after 2 "
                 "collective(s) while process 0 waited for it in step 3",
    }[mode]
    assert lost["message"].startswith(said), lost["message"]
    assert p1.returncode == {"kill": -signal.SIGKILL, "raise": 1, "exit0": 1}[mode], p1.stderr
    assert "Terminating process" not in p0.stderr + p1.stderr
    assert lost["time"] - last_step(tmp_path, 1)[1] < 10


def test_without_the_launcher_process_0_failing_stops_the_other_by_name(tmp_path):
    p0, p1 = by_hand(tmp_path, "raise", "--at", "2", "--victim", "0")
    assert p0.returncode == 1 and "ValueError: boom in process 0 before step 3" in p0.stderr
    # JAX terminates a process whose coordinator is gone; it goes first, saying why.
    assert p1.returncode == 1, p1.stderr
    assert ("hlatc.jax: process 1: process 0 of 2 failed: ValueError: boom in process 0 before "
            "step 3; process 1 stops too") in p1.stderr, p1.stderr
    assert "Terminating process" not in p1.stderr


def test_a_script_without_hlatc_is_named_with_its_stderrs_last_error_line(tmp_path):
    """No JAX: process 1 raises; its traceback's last line names it."""
    script = tmp_path / "s.py"
    script.write_text("import os, time\n"
                      "if os.environ['HLATC_PROCESS_ID'] == '1':\n"
                      "    raise KeyError('no such thing')\n"
                      "time.sleep(60)\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "hlatc.launch", "--processes", "2",
                           str(script)], capture_output=True, text=True, timeout=30)
    assert time.monotonic() - start < 15
    assert done.returncode == 1
    assert ("process 1 of 2 (pid " in done.stderr and "failed first (exit status 1): "
            "KeyError: 'no such thing'; stopping the others" in done.stderr), done.stderr


def test_process_0_killed_is_named_not_the_process_jax_terminates(tmp_path):
    done, _, ended = launch(tmp_path, "kill", "--at", "2", "--victim", "0")
    # JAX terminates process 1 (SIGABRT) once its coordinator is gone; the
    # launcher names process 0, killed first.
    assert done.returncode == 128 + signal.SIGKILL, done.stderr
    assert ("hlatc.launch: process 0 of 2 (pid " in done.stderr
            and "failed first (signal SIGKILL)" in done.stderr), done.stderr
    assert ended - last_step(tmp_path, 0)[1] < 15
