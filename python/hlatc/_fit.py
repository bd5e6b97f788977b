"""`Trainer.fit`: training from a loader with checkpoints, resumed after a
crash from the newest complete one.

A checkpoint is the train crate's (`CheckpointDir`, what `hlatc train
--checkpoint-dir` writes): `step-NNNNNNNN/` holding `state.safetensors` (the
whole training state), `loader.json` (each DP replica's loader position)
and `metrics.csv` (every step so far), marked `COMPLETE` with their sha256s
once all are on disk. The loop is the library's (`hlatc::fit`, what `hlatc
train` runs: `_hlatc.fit_steps`), and so is the directory (`hlatc::fit::
checkpoints`, `_hlatc.RunCheckpoints`: locked for the run, its newest
complete checkpoint checked against the run's identity); what is left here
is handing them this trainer and loader."""

from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _hlatc, _identity
from ._args import check_int

PathLike = Union[str, "os.PathLike[str]"]
Metrics = List[Dict[str, float]]
OnStep = Callable[[Dict[str, float]], Optional[bool]]


class CheckpointWarning(UserWarning):
    """A checkpoint passed over when a run resumes: one a crash left torn (no
    `COMPLETE` marker) or whose files no longer match their sha256s, or one
    without a loader position."""


def check_fit_args(steps: int, checkpoint_every: int, keep: int) -> None:
    check_int("steps", steps, 0, "a step number to train to, an int 0 or more")
    check_int("checkpoint_every", checkpoint_every, 1,
              "steps between checkpoints, an int 1 or more")
    check_int("keep", keep, 1, "checkpoints kept, an int 1 or more (the newest at least)")


def warn_skipped(path: str, why: str) -> None:
    warnings.warn(f"skipped checkpoint {path}: {why}", CheckpointWarning, stacklevel=4)


def metrics_from(files: Mapping[str, bytes], where: str) -> Metrics:
    """The metrics a checkpoint holds (none if it has no metrics file)."""
    text = files.get(_hlatc.METRICS_FILE)
    if text is None:
        return []
    what = os.path.join(where, _hlatc.METRICS_FILE)
    return [dict(r) for r in _hlatc.read_metrics_csv(text.decode("utf-8"), what)]


def metrics_bytes(metrics: Metrics) -> bytes:
    return _hlatc.metrics_csv(metrics).encode("utf-8")


def seek_loader(loader: Any, position: Optional[bytes], where: str) -> None:
    if position is None:
        warnings.warn(
            f"checkpoint {where} holds no loader position (a run on other data): the loader "
            "goes on from where it is, not from where that run stopped",
            CheckpointWarning,
            stacklevel=4,
        )
        return
    loader.seek(position)


def run_steps(
    trainer: Any,
    loader: Any,
    steps: int,
    metrics: Metrics,
    save: Optional[Callable[[int, Metrics], None]],
    checkpoint_every: int,
    on_step: Optional[OnStep],
    step_kw: Optional[Mapping[str, Any]] = None,
) -> Metrics:
    """The library's training loop (`hlatc::fit`, `hlatc train`'s) over
    `trainer` and `loader`: `trainer.step(**batch, **step_kw)` until
    `steps` are done, the loader ends (with a warning) or `on_step` returns
    False; `save(done, metrics)` every `checkpoint_every` steps and after
    the last. A loss that is not finite raises `RunError` before anything
    is saved."""
    ended = _hlatc.fit_steps(trainer, loader, steps, metrics, save, checkpoint_every, on_step,
                             None if step_kw is None else dict(step_kw))
    if ended is not None:
        warnings.warn(f"the loader's last pass ended at step {ended} of {steps}", stacklevel=3)
    return metrics


def every(steps: int, checkpoint_every: Optional[int]) -> int:
    """`hlatc train --checkpoint-every`'s default: a tenth of the run."""
    return max(steps // 10, 1) if checkpoint_every is None else checkpoint_every


def fit(
    trainer: Any,
    loader: Any,
    steps: int,
    checkpoint_dir: Optional[PathLike],
    checkpoint_every: Optional[int],
    keep: int,
    on_step: Optional[OnStep],
    allow_changes: Optional[Sequence[str]] = None,
) -> Metrics:
    """`hlatc.Trainer.fit` (see its docstring)."""
    checkpoint_every = every(steps, checkpoint_every)
    check_fit_args(steps, checkpoint_every, keep)
    _identity.check_allow(allow_changes)
    from .data import Loader

    if not isinstance(loader, Loader):
        # It was an AttributeError from deep inside the first step.
        raise _hlatc.argument_error("loader", loader, "an hlatc.data.Loader", of_type=True)
    if checkpoint_dir is None:
        return run_steps(trainer, loader, steps, [], None, checkpoint_every, on_step)
    current = _identity.of_step(trainer._step, loader, trainer._start)
    # Named fields checked on a fresh directory too, as the CLI checks them.
    allowed = _identity.check_allow(allow_changes, current)
    # `hlatc train --checkpoint-dir`'s directory, opened by the same code:
    # locked for this run, its newest complete checkpoint checked against
    # the run's identity.
    ckpt = _hlatc.RunCheckpoints(os.fspath(checkpoint_dir), keep, current, allowed)
    try:
        for kind, message in ckpt.notices:
            category = _identity.IdentityWarning if kind == "identity" else CheckpointWarning
            warnings.warn(message, category, stacklevel=4)
        metrics: Metrics = []
        restored = ckpt.take_restored()
        if restored is not None:
            _, where, state, position, metrics = restored
            trainer._native.resume_safetensors(state, where)
            seek_loader(loader, position, os.path.dirname(where))

        def save(done: int, metrics: Metrics) -> None:
            ckpt.save(done, trainer._native.state_safetensors(),
                      loader.position().encode("utf-8"), metrics)

        return run_steps(trainer, loader, steps, metrics, save, checkpoint_every, on_step)
    finally:
        # The lock goes with the run, also when it raised (a next `fit` in
        # this process resumes).
        ckpt.close()
