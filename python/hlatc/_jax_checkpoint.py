"""`hlatc.jax.Trainer`'s per-rank checkpoints: the protocol across processes.

Every file is named, written, read and checked by the Rust core (the train
crate's `checkpoint::sharded`, through `_hlatc.sharded_*`): `step-NNNNNNNN`
directories, `hlatc shard`'s rank files, one loader file a replica, the
`COMPLETE` marker process 0 writes last with each file's sha256, synced
writes, pruning. What is left here is JAX's part: the arrays from the
devices to the files and back, and the collectives that order the
processes (a barrier before anyone writes, a gather of the digests to
process 0, a barrier once the marker is written; on resume, agreeing on
the newest checkpoint every process finds complete)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from . import _fit, _hlatc, _identity
from ._arrays import to_raw
from ._jax_collectives import _all_processes, _allgather, _barrier, _max_over_processes

if TYPE_CHECKING:
    from .data import Loader
    from .jax import Trainer

# A checkpoint directory is complete only once this file is in it: written
# last, by process 0, after every process has renamed its rank files.
COMPLETE: str = _hlatc.COMPLETE
CHECKPOINT_FORMAT: str = _hlatc.CHECKPOINT_FORMAT


def save(trainer: "Trainer", d: str, shared: Optional[Mapping[str, bytes]] = None,
         replica_files: Optional[Mapping[int, bytes]] = None,
         identity: Optional[Dict[str, Any]] = None) -> None:
    """`Trainer.save`, with the files `fit` adds under the same marker:
    `shared`, written alike by every process (the metrics), and
    `replica_files`, this process's replicas' (their loader positions,
    `loader_file`)."""
    jax = trainer._jax
    fn = trainer._fn
    world = len(fn.devices)
    me = jax.process_index()
    _hlatc.sharded_prepare_save(d, world, me == 0)
    # No process overwrites a rank file while an old marker vouches for it.
    _barrier(f"hlatc-save-start:{d}")
    digests = []
    for r in fn.local_ranks:
        tensors = [(n, to_raw(n, np.asarray(trainer._state[r][n]))) for n in trainer._state_names]
        digest = _hlatc.sharded_write_rank(d, r, tensors)
        digests.append(np.frombuffer(bytes.fromhex(digest), dtype=np.uint8))
    extra = {name: _hlatc.sharded_write_file(d, name, data) for name, data in (shared or {}).items()}
    # Each replica's file, with its digest, from whichever process owns
    # it (a replica whose TP ranks span processes: each writes the same).
    dp = trainer._layout["replicas"]
    owned = np.zeros((dp, 33), dtype=np.uint8)
    for replica, data in (replica_files or {}).items():
        digest = _hlatc.sharded_write_file(d, _hlatc.loader_file(replica), data)
        owned[replica, 0] = 1
        owned[replica, 1:] = np.frombuffer(bytes.fromhex(digest), dtype=np.uint8)
    # Each process's digests reach process 0 (its files need not be on
    # process 0's disk); the gather also waits for every process's files.
    digests_of = np.stack(digests)
    ranks = np.array(fn.local_ranks, dtype=np.int32)
    if jax.process_count() > 1:
        digests_of = _allgather(digests_of, "Trainer.save").reshape(-1, 32)
        ranks = _allgather(ranks, "Trainer.save").reshape(-1)
        if replica_files is not None:
            owned = _allgather(owned, "Trainer.save").reshape(-1, dp, 33)
    owned = owned.reshape(-1, dp, 33)
    if me == 0:
        files = {_hlatc.rank_file(int(r)): bytes(h).hex() for r, h in zip(ranks, digests_of)}
        for replica in range(dp):
            held = [row[replica] for row in owned if row[replica, 0]]
            if held:
                files[_hlatc.loader_file(replica)] = bytes(held[0][1:]).hex()
        files.update(extra)
        recorded = identity if identity is not None else trainer._identity(None)
        _hlatc.sharded_write_marker(d, trainer.steps_done, world, json.dumps(trainer._step.config),
                                    json.dumps(recorded), files)
    # Nobody goes on (to load it, say) before the checkpoint is complete.
    _barrier(f"hlatc-save-done:{d}")


def load(trainer: "Trainer", d: str, allow_changes: Optional[Sequence[str]]) -> None:
    """`Trainer.load`: the checkpoint's files checked, its identity, then
    this process's ranks' state taken."""
    fn = trainer._fn
    _identity.check_allow(allow_changes)
    done, identity, _ = _hlatc.sharded_open(d, len(fn.devices), fn.local_ranks)
    trainer._check_identity(d, done, identity, None, allow_changes)
    trainer._take_shares(d)


def resume_newest(trainer: "Trainer", root: str, loader: "Loader",
                  allow_changes: Optional[Sequence[str]] = None) -> List[Dict[str, float]]:
    """Resumes from the newest checkpoint in `root` every process finds
    complete; its metrics (none without one)."""
    fn = trainer._fn
    world = len(fn.devices)
    rejected = set()
    while True:
        mine = [s for s in _hlatc.sharded_steps(root) if s not in rejected]
        newest = _max_over_processes(max(mine, default=-1))
        if newest < 0:
            return []
        d = os.path.join(root, _hlatc.step_dir_name(newest))
        problem = _hlatc.sharded_problem(d, world, fn.local_ranks, loader.owned_replicas)
        if _all_processes(problem is None):
            break
        _fit.warn_skipped(d, problem or "it is not complete on another process")
        rejected.add(newest)
    done, identity, recorded = _hlatc.sharded_read_marker(d, world)
    trainer._check_identity(d, done, identity, loader, allow_changes)
    trainer._take_shares(d)
    names = [_hlatc.loader_file(r) for r in loader.owned_replicas]
    if all(n in recorded for n in names):
        positions = []
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                positions.extend(json.loads(f.read()))
        loader.seek(json.dumps(positions))
    else:
        _fit.seek_loader(loader, {}, d)  # warns: no position to go on from
    files = {}
    if _hlatc.METRICS_FILE in recorded:
        with open(os.path.join(d, _hlatc.METRICS_FILE), "rb") as f:
            files[_hlatc.METRICS_FILE] = f.read()
    return _fit.metrics_from(files, d)


def prune(trainer: "Trainer", root: str, saved: int, keep: int) -> None:
    """After the save of step `saved`: the checkpoints before it past the
    newest `keep` complete ones removed, and (on process 0, which writes
    every marker, so sees one wherever there is one) the incomplete ones
    before it."""
    _hlatc.sharded_prune(root, saved, keep, trainer._jax.process_index() == 0)
