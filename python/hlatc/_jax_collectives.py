"""The collectives `hlatc.jax` runs across processes outside a step: a
barrier, an all-gather of host arrays, and the two agreements a resume
needs. Each is a no-op with one process, and each runs under
`_peers.collective`, so that a peer lost while it waits is named."""

from __future__ import annotations

import numpy as np

from . import _peers


def barrier(name: str) -> None:
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        with _peers.collective(f"a barrier ({name})"):
            multihost_utils.sync_global_devices(name)


def allgather(value: np.ndarray, what: str) -> np.ndarray:
    """`value` of every process, stacked (one all-gather)."""
    from jax.experimental import multihost_utils

    with _peers.collective(what):
        return np.asarray(multihost_utils.process_allgather(value))


def max_over_processes(value: int) -> int:
    import jax

    if jax.process_count() == 1:
        return value
    return int(np.max(allgather(np.array([value], dtype=np.int64), "a resume")))


def all_processes(ok: bool) -> bool:
    import jax

    if jax.process_count() == 1:
        return ok
    return bool(np.all(allgather(np.array([ok], dtype=np.int32), "a resume")))
