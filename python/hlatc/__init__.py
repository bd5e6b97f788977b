"""hlatc: Llama-family training steps compiled ahead of time to XLA HLO.

A Rust core (the `hlatc` compiler) behind a thin PyO3 layer::

    import hlatc
    step = hlatc.compile_step(model="tiny", target="cpu")
    step.write_bundle("build/tiny")            # what `hlatc compile` writes
    state, batch = step.init_state(), step.example_batch()
    out = step.run({**state, **batch})         # one step on XLA CPU
    print(out["loss"])

    trainer = hlatc.Trainer(step)              # carries the state
    for i in range(100):
        stats = trainer.step(tokens, targets)

    loader = hlatc.data.Loader.for_step(step, "corpus/*.jsonl", tokenizer="tokenizer.json")
    metrics = trainer.fit(loader, 1000, checkpoint_dir="ckpt")   # resumes after a crash

Tensors are NumPy arrays (bf16 as `ml_dtypes.bfloat16`). Every error is an
`hlatc.Error` and also the builtin it means (`ValueError`, `OSError`,
`RuntimeError`); its subclasses carry where the problem is
(`HloSyntaxError` has `line` and `column`, `ConfigError` the `key`,
`BatchError` the `row` and `column`, `DataError` the corpus file and line).
`hlatc.jax.load(step)` runs the step with JAX. Options of a fixed set of
values are `Literal` types (`hlatc.Precision`, `hlatc.Target`, ...), so
IDEs and mypy check them.
"""

from __future__ import annotations

import os  # noqa: F401  (PathLike's "os.PathLike[str]", for typing.get_type_hints)
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _args, _hlatc, _identity, data
from ._arrays import dict_to_numpy, dict_to_raw, list_of_dicts_to_raw, to_raw
from ._fit import CheckpointWarning, Metrics, OnStep
from ._bundle import Bundle, BundleTensor
from ._identity import IdentityError, IdentityWarning
from ._hlatc import (
    BatchError,
    CalibrationReport,
    Candidate,
    CapacityAdvice,
    CheckpointError,
    ConfigError,
    DataError,
    Error,
    FileError,
    HloSyntaxError,
    InternalError,
    Module,
    NeuronRefusedError,
    PassError,
    Plan,
    PredictedRun,
    Prediction,
    ProtoError,
    RunError,
    Schedule,
    TensorInfo,
    TickPlan,
    TickRouting,
    UsageError,
    UsageTypeError,
    VerifyError,
    append_measured_run,
    load_module,
    optimize,
    passes,
    plan,
)
from ._types import (
    # <option types: generated from the option table>
    Model,
    Precision,
    Rounding,
    Target,
    Chip,
    Remat,
    EpExchange,
    CpBalance,
    CpExchange,
    Reshard,
    Spmd,
    RankSource,
    ReplicaGroups,
    PpSend,
    # </option types>
    Array,
    ArrayLike,
    Format,
    Instance,
    NeuronFinding,
    Packing,
    PathLike,
    Phase,
    Program,
    RawDtype,
    Series,
    Tensors,
)

__version__ = _hlatc.__version__

__all__ = [
    "compile_step",
    "Step",
    "Trainer",
    "TensorInfo",
    "Schedule",
    "TickPlan",
    "TickRouting",
    "Module",
    "load_module",
    "optimize",
    "passes",
    "plot_metrics",
    "plan",
    "append_measured_run",
    "Plan",
    "Candidate",
    "CapacityAdvice",
    "CalibrationReport",
    "Prediction",
    "PredictedRun",
    "Instance",
    "Error",
    "HloSyntaxError",
    "ConfigError",
    "BatchError",
    "FileError",
    "ProtoError",
    "VerifyError",
    "PassError",
    "NeuronRefusedError",
    "RunError",
    "UsageError",
    "UsageTypeError",
    "DataError",
    "CheckpointError",
    "InternalError",
    "CheckpointWarning",
    "IdentityError",
    "IdentityWarning",
    "Bundle",
    "BundleTensor",
    "data",
    # <option type names: generated from the option table>
    "Model",
    "Precision",
    "Rounding",
    "Target",
    "Chip",
    "Remat",
    "EpExchange",
    "CpBalance",
    "CpExchange",
    "Reshard",
    "Spmd",
    "RankSource",
    "ReplicaGroups",
    "PpSend",
    # </option type names>
    "NeuronFinding",
    "Format",
    "Packing",
    "RawDtype",
    "Series",
    "Phase",
    "Program",
    "PathLike",
    "ArrayLike",
    "Array",
    "Tensors",
]


