"""How the processes `hlatc.jax.initialize` joined learn that one of them
stopped, and stop in turn, by name (see docs/src/python.md, "Launching").

JAX alone leaves this badly: a process whose script raises (or returns, or
calls `sys.exit`) waits at exit in JAX's shutdown barrier while its peers
wait for it in a collective, until JAX aborts them all some 40 s later; a
peer killed outright gives a raw gloo error. Here each process, once
joined:

- publishes why it ends (`hlatc/exit/<i>` in JAX's coordination service,
  and, under `python -m hlatc.launch`, a status file the launcher reads):
  an exception's last line, a normal end, or a peer lost;
- on an exception it does not wait in JAX's shutdown (which aborts with a
  peer gone): it prints the traceback and exits at once, status 1, so that
  its peers' collectives fail at once;
- at a normal end it waits (at most `shutdown_timeout_seconds`) for the
  others to end too; if a peer is meanwhile waiting for it in a collective
  it never joined, or a peer failed, it exits at once;
- a collective hlatc runs (`collective`) that fails because a peer is
  gone raises `PeerLostError` naming it, and one a peer will never join
  (that peer ended before it) raises before it starts;
- process 0 serves JAX's coordination service, which the others cannot
  outlive (JAX terminates them): when process 0 fails, each other process
  says so and exits (status 1) before JAX does.

Collectives are counted (`calls`): every process runs the same sequence,
so a peer that ended after `m` calls will never join call `m + 1`.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import sys
import threading
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Set

from . import _hlatc

#: The folder `python -m hlatc.launch` reads each process's end from.
ENV_STATUS_DIR = "HLATC_LAUNCH_STATUS_DIR"
#: The launcher's pid: a process whose parent is no longer it exits.
ENV_LAUNCHER_PID = "HLATC_LAUNCHER_PID"

POLL_SECONDS = 0.1
PREFIX = "hlatc/"
#: What JAX prints when it terminates a process whose coordination service
#: reported another task's failure (the launcher blames the other).
JAX_TERMINATING = "Terminating process because the JAX distributed service"


class PeerLostError(_hlatc.Error, RuntimeError):
    """Another process of the job stopped, so a collective cannot complete:
    `process` is its index (None when it cannot be told), `reason` what it
    said or what became of it."""

    def __init__(self, message: str, process: Optional[int] = None, reason: str = "") -> None:
        super().__init__(message)
        self.process = process
        self.reason = reason
        # A case only the Python API raises (`_hlatc.PYTHON_CODES`).
        self.code = "jax.peer_lost"


PeerLostError.__module__ = "hlatc.jax"


def port_taken(port: int) -> Optional[str]:
    """Why the coordinator could not listen on `port` (JAX's service binds
    every address, `[::]:port`), or None if it can now."""
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
            s.listen(1)
        except OSError as e:
            return e.strerror or str(e)
        finally:
            s.close()
    return None


def write_status(record: Dict[str, Any]) -> None:
    """The launcher's copy of this process's end (only the first one)."""
    d = os.environ.get(ENV_STATUS_DIR)
    if not d:
        return
    path = os.path.join(d, f"process-{record['process']}.json")
    if os.path.exists(path):
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(record, f)
        os.replace(tmp, path)
    except OSError:
        pass


def last_line(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


class _Job:
    def __init__(self, client: Any, me: int, count: int, wait_seconds: float,
                 join_timeout: float) -> None:
        self.client, self.me, self.count = client, me, count
        self.wait_seconds = wait_seconds
        self.calls = 0  # the collectives this process entered
        self.depth = 0
        self.what: Optional[str] = None
        self.exits: Dict[int, Dict[str, Any]] = {}
        self.released: Optional[Dict[str, Any]] = None
        self.releases_sent: Set[int] = set()
        self.left: Set[int] = set()  # peers that said they exit now (leave)
        self.previous_hook: Any = sys.excepthook
        self.reported = False
        self.lost = False  # a PeerLostError was raised here
        self.lock = threading.Lock()
        # The watcher stops (and is joined) before the interpreter
        # finalizes: a daemon thread that comes back from a call into JAX
        # (the coordination service's `key_value_dir_get`) once
        # finalization has begun is ended by Python 3.11-3.13 with
        # `pthread_exit`, whose unwinding through JAX's C++ frames aborts
        # the process ("FATAL: exception not rethrown", SIGABRT) after its
        # script ended normally. Seen under load in about one launch in
        # twenty.
        self.stopping = threading.Event()
        self.watcher: Optional[threading.Thread] = None
        self.host = socket.gethostname()
        launcher = os.environ.get(ENV_LAUNCHER_PID)
        self.launcher_pid = int(launcher) if launcher and launcher.isdigit() else None
        client.key_value_set(f"{PREFIX}proc/{me}", json.dumps({"pid": os.getpid(),
                                                                "host": self.host}))
        self.peers: Dict[int, Dict[str, Any]] = {}
        for i in range(count):
            if i != me:
                value = client.blocking_key_value_get(f"{PREFIX}proc/{i}",
                                                      int(join_timeout * 1000))
                self.peers[i] = json.loads(value)

    # What this process says of its own end.

    def report(self, kind: str, message: str, code: Optional[int],
               peer: Optional[int] = None, what: Optional[str] = None) -> None:
        with self.lock:
            if self.reported:
                return
            self.reported = True
        record = {"process": self.me, "pid": os.getpid(), "kind": kind, "message": message,
                  "code": code, "calls": self.calls, "what": what or self.what, "peer": peer,
                  "time": time.time()}
        if kind != "exit":
            write_status(record)
        try:
            self.client.key_value_set(f"{PREFIX}exit/{self.me}", json.dumps(record))
        except Exception:
            pass  # the coordinator is gone: the others learn it from JAX

    def leave(self, code: int) -> None:
        """Exits now, past JAX's shutdown (which would wait for, or abort
        over, a peer that is gone). Process 0 first gives the others a
        moment to see why (its coordination service goes with it)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        if self.me == 0:
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and (self.running_peers()
                                                   or self.peers_in_exit_wait()):
                self.refresh()
                time.sleep(POLL_SECONDS / 2)
        else:
            try:
                # Process 0 waits for this before its coordination service
                # goes (peers_in_exit_wait).
                self.client.key_value_set(f"{PREFIX}left/{self.me}", str(code))
            except Exception:
                pass
        os._exit(code)

    # What this process learns of the others.

    def refresh(self) -> bool:
        """Reads the others' ends and releases from the coordination
        service; False if it cannot be reached."""
        try:
            entries = self.client.key_value_dir_get(PREFIX)
        except Exception:
            return False
        for key, value in entries:
            parts = key[key.find(PREFIX) + len(PREFIX):].split("/")
            if len(parts) < 2 or not parts[1].isdigit():
                continue
            i = int(parts[1])
            if parts[0] == "exit" and i != self.me and i not in self.exits:
                try:
                    self.exits[i] = json.loads(value)
                except ValueError:
                    continue
            elif parts[0] == "left" and i != self.me:
                self.left.add(i)
            elif parts[0] == "release" and i == self.me and self.released is None:
                self.released = json.loads(value)
        return True

    def watch(self) -> None:
        """The watcher thread: every 0.1 s, the others' ends, until
        `stop_watching`."""
        while not self.stopping.wait(POLL_SECONDS):
            try:
                self.watch_once()
            except Exception:  # never let the watcher die of one bad read
                time.sleep(POLL_SECONDS)

    def watch_once(self) -> None:
        """One look at the others' ends (see `watch`)."""
        if self.launcher_pid is not None and os.getppid() != self.launcher_pid:
            print(f"hlatc.jax: process {self.me}: its launcher (pid {self.launcher_pid}) is "
                  "gone; exiting", file=sys.stderr, flush=True)
            os._exit(1)
        if not self.refresh():
            time.sleep(1)
            return
        for i, rec in sorted(list(self.exits.items())):
            if rec["kind"] == "exit":
                # It ended normally; if this process waits in a
                # collective it never joined, it must go at once.
                if self.depth > 0 and rec["calls"] < self.calls and i not in self.releases_sent:
                    self.releases_sent.add(i)
                    why = (f"{self.describe(i, rec)}, while process {self.me} waited for it "
                           f"in {self.what}")
                    if i == 0:
                        # Process 0 goes once released, and JAX
                        # terminates the others then: this one goes first.
                        self.say_and_leave(why)
                    try:
                        self.client.key_value_set(f"{PREFIX}release/{i}", json.dumps(
                            {"by": self.me, "what": self.what, "calls": self.calls}))
                    except Exception:
                        pass
            elif i == 0 and self.me != 0 and not self.reported:
                # JAX terminates every process once the coordinator
                # is gone: say why first.
                self.say_and_leave(self.describe(0, rec))

    def say_and_leave(self, why: str) -> None:
        """Process 0 is going (`why`): this process reports it, and exits
        (status 1) before JAX terminates it."""
        if self.me == 0 or self.reported:
            return
        print(f"hlatc.jax: process {self.me}: {why}; process {self.me} stops too (JAX's "
              "distributed runtime does not go on without process 0, its coordinator)",
              file=sys.stderr, flush=True)
        # Process 0 reads this as its release (at_exit).
        self.report("lost_peer", why, 1, peer=0, what=self.what)
        self.leave(1)

    def running_peers(self) -> List[int]:
        """The peers that have not said they end and may still run (a peer
        of this host whose process is gone does not)."""
        return [i for i, p in sorted(self.peers.items()) if i not in self.exits
                and not (p.get("host") == self.host and not _alive(int(p["pid"])))]

    def peers_in_exit_wait(self) -> List[int]:
        """The peers that ended normally and may still wait, in their exit
        hook, to learn why the job stops: JAX terminates them (SIGABRT,
        their end unsaid) if process 0's coordination service goes first.
        Seen under load when process 0 raised before a collective a peer
        had already ended without."""
        return [i for i, rec in sorted(self.exits.items())
                if rec["kind"] == "exit" and i not in self.left
                and not (self.peers[i].get("host") == self.host
                         and not _alive(int(self.peers[i]["pid"])))]

    def describe(self, i: int, rec: Optional[Dict[str, Any]]) -> str:
        """What became of process `i`, in words."""
        who = f"process {i} of {self.count}"
        if rec is None:
            pid = self.peers.get(i, {}).get("pid")
            return f"{who} (pid {pid}) is gone (killed, or it crashed)"
        if rec["kind"] == "exit":
            return (f"{who} ended (its script returned or called sys.exit) after "
                    f"{rec['calls']} collective(s)")
        if rec["kind"] == "left":
            return f"{who} ended early: {rec['message']}"
        if rec["kind"] == "lost_peer":
            return f"{who} stopped: {rec['message']}"
        return f"{who} failed: {rec['message']}"

    def gone(self, calls: int) -> List[int]:
        """The peers that will not join collective number `calls`."""
        out = []
        for i, rec in sorted(self.exits.items()):
            if rec["kind"] != "exit" or rec["calls"] < calls:
                out.append(i)
        return out

    def lost_error(self, who: List[int], cause: str = "") -> PeerLostError:
        first = who[0]
        rec = self.exits.get(first)
        reason = self.describe(first, rec)
        where = f" while process {self.me} waited for it in {self.what}" if self.what else ""
        more = f" (also lost: {', '.join(map(str, who[1:]))})" if who[1:] else ""
        tail = f"; {cause}" if cause else ""
        return PeerLostError(f"{reason}{where}{more}{tail}", first,
                             rec["message"] if rec else "gone")

    def find_lost(self, error: BaseException) -> Optional[PeerLostError]:
        """The peer whose loss made a collective fail with `error`, as a
        PeerLostError; None if `error` is not a lost peer's."""
        text = str(error)
        collective = any(s in text for s in ("Gloo", "gloo", "Connection closed",
                                             "Connection reset", "connection reset",
                                             "Socket closed"))
        deadline = time.monotonic() + (1.0 if collective else 0.0)
        while True:
            self.refresh()
            who = self.gone(self.calls)
            if not who:
                who = [i for i, p in sorted(self.peers.items())
                       if p.get("host") == self.host and not _alive(int(p["pid"]))]
            if who or time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS / 2)
        first_line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
        if who:
            return self.lost_error(who, f"the collective said: {first_line}")
        if collective:
            where = f" while process {self.me} waited in {self.what}" if self.what else ""
            return PeerLostError(f"another process of {self.count} stopped{where} (which one "
                                 f"cannot be told from here): {first_line}", None, first_line)
        return None

    # Hooks.

    def excepthook(self, tp: Any, value: Any, tb: Any) -> None:
        self.previous_hook(tp, value, tb)
        if isinstance(value, PeerLostError):
            self.report("lost_peer", last_line(value), 1, peer=value.process)
        else:
            self.report("error", last_line(value), 1)
        self.leave(1)

    def start_watching(self) -> None:
        self.watcher = threading.Thread(target=self.watch, name="hlatc-peers", daemon=True)
        self.watcher.start()

    def stop_watching(self) -> None:
        """Ends the watcher thread and waits for it (at most the longest a
        look at the others takes, a coordination-service call and a
        second's pause): nothing of this module calls into JAX once the
        interpreter finalizes."""
        self.stopping.set()
        watcher = self.watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=10)

    def at_exit(self) -> None:
        """A normal end (see `end_normally`); the watcher is stopped before
        JAX's shutdown and the interpreter's finalization run."""
        try:
            self.end_normally()
        finally:
            self.stop_watching()

    def end_normally(self) -> None:
        """Says this process ended, then waits for the others' (JAX's
        shutdown then runs as usual), unless a peer needs this process in
        a collective or failed."""
        if self.reported:
            return
        self.report("exit", "ended", 0)
        if self.lost:
            self.leave(0)  # this process saw a peer go: JAX's shutdown would abort
        deadline = time.monotonic() + self.wait_seconds
        while time.monotonic() < deadline:
            self.refresh()
            if self.released is None:
                # A peer that stopped because it waited for this one.
                self.released = next(({"by": i, "what": r.get("what")}
                                      for i, r in sorted(self.exits.items())
                                      if r["kind"] == "lost_peer" and r.get("peer") == self.me),
                                     None)
            if self.released is not None:
                by, what = self.released.get("by"), self.released.get("what")
                message = (f"process {self.me} ended (its script returned or called sys.exit) "
                           f"after {self.calls} collective(s), while process {by} waited for it "
                           f"in {what}")
                print(f"hlatc.jax: {message}; exiting with status 1", file=sys.stderr,
                      flush=True)
                write_status({"process": self.me, "pid": os.getpid(), "kind": "left",
                              "message": message, "code": 1, "calls": self.calls,
                              "what": None, "peer": by, "time": time.time()})
                self.leave(1)
            running = self.running_peers()
            if not running:
                if len(self.exits) == self.count - 1 and all(
                        r["kind"] == "exit" for r in self.exits.values()):
                    return
                self.leave(0)  # a peer failed or is gone: JAX's shutdown would abort
            time.sleep(POLL_SECONDS / 2)


_job: Optional[_Job] = None


def start(client: Any, me: int, count: int, wait_seconds: float, join_timeout: float) -> None:
    """Watches the job `jax.distributed.initialize` joined (call it right
    after: its exit hook must run before JAX's)."""
    global _job
    if count < 2:
        return
    job = _Job(client, me, count, wait_seconds, join_timeout)
    sys.excepthook = job.excepthook
    atexit.register(job.at_exit)
    job.start_watching()
    _job = job


@contextlib.contextmanager
def collective(what: str) -> Iterator[None]:
    """Runs a collective of every process (one hlatc call: a step, a
    barrier, a gather): PeerLostError if a peer is gone before or during
    it. Nested calls count as their outermost."""
    job = _job
    if job is None:
        yield
        return
    if job.depth == 0:
        job.calls += 1
        job.what = what
        who = job.gone(job.calls)
        if who:
            job.lost = True
            raise job.lost_error(who)
    job.depth += 1
    try:
        yield
    except PeerLostError:
        raise
    except Exception as e:
        lost = job.find_lost(e)
        if lost is None:
            raise
        job.lost = True
        raise lost from e
    finally:
        job.depth -= 1
        if job.depth == 0:
            job.what = None
