"""hlatc's training step run by JAX, on one device or on many across processes.

`load(step)` compiles the step's HLO with JAX's own XLA and returns a
function that takes and gives JAX arrays by name, with the carried state's
buffers donated (each state input is updated in place; the arrays passed in
are deleted). A sharded step (`tp` x `dp` ranks) runs rank r on
`devices[r]`, JAX's global devices in id order by default, in one process
or many (`jax.distributed`); each process passes and gets back its own
ranks' arrays. `Trainer` trains a step of any world size from global
batches, with checkpoints in `hlatc shard`'s per-rank format (their
protocol across processes in `_jax_checkpoint`, their files the Rust
core's); a pipeline-parallel step's four programs it runs tick by tick.

    import hlatc, hlatc.jax
    hlatc.jax.initialize()             # reads the environment `python -m hlatc.launch` sets
    trainer = hlatc.jax.Trainer(hlatc.compile_step(model="tiny", target="cpu", tp=2, dp=2))
    stats = trainer.step(tokens, targets)   # the global batch, the same on every process

Tested with jax and jaxlib 0.10.2 (the `jax` extra), on JAX's CPU devices.
JAX is imported only when a function here is called.
"""

from __future__ import annotations

import json
import os
import time
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
    overload,
)

import numpy as np

import hlatc
from . import _args, _hlatc, _identity, _jax_checkpoint, _peers
from ._args import UsageKind
from ._arrays import _DTYPES, dict_to_numpy, to_raw
from ._fit import Metrics, OnStep
# Names of hlatc.jax since before the checkpoints' protocol moved out.
from ._jax_checkpoint import CHECKPOINT_FORMAT, COMPLETE  # noqa: F401
from ._jax_collectives import allgather
from ._peers import PeerLostError
from ._types import Array, ArrayLike, Format, PathLike, Phase, RawDtype, Special, Tensors

if TYPE_CHECKING:
    # JAX's types, for the annotations (JAX itself is imported only when a
    # function here is called): a device, and the arrays a step returns.
    from jax import Array as JaxArray
    from jax import Device

    from .data import Loader, Position, Sources

#: A step function's input: a NumPy-convertible value or a JAX array.
Input = Union[ArrayLike, "JaxArray"]

__all__ = [
    "initialize",
    "load",
    "StepFunction",
    "Trainer",
    "loader_file",
    "rank_file",
    "Input",
    "PeerLostError",
]

# What `python -m hlatc.launch` sets for each process, and `initialize` reads.
# JAX reads JAX_COORDINATOR_ADDRESS itself; it has no variables for the
# process count and index, so those are hlatc's.
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "HLATC_NUM_PROCESSES"
ENV_PROCESS_ID = "HLATC_PROCESS_ID"
ENV_CPU_COLLECTIVES = "HLATC_CPU_COLLECTIVES"


def loader_file(replica: int) -> str:
    """The file of DP replica `replica`'s loader position in a checkpoint
    `Trainer.fit` saves: a JSON array of that one position (the layout of
    the single-process checkpoint's `loader.json`, one replica a file, so
    each process writes only its own)."""
    return _hlatc.loader_file(replica)


def rank_file(rank: int) -> str:
    """The file of rank `rank` in a checkpoint: the name `hlatc shard` writes
    and `hlatc unshard` reads."""
    return _hlatc.rank_file(rank)


def initialize(
    heartbeat_timeout_seconds: int = 10,
    initialization_timeout: int = 60,
    shutdown_timeout_seconds: int = 30,
) -> bool:
    """Joins the processes `python -m hlatc.launch` started (or any set up
    with the same environment: `JAX_COORDINATOR_ADDRESS` as host:port of
    process 0, `HLATC_NUM_PROCESSES`, `HLATC_PROCESS_ID`) with
    `jax.distributed.initialize`, CPU collectives over gloo
    (`HLATC_CPU_COLLECTIVES` to change it). Call it before anything else
    touches JAX. Without that environment it does nothing and returns
    False: one process, JAX's local devices.

    `heartbeat_timeout_seconds` bounds how long a process outlives a peer
    that died without the launcher to stop it: JAX's coordination service
    declares a process dead after that long without a heartbeat and the
    others' next collective fails (JAX's default is 100 s).
    `shutdown_timeout_seconds` bounds the wait for the others at exit (JAX's
    default, 300 s)."""
    count = os.environ.get(ENV_NUM_PROCESSES)
    if count is None:
        return False
    missing = [v for v in (ENV_COORDINATOR, ENV_PROCESS_ID) if v not in os.environ]
    if missing:
        raise _args.usage_error(
            UsageKind.CONFLICT,
            f"{ENV_NUM_PROCESSES} is set but {' and '.join(missing)} is not: set all three "
            f"({ENV_COORDINATOR}=host:port of process 0, {ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}), "
            "or start the script with python -m hlatc.launch"
        )
    me = int(os.environ[ENV_PROCESS_ID])
    address = os.environ[ENV_COORDINATOR]
    port = address.rsplit(":", 1)[-1]
    if me == 0 and port.isdigit():
        # Taken, JAX's service fails deep in gRPC ("Failed to add port"),
        # and the process dies of a signal.
        why = _peers.port_taken(int(port))
        if why is not None:
            raise _args.usage_error(
                UsageKind.CONFLICT,
                f"{ENV_COORDINATOR}={address}: process 0 serves the coordinator on port {port}, "
                f"which is taken on this machine ({why}): choose another port",
                code="launch.port_taken",
            )
    import jax
    from jax._src import distributed

    jax.config.update(
        "jax_cpu_collectives_implementation", os.environ.get(ENV_CPU_COLLECTIVES, "gloo")
    )
    timeouts = {
        "initialization_timeout": initialization_timeout,
        "heartbeat_timeout_seconds": heartbeat_timeout_seconds,
        "shutdown_timeout_seconds": shutdown_timeout_seconds,
    }
    jax.distributed.initialize(
        coordinator_address=address,
        num_processes=int(count),
        process_id=me,
        # JAX before 0.8 has no shutdown timeout: its shutdown barrier
        # waits its own 300 s, and hlatc's exit hook still bounds the wait
        # for peers that stopped (below).
        **_accepted(jax.distributed.initialize, timeouts),
    )
    # After JAX's own exit hook (registered at import), so it runs first.
    _peers.start(distributed.global_state.client, me, int(count),
                 wait_seconds=shutdown_timeout_seconds, join_timeout=initialization_timeout)
    return True