def plot_metrics(
    runs: Mapping[str, Sequence[Mapping[str, float]]],
    path: PathLike,
    series: Series = "loss",
    title: Optional[str] = None,
    log_y: bool = False,
) -> None:
    """Draws training curves into a PNG with hlatc's plotter (what `hlatc plot`
    draws): `runs` maps a label to one `Trainer.step` result per step;
    `series` is `loss`, `grad_norm`, `learning_rate` or `held_out_loss`."""
    if not isinstance(runs, Mapping) or not all(
            isinstance(v, Sequence) and all(isinstance(s, Mapping) for s in v)
            for v in runs.values()):
        raise _hlatc.argument_error("runs", runs, "a dict of a label to a list of dicts of "
                                    "metrics, one per step", of_type=True)
    _hlatc.plot_metrics({k: [dict(s) for s in v] for k, v in runs.items()}, path, series, title,
                        log_y)


class Step:
    """A compiled training step: its HLO, its inputs and outputs by role, its
    manifest, and runs on XLA CPU. Made by `compile_step`."""

    def __init__(self, native: "_hlatc.Step") -> None:
        self._native = native

    @property
    def hlo_proto(self) -> bytes:
        """The serialized HloModuleProto (the bundle's model.hlo_module.pb)."""
        return self._native.hlo_proto

    @property
    def hlo_text(self) -> str:
        """The HLO text (the bundle's model.hlo.txt)."""
        return self._native.hlo_text

    @property
    def inputs(self) -> List[TensorInfo]:
        """Every input in order: name, shape, dtype and role."""
        return self._native.inputs

    @property
    def outputs(self) -> List[TensorInfo]:
        """Every output in order: name, shape, dtype and role."""
        return self._native.outputs

    @property
    def world_size(self) -> int:
        """How many ranks run the step (tp x dp x pp)."""
        return self._native.world_size

    @property
    def spmd(self) -> Spmd:
        """The SPMD form a sharded step is written in: `replicas`
        (`replica_count=N`, `replica-id`: torch-xla, NxD and hlatc's own
        runtime) or `partitions` (`num_partitions=N`, `partition-id`, manual
        shardings: JAX)."""
        return self._native.spmd

    @property
    def rank_source(self) -> RankSource:
        """Where a sharded step's ranks read their numbers: `device`
        (`replica-id` or `partition-id`) or `input` (an `s32[1]` input named
        `rank`, fed `[r]` on rank r, as NxD's SPMDRank)."""
        return self._native.rank_source

    @property
    def manifest(self) -> Dict[str, Any]:
        """The bundle's manifest.json, as a dict."""
        return self._native.manifest

    @property
    def summary(self) -> Dict[str, Any]:
        """Sizes, passes and the time of each compile stage (ms); for
        gradient accumulation, `grad_accum` and each program's summary."""
        return self._native.summary

    @property
    def config(self) -> Dict[str, Any]:
        """The config the step was built from, as its bundle's manifest
        records it: the whole model and the optimizer step's batch, whatever
        its programs."""
        return self._native.config

    @property
    def grad_accum(self) -> int:
        """K of `compile_step(grad_accum=K)`: the micro-batches of an
        optimizer step under gradient accumulation or a pipeline; 1 for a
        step of one program."""
        return self._native.grad_accum

    @property
    def pp(self) -> int:
        """The pipeline stages its ranks form: `compile_step(pp=P)`."""
        return self._native.pp

    @property
    def schedule(self) -> Optional[Schedule]:
        """A pipeline-parallel step's schedule (`ticks`, `bubble`, the
        program of each tick, the micro-batch of each stage's slots); None
        otherwise."""
        return self._native.schedule

    @property
    def tick_plan(self) -> Optional[TickPlan]:
        """How a pipeline-parallel step's ticks run, as hlatc's trainer runs
        them: the program of each tick (`phase(tick)`), the buffers the
        ticks carry (`buffers`, zero at the first tick), and for each
        program (`routing(phase)`) the names of its inputs from the rank's
        state, buffers and tick batch, of its outputs back to the state and
        buffers, and of its loss; None otherwise."""
        return self._native.tick_plan

    @property
    def warm_up(self) -> Optional["Step"]:
        """Under pipeline parallelism, the warm-up tick program (forward
        slots only) as a Step of one stage's program; None otherwise."""
        return _step_or_none(self._native.warm_up)

    @property
    def steady(self) -> Optional["Step"]:
        """Under pipeline parallelism, the steady tick program (a forward
        and a backward slot) as a Step of one stage's program; None
        otherwise."""
        return _step_or_none(self._native.steady)

    @property
    def cool_down(self) -> Optional["Step"]:
        """Under pipeline parallelism, the cool-down tick program (backward
        slots only) as a Step of one stage's program; None otherwise."""
        return _step_or_none(self._native.cool_down)

    @property
    def micro_step(self) -> Optional["Step"]:
        """Under gradient accumulation, the micro step (forward and backward
        over one micro-batch, added into the `grad.NAME` accumulators) as a
        Step of one program; None otherwise."""
        return _step_or_none(self._native.micro_step)

    @property
    def apply_step(self) -> Optional["Step"]:
        """Under gradient accumulation or pipeline parallelism, the apply
        step (sum over ranks, clip, AdamW) as a Step of one program; None
        otherwise."""
        return _step_or_none(self._native.apply_step)

    def module(self) -> Module:
        """The step as an hlatc Module (for `optimize`, `to_text`, ...)."""
        return load_module(self.hlo_proto)

    def write_bundle(self, path: PathLike) -> None:
        """Writes the bundle `hlatc compile --out PATH` writes, whole or not at all."""
        self._native.write_bundle(path)

    def init_state(
        self, seed: int = 0, rank: int = 0, checkpoint: Optional[PathLike] = None
    ) -> Dict[str, Array]:
        """Rank `rank`'s carried state before the first step, by input name:
        parameters initialized as the model is (from `seed`), or read from
        the Hugging Face safetensors file `checkpoint` (only the slices the
        rank holds: a rank of a sharded step never reads the whole file; a
        missing tensor or one of another shape raises UsageError naming
        it), Adam moments and the step counter zero, the rounding RNG
        seeded. Of a pipeline-parallel step, the state its rank's programs
        take: its stage's layers of the whole model's initialization, under
        the stage model's names (a `checkpoint` is refused)."""
        return dict_to_numpy(self._native.init_state(seed, rank, checkpoint))

    def example_batch(self, seed: int = 0, rank: int = 0) -> Dict[str, Array]:
        """Rank `rank`'s share of a batch of hlatc's synthetic language: tokens,
        targets (and segment ids for a packed step)."""
        return dict_to_numpy(self._native.example_batch(seed, rank))

    def run(self, inputs: Tensors) -> Dict[str, Array]:
        """One step on XLA CPU from every input by name; the outputs by name
        (`loss`, `grad_norm`, `learning_rate`, then the updated state under
        the names of the inputs it updates). Token data is checked first."""
        return dict_to_numpy(self._native.run(dict_to_raw(inputs, "inputs")))

    def run_ranks(self, inputs: Sequence[Tensors]) -> List[Dict[str, Array]]:
        """`run` for a sharded step: one dict of inputs per rank."""
        outs = self._native.run_ranks(list_of_dicts_to_raw(inputs, "inputs"))
        return [dict_to_numpy(o) for o in outs]

    def rank_batch(
        self,
        tokens: ArrayLike,
        targets: ArrayLike,
        segment_ids: Optional[ArrayLike] = None,
        rank: int = 0,
    ) -> Dict[str, Array]:
        """Rank `rank`'s share of a global batch (`[batch_size, seq_len]`
        integer ids, every rank's rows): its batch inputs by name, the rows
        `Trainer` gives that rank. The batch is checked as a run checks it."""
        seg = None if segment_ids is None else to_raw("segment_ids", segment_ids)
        return dict_to_numpy(self._native.rank_batch(
            to_raw("tokens", tokens), to_raw("targets", targets), seg, rank))

    def shard_state(self, state: Tensors, rank: int) -> Dict[str, Array]:
        """Rank `rank`'s share of every state input, by name, from a whole
        state (`Trainer.state()`, `hlatc unshard`'s file): what that rank's
        program takes, as `hlatc shard` divides it (under pipeline
        parallelism, its stage's share, from the whole model's names)."""
        return dict_to_numpy(self._native.shard_state(dict_to_raw(state, "state"), rank))

    def gather_state(self, per_rank: Sequence[Tensors]) -> Dict[str, Array]:
        """The whole state, by input name, from every rank's state (one dict
        per rank, in rank order), as `hlatc unshard` joins rank files (under
        pipeline parallelism, by the whole model's names, without the
        gradient accumulators, zero between steps)."""
        return dict_to_numpy(self._native.gather_state(list_of_dicts_to_raw(per_rank, "per_rank")))

    def hugging_face_params(self, state: Tensors) -> Dict[str, Array]:
        """The parameters of a whole state as Hugging Face tensors (fused
        ones split back)."""
        return dict_to_numpy(self._native.hugging_face_params(dict_to_raw(state, "state")))

    def tick_batches(
        self, tokens: ArrayLike, targets: ArrayLike, rank: int = 0
    ) -> List[Dict[str, Array]]:
        """Under pipeline parallelism, rank `rank`'s batch inputs of every
        tick of one optimizer step on a global batch (`[batch_size,
        seq_len]` integer ids, every rank's rows), in tick order, as the
        bundle's manifest states the rules: `tick`, `token_count`, `tokens`
        (micro-batch t), `backward_tokens` (t - (2 pp - 1)) and `targets`
        (t - pp), zeros where that is no micro-batch, each the rank's DP
        replica's rows. The batch is checked as a run checks it."""
        ticks = self._native.tick_batches(to_raw("tokens", tokens), to_raw("targets", targets),
                                          rank)
        return [dict_to_numpy(t) for t in ticks]

    def __repr__(self) -> str:
        return repr(self._native)


