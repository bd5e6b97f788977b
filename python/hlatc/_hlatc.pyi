"""Type stubs of hlatc's native module (the Rust core's PyO3 layer).
Use the `hlatc` package; these are what it wraps."""

from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union
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
    def state_safetensors(self) -> bytes: ...
    def resume_safetensors(self, data: bytes, what: str) -> None: ...
    def hugging_face_params(self) -> Dict[str, Raw]: ...

Special = Union[bool, str, None]

class Loader:
    rows_per_replica: int
    replicas: int
    owned: List[int]
    seq_len: int
    packing: str
    tokenizer_vocab: Optional[int]
    def __init__(
        self,
        sources: Sequence[str],
        *,
        vocab_size: int,
        batch_size: int,
        seq_len: int,
        replicas: int = 1,
        owned: Optional[Sequence[int]] = None,
        tokenizer: Optional[str] = None,
        text_field: str = "text",
        format: Optional[Literal["jsonl", "lines", "paragraphs", "token-ids"]] = None,
        packing: Literal["segments", "concat"] = "segments",
        shuffle_buffer: int = 1024,
        seed: int = 0,
        epochs: Optional[int] = None,
        bos: Special,
        eos: Special,
        eos_id: Optional[int] = None,
        raw_dtype: Literal["u16", "u32"] = "u16",
        position: Optional[str] = None,
    ) -> None: ...
    def next_batch(self) -> Optional[Dict[str, Raw]]: ...
    def position(self) -> str: ...
    def seek(self, position: str) -> None: ...
    def stats(self) -> Dict[str, Union[int, float]]: ...
    def close(self) -> None: ...

def data_layout(step: Step) -> Dict[str, Any]: ...

STATE_FILE: str
LOADER_FILE: str
METRICS_FILE: str
COMPLETE: str

class CheckpointDir:
    path: str
    def __init__(self, dir: str, keep: int = 3) -> None: ...
    def step_dir(self, step: int) -> str: ...
    def save(self, step: int, files: Sequence[Tuple[str, bytes]]) -> str: ...
    def latest(
        self,
    ) -> Tuple[Optional[Tuple[int, str, Dict[str, bytes]]], List[Tuple[str, str]]]: ...

def metrics_csv(rows: Sequence[Dict[str, Optional[float]]]) -> str: ...
def read_metrics_csv(text: str, what: str) -> List[Dict[str, float]]: ...

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