def _accepted(function: Any, keywords: Mapping[str, Any]) -> Dict[str, Any]:
    """The `keywords` `function` takes: JAX adds keywords between versions,
    and hlatc.jax runs on every version JAX on Trainium does (0.7 to 0.10),
    so it asks the function rather than a version string."""
    import inspect

    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return dict(keywords)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(keywords)
    return {k: v for k, v in keywords.items() if k in parameters}


class StepFunction:
    """The step compiled by JAX for its ranks' devices.

    A one-rank step is called with every input by name and returns every
    output by name (JAX arrays). A step of several ranks is called with
    `{rank: {name: array}}` for this process's ranks (`local_ranks`) and
    returns `{rank: {name: jax.Array}}` for the same ranks; every process
    holding a rank must make the call, as with any JAX collective. Inputs
    may be NumPy or JAX arrays; token ids of another integer type are
    converted. A step that reads its rank from an input (`rank`) is fed
    `[r]` on rank r when the caller does not give it."""

    def __init__(
        self, step: "hlatc.Step", devices: Optional[Union["Device", Sequence["Device"]]] = None
    ) -> None:
        import jax
        from jax._src.lib import xla_client as xc

        _args.check_step(step)
        world = step.world_size
        if devices is None:
            devices = jax.devices()
            if len(devices) != world:
                raise _args.usage_error(
                    UsageKind.CONFLICT,
                    f"the step runs on {world} rank(s) but JAX has {len(devices)} device(s) "
                    f"(jax.device_count(), over {jax.process_count()} process(es)): give "
                    f"devices=[...] of {world}, or start {world} devices in all "
                    "(python -m hlatc.launch --processes P --devices-per-process K)"
                )
        elif hasattr(devices, "platform"):
            devices = [devices]  # one device, as load(step, device) took before
        devices = list(devices)
        if len(devices) != world:
            raise _args.usage_error(
                UsageKind.CONFLICT,
                f"the step runs on {world} rank(s); {len(devices)} device(s) were given",
                argument="devices",
            )
        if len({d.id for d in devices}) != world:
            raise _args.usage_error(
                UsageKind.INVALID, "a device was given for two ranks: each rank needs its own",
                argument="devices")
        platforms = {d.platform for d in devices}
        if len(platforms) != 1:
            raise _args.usage_error(
                UsageKind.UNSUPPORTED, f"the devices are of several platforms: {sorted(platforms)}",
                argument="devices")
        self.devices: List[Any] = devices
        self.device = devices[0]
        me = jax.process_index()
        self.local_ranks: List[int] = [r for r, d in enumerate(devices) if d.process_index == me]
        if not self.local_ranks:
            raise _args.usage_error(
                UsageKind.CONFLICT,
                f"process {me} holds none of the step's {world} devices: load the step only "
                "on processes that run one of its ranks"
            )
        self.form = step.spmd

        module = step.module()
        passes = []
        platform = devices[0].platform
        if platform != "neuron":
            # Neuron's custom calls as the same math in plain HLO.
            passes.append("lower-neuron-calls")
        if platform == "cpu":
            # XLA CPU has no kernel for some bf16 x bf16 -> f32 dots; hlatc's
            # runtime makes the same rewrite (the values are the same).
            passes.append("widen-mixed-dots")
        if passes:
            module = hlatc.optimize(module, passes=passes, target="cpu")
        stablehlo = xc._xla.mlir.hlo_to_stablehlo(module.to_proto())
        options = xc.CompileOptions()
        # Every rounding the step asks for happens, as on hlatc's runtime
        # (XLA may otherwise drop f32 -> bf16 -> f32 pairs).
        options.env_option_overrides = [("xla_allow_excess_precision", False)]
        build = options.executable_build_options
        ids = np.array([d.id for d in devices], dtype=np.int32)
        if self.form == "partitions" and world > 1:
            # The program is already divided by hand (`sharding={manual}`):
            # XLA's partitioner must run, and leaves it as it is. The
            # shardings are GSPMD's (HLO's); asked for Shardy, jaxlib 0.10.2
            # says so and falls back to GSPMD, so it is not asked.
            build.num_replicas = 1
            build.num_partitions = world
            build.use_spmd_partitioning = True
            build.device_assignment = xc.DeviceAssignment.create(ids.reshape(1, world))
        else:
            build.num_replicas = world
            build.num_partitions = 1
            build.device_assignment = xc.DeviceAssignment.create(ids.reshape(world, 1))
        self._executable = devices[0].client.compile_and_load(
            stablehlo, xc.DeviceList(tuple(devices)), options
        )
        self.input_names: List[str] = [t.name for t in step.inputs]
        self.output_names: List[str] = [t.name for t in step.outputs]
        self._inputs = {t.name: t for t in step.inputs}
        self._rank_input = next((t.name for t in step.inputs if t.role == "rank"), None)
        self._rank_of_device = {d.id: r for r, d in enumerate(devices)}
        if world > 1:
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            # Each rank's array differs, but the program divides itself:
            # the runtime is told every rank holds the whole (XLA labels a
            # replica program's arguments so), and each device gets its own.
            self._sharding = NamedSharding(Mesh(np.array(devices), ("ranks",)), PartitionSpec())
        self._jax = jax

    def _value(self, rank: int, name: str, given: Mapping[str, Any]) -> Any:
        if name not in given:
            return np.array([rank], dtype=np.int32)  # only the rank input is ever absent here
        value = given[name]
        if not hasattr(value, "shape"):
            value = np.asarray(value)
        info = self._inputs[name]
        want = _DTYPES[info.dtype]
        at = f"rank {rank}: " if len(self.devices) > 1 else ""
        if tuple(value.shape) != tuple(info.shape):
            raise _args.usage_error(
                UsageKind.INVALID,
                f"{at}input '{name}' is {list(value.shape)}; the step takes {info.shape}"
            )
        if np.dtype(value.dtype) != want:
            if not info.is_state and np.issubdtype(value.dtype, np.integer) and np.issubdtype(want, np.integer):
                return np.asarray(value).astype(want)
            raise _args.usage_error(
                UsageKind.INVALID,
                f"{at}input '{name}' is {value.dtype}; the step takes {info.dtype}")
        return value

    def _on(self, value: Any, device: Any) -> Any:
        # The carried state comes back as arrays already on their rank's
        # device: passed on as they are, not through device_put, which cost
        # more than half of a tiny step's time (3840 calls in 20 steps).
        if isinstance(value, self._jax.Array) and value.devices() == {device}:
            return value
        return self._jax.device_put(value, device)

    def _check(self, rank: int, given: Mapping[str, Any]) -> None:
        at = f"rank {rank}: " if len(self.devices) > 1 else ""
        missing = [n for n in self.input_names if n not in given and n != self._rank_input]
        if missing:
            raise _args.usage_error(
                UsageKind.NOT_FOUND, f"{at}no input {', '.join(repr(m) for m in missing[:5])}"
                f"{' and more' if len(missing) > 5 else ''}")
        extra = sorted(set(given) - set(self.input_names))
        if extra:
            raise _args.usage_error(
                UsageKind.NOT_FOUND, f"{at}the step takes no input named {', '.join(extra)}")

    @overload
    def __call__(self, inputs: Mapping[str, Input]) -> Dict[str, "JaxArray"]: ...

    @overload
    def __call__(
        self, inputs: Mapping[int, Mapping[str, Input]]
    ) -> Dict[int, Dict[str, "JaxArray"]]: ...

    def __call__(self, inputs: Mapping[Any, Any]) -> Dict[Any, Any]:
        by_rank = bool(inputs) and all(isinstance(k, (int, np.integer)) for k in inputs)
        if not by_rank:
            if len(self.devices) != 1:
                raise _args.usage_error(
                    UsageKind.CONFLICT,
                    f"the step runs on {len(self.devices)} ranks: call it with "
                    f"{{rank: {{name: array}}}} for this process's ranks {self.local_ranks}"
                )
            return self.run({0: inputs})[0]
        return self.run({int(k): v for k, v in inputs.items()})

    def run(
        self, inputs: Mapping[int, Mapping[str, Input]]
    ) -> Dict[int, Dict[str, "JaxArray"]]:
        """One step: `{rank: {name: array}}` in for this process's ranks,
        `{rank: {name: jax.Array}}` out."""
        jax = self._jax
        if sorted(inputs) != self.local_ranks:
            raise _args.usage_error(
                UsageKind.CONFLICT,
                f"this process (jax.process_index() {jax.process_index()}) runs rank(s) "
                f"{self.local_ranks}; inputs were given for rank(s) {sorted(inputs)}"
            )
        for r in self.local_ranks:
            self._check(r, inputs[r])
        args = []
        for name in self.input_names:
            shards = [self._on(self._value(r, name, inputs[r]), self.devices[r])
                      for r in self.local_ranks]
            if len(self.devices) == 1:
                args.append(shards[0])
            else:
                shape = tuple(self._inputs[name].shape)
                args.append(jax.make_array_from_single_device_arrays(shape, self._sharding, shards))
        with _peers.collective("a step"):
            results = self._executable.execute_sharded(args)
            outputs = results.disassemble_into_single_device_arrays()
        out: Dict[int, Dict[str, JaxArray]] = {r: {} for r in self.local_ranks}
        for name, arrays in zip(self.output_names, outputs):
            # Only this process's devices' arrays come back; each names its
            # device, and so its rank.
            for a in arrays:
                (device,) = a.devices()
                out[self._rank_of_device[device.id]][name] = a
        return out


