"""Type stubs of hlatc's native module (the Rust core's PyO3 layer).
Use the `hlatc` package; these are what it wraps.

Checked against the built module by `python -m mypy.stubtest hlatc._hlatc`
(scripts/test.sh): a name, parameter or default here that the module does
not have fails the tests."""

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union, final

import numpy as np
import numpy.typing as npt
from typing_extensions import Self

from hlatc._types import (
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
    Format,
    Instance,
    NeuronFinding,
    Packing,
    Phase,
    RawDtype,
    Program,
    Series,
    Special,
)

# A tensor handed over: its XLA type name, its shape, and a 1-D uint8 array
# over its little-endian row-major bytes (a view of the caller's array).
_RawIn = Tuple[str, Sequence[int], npt.NDArray[np.uint8]]
# A tensor given back: the same, the array owning the buffer Rust made
# (uint8, or int32 for a loader's batch).
_RawOut = Tuple[str, List[int], npt.NDArray[Any]]

__version__: str
# What the module's `__all__` holds: the names below, in the order the
# module adds them.
__all__ = [
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
    "PYTHON_CODES",
    "USAGE_CATEGORIES",
    "compile_step",
    "choices",
    "argument_error",
    "program_name",
    "BUNDLE_FORMATS",
    "PROGRAM_FORMATS",
    "compile_spellings",
    "load_module",
    "optimize",
    "passes",
    "plot_metrics",
    "plan",
    "RunIdentity",
    "init_of_file",
    "expand_listing",
    "ListedBundle",
    "ListedProgram",
    "IDENTITY_GROUPS",
    "append_measured_run",
    "Plan",
    "Candidate",
    "CapacityAdvice",
    "PredictedRun",
    "CalibrationReport",
    "Prediction",
    "read_safetensors",
    "rank_file",
    "write_safetensors",
    "Step",
    "TensorInfo",
    "Schedule",
    "TickPlan",
    "TickRouting",
    "Module",
    "Trainer",
    "Loader",
    "data_layout",
    "RunCheckpoints",
    "fit_steps",
    "metrics_csv",
    "read_metrics_csv",
    "step_dir_name",
    "loader_file",
    "sharded_prepare_save",
    "sharded_write_rank",
    "sharded_write_file",
    "sharded_write_marker",
    "sharded_open",
    "sharded_read_marker",
    "sharded_problem",
    "sharded_steps",
    "sharded_prune",
    "STATE_FILE",
    "LOADER_FILE",
    "METRICS_FILE",
    "COMPLETE",
    "CHECKPOINT_FORMAT",
    "__version__",
]

STATE_FILE: str
LOADER_FILE: str
METRICS_FILE: str
COMPLETE: str
CHECKPOINT_FORMAT: str

class Error(Exception):
    code: Optional[str]

class HloSyntaxError(Error, ValueError):
    path: Optional[str]
    line: Optional[int]
    column: Optional[int]

class ConfigError(Error, ValueError):
    key: Optional[str]
    source: Optional[str]

class BatchError(Error, ValueError):
    input: Optional[str]
    row: Optional[int]
    column: Optional[int]
    value: Optional[int]
    rank: Optional[int]

class FileError(Error, OSError):
    path: Optional[str]

class ProtoError(Error, ValueError):
    path: Optional[str]

class VerifyError(Error, ValueError):
    path: Optional[str]

class PassError(Error, ValueError): ...

class NeuronRefusedError(Error, ValueError):
    path: Optional[str]
    findings: Optional[List[NeuronFinding]]

class RunError(Error, RuntimeError): ...
class UsageError(Error, ValueError):
    argument: Optional[str]
    category: Optional[str]

class UsageTypeError(UsageError, TypeError): ...

USAGE_CATEGORIES: List[str]

class DataError(Error, ValueError):
    path: Optional[str]
    line: Optional[int]
    column: Optional[int]
    offset: Optional[int]
    field: Optional[str]
    setting: Optional[str]
    tokenizer_vocab: Optional[int]
    model_vocab: Optional[int]