def _step_or_none(native: Optional["_hlatc.Step"]) -> Optional[Step]:
    return None if native is None else Step(native)


def compile_step(
    *,
    # <compile options: generated from the option table>
    model: Optional[Model] = None,
    config: Optional[Union[str, "os.PathLike[str]", Mapping[str, Any]]] = None,
    batch_size: Optional[int] = None,
    seq_len: Optional[int] = None,
    packed: bool = False,
    separate_projections: bool = False,
    capacity_factor: Optional[float] = None,
    precision: Precision = "bf16-mixed",
    rounding: Optional[Rounding] = None,
    target: Target = "neuron",
    chip: Optional[Chip] = None,
    passes: Optional[Union[str, Sequence[str]]] = None,
    disable_pass: Union[str, Sequence[str]] = (),
    verify_each_pass: bool = False,
    remat: Remat = "core-attention",
    tp: int = 1,
    dp: int = 1,
    pp: int = 1,
    ep: int = 1,
    ep_exchange: EpExchange = "all-to-all",
    cp: int = 1,
    cp_balance: CpBalance = "head-tail",
    cp_exchange: CpExchange = "all-gather",
    sequence_parallel: bool = False,
    zero1: bool = False,
    fsdp: int = 1,
    reshard: Reshard = "never",
    lr_max: Optional[float] = None,
    lr_min: Optional[float] = None,
    warmup_steps: Optional[int] = None,
    total_steps: Optional[int] = None,
    beta1: Optional[float] = None,
    beta2: Optional[float] = None,
    adam_eps: Optional[float] = None,
    weight_decay: Optional[float] = None,
    clip_norm: Optional[float] = None,
    module_markers: bool = False,
    device_memory: Optional[Union[int, str]] = None,
    grad_accum: int = 1,
    spmd: Optional[Spmd] = None,
    rank_source: Optional[RankSource] = None,
    replica_groups: ReplicaGroups = "explicit",
    pp_send: Optional[PpSend] = None,
    kernels: Optional[Mapping[str, str]] = None,
    # </compile options>
) -> Step:
    """Compiles a model's training step as `hlatc compile` does. Every
    argument is a keyword.

    `model` is a preset (`hlat-7b` unless `config` is given); `config` a
    Hugging Face config.json path or its contents as a dict. Every other
    option of `hlatc compile` is a keyword with the same name (underscores
    for dashes) and default: the batch (`batch_size`, `seq_len`, `packed`),
    the model's storage (`separate_projections`), a mixture of experts'
    `capacity_factor` (dropless when None), `precision` and
    `rounding`, the `target` and, for neuron, the `chip` (`"trn1"` when
    None, `"trn2"` or `"trn3"`: its neuronx-cc flags and LNC, its pre-flight
    and the core memory its plan is held to), the pipeline (`passes`, a list or a
    comma-separated string, in place of the target's; `disable_pass`,
    one or a list, left out of it; `verify_each_pass`), `remat`, the
    layout (`tp`, `dp`, `pp`, `sequence_parallel`, `zero1`; for a mixture
    of experts `ep`, its experts divided over that many of the `dp`
    replicas, and `ep_exchange`, `"all-to-all"` or `"all-gather"`; for a sharded
    step `spmd` and `rank_source`, the target's when None), the optimizer's
    `lr_max`, `lr_min`, `warmup_steps`, `total_steps`, `beta1`, `beta2`,
    `adam_eps`, `weight_decay` and `clip_norm` (the model's defaults when
    None), `module_markers`, `device_memory` (bytes, a size such as
    `"16GiB"`, or `"none"`; a plan over it raises `UsageError` with the
    smallest change that fits), `grad_accum`, `replica_groups`
    (`"explicit"`, every group's ids, the one form known to reach
    neuronx-cc; `"iota"`, XLA's compact form, which XLA CPU reads) and
    `pp_send` (how pipeline stages send: `"all-gather"`, NxD's form and the
    default for neuron, or `"permute"`, cpu's; only with `pp` above 1).
    `kernels` maps kernel points to implementations, as repeated `--kernel
    POINT=IMPL[:ARG]` do (`{"attention": "blocked"}`, or `"blocked:128"`
    for tiles of 128; `hlatc.passes()`'s command lists them): an unknown
    point or implementation raises `ConfigError`, and a request whose
    constraint does not hold falls back to the target's default with a
    `UserWarning` saying why. The manifest's `config.kernels` records what
    each point took.

    With `grad_accum=K` above 1 the step is two programs, as `hlatc compile
    --grad-accum K` writes them: `micro_step` and `apply_step` are each a
    Step of one program, `write_bundle` writes both and `Trainer` runs
    them; what belongs to one program (`hlo_text`, `run`, ...) raises
    `UsageError` on the pair.

    With `pp=P` above 1 the decoder layers are divided over P pipeline
    stages (P must divide them: `ConfigError` names the divisors), and an
    optimizer step is `grad_accum` micro-batches through a 1F1B-ordered
    schedule of ticks: the four programs `hlatc compile --pp P` writes,
    `warm_up`, `steady`, `cool_down` and `apply_step`, each a Step of one
    stage's program, with `schedule`. `write_bundle` writes all four and
    their manifest; `Trainer` and `hlatc.jax.Trainer` run them; the state
    (`init_state`, `shard_state`, `gather_state`, `hugging_face_params`) is
    asked of the pipelined step, `tick_batches` gives each tick's batch
    inputs and `tick_plan` where each tick's inputs come from and outputs
    go. The GIL is released while it compiles.
    """
    # Every keyword is an option of the table, read and checked by the
    # native function; only a Mapping that is no dict is made one here.
    options = dict(locals())
    for name in ("config", "kernels"):
        given = options[name]
        if isinstance(given, Mapping) and not isinstance(given, dict):
            options[name] = dict(given)
    return Step(_hlatc.compile_step(**options))


