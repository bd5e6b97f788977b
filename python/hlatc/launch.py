"""Starts a script as N local processes of one JAX distributed job.

    python -m hlatc.launch --processes 2 --devices-per-process 2 train.py [args]

Each process gets the environment `hlatc.jax.initialize()` reads: the
coordinator `JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT` (process 0 serves it),
`HLATC_NUM_PROCESSES`, `HLATC_PROCESS_ID`, CPU collectives over gloo
(`HLATC_CPU_COLLECTIVES`), and `--xla_force_host_platform_device_count=K`
added to `XLA_FLAGS` (K CPU devices per process).

A taken `--port` is refused before any process starts.

When a process fails (an exception, a non-zero exit, a signal, or an end
while the others still wait for it in a collective), the launcher names
the first to fail, with its exception's last line (what `hlatc.jax`
reports, else the last line it wrote to stderr), stops the others
(SIGTERM, then SIGKILL after `--grace` seconds, 2 by default: JAX's
distributed runtime takes SIGTERM as a preemption notice, not a stop) and
exits with that process's status (128 + N for signal N). A process that
fails because another stopped (`hlatc.jax.PeerLostError`, or JAX
terminating it for its lost coordinator) is never the one named. Every
process dies with the launcher (Linux's PR_SET_PDEATHSIG; elsewhere
`hlatc.jax.initialize` watches its parent). Every wait is bounded;
`--timeout` bounds the whole run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, Any, Deque, Dict, List, Optional, Tuple

from . import _peers

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


class _Output(threading.Thread):
    """Copies a process's stderr to the launcher's as it comes, keeping its
    last lines."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: Deque[str] = collections.deque(maxlen=40)

    def run(self) -> None:
        out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        for line in iter(self.stream.readline, b""):
            try:
                if out is not None:
                    out.write(line)
                    out.flush()
                else:
                    sys.stderr.write(line.decode("utf-8", "replace"))
            except (OSError, ValueError):
                pass
            text = line.decode("utf-8", "replace").strip()
            if text:
                self.lines.append(text)

    def last(self) -> str:
        """The last line that reads as an error, else the last line."""
        lines = [s for s in self.lines if not s.startswith(("@", "***"))]
        for s in reversed(lines):
            if s.split(":", 1)[0].endswith(("Error", "Exception", "Interrupt", "Exit")):
                return s
        return lines[-1] if lines else ""

    def terminated_by_jax(self) -> bool:
        return any(_peers.JAX_TERMINATING in s for s in self.lines)


def _die_with(launcher: int) -> Any:
    """A Popen preexec_fn: the child gets SIGKILL when the launcher dies
    (Linux); if the launcher is already gone, it exits."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def preexec() -> None:
        if prctl is not None:
            prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != launcher:
            os._exit(1)

    return preexec


def _read_status(d: str, i: int) -> Optional[Dict[str, Any]]:
    try:
        with open(os.path.join(d, f"process-{i}.json")) as f:
            record = json.load(f)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def launch(
    command: List[str],
    processes: int,
    devices_per_process: int = 1,
    port: Optional[int] = None,
    grace: float = 2.0,
    timeout: Optional[float] = None,
) -> int:
    """Runs `command` as `processes` processes; the launcher's exit code."""
    if port is not None:
        why = _peers.port_taken(port)
        if why is not None:
            print(f"hlatc.launch: error: --port {port} is taken on this machine ({why}); no "
                  "process was started: choose another port, or leave --port out for a free one",
                  file=sys.stderr, flush=True)
            return 2
    port = port or free_port()
    procs: List[subprocess.Popen] = []
    outputs: List[_Output] = []
    interrupted = []
    status_dir = tempfile.mkdtemp(prefix="hlatc-launch-")

    def on_signal(signum, _frame):
        interrupted.append(signum)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for i in range(processes):
            env = process_env(os.environ, i, processes, port, devices_per_process)
            env[_peers.ENV_STATUS_DIR] = status_dir
            env[_peers.ENV_LAUNCHER_PID] = str(os.getpid())
            procs.append(subprocess.Popen(command, env=env, start_new_session=True,
                                          stderr=subprocess.PIPE,
                                          preexec_fn=_die_with(os.getpid())))
        # The readers start once every process has (no thread runs while
        # the launcher forks).
        for p in procs:
            assert p.stderr is not None
            outputs.append(_Output(p.stderr))
            outputs[-1].start()
        start = time.monotonic()
        secondary_since: Optional[float] = None
        while True:
            codes = [p.poll() for p in procs]
            found = _first_failure(procs, codes, outputs, status_dir)
            if found is not None:
                i, code, line, primary = found
                now = time.monotonic()
                if not primary and secondary_since is None:
                    secondary_since = now
                # One that failed for another's loss waits a second for
                # the other to show.
                if primary or now - secondary_since > 1.0:
                    return _fail(procs, outputs, status_dir, i, code, line, grace)
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
        for o in outputs:
            o.join(timeout=1)
        shutil.rmtree(status_dir, ignore_errors=True)


