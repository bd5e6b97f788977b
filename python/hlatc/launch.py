"""Starts a script as N local processes of one JAX distributed job.

    python -m hlatc.launch --processes 2 --devices-per-process 2 train.py [args]

Each process gets the environment `hlatc.jax.initialize()` reads: the
coordinator `JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT` (process 0 serves it),
`HLATC_NUM_PROCESSES`, `HLATC_PROCESS_ID`, CPU collectives over gloo
(`HLATC_CPU_COLLECTIVES`), and `--xla_force_host_platform_device_count=K`
added to `XLA_FLAGS` (K CPU devices per process).

When a process fails (a non-zero exit or a signal), the launcher stops the
others (SIGTERM, then SIGKILL after `--grace` seconds, 2 by default:
JAX's distributed runtime takes SIGTERM as a preemption notice, not a stop), names the lost
process and exits non-zero: a survivor would otherwise wait in a collective
for a peer that is gone. Every wait is bounded; `--timeout` bounds the
whole run.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from typing import List, Optional

POLL_SECONDS = 0.05


def free_port() -> int:
    """A TCP port on 127.0.0.1 free now (the coordinator binds it moments
    later; another program could take it in between, so --port exists)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def describe(code: int) -> str:
    """A Popen return code in words: 'exit status 3' or 'signal SIGKILL'."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def process_env(base: dict, index: int, count: int, port: int, devices: int) -> dict:
    env = dict(base)
    env["JAX_COORDINATOR_ADDRESS"] = f"127.0.0.1:{port}"
    env["HLATC_NUM_PROCESSES"] = str(count)
    env["HLATC_PROCESS_ID"] = str(index)
    env.setdefault("HLATC_CPU_COLLECTIVES", "gloo")
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags.append(f"--xla_force_host_platform_device_count={devices}")
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def stop(procs: List[subprocess.Popen], grace: float) -> None:
    """SIGTERM to every process still running (its whole process group),
    SIGKILL to any left after `grace` seconds; returns once all are reaped
    or after the kill (each wait bounded)."""
    for p in procs:
        if p.poll() is None:
            _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(POLL_SECONDS)
    for p in procs:
        if p.poll() is None:
            _signal_group(p, signal.SIGKILL)
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    # Each process leads its own group (start_new_session), so what it
    # started goes with it.
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def launch(
    command: List[str],
    processes: int,
    devices_per_process: int = 1,
    port: Optional[int] = None,
    grace: float = 2.0,
    timeout: Optional[float] = None,
) -> int:
    """Runs `command` as `processes` processes; the launcher's exit code."""
    port = port or free_port()
    procs: List[subprocess.Popen] = []
    interrupted = []

    def on_signal(signum, _frame):
        interrupted.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for i in range(processes):
            env = process_env(os.environ, i, processes, port, devices_per_process)
            procs.append(subprocess.Popen(command, env=env, start_new_session=True))
        start = time.monotonic()
        while True:
            codes = [p.poll() for p in procs]
            failed = [(i, c) for i, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                i, code = failed[0]
                print(f"hlatc.launch: process {i} of {processes} (pid {procs[i].pid}) was lost: "
                      f"{describe(code)}; stopping the others", file=sys.stderr, flush=True)
                stop(procs, grace)
                return code if code > 0 else 128 - code
            if all(c == 0 for c in codes):
                return 0
            if interrupted:
                print(f"hlatc.launch: {signal.Signals(interrupted[0]).name}; stopping "
                      f"{processes} processes", file=sys.stderr, flush=True)
                stop(procs, grace)
                return 128 + interrupted[0]
            if timeout is not None and time.monotonic() - start > timeout:
                running = [i for i, c in enumerate(codes) if c is None]
                print(f"hlatc.launch: --timeout {timeout:g} s passed with process(es) {running} "
                      "still running; stopping them", file=sys.stderr, flush=True)
                stop(procs, grace)
                return 124
            time.sleep(POLL_SECONDS)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        stop(procs, grace)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hlatc.launch",
        description="Run a Python script as N local processes of one JAX distributed job "
                    "(call hlatc.jax.initialize() first thing in the script).",
    )
    parser.add_argument("--processes", type=int, required=True, help="how many processes")
    parser.add_argument("--devices-per-process", type=int, default=1,
                        help="XLA CPU devices in each process (default 1)")
    parser.add_argument("--port", type=int, default=None,
                        help="the coordinator's port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--grace", type=float, default=2.0,
                        help="seconds the others get to exit after SIGTERM once one is lost, "
                             "before SIGKILL (default 2; JAX's distributed runtime takes SIGTERM "
                             "as a preemption notice and does not exit on it)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="stop every process after this many seconds (exit 124)")
    parser.add_argument("script", help="the Python script")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = parser.parse_args(argv)
    if a.processes < 1 or a.devices_per_process < 1:
        parser.error("--processes and --devices-per-process must be at least 1")
    return launch([sys.executable, a.script, *a.args], a.processes, a.devices_per_process,
                  a.port, a.grace, a.timeout)


if __name__ == "__main__":
    sys.exit(main())