class CheckpointError(Error, OSError):
    path: Optional[str]

class InternalError(Error, RuntimeError): ...

#: The error codes only the Python API raises (docs/src/python.md lists them).
PYTHON_CODES: List[str]

def choices() -> Dict[str, List[str]]: ...
def argument_error(name: str, given: object, accepted: str, *, of_type: bool) -> UsageError: ...
def program_name(name: str) -> Program: ...

BUNDLE_FORMATS: List[str]
PROGRAM_FORMATS: List[str]
def compile_spellings() -> List[Tuple[str, Optional[str], str, Optional[str]]]: ...

@final
class TensorInfo:
    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> List[int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def is_state(self) -> bool: ...
    @property
    def parameter(self) -> Optional[str]: ...
    @property
    def layer(self) -> Optional[int]: ...

@final
class Schedule:
    @property
    def stages(self) -> int: ...
    @property
    def micro_batches(self) -> int: ...
    @property
    def ticks(self) -> int: ...
    @property
    def bubble(self) -> float: ...
    def phase(self, tick: int) -> Phase: ...
    def phases(self) -> List[Tuple[Phase, int, int]]: ...
    def forward_micro_batch(self, tick: int, stage: int) -> Optional[int]: ...
    def backward_micro_batch(self, tick: int, stage: int) -> Optional[int]: ...

@final
class TickRouting:
    @property
    def phase(self) -> Phase: ...
    @property
    def from_state(self) -> List[str]: ...
    @property
    def from_buffers(self) -> List[str]: ...
    @property
    def from_batch(self) -> List[str]: ...
    @property
    def to_state(self) -> List[str]: ...
    @property
    def to_buffers(self) -> List[str]: ...
    @property
    def loss(self) -> str: ...

@final
class TickPlan:
    @property
    def ticks(self) -> int: ...
    def phase(self, tick: int) -> Phase: ...
    @property
    def buffers(self) -> List[TensorInfo]: ...
    def routing(self, phase: Phase) -> TickRouting: ...

@final
class Module:
    @property
    def name(self) -> str: ...
    @property
    def instruction_count(self) -> int: ...
    def to_text(self) -> str: ...
    def to_proto(self) -> bytes: ...

def load_module(source: Union[str, "os.PathLike[str]", bytes]) -> Module: ...
def optimize(
    module: Module, passes: Optional[Sequence[str]] = None, target: Target = "neuron"
) -> Module: ...
def passes() -> List[Tuple[str, str]]: ...

@final
class Step:
    @property
    def hlo_proto(self) -> bytes: ...
    @property
    def hlo_text(self) -> str: ...
    @property
    def inputs(self) -> List[TensorInfo]: ...
    @property
    def outputs(self) -> List[TensorInfo]: ...
    @property
    def world_size(self) -> int: ...
    @property
    def spmd(self) -> Spmd: ...
    @property
    def rank_source(self) -> RankSource: ...
    @property
    def manifest(self) -> Dict[str, Any]: ...
    @property
    def summary(self) -> Dict[str, Any]: ...
    @property
    def grad_accum(self) -> int: ...
    @property
    def micro_step(self) -> Optional[Step]: ...
    @property
    def apply_step(self) -> Optional[Step]: ...
    @property
    def pp(self) -> int: ...
    @property
    def schedule(self) -> Optional[Schedule]: ...
    @property
    def tick_plan(self) -> Optional[TickPlan]: ...
    @property
    def config(self) -> Dict[str, Any]: ...
    @property
    def warm_up(self) -> Optional[Step]: ...
    @property
    def steady(self) -> Optional[Step]: ...
    @property
    def cool_down(self) -> Optional[Step]: ...
    def tick_batches(
        self, tokens: _RawIn, targets: _RawIn, rank: int = 0
    ) -> List[Dict[str, _RawOut]]: ...
    def write_bundle(self, path: Union[str, "os.PathLike[str]"]) -> None: ...
    def init_state(
        self,
        seed: int = 0,
        rank: int = 0,
        checkpoint: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> Dict[str, _RawOut]: ...
    def example_batch(self, seed: int = 0, rank: int = 0) -> Dict[str, _RawOut]: ...
    def run(self, inputs: Dict[str, _RawIn]) -> Dict[str, _RawOut]: ...
    def run_ranks(self, inputs: Sequence[Dict[str, _RawIn]]) -> List[Dict[str, _RawOut]]: ...
    def rank_batch(
        self,
        tokens: _RawIn,
        targets: _RawIn,
        segment_ids: Optional[_RawIn] = None,
        rank: int = 0,
    ) -> Dict[str, _RawOut]: ...
    def shard_state(self, state: Dict[str, _RawIn], rank: int) -> Dict[str, _RawOut]: ...
    def gather_state(self, per_rank: Sequence[Dict[str, _RawIn]]) -> Dict[str, _RawOut]: ...
    def hugging_face_params(self, state: Dict[str, _RawIn]) -> Dict[str, _RawOut]: ...

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
) -> Step: ...

@final
class Trainer:
    def __new__(cls, step: Step, seed: int = 0) -> Self: ...
    @property
    def steps_done(self) -> int: ...
    def step(
        self, tokens: _RawIn, targets: _RawIn, segment_ids: Optional[_RawIn] = None
    ) -> Dict[str, float]: ...
    def state(self) -> Dict[str, _RawOut]: ...
    def resume(self, state: Dict[str, _RawIn]) -> None: ...
    def state_safetensors(self) -> bytes: ...
    def resume_safetensors(self, data: bytes, what: str) -> None: ...
    def hugging_face_params(self) -> Dict[str, _RawOut]: ...

@final
class Loader:
    def __new__(
        cls,
        sources: Sequence[str],
        *,
        vocab_size: int,
        batch_size: int,
        seq_len: int,
        replicas: int = 1,
        owned: Optional[Sequence[int]] = None,
        tokenizer: Optional[str] = None,
        text_field: str = ...,
        format: Optional[Format] = None,
        packing: Packing = "segments",
        shuffle_buffer: int = ...,
        seed: int = 0,
        epochs: Optional[int] = None,
        bos: Special,
        eos: Special,
        eos_id: Optional[int] = None,
        raw_dtype: RawDtype = "u16",
        position: Optional[str] = None,
    ) -> Self: ...
    @property
    def rows_per_replica(self) -> int: ...
    @property
    def replicas(self) -> int: ...
    @property
    def owned(self) -> List[int]: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def packing(self) -> Packing: ...
    @property
    def tokenizer_vocab(self) -> Optional[int]: ...
    def next_batch(self) -> Optional[Dict[str, _RawOut]]: ...
    def position(self) -> str: ...
    def seek(self, position: str) -> None: ...
    def stats(self) -> Dict[str, Union[int, float]]: ...
    def close(self) -> None: ...

def data_layout(step: Step) -> Dict[str, Any]: ...

@final
class RunCheckpoints:
    def __new__(
        cls, dir: str, keep: int, identity: RunIdentity, allow_changes: List[str]
    ) -> Self: ...
    @property
    def notices(self) -> List[Tuple[str, str]]: ...
    def take_restored(
        self,
    ) -> Optional[Tuple[int, str, bytes, Optional[bytes], List[Dict[str, float]]]]: ...
    def save(
        self,
        done: int,
        state: bytes,
        loader: Optional[bytes],
        metrics: Sequence[Mapping[str, Optional[float]]],
    ) -> str: ...
    def close(self) -> None: ...

def fit_steps(
    trainer: Any,
    loader: Any,
    steps: int,
    metrics: List[Dict[str, float]],
    save: Optional[Callable[[int, List[Dict[str, float]]], None]],
    checkpoint_every: int,
    on_step: Optional[Callable[[Dict[str, float]], Optional[bool]]],
    step_kw: Optional[Dict[str, Any]] = None,
) -> Optional[int]: ...
def metrics_csv(rows: Sequence[Mapping[str, Optional[float]]]) -> str: ...
def read_metrics_csv(text: str, what: str) -> List[Dict[str, float]]: ...

# A per-rank checkpoint's marker: (steps_done, identity or None, each
# file's sha256 by name).
_Marker = Tuple[int, Optional[RunIdentity], Dict[str, str]]

def step_dir_name(step: int) -> str: ...
def loader_file(replica: int) -> str: ...
def sharded_prepare_save(dir: str, world_size: int, first: bool) -> None: ...
def sharded_write_rank(dir: str, rank: int, tensors: Sequence[Tuple[str, _RawIn]]) -> str: ...
def sharded_write_file(dir: str, name: str, data: bytes) -> str: ...
def sharded_write_marker(
    dir: str,
    steps_done: int,
    world_size: int,
    config: str,
    identity: Optional[RunIdentity],
    files: Mapping[str, str],
) -> None: ...
def sharded_open(dir: str, world_size: int, ranks: Sequence[int]) -> _Marker: ...
def sharded_read_marker(dir: str, world_size: int) -> _Marker: ...
def sharded_problem(
    dir: str, world_size: int, ranks: Sequence[int], replicas: Sequence[int]
) -> Optional[str]: ...
def sharded_steps(root: str) -> List[int]: ...
def sharded_prune(root: str, saved: int, keep: int, first: bool) -> None: ...
def write_safetensors(path: str, tensors: Sequence[Tuple[str, _RawIn]]) -> None: ...
def read_safetensors(path: str) -> Dict[str, _RawOut]: ...
def rank_file(rank: int) -> str: ...
@final
class Candidate:
    @property
    def layout(self) -> str: ...
    @property
    def tp(self) -> int: ...
    @property
    def pp(self) -> int: ...
    @property
    def dp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def ep_exchange(self) -> EpExchange: ...
    @property
    def sequence_parallel(self) -> bool: ...
    @property
    def zero1(self) -> bool: ...
    @property
    def fsdp(self) -> int: ...
    @property
    def remat(self) -> Remat: ...
    @property
    def micro_batch(self) -> int: ...
    @property
    def precision(self) -> Precision: ...
    @property
    def step_seconds(self) -> float: ...
    @property
    def seq_per_s(self) -> float: ...
    @property
    def tokens_per_s(self) -> float: ...
    @property
    def mfu(self) -> float: ...
    @property
    def memory_per_rank(self) -> int: ...
    @property
    def memory(self) -> Dict[str, int]: ...
    @property
    def fits(self) -> bool: ...
    @property
    def cost_per_4m_tokens(self) -> Optional[float]: ...
    @property
    def breakdown(self) -> Dict[str, float]: ...
    @property
    def command(self) -> str: ...
    @property
    def exact(self) -> bool: ...
    @property
    def preflight_warnings(self) -> List[str]: ...

@final
class PredictedRun:
    @property
    def run(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def layout(self) -> str: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def measured_seq_per_s(self) -> float: ...
    @property
    def predicted_seq_per_s(self) -> float: ...
    @property
    def relative_error(self) -> float: ...

@final
class CalibrationReport:
    @property
    def path(self) -> str: ...
    @property
    def runs(self) -> int: ...
    @property
    def parameters(self) -> Dict[str, float]: ...
    @property
    def in_sample(self) -> List[PredictedRun]: ...
    @property
    def leave_one_out(self) -> List[PredictedRun]: ...

@final
class Prediction:
    @property
    def path(self) -> str: ...
    @property
    def errors(self) -> List[PredictedRun]: ...

@final
class CapacityAdvice:
    @property
    def factor(self) -> float: ...
    @property
    def dropless_seq_per_s(self) -> float: ...
    @property
    def capped(self) -> Candidate: ...

@final
class Plan:
    @property
    def model(self) -> Optional[str]: ...
    @property
    def instance(self) -> Instance: ...
    @property
    def nodes(self) -> int: ...
    @property
    def global_batch(self) -> int: ...
    @property
    def seq_len(self) -> Optional[int]: ...
    @property
    def searched(self) -> bool: ...
    @property
    def calibrated_on(self) -> str: ...
    @property
    def report(self) -> Optional[CalibrationReport]: ...
    @property
    def predicted(self) -> Optional[Prediction]: ...
    @property
    def candidates(self) -> List[Candidate]: ...
    @property
    def too_large(self) -> List[str]: ...
    @property
    def pruned(self) -> List[Tuple[str, str]]: ...
    @property
    def refused(self) -> List[Tuple[str, str]]: ...
    @property
    def capacity_advice(self) -> Optional[CapacityAdvice]: ...
    @property
    def seconds(self) -> float: ...
    def best(self) -> Optional[Candidate]: ...

def plan(
    *,
    model: Optional[Model] = None,
    config: Optional[Union[str, "os.PathLike[str]", Mapping[str, Any]]] = None,
    seq_len: Optional[int] = None,
    precision: Optional[Precision] = None,
    instance: Instance = "trn1.32xlarge",
    nodes: int = 1,
    global_batch: int = 1024,
    top: int = 5,
    price: Optional[float] = None,
    layout: Optional[str] = None,
    calibration: Optional[Union[str, "os.PathLike[str]"]] = None,
    threads: int = 0,
    kernels: Optional[Dict[str, str]] = None,
    capacity_factor: Optional[float] = None,
    json: Optional[Union[str, "os.PathLike[str]"]] = None,
    plot: Optional[Union[str, "os.PathLike[str]"]] = None,
    predict: Optional[Union[str, "os.PathLike[str]"]] = None,
    report: bool = False,
) -> Plan: ...
IDENTITY_GROUPS: List[str]

@final
class RunIdentity:
    @staticmethod
    def of_step(
        step: Step,
        tokenizer: Optional[Union[str, "os.PathLike[str]"]] = None,
        corpus: Optional[Sequence[str]] = None,
        seed: Optional[int] = None,
        init: Optional[str] = None,
    ) -> RunIdentity: ...
    @staticmethod
    def from_json(text: str, source: str) -> RunIdentity: ...
    def to_json(self) -> str: ...
    @property
    def fields(self) -> Dict[str, str]: ...
    @property
    def allowed_changes(self) -> List[Dict[str, Union[int, str]]]: ...
    @property
    def names(self) -> List[str]: ...
    def with_allowed_changes_of(self, other: RunIdentity) -> RunIdentity: ...
    def check(
        self, recorded: RunIdentity, allowed: Sequence[str], step: int, where: str
    ) -> Tuple[RunIdentity, List[str]]: ...
    def __eq__(self, value: object, /) -> bool: ...

def init_of_file(path: Union[str, "os.PathLike[str]"]) -> str: ...
def expand_listing(listing: str) -> str: ...
@final
class ListedBundle:
    def __new__(cls, path: Union[str, "os.PathLike[str]"]) -> Self: ...
    @property
    def format(self) -> str: ...
    @property
    def manifest(self) -> Dict[str, Any]: ...
    @property
    def programs(self) -> List[ListedProgram]: ...

@final
class ListedProgram:
    @property
    def name(self) -> str: ...
    @property
    def manifest(self) -> str: ...
    @property
    def inputs(self) -> List[Dict[str, Any]]: ...
    @property
    def outputs(self) -> List[Dict[str, Any]]: ...
def append_measured_run(
    path: Union[str, "os.PathLike[str]"],
    *,
    model: str,
    instance: Instance,
    nodes: int,
    tp: int,
    dp: int,
    seq_per_s: float,
    global_batch: int,
    seq_len: int,
    pp: int = 1,
    sequence_parallel: bool = False,
    zero1: bool = False,
    remat: Remat = "core-attention",
    micro_batch: int = 1,
    precision: Precision = "bf16-master",
    sdk: str = "unknown",
    source: str = "hlatc",
) -> None: ...
def plot_metrics(
    runs: Dict[str, List[Dict[str, float]]],
    path: Union[str, "os.PathLike[str]"],
    series: Series = "loss",
    title: Optional[str] = None,
    log_y: bool = False,
) -> None: ...