def load(
    step: "hlatc.Step",
    devices: Optional[Union["Device", Sequence["Device"]]] = None,
    *,
    device: Optional["Device"] = None,
) -> StepFunction:
    """`step` compiled by JAX: rank r on `devices[r]` (JAX's global devices,
    `jax.devices()`, ordered by id, when None; a step of one rank also takes
    a single device, or `device=` as before many devices were). A step's
    world size other than the devices' count is refused by name
    (`UsageError`)."""
    if device is not None:
        if devices is not None:
            raise _args.usage_error(UsageKind.CONFLICT, "give devices or device, not both")
        devices = [device]
    return StepFunction(step, devices)


class Trainer:
    """Trains a step with JAX, each process running its own ranks, with the
    interface of `hlatc.Trainer`: `step` takes the global batch (the same on
    every process) and returns the same statistics on every process.

    Every process must call `step`, `state`, `hugging_face_params`, `save`
    and `load` together (they run collectives). A pipeline-parallel step
    (`pp` above 1) runs its four programs as its bundle's manifest says:
    each tick's program, then the apply step (see `_Pipeline`).
    Gradient accumulation's pair (`grad_accum` above 1 without `pp`) is
    refused: `hlatc.Trainer` runs it."""

    def __init__(
        self,
        step: "hlatc.Step",
        seed: int = 0,
        devices: Optional[Union["Device", Sequence["Device"]]] = None,
        init: Optional[PathLike] = None,
    ) -> None:
        """Starts from the model's initialization drawn from `seed`, zero Adam
        state and step 0, as `hlatc.Trainer(step, seed)` does: each process
        makes only its own ranks' state. With `init`, a Hugging Face
        safetensors checkpoint, the parameters are read from it instead, each
        process reading only the slices its ranks hold (not yet for a
        pipeline-parallel step: `init` is refused)."""
        _args.check_step(step)
        self._pipeline: Optional[_Pipeline] = None
        if step.pp > 1:
            if init is not None:
                raise _args.usage_error(
                    UsageKind.UNSUPPORTED,
                    "init=: a pipeline-parallel step (pp above 1) does not start from a Hugging "
                    "Face checkpoint yet (each stage would read its own layers' slices); leave "
                    "init out to start from the model's initialization",
                    argument="init",
                )
            self._pipeline = _Pipeline(step, devices)
            program = step.apply_step
            assert program is not None, "a pipeline has an apply step"
            self._fn = self._pipeline.apply
        elif step.grad_accum != 1:
            raise _args.usage_error(
                UsageKind.UNSUPPORTED,
                f"hlatc.jax.Trainer runs steps of one program; this one is gradient "
                f"accumulation's pair (grad_accum={step.grad_accum}): train it with "
                "hlatc.Trainer, or load its micro_step and apply_step with hlatc.jax.load"
            )
        else:
            program = step
            self._fn = load(step, devices)
        self._step = step
        import jax

        self._jax = jax
        # The state the ranks carry between steps: under pipeline
        # parallelism the apply step's, which names each stage's layers as
        # the stage model's (`init_state`, `shard_state` and `gather_state`
        # of the pipelined step translate).
        self._state_infos = [t for t in program.inputs if t.is_state]
        self._state_names = [t.name for t in self._state_infos]
        roles = {t.role: t.name for t in program.outputs}
        # A pipeline's loss is its ticks' (`_Pipeline.run`), not the apply step's.
        stats = ("grad_norm", "learning_rate") if self._pipeline else ("loss", "grad_norm",
                                                                      "learning_rate")
        self._stats = {k: roles[k] for k in stats}
        self._step_input = next(t.name for t in program.inputs if t.role == "step")
        self._layout = _hlatc.data_layout(step._native)
        counts = {}
        for d in self._fn.devices:
            counts[d.process_index] = counts.get(d.process_index, 0) + 1
        # state() gathers every rank's bytes with one all-gather of equal
        # shapes: each process must hold as many ranks.
        self._even = len(set(counts.values())) == 1
        # steps_done as this process last knew it (None: read it again).
        self._done: Optional[int] = None
        # Each step's wall time, for append_measured_run.
        self._step_seconds: List[float] = []
        # The identity last recorded or checked, whose changes allowed on
        # the resumes of this run every later checkpoint carries on.
        self._history: Optional[_hlatc.RunIdentity] = None
        self._state: Dict[int, Dict[str, Any]] = {
            r: self._put(r, step.init_state(seed, r, checkpoint=init))
            for r in self._fn.local_ranks
        }
        # What the weights started from, for the run's identity: the
        # checkpoint's content, as `hlatc train --init` records it, or the seed.
        self._start: _identity.Start = (
            (None, _hlatc.init_of_file(os.fspath(init))) if init is not None else (seed, None))

    @property
    def local_ranks(self) -> List[int]:
        """The ranks this process runs."""
        return self._fn.local_ranks

    @property
    def local_replicas(self) -> List[int]:
        """The DP replicas whose rows this process's ranks take, in order: what
        its loader reads (`loader`), and `step(..., replicas=)` takes."""
        of = self._layout["replica_of_rank"]
        return sorted({of[r] for r in self._fn.local_ranks})

    def loader(
        self,
        sources: "Sources",
        *,
        tokenizer: Optional[PathLike] = None,
        text_field: str = "text",
        format: Optional[Format] = None,
        shuffle_buffer: int = 1024,
        seed: int = 0,
        epochs: Optional[int] = None,
        bos: Special = True,
        eos: Special = True,
        eos_id: Optional[int] = None,
        raw_dtype: RawDtype = "u16",
        position: Optional["Position"] = None,
    ) -> "Loader":
        """`hlatc.data.Loader.for_step` for this step that reads only this
        process's replicas' documents (`owned_replicas=local_replicas`): each
        process tokenizes its own shard, and its batches hold its replicas'
        rows, which `step` and `fit` take as they are. The keywords are
        `Loader`'s."""
        return hlatc.data.Loader.for_step(
            self._step, sources, owned_replicas=self.local_replicas, tokenizer=tokenizer,
            text_field=text_field, format=format, shuffle_buffer=shuffle_buffer, seed=seed,
            epochs=epochs, bos=bos, eos=eos, eos_id=eos_id, raw_dtype=raw_dtype,
            position=position)

    def _global_rows(self, name: str, value: Any, replicas: Sequence[int]) -> np.ndarray:
        """A global batch from the rows of `replicas` (in order): rows of the
        replicas this process does not run are never read, and the first
        given replica's stand in for them (valid ids, so the checks of the
        whole batch pass)."""
        a = np.asarray(value)
        dp, batch = self._layout["replicas"], self._layout["batch_size"]
        rows = batch // dp
        if a.ndim != 2 or a.shape[0] != rows * len(replicas):
            raise _args.usage_error(
                UsageKind.INVALID,
                f"'{name}' is {list(a.shape)}; the rows of replicas {list(replicas)} are "
                f"[{rows * len(replicas)}, seq_len] ({rows} a replica)")
        out = np.empty((batch, a.shape[1]), dtype=a.dtype)
        for d in range(dp):
            k = replicas.index(d) if d in replicas else 0
            out[d * rows:(d + 1) * rows] = a[k * rows:(k + 1) * rows]
        return out

    def _put(self, rank: int, tensors: Mapping[str, Any]) -> Dict[str, Any]:
        device = self._fn.devices[rank]
        return {n: self._jax.device_put(np.asarray(tensors[n]), device) for n in self._state_names}

    def step(self, tokens: ArrayLike, targets: ArrayLike,
             segment_ids: Optional[ArrayLike] = None, *,
             replicas: Optional[Sequence[int]] = None) -> Dict[str, float]:
        """One optimizer step on a global batch ([batch, seq] integer ids,
        every rank's rows): its loss, grad norm and learning rate. With
        `replicas` (DP replica indices, a loader's `owned_replicas`), the
        batch holds only those replicas' rows, one replica after another;
        they must include this process's (`local_replicas`). A peer process
        gone before or during the step raises `PeerLostError` naming it."""
        if self._done is None:
            self._done = self.steps_done
        started = time.perf_counter()
        with _peers.collective(f"step {self._done + 1}"):
            stats = self._step_once(tokens, targets, segment_ids, replicas)
        # The statistics are read back, so the step has run: its wall time.
        self._step_seconds.append(time.perf_counter() - started)
        self._done += 1
        return stats

    def append_measured_run(self, path: PathLike, *, model: str, instance: "hlatc.Instance",
                            nodes: int, skip: int = 1, sdk: str = "unknown",
                            source: str = "hlatc.jax") -> float:
        """Appends this run to a calibration CSV (`hlatc plan --calibration`,
        `hlatc.plan(calibration=...)`): the step's layout, and the sequences
        per second of the steps this trainer ran after its first `skip`
        (which compile), on `nodes` instances of `instance`. `model` is the
        preset or the `config.json` path the plan should read. Every process
        calls it; process 0 writes. Returns the sequences per second."""
        times = self._step_seconds[skip:]
        if skip < 0 or not times:
            raise _args.usage_error(
                UsageKind.OUT_OF_RANGE,
                f"skip={skip}: this trainer has run {len(self._step_seconds)} steps; at least "
                f"one after the first {max(skip, 0)} is needed to measure", argument="skip")
        config = self._step.config
        batch, parallel = config["batch"], config["parallel"]
        micro_batches = self._step.grad_accum if self._step.pp > 1 else 1
        seq_per_s = batch["batch_size"] * len(times) / sum(times)
        if self._jax.process_index() == 0:
            hlatc.append_measured_run(
                path, model=model, instance=instance, nodes=nodes,
                tp=parallel["tp"], pp=parallel.get("pp", 1), dp=parallel["dp"],
                sequence_parallel=parallel.get("sequence_parallel", False),
                zero1=parallel.get("zero1", False), remat=self._step.manifest["remat"],
                micro_batch=batch["batch_size"] // (parallel["dp"] * micro_batches),
                precision=config["precision"], seq_per_s=seq_per_s,
                global_batch=batch["batch_size"], seq_len=batch["seq_len"], sdk=sdk,
                source=source)
        return seq_per_s

    def _step_once(self, tokens: ArrayLike, targets: ArrayLike,
                   segment_ids: Optional[ArrayLike],
                   replicas: Optional[Sequence[int]]) -> Dict[str, float]:
        if replicas is not None:
            replicas = [int(r) for r in replicas]
            missing = sorted(set(self.local_replicas) - set(replicas))
            if missing:
                raise _args.usage_error(
                    UsageKind.CONFLICT,
                    f"the batch holds replicas {replicas}' rows; this process runs replicas "
                    f"{self.local_replicas} (missing {missing}): open its loader with "
                    "owned_replicas=trainer.local_replicas (trainer.loader(...))",
                    argument="replicas")
            tokens = self._global_rows("tokens", tokens, replicas)
            targets = self._global_rows("targets", targets, replicas)
            if segment_ids is not None:
                segment_ids = self._global_rows("segment_ids", segment_ids, replicas)
        t, y = to_raw("tokens", tokens), to_raw("targets", targets)
        s = None if segment_ids is None else to_raw("segment_ids", segment_ids)
        loss = None
        if self._pipeline is not None:
            if s is not None:
                raise _args.usage_error(
                    UsageKind.UNSUPPORTED,
                    "a pipeline-parallel step takes no segment ids (packed rows are not pipelined)",
                    argument="segment_ids")
            loss, out = self._pipeline.run(self._step, self._state, t, y)
        else:
            inputs = {}
            for r in self._fn.local_ranks:
                batch = dict_to_numpy(self._step._native.rank_batch(t, y, s, r))
                inputs[r] = {**self._state[r], **batch}
            out = self._fn.run(inputs)
        for r in self._fn.local_ranks:
            self._state[r] = {n: out[r][n] for n in self._state_names}
        # The statistics are all-reduced in the step: every rank has them.
        first = out[self._fn.local_ranks[0]]
        stats = {} if loss is None else {"loss": loss}
        stats.update({k: float(np.asarray(first[name]).reshape(-1)[0])
                      for k, name in self._stats.items()})
        return stats

    def _every_rank(self) -> List[Dict[str, np.ndarray]]:
        """Every rank's state, on every process, in rank order."""
        local = self._fn.local_ranks
        flat = np.stack([
            np.concatenate([np.asarray(self._state[r][n]).reshape(-1).view(np.uint8)
                            for n in self._state_names])
            for r in local
        ])
        ranks = np.array(local, dtype=np.int32)
        if self._jax.process_count() > 1:
            if not self._even:
                raise _args.usage_error(
                    UsageKind.UNSUPPORTED,
                    "state() gathers the ranks' state with one all-gather, which needs as many "
                    "ranks on every process; these processes hold different numbers"
                )
            flat = allgather(flat, "Trainer.state").reshape(-1, flat.shape[-1])
            ranks = allgather(ranks, "Trainer.state").reshape(-1)
        rows = dict(zip(ranks.tolist(), flat))
        out = []
        for r in range(len(self._fn.devices)):
            row, at, tensors = rows[r], 0, {}
            for info in self._state_infos:
                dtype = _DTYPES[info.dtype]
                n = int(np.prod(info.shape, dtype=np.int64)) * dtype.itemsize
                tensors[info.name] = row[at:at + n].view(dtype).reshape(info.shape)
                at += n
            out.append(tensors)
        return out

    def state(self) -> Dict[str, Array]:
        """The whole carried state by input name (every rank's share gathered
        across processes, on every process): what `hlatc.Trainer.state()`
        gives and `resume` takes, in this or another layout."""
        per_rank = [{n: to_raw(n, v) for n, v in d.items()} for d in self._every_rank()]
        return dict_to_numpy(self._step._native.gather_state(per_rank))

    def resume(self, state: Tensors) -> None:
        """Continues from a whole state (`state()`, `hlatc.Trainer.state()`,
        `hlatc unshard`'s file) of the same model and precision, from any
        layout: each process takes its ranks' shares."""
        raw = {n: to_raw(n, v) for n, v in state.items()}
        shares = {r: dict_to_numpy(self._step._native.shard_state(raw, r))
                  for r in self._fn.local_ranks}
        for r, tensors in shares.items():
            self._state[r] = self._put(r, tensors)
        self._done = None
        self._start = (None, _identity.init_of_state(raw))

    def hugging_face_params(self) -> Dict[str, Array]:
        """The parameters as Hugging Face tensors (fused ones split back)."""
        raw = {n: to_raw(n, v) for n, v in self.state().items()}
        return dict_to_numpy(self._step._native.hugging_face_params(raw))

    @property
    def steps_done(self) -> int:
        first = self._state[self._fn.local_ranks[0]][self._step_input]
        return int(np.asarray(first).reshape(-1)[0])

    def save(self, path: PathLike) -> None:
        """Writes a checkpoint: each process its ranks' files, the ones `hlatc
        shard` writes (`rank-00000.safetensors`, ...: each rank's share of
        every state input under the input's name), each written under a
        temporary name and renamed; then, once every process has, process 0
        writes `COMPLETE` (the step and each file's sha256) last. `hlatc
        unshard` joins the files into the whole state. A checkpoint already
        in `path` loses its marker first, so a save cut short leaves no
        complete checkpoint there, and rank files beyond this world size
        (which `hlatc unshard` would refuse). The marker records the run's
        identity (`identity`: see `hlatc.Trainer.fit`; without the data's
        fields, which only `fit` knows). `path` must be a directory or not
        exist (`FileError` otherwise). Every process must call it."""
        _jax_checkpoint.save(self._shards(), os.fspath(path))

    def _shards(self) -> _jax_checkpoint.Shards:
        """What the checkpoint protocol (`_jax_checkpoint`) needs of this
        trainer, handed over rather than read from its attributes."""
        return _jax_checkpoint.Shards(
            jax=self._jax,
            world=len(self._fn.devices),
            local_ranks=list(self._fn.local_ranks),
            replicas=self._layout["replicas"],
            steps_done=self.steps_done,
            config=self._step.config,
            rank_state=lambda r: [(n, to_raw(n, np.asarray(self._state[r][n])))
                                  for n in self._state_names],
            identity=self._identity,
            check_identity=self._check_identity,
            take_shares=self._take_shares,
        )

    def _identity(self, loader: Optional["Loader"], start: bool = True) -> _hlatc.RunIdentity:
        """This run's identity (with the data's fields from `loader`, and
        unless `start` is False what its weights started from), and the
        changes allowed so far (`_history`'s)."""
        identity = _identity.of_step(self._step, loader,
                                     self._start if start else (None, None))
        if self._history is None:
            return identity
        return identity.with_allowed_changes_of(self._history)

    def _check_identity(self, d: str, steps_done: int,
                        recorded: Optional[_hlatc.RunIdentity],
                        loader: Optional["Loader"],
                        allow_changes: Optional[Sequence[str]],
                        start: bool = True) -> _hlatc.RunIdentity:
        """Checkpoint `d`'s identity (its marker's; None: it records
        none), of a checkpoint after `steps_done` steps, against this run's:
        `IdentityError` naming each differing field not allowed; another
        layout, `UsageError` (its rank files are another layout's shares).
        Without `start` (a checkpoint loaded by hand, whose weights replace
        this trainer's), what the weights started from is the
        checkpoint's, not compared. The identity this run records from now
        on."""
        current = self._identity(loader, start)
        if recorded is not None:
            old, new = recorded.fields.get("layout"), current.fields.get("layout")
            if old is not None and old != new:
                raise _args.usage_error(
                    UsageKind.CONFLICT,
                    f"{d}: a checkpoint of layout {old}; this step's is {new}: its rank files "
                    "are another layout's shares (join them with hlatc unshard and resume() "
                    "the whole state)")
        checked = _identity.check(recorded, current, d, allow_changes, steps_done)
        self._history = checked
        return checked

    def load(self, path: PathLike, *, allow_changes: Optional[Sequence[str]] = None) -> None:
        """Continues from a checkpoint `save` wrote (for this step's world
        size and layout): each process reads its ranks' files. A path that
        does not exist or is not a directory, a directory without
        `COMPLETE`, or a file whose sha256 is not the one recorded, raises
        `FileError`; a tensor of another shape or type, `UsageError`; a
        checkpoint of another run (its identity: model config, precision,
        rounding, optimizer and schedule), `IdentityError` naming each
        differing field with both values, unless `allow_changes` names it.
        Each process must see the marker (process 0 writes it: on hosts
        without a shared file system, copy it)."""
        _jax_checkpoint.load(self._shards(), os.fspath(path), allow_changes)

    def _take_shares(self, d: str) -> None:
        """This process's ranks' state from checkpoint `d`'s rank files (their
        sha256s already checked)."""
        shares = {}
        for r in self._fn.local_ranks:
            f = os.path.join(d, rank_file(r))
            tensors = dict_to_numpy(_hlatc.read_safetensors(f))
            left = dict(tensors)
            for info in self._state_infos:
                t = left.pop(info.name, None)
                if t is None:
                    raise _args.usage_error(UsageKind.NOT_FOUND, f"{f}: no tensor '{info.name}'")
                if list(t.shape) != list(info.shape) or t.dtype != _DTYPES[info.dtype]:
                    raise _args.usage_error(
                        UsageKind.INVALID,
                        f"{f}: tensor '{info.name}' is {t.dtype}{list(t.shape)}, this step's rank "
                        f"{r} takes {info.dtype}{info.shape} (another model, precision or layout?)"
                    )
            if left:
                raise _args.usage_error(
                    UsageKind.NOT_FOUND,
                    f"{f}: tensor '{sorted(left)[0]}' is not state of this step")
            shares[r] = tensors
        for r, tensors in shares.items():
            self._state[r] = self._put(r, tensors)
        self._done = None

    def fit(
        self,
        loader: "Loader",
        steps: int,
        *,
        checkpoint_dir: Optional[PathLike] = None,
        checkpoint_every: Optional[int] = None,
        keep: int = 3,
        on_step: Optional[OnStep] = None,
        allow_changes: Optional[Sequence[str]] = None,
    ) -> Metrics:
        """`hlatc.Trainer.fit` on JAX, across processes: every process calls
        it, each with its own loader (`loader(...)`: its replicas' rows, or
        a loader of the whole global batch), and gets the same metrics.

        With `checkpoint_dir`, the processes agree on the newest checkpoint
        that is complete for all of them and resume from it (each reading
        its ranks' files and its replicas' loader positions), warning with
        `CheckpointWarning` about each newer one passed over. A checkpoint
        is `step-NNNNNNNN/` in `save`'s format (`hlatc unshard` joins it),
        with each replica's loader position (`loader-replica-00000.json`, a
        file a replica, written by the process that owns it) and the metrics
        (`metrics.csv`) under the same `COMPLETE` marker; the newest `keep`
        are kept. Unlike `hlatc.Trainer.fit`'s (one `state.safetensors` of
        the whole state, which `hlatc train --checkpoint-dir` shares), it is
        per rank, so no process gathers the whole state to save. Its marker
        records the run's identity, checked on resume as `hlatc.Trainer.fit`
        checks it (`allow_changes`), and the layout, which must match."""
        from . import _fit

        checkpoint_every = _fit.every(steps, checkpoint_every)
        _fit.check_fit_args(steps, checkpoint_every, keep)
        _identity.check_allow(allow_changes)
        owned = list(loader.owned_replicas)
        step_kw = {} if owned == list(range(loader.replicas)) else {"replicas": owned}
        if checkpoint_dir is None:
            return _fit.run_steps(self, loader, steps, [], None, checkpoint_every, on_step,
                                  step_kw)
        root = os.fspath(checkpoint_dir)
        os.makedirs(root, exist_ok=True)
        identity = self._identity(loader)
        metrics = _jax_checkpoint.resume_newest(self._shards(), root, loader, allow_changes)
        if self._history is not None:
            identity = identity.with_allowed_changes_of(self._history)

        def save(done: int, metrics: List[Dict[str, float]]) -> None:
            positions = json.loads(loader.position())
            files = {r: json.dumps([p], separators=(",", ":")).encode("utf-8")
                     for r, p in zip(owned, positions)}
            _jax_checkpoint.save(self._shards(), os.path.join(root, _hlatc.step_dir_name(done)),
                                 {_hlatc.METRICS_FILE: _fit.metrics_bytes(metrics)}, files,
                                 identity)
            _jax_checkpoint.prune(self._shards(), root, done, keep)

        return _fit.run_steps(self, loader, steps, metrics, save, checkpoint_every, on_step,
                              step_kw)