class Trainer:
    """Trains a compiled step on XLA CPU, carrying its state between steps."""

    def __init__(self, step: Step, seed: int = 0) -> None:
        """Starts from the model's initialization drawn from `seed`, zero Adam
        state and step 0. A step compiled with `grad_accum=K` runs its micro
        step K times and its apply step once per `step`; one compiled with
        `pp=P` runs its schedule's ticks and then its apply step, its state
        (`state`, `resume`, `hugging_face_params`) named as the whole
        model's."""
        _args.check_step(step)
        self._step = step
        self._native = _hlatc.Trainer(step._native, seed)
        # What the weights started from, for the run's identity.
        self._start: _identity.Start = (seed, None)

    def step(
        self, tokens: ArrayLike, targets: ArrayLike, segment_ids: Optional[ArrayLike] = None
    ) -> Dict[str, float]:
        """One optimizer step on a global batch ([batch, seq] integer ids):
        its loss, grad norm and learning rate; of a mixture of experts, also
        `routed_tokens` and `dropped_tokens` (token slots routed to experts,
        and of those dropped by a capacity factor, over the sparse layers)
        and `expert_imbalance` (the busiest expert's slots over the mean)."""
        seg = None if segment_ids is None else to_raw("segment_ids", segment_ids)
        return self._native.step(to_raw("tokens", tokens), to_raw("targets", targets), seg)

    def state(self) -> Dict[str, Array]:
        """The whole carried state by input name (shares of a sharded step and
        ZeRO-1 shards gathered): what `resume` takes, in this or another layout."""
        return dict_to_numpy(self._native.state())

    def resume(self, state: Tensors) -> None:
        """Continues from a `state()` of the same model and precision (any
        --tp/--dp/--zero1): the next step is the one that state stopped before.
        A `fit` after it records the state's content hash as what the run
        started from."""
        raw = dict_to_raw(state, "state")
        self._native.resume(raw)
        self._start = (None, _identity.init_of_state(raw))

    def hugging_face_params(self) -> Dict[str, Array]:
        """The parameters as Hugging Face tensors (fused ones split back)."""
        return dict_to_numpy(self._native.hugging_face_params())

    @property
    def steps_done(self) -> int:
        return self._native.steps_done

    def fit(
        self,
        loader: "data.Loader",
        steps: int,
        *,
        checkpoint_dir: Optional[PathLike] = None,
        checkpoint_every: Optional[int] = None,
        keep: int = 3,
        on_step: Optional[OnStep] = None,
        allow_changes: Optional[Sequence[str]] = None,
    ) -> Metrics:
        """Trains on `loader`'s batches until `steps` optimizer steps are done
        (counted from step 0, as `steps_done` counts: a resumed run goes on to
        the same end), and returns every step's metrics: `{"step", "loss",
        "grad_norm", "learning_rate"}` per step, from step 1.

        With `checkpoint_dir`, it first resumes from the newest complete
        checkpoint there, if any: the training state, the loader's position
        (`loader.seek`) and the metrics so far, so the run goes on as if it
        had never stopped; each newer checkpoint a crash left torn, or whose
        files no longer match their sha256s, is skipped with a
        `CheckpointWarning` naming it. It saves a checkpoint every
        `checkpoint_every` steps (a tenth of `steps` by default, as `hlatc
        train --checkpoint-every`) and after the last, keeping the newest
        `keep`: `step-NNNNNNNN/` with `state.safetensors`, `loader.json` and
        `metrics.csv`, written whole or not at all, the layout `hlatc train
        --checkpoint-dir` writes and resumes (same model and layout).

        `on_step(row)` is called after each step (and its checkpoint, when one
        is due) with that step's metrics; returning False stops the run,
        which saves a checkpoint first. An exception from it, or from the
        step, stops the run where it is: the last checkpoint saved is where
        the next `fit` resumes. A loss that is not finite raises `RunError`
        before anything is saved. If the loader's last pass ends first, the
        run stops there, with a warning.

        Each checkpoint records the run's identity (`run.json`, as `hlatc
        train` writes it: the model config, precision and rounding,
        optimizer and schedule, the tokenizer's content hash, the corpus'
        fingerprint, the layout). A checkpoint whose identity differs from
        this run's is refused with `IdentityError` naming each differing
        field with both values, unless `allow_changes` names the field or
        its group (then an `IdentityWarning`, and the change kept in the
        identity's `allowed_changes`); the layout may change."""
        from . import _fit

        return _fit.fit(self, loader, steps, checkpoint_dir, checkpoint_every, keep, on_step,
                        allow_changes)


def __getattr__(name: str) -> Any:
    # `hlatc.jax` without an import of its own; JAX itself loads only when
    # `hlatc.jax.load` is called.
    if name == "jax":
        import importlib

        return importlib.import_module(".jax", __name__)
    raise AttributeError(f"module 'hlatc' has no attribute {name!r}")
