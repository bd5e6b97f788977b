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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import _fit, _hlatc, _identity
from ._jax_collectives import all_processes, allgather, barrier, max_over_processes

if TYPE_CHECKING:
    from .data import Loader

# A checkpoint directory is complete only once this file is in it: written
# last, by process 0, after every process has renamed its rank files.
COMPLETE: str = _hlatc.COMPLETE
CHECKPOINT_FORMAT: str = _hlatc.CHECKPOINT_FORMAT


@dataclass(frozen=True)
class Shards:
    """What the protocol needs of an `hlatc.jax.Trainer`, handed over by it
    (`Trainer._shards()`): its ranks' state out and in, and its run's
    identity, so nothing here reaches into the trainer."""

    #: The `jax` module the trainer runs on.
    jax: Any
    #: Ranks in the step's world.
    world: int
    #: The ranks this process holds.
    local_ranks: Sequence[int]
    #: Data-parallel replicas.
    replicas: int
    steps_done: int
    #: The step's config, as its manifest records it.
    config: Dict[str, Any]
    #: A rank's state as raw tensors, in the state's order.
    rank_state: Callable[[int], List[Tuple[str, Any]]]
    #: The run's identity, with the data's fields from a loader.
    identity: Callable[[Optional["Loader"]], _hlatc.RunIdentity]
    #: A checkpoint's identity checked against the run's: (dir, steps done,
    #: its marker's identity, loader, allow_changes, whether what the
    #: weights started from is compared) -> the identity to record.
    check_identity: Callable[
        [str, int, Optional[_hlatc.RunIdentity], Optional["Loader"], Optional[Sequence[str]],
         bool],
        _hlatc.RunIdentity]
    #: This process's ranks' state taken from a checkpoint's rank files.
    take_shares: Callable[[str], None]


def save(trainer: Shards, d: str, shared: Optional[Mapping[str, bytes]] = None,
         replica_files: Optional[Mapping[int, bytes]] = None,
         identity: Optional[_hlatc.RunIdentity] = None) -> None:
    """`Trainer.save`, with the files `fit` adds under the same marker:
    `shared`, written alike by every process (the metrics), and
    `replica_files`, this process's replicas' (their loader positions,
    `loader_file`)."""
    jax = trainer.jax
    world = trainer.world
    me = jax.process_index()
    _hlatc.sharded_prepare_save(d, world, me == 0)
    # No process overwrites a rank file while an old marker vouches for it.
    barrier(f"hlatc-save-start:{d}")
    digests = []
    for r in trainer.local_ranks:
        digest = _hlatc.sharded_write_rank(d, r, trainer.rank_state(r))
        digests.append(np.frombuffer(bytes.fromhex(digest), dtype=np.uint8))
    extra = {name: _hlatc.sharded_write_file(d, name, data) for name, data in (shared or {}).items()}
    # Each replica's file, with its digest, from whichever process owns
    # it (a replica whose TP ranks span processes: each writes the same).
    dp = trainer.replicas
    owned = np.zeros((dp, 33), dtype=np.uint8)
    for replica, data in (replica_files or {}).items():
        digest = _hlatc.sharded_write_file(d, _hlatc.loader_file(replica), data)
        owned[replica, 0] = 1
        owned[replica, 1:] = np.frombuffer(bytes.fromhex(digest), dtype=np.uint8)
    # Each process's digests reach process 0 (its files need not be on
    # process 0's disk); the gather also waits for every process's files.
    digests_of = np.stack(digests)
    ranks = np.array(trainer.local_ranks, dtype=np.int32)
    if jax.process_count() > 1:
        digests_of = allgather(digests_of, "Trainer.save").reshape(-1, 32)
        ranks = allgather(ranks, "Trainer.save").reshape(-1)
        if replica_files is not None:
            owned = allgather(owned, "Trainer.save").reshape(-1, dp, 33)
    owned = owned.reshape(-1, dp, 33)
    if me == 0:
        files = {_hlatc.rank_file(int(r)): bytes(h).hex() for r, h in zip(ranks, digests_of)}
        for replica in range(dp):
            held = [row[replica] for row in owned if row[replica, 0]]
            if held:
                files[_hlatc.loader_file(replica)] = bytes(held[0][1:]).hex()
        files.update(extra)
        recorded = identity if identity is not None else trainer.identity(None)
        _hlatc.sharded_write_marker(d, trainer.steps_done, world, json.dumps(trainer.config),
                                    recorded, files)
    # Nobody goes on (to load it, say) before the checkpoint is complete.
    barrier(f"hlatc-save-done:{d}")


def load(trainer: Shards, d: str, allow_changes: Optional[Sequence[str]]) -> None:
    """`Trainer.load`: the checkpoint's files checked, its identity, then
    this process's ranks' state taken."""
    _identity.check_allow(allow_changes)
    done, identity, _ = _hlatc.sharded_open(d, trainer.world, list(trainer.local_ranks))
    # Loaded by hand: its weights replace the trainer's, so what they
    # started from is the checkpoint's.
    trainer.check_identity(d, done, identity, None, allow_changes, False)
    trainer.take_shares(d)


def resume_newest(trainer: Shards, root: str, loader: "Loader",
                  allow_changes: Optional[Sequence[str]] = None) -> List[Dict[str, float]]:
    """Resumes from the newest checkpoint in `root` every process finds
    complete; its metrics (none without one)."""
    world = trainer.world
    rejected = set()
    while True:
        mine = [s for s in _hlatc.sharded_steps(root) if s not in rejected]
        newest = max_over_processes(max(mine, default=-1))
        if newest < 0:
            return []
        d = os.path.join(root, _hlatc.step_dir_name(newest))
        problem = _hlatc.sharded_problem(d, world, list(trainer.local_ranks),
                                         loader.owned_replicas)
        if all_processes(problem is None):
            break
        _fit.warn_skipped(d, problem or "it is not complete on another process")
        rejected.add(newest)
    done, identity, recorded = _hlatc.sharded_read_marker(d, world)
    trainer.check_identity(d, done, identity, loader, allow_changes, True)
    trainer.take_shares(d)
    names = [_hlatc.loader_file(r) for r in loader.owned_replicas]
    if all(n in recorded for n in names):
        positions = []
        for n in names:
            with open(os.path.join(d, n), "rb") as f:
                positions.extend(json.loads(f.read()))
        loader.seek(json.dumps(positions))
    else:
        _fit.seek_loader(loader, None, d)  # warns: no position to go on from
    files = {}
    if _hlatc.METRICS_FILE in recorded:
        with open(os.path.join(d, _hlatc.METRICS_FILE), "rb") as f:
            files[_hlatc.METRICS_FILE] = f.read()
    return _fit.metrics_from(files, d)


def prune(trainer: Shards, root: str, saved: int, keep: int) -> None:
    """After the save of step `saved`: the checkpoints before it past the
    newest `keep` complete ones removed, and (on process 0, which writes
    every marker, so sees one wherever there is one) the incomplete ones
    before it."""
    _hlatc.sharded_prune(root, saved, keep, trainer.jax.process_index() == 0)
