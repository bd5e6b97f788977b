"""The public API as a user's typed code uses it: `mypy --strict` checks
this file against the installed package (scripts/test.sh), so every
signature here is what IDEs and mypy see. It is type-checked, not run by
the tests (it would train); `python typed_usage.py DIR` runs it.

The lines marked `type: ignore[...]` are the mistakes the types catch:
with `warn_unused_ignores` (part of --strict), each must still be an
error, so a Literal that stopped being checked fails the check."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import hlatc
import hlatc.data
import hlatc.jax


def compile_tiny(packed: bool) -> hlatc.Step:
    precision: hlatc.Precision = "fp32"
    target: hlatc.Target = "cpu"
    return hlatc.compile_step(
        model="tiny",
        target=target,
        precision=precision,
        seq_len=16,
        batch_size=4,
        packed=packed,
        remat="full-layer",
        rounding="rne",
        passes="cse,dce",
        disable_pass="cse",
        device_memory="16GiB",
        lr_max=1e-3,
        total_steps=100,
    )


def step_by_step(step: hlatc.Step) -> float:
    state: Dict[str, hlatc.Array] = step.init_state(seed=0)
    batch = step.example_batch()
    out = step.run({**state, **batch})
    loss: float = float(out["loss"])
    info: hlatc.TensorInfo
    for info in step.inputs:
        shape: List[int] = info.shape
        assert len(shape) == np.asarray(state.get(info.name, batch.get(info.name))).ndim
    spmd: hlatc.Spmd = step.spmd
    source: hlatc.RankSource = step.rank_source
    print(spmd, source, step.world_size, step.summary["instructions"])
    rows = step.rank_batch(batch["tokens"], batch["targets"], rank=0)
    assert set(rows) <= set(batch)
    micro: Optional[hlatc.Step] = step.micro_step
    assert micro is None
    return loss


def train(step: hlatc.Step, corpus: Path, tokenizer: Path, ckpt: Path) -> List[Dict[str, float]]:
    trainer = hlatc.Trainer(step, seed=0)
    tokens = np.zeros((4, 16), dtype=np.int32)
    stats: Dict[str, float] = trainer.step(tokens, tokens)
    print(stats["loss"], trainer.steps_done)
    whole = trainer.state()
    hlatc.Trainer(step).resume(whole)

    loader = hlatc.data.Loader.for_step(step, corpus, tokenizer=tokenizer, seed=1,
                                        format="jsonl", bos=True, eos="</s>")
    stats_now: hlatc.data.LoaderStats = loader.stats
    print(stats_now.efficiency, loader.position())

    def on_step(row: Dict[str, float]) -> Optional[bool]:
        return row["step"] < 50

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", hlatc.CheckpointWarning)
        metrics = trainer.fit(loader, 100, checkpoint_dir=ckpt, checkpoint_every=10, keep=2,
                              on_step=on_step)
    hlatc.plot_metrics({"tiny": metrics}, ckpt / "loss.png", series="loss", log_y=True)
    return metrics


def errors(tmp: Path) -> None:
    try:
        hlatc.load_module(tmp / "missing.hlo")
    except OSError as e:  # a FileError
        assert isinstance(e, hlatc.FileError) and e.path is not None
    try:
        hlatc.compile_step(model="tiny", precision="fp8")  # type: ignore[arg-type]
    except hlatc.ConfigError as e:
        key: Optional[str] = e.key
        print(key, isinstance(e, ValueError))
    try:
        hlatc.compile_step(model="gpt-5")  # type: ignore[arg-type]
    except ValueError:
        pass
    try:
        hlatc.data.Loader(tmp / "*.jsonl", seq_len=8, batch_size=2, vocab_size=64,
                          packing="documents")  # type: ignore[arg-type]
    except hlatc.DataError as e:
        line: Optional[int] = e.line
        print(line)
    except hlatc.UsageError as e:
        category: Optional[str] = e.category
        print(category, e.argument)
    except hlatc.Error:
        raise
    error_types: List[type[hlatc.Error]] = [hlatc.RunError, hlatc.CheckpointError,
                                            hlatc.InternalError, hlatc.BatchError]
    assert issubclass(error_types[0], RuntimeError)


def on_jax(step: hlatc.Step, corpus: Path) -> None:
    fn = hlatc.jax.load(step)
    state = step.init_state()
    out = fn({**state, **step.example_batch()})
    print(out["loss"])
    by_rank = fn.run({0: {**state, **step.example_batch()}})
    print(by_rank[0]["loss"])
    trainer = hlatc.jax.Trainer(step, seed=0)
    loader = trainer.loader(corpus, tokenizer=None, format="lines")
    metrics: List[Dict[str, float]] = trainer.fit(loader, 3)
    print(metrics)


def pipelined() -> None:
    step = hlatc.compile_step(model="tiny", target="cpu", seq_len=16, batch_size=4, tp=2, pp=2,
                              grad_accum=2, precision="fp32")
    schedule: Optional[hlatc.Schedule] = step.schedule
    assert schedule is not None and step.pp == 2
    phase: hlatc.Phase = schedule.phase(0)
    wrong: hlatc.Phase = "cooldown"  # type: ignore[assignment]
    print(phase, wrong, schedule.ticks, schedule.bubble, schedule.forward_micro_batch(0, 0))
    programs: List[Optional[hlatc.Step]] = [step.warm_up, step.steady, step.cool_down,
                                             step.apply_step]
    print([p.summary["instructions"] for p in programs if p is not None])
    tokens = np.zeros((4, 16), dtype=np.int32)
    ticks: List[Dict[str, hlatc.Array]] = step.tick_batches(tokens, tokens, rank=3)
    plan: Optional[hlatc.TickPlan] = step.tick_plan
    assert plan is not None
    route: hlatc.TickRouting = plan.routing(plan.phase(0))
    buffers: List[hlatc.TensorInfo] = plan.buffers
    print(plan.ticks, route.from_state, route.to_buffers, route.loss, [b.shape for b in buffers])
    rank: Dict[str, hlatc.Array] = step.init_state(seed=0, rank=3)
    print(len(ticks), step.gather_state([step.init_state(rank=r) for r in range(4)]).keys(),
          rank.keys(), step.config["parallel"])
    trainer = hlatc.jax.Trainer(step, seed=0)
    print(trainer.step(tokens, tokens)["loss"], hlatc.Trainer(step).step(tokens, tokens))


def identity_and_bundles(step: hlatc.Step, corpus: Path, tokenizer: Path, root: Path) -> None:
    loader = hlatc.data.Loader.for_step(step, corpus, tokenizer=tokenizer)
    try:
        hlatc.Trainer(step).fit(loader, 3, checkpoint_dir=root / "ckpt",
                                allow_changes=["precision"])
    except hlatc.IdentityError as e:
        fields: Dict[str, Tuple[Any, Any]] = e.fields
        print(sorted(fields), isinstance(e, hlatc.UsageError))
    trainer = hlatc.jax.Trainer(step)
    trainer.save(root / "jax")
    trainer.load(root / "jax", allow_changes=("model",))
    try:
        trainer.step(np.zeros((4, 16), dtype=np.int32), np.zeros((4, 16), dtype=np.int32))
    except hlatc.jax.PeerLostError as e:
        lost: Optional[int] = e.process
        print(lost, e.reason)
    step.write_bundle(str(root / "bundle"))
    bundle = hlatc.Bundle(root / "bundle")
    programs: List[str] = bundle.programs
    tensor: hlatc.BundleTensor
    for tensor in bundle:
        shape: Tuple[int, ...] = tensor.shape
        layer: Optional[int] = tensor.layer
        print(tensor.program, tensor.kind, tensor.index, tensor.name, shape, tensor.dtype,
              tensor.role, layer)
    inputs: List[hlatc.BundleTensor] = bundle.inputs(programs[0])
    print(len(bundle), inputs[0].name, bundle.outputs()[0].role, bundle.manifest["format"])


def main(root: Path) -> None:
    step = compile_tiny(packed=True)
    print(step_by_step(step))
    train(step, root / "corpus.jsonl", root / "tokenizer.json", root / "ckpt")
    errors(root)
    on_jax(compile_tiny(packed=False), root / "corpus.txt")
    pipelined()
    identity_and_bundles(step, root / "corpus.jsonl", root / "tokenizer.json", root)


if __name__ == "__main__":
    main(Path(sys.argv[1]))


def plan_a_layout() -> Optional[str]:
    instance: hlatc.Instance = "trn1n.32xlarge"
    p: hlatc.Plan = hlatc.plan(model="hlat-70b", nodes=32, instance=instance, top=3)
    hlatc.plan(model="hlat-70b", instance="p5.48xlarge")  # type: ignore[arg-type]
    best: Optional[hlatc.Candidate] = p.best()
    rates: List[float] = [c.seq_per_s for c in p.candidates if c.fits]
    hlatc.append_measured_run(
        "runs.csv", model="hlat-70b", instance=instance, nodes=32, tp=32, pp=4, dp=8,
        seq_per_s=max(rates), global_batch=1024, seq_len=4096,
    )
    return best.command if best is not None else None
