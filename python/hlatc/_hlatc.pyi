"""Type stubs of hlatc's native module (the Rust core's PyO3 layer).
Use the `hlatc` package; these are what it wraps."""

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
import os

Raw = Tuple[str, List[int], bytes]

__version__: str

class Error(Exception): ...

class HloSyntaxError(Error):
    path: str
    line: int
    column: int

class ConfigError(Error):
    key: Optional[str]
    source: Optional[str]

class BatchError(Error):
    input: str
    row: int
    column: int
    value: int
    rank: int

class FileError(Error):
    path: str

class ProtoError(Error):
    path: str

class VerifyError(Error):
    path: str

class PassError(Error): ...

class NeuronRefusedError(Error):
    path: str
    findings: List[str]
class RunError(Error): ...
class UsageError(Error): ...

class TensorInfo:
    name: str
    shape: List[int]
    dtype: str
    role: str
    is_state: bool

class Module:
    name: str
    instruction_count: int
    def to_text(self) -> str: ...
    def to_proto(self) -> bytes: ...

def load_module(source: Union[str, "os.PathLike[str]", bytes]) -> Module: ...
def optimize(module: Module, passes: Optional[Sequence[str]] = None, target: str = "neuron") -> Module: ...
def passes() -> List[Tuple[str, str]]: ...

class Step:
    hlo_proto: bytes
    hlo_text: str
    inputs: List[TensorInfo]
    outputs: List[TensorInfo]
    world_size: int
    spmd: str
    rank_source: str
    manifest: Dict[str, Any]
    summary: Dict[str, Any]
    grad_accum: int
    micro_step: Optional[Step]
    apply_step: Optional[Step]
    def write_bundle(self, path: str) -> None: ...
    def init_state(
        self, seed: int = 0, rank: int = 0, checkpoint: Optional[str] = None
    ) -> Dict[str, Raw]: ...
    def example_batch(self, seed: int = 0, rank: int = 0) -> Dict[str, Raw]: ...
    def run(self, inputs: Dict[str, Raw]) -> Dict[str, Raw]: ...
    def run_ranks(self, inputs: Sequence[Dict[str, Raw]]) -> List[Dict[str, Raw]]: ...
    def rank_batch(
        self, tokens: Raw, targets: Raw, segment_ids: Optional[Raw] = None, rank: int = 0
    ) -> Dict[str, Raw]: ...
    def shard_state(self, state: Dict[str, Raw], rank: int) -> Dict[str, Raw]: ...
    def gather_state(self, per_rank: Sequence[Dict[str, Raw]]) -> Dict[str, Raw]: ...
    def hugging_face_params(self, state: Dict[str, Raw]) -> Dict[str, Raw]: ...

def compile_step(
    model: Optional[str] = None,
    config: Optional[Union[str, Dict[str, Any]]] = None,
    *,
    batch_size: Optional[int] = None,
    seq_len: Optional[int] = None,
    packed: bool = False,
    separate_projections: bool = False,
    precision: str = "bf16-mixed",
    rounding: Optional[str] = None,
    target: str = "neuron",
    passes: Optional[Sequence[str]] = None,
    disable_pass: Sequence[str] = ...,
    verify_each_pass: bool = False,
    remat: str = "core-attention",
    tp: int = 1,
    dp: int = 1,
    sequence_parallel: bool = False,
    zero1: bool = False,
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
    spmd: Optional[str] = None,
    rank_source: Optional[str] = None,
) -> Step: ...

class Trainer:
    steps_done: int
    def __init__(self, step: Step, seed: int = 0) -> None: ...
    def step(self, tokens: Raw, targets: Raw, segment_ids: Optional[Raw] = None) -> Dict[str, float]: ...
    def state(self) -> Dict[str, Raw]: ...
    def resume(self, state: Dict[str, Raw]) -> None: ...
    def hugging_face_params(self) -> Dict[str, Raw]: ...

def write_safetensors(path: str, tensors: Sequence[Tuple[str, Raw]]) -> None: ...
def read_safetensors(path: str) -> Dict[str, Raw]: ...
def rank_file(rank: int) -> str: ...

def plot_metrics(
    runs: Dict[str, List[Dict[str, float]]],
    path: str,
    series: str = "loss",
    title: Optional[str] = None,
    log_y: bool = False,
) -> None: ...