class _Pipeline:
    """A pipeline-parallel step's four programs, each compiled by JAX for
    every rank's device (`load`), run by the step's `TickPlan`, the one
    `hlatc.Trainer` runs in Rust: for each tick, the program of its phase
    with the tick's batch (`Step.tick_batches`) and the inputs its routing
    names from the rank's state and buffers; its outputs go back where the
    routing says, and its loss adds into the step's (every rank holds
    each). Then the apply step runs once on the state. Each process runs
    only its own ranks and holds only their state and buffers; the
    programs' collective-permutes and all-reduces join the processes.

    The buffers are zero at the first tick and carried from step to step,
    as hlatc's trainer carries them."""

    def __init__(
        self, step: "hlatc.Step", devices: Optional[Union["Device", Sequence["Device"]]]
    ) -> None:
        import jax

        plan, apply = step.tick_plan, step.apply_step
        assert plan is not None and apply is not None, "a pipeline-parallel step"
        programs: Dict[Phase, Optional["hlatc.Step"]] = {
            "warm_up": step.warm_up, "steady": step.steady, "cool_down": step.cool_down}
        self.ticks: Dict[Phase, StepFunction] = {}
        self._routes: Dict[Phase, "hlatc.TickRouting"] = {}
        for phase, program in programs.items():
            assert program is not None, phase
            self.ticks[phase] = load(program, devices)
            self._routes[phase] = plan.routing(phase)
        self.apply = load(apply, devices)
        self._phases = [plan.phase(t) for t in range(plan.ticks)]
        self.buffers: Dict[int, Dict[str, Any]] = {
            r: {t.name: jax.device_put(np.zeros(t.shape, _DTYPES[t.dtype]), self.apply.devices[r])
                for t in plan.buffers}
            for r in self.apply.local_ranks
        }

    def run(self, step: "hlatc.Step", state: Dict[int, Dict[str, Any]], tokens: Any,
            targets: Any) -> Tuple[float, Dict[int, Dict[str, Any]]]:
        """One optimizer step on the global batch (`tokens` and `targets` as
        raw tensors) from this process's ranks' `state`, whose accumulators
        the ticks update in place: the step's loss and the apply step's
        outputs by rank."""
        local = self.apply.local_ranks
        batches = {r: [dict_to_numpy(b) for b in step._native.tick_batches(tokens, targets, r)]
                   for r in local}
        loss = 0.0
        for tick, phase in enumerate(self._phases):
            route = self._routes[phase]
            inputs = {}
            for r in local:
                inputs[r] = {**{n: state[r][n] for n in route.from_state},
                             **{n: self.buffers[r][n] for n in route.from_buffers},
                             **{n: batches[r][tick][n] for n in route.from_batch}}
            out = self.ticks[phase].run(inputs)
            for r in local:
                state[r].update({n: out[r][n] for n in route.to_state})
                self.buffers[r].update({n: out[r][n] for n in route.to_buffers})
            loss += float(np.asarray(out[local[0]][route.loss]).reshape(-1)[0])
        return loss, self.apply.run({r: dict(state[r]) for r in local})
