"""The types of hlatc's public signatures: each option of a fixed set of
values as a `Literal` of its names, so a misspelt one is an error in an IDE
and under mypy, before anything runs.

The names are the Rust core's (`hlatc._hlatc.choices()` reports them, from
the types that parse them). The compile options' types are written from
the option table between the `option types` marker lines (here, and their
imports in `__init__.py` and `_hlatc.pyi`): `tests/it/option_surfaces.rs`
holds them to it, and `HLATC_BLESS=1 cargo test --test it option_surfaces`
writes them. `python/tests/test_api.py` holds every list here equal to
the core's, so a name added in Rust fails the tests until it is here too.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Literal, Mapping, NamedTuple, Optional, Union

import numpy.typing as npt

__all__ = [
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
    "Special",
    "CHOICES",
    "NeuronFinding",
]

# <option types: generated from the option table>
#: The names `--model` and `model=` take.
Model = Literal[
    "tiny",
    "hlat-7b",
    "hlat-70b",
    "llama3-8b",
    "llama3.1-8b",
    "llama3.2-1b",
    "mistral-7b",
    "qwen2-0.5b",
    "tinyllama",
    "smollm-135m",
    "tiny-moe",
    "mixtral-8x7b",
    "qwen3-30b-a3b",
]
#: The names `--precision` and `precision=` take.
Precision = Literal["fp32", "bf16-mixed", "bf16-pure", "bf16-master", "mxfp8", "fp64"]
#: The names `--rounding` and `rounding=` take.
Rounding = Literal["rne", "sr", "state-updates"]
#: The names `--target` and `target=` take.
Target = Literal["neuron", "cpu"]
#: The names `--chip` and `chip=` take.
Chip = Literal["trn1", "trn2", "trn3"]
#: The names `--remat` and `remat=` take.
Remat = Literal["none", "core-attention", "full-layer", "stage"]
#: The names `--ep-exchange` and `ep_exchange=` take.
EpExchange = Literal["all-to-all", "all-gather"]
#: The names `--cp-balance` and `cp_balance=` take.
CpBalance = Literal["head-tail", "contiguous"]
#: The names `--cp-exchange` and `cp_exchange=` take.
CpExchange = Literal["all-gather", "ring"]
#: The names `--reshard` and `reshard=` take.
Reshard = Literal["never", "always", "unless-pp"]
#: The names `--spmd` and `spmd=` take.
Spmd = Literal["replicas", "partitions"]
#: The names `--rank-source` and `rank_source=` take.
RankSource = Literal["device", "input"]
#: The names `--replica-groups` and `replica_groups=` take.
ReplicaGroups = Literal["explicit", "iota"]
#: The names `--pp-send` and `pp_send=` take.
PpSend = Literal["all-gather", "permute"]
# </option types>
#: A corpus file's format (`hlatc train --corpus-format`).
Format = Literal["jsonl", "lines", "paragraphs", "token-ids"]
#: How the loader fills rows (`hlatc train --packing`).
Packing = Literal["segments", "concat"]
#: The ids of a raw `.bin` token-id file.
RawDtype = Literal["u16", "u32"]
#: A column of the training metrics (`hlatc plot --series`).
Series = Literal["loss", "grad_norm", "learning_rate", "held_out_loss"]
#: A pipeline-parallel step's tick program (`Schedule.phase`).
Phase = Literal["warm_up", "steady", "cool_down"]
#: A program of a bundle, named as its folder is (`Bundle.programs`,
#: `BundleTensor.program`, `hlatc check --format json`): `step` the one of
#: a bundle of one.
Program = Literal["step", "micro_step", "apply_step", "warm_up", "steady", "cool_down"]
#: A Trainium instance kind `plan` prices (`hlatc plan --instance`).
# <instances: generated from the planner's instance kinds>
Instance = Literal[
    "trn1.32xlarge",
    "trn1n.32xlarge",
    "trn2.48xlarge",
    "trn3-server",
    "trn3-ultraserver-gen1",
    "trn3-ultraserver-gen2",
]
# </instances>

#: Each option's Literal by the name `hlatc._hlatc.choices()` gives it.
CHOICES: Dict[str, Any] = {
    # <option types by keyword: generated from the option table>
    "model": Model,
    "precision": Precision,
    "rounding": Rounding,
    "target": Target,
    "chip": Chip,
    "remat": Remat,
    "ep_exchange": EpExchange,
    "cp_balance": CpBalance,
    "cp_exchange": CpExchange,
    "reshard": Reshard,
    "spmd": Spmd,
    "rank_source": RankSource,
    "replica_groups": ReplicaGroups,
    "pp_send": PpSend,
    # </option types by keyword>
    "format": Format,
    "packing": Packing,
    "raw_dtype": RawDtype,
    "series": Series,
    "phase": Phase,
    "program": Program,
    "instance": Instance,
}

#: A file system path.
PathLike = Union[str, "os.PathLike[str]"]
#: Anything `numpy.asarray` takes: a tensor's value.
ArrayLike = npt.ArrayLike
#: A tensor hlatc gives back (bf16 as `ml_dtypes.bfloat16`).
Array = npt.NDArray[Any]
#: Tensors by name, as a step's inputs take them.
Tensors = Mapping[str, npt.ArrayLike]
#: A loader's BOS or EOS: True the tokenizer's own (found by name), False
#: or None none, a str that token.
Special = Union[bool, str, None]


class NeuronFinding(NamedTuple):
    """What the Neuron pre-flight found, and where: one of
    `NeuronRefusedError.findings`. `str()` gives the line `hlatc check`
    prints (`file:line:col: message`)."""

    #: neuronx-cc's code (`NCC_EVRF019`), or the rule's id in brackets.
    code: str
    #: The rule's id in hlatc's table (`f64`).
    rule: str
    severity: Literal["refusal", "warning"]
    #: The file of the bundle whose text places it (`model.hlo.txt`).
    file: str
    line: Optional[int]
    column: Optional[int]
    computation: str
    #: None for a finding about the whole module.
    instruction: Optional[str]
    #: The finding without its place.
    message: str

    def __str__(self) -> str:
        if self.line is not None and self.column is not None:
            return f"{self.file}:{self.line}:{self.column}: {self.message}"
        return f"{self.file}: {self.message}"
