"""Sharded `hlatc.Trainer` runs of a model whose dots XLA CPU splits over its
threads meet at every collective on a 2-core machine, and follow the
single-device run (tests/it/collectives_meet.rs is the CLI's; docs/src/runtime.md,
"Several devices, and the threads they need")."""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

import hlatc

# The report's model: 4 layers, hidden 256, intermediate 688, 8 heads over
# 4 KV heads, a 1,024-token vocabulary. The tiny model's dots are too small
# for XLA to split, so it never met the deadlock.
CONFIG = {
    "model_type": "llama", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 688,
    "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 4,
    "rms_norm_eps": 1e-6, "rope_theta": 500000.0, "tie_word_embeddings": False,
    "max_position_embeddings": 128,
}
SHAPE = dict(batch_size=8, seq_len=32, precision="fp32", target="cpu",
             lr_max=3e-4, lr_min=3e-5, warmup_steps=1, total_steps=3)
STEPS = 3

pytestmark = pytest.mark.xdist_group("collectives_meet")


def losses(**layout: int) -> List[Tuple[float, float]]:
    trainer = hlatc.Trainer(hlatc.compile_step(config=CONFIG, **SHAPE, **layout), seed=0)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(STEPS):
        tokens = rng.integers(0, CONFIG["vocab_size"], size=(8, 32), dtype=np.int32)
        stats: Dict[str, float] = trainer.step(tokens, np.roll(tokens, -1, axis=1))
        out.append((stats["loss"], stats["grad_norm"]))
    return out


def test_sharded_trainers_of_a_wider_model_meet_and_follow_one_device() -> None:
    single = losses()
    for layout in (dict(dp=2), dict(tp=2, dp=2)):
        sharded = losses(**layout)
        for k, (s, p) in enumerate(zip(single, sharded)):
            assert abs(p[0] - s[0]) <= 1e-5 * abs(s[0]), (layout, k, p, s)
            assert abs(p[1] - s[1]) <= 1e-5 * abs(s[1]), (layout, k, p, s)