def _first_failure(
    procs: List[subprocess.Popen], codes: List[Optional[int]], outputs: List[_Output],
    status_dir: str,
) -> Optional[Tuple[int, int, str, bool]]:
    """The process to blame, if one failed: (index, exit status as Popen
    gives it, its last line, whether it failed of itself). A process that
    failed of itself comes first (the earliest), else the peer one that
    failed for another's loss names (or that one)."""
    primary: List[Tuple[float, int, int, str]] = []
    secondary: List[Tuple[float, int, int, str]] = []
    now = time.time()
    for i, code in enumerate(codes):
        record = _read_status(status_dir, i)
        if record is not None and record.get("kind") in ("error", "left", "lost_peer"):
            c = code if code is not None and code != 0 else int(record.get("code") or 1)
            entry = (float(record.get("time", now)), i, c, str(record.get("message", "")))
            if record["kind"] == "lost_peer":
                peer = record.get("peer")
                if isinstance(peer, int) and 0 <= peer < len(procs) and peer != i:
                    secondary.append((entry[0], peer, -1, ""))
                else:
                    secondary.append(entry)
            else:
                primary.append(entry)
        elif code not in (None, 0):
            if i < len(outputs):
                # The process has exited, but its last lines may still be
                # in the pipe: read them to the end (bounded, as a child it
                # left behind may hold the pipe open).
                outputs[i].join(timeout=1.0)
            entry = (now, i, code, outputs[i].last() if i < len(outputs) else "")
            (secondary if outputs[i].terminated_by_jax() else primary).append(entry)
    if primary:
        _, i, c, line = min(primary)
        return i, c, line, True
    if secondary:
        _, i, c, line = min(secondary)
        return i, c, line, False
    return None


def _fail(procs: List[subprocess.Popen], outputs: List[_Output], status_dir: str, i: int,
          code: int, line: str, grace: float) -> int:
    """Names process `i` as the first to fail, stops the others, and gives
    the launcher's exit status: that process's."""
    n = len(procs)
    if code == -1:  # named by a peer: what it says of itself, or its status
        record = _read_status(status_dir, i)
        procs[i].poll()
        got = procs[i].returncode
        code = got if got not in (None, 0) else int((record or {}).get("code") or 1)
        line = str((record or {}).get("message") or outputs[i].last())
    said = f": {line}" if line else ""
    print(f"hlatc.launch: process {i} of {n} (pid {procs[i].pid}) failed first "
          f"({describe(code)}){said}; stopping the others", file=sys.stderr, flush=True)
    start = time.monotonic()
    stop(procs, grace)
    print(f"hlatc.launch: all {n} processes stopped {time.monotonic() - start:.1f} s after "
          f"process {i} was named", file=sys.stderr, flush=True)
    return code if code > 0 else 128 - code


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
