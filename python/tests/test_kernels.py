"""`kernels=`: kernel points computed by another implementation (issue
70). Blocked attention runs the step the plain graph runs; the choice is
recorded in the step's config; a request that does not apply falls back
with a warning naming why, and a bad one raises `ConfigError`."""

import warnings

import numpy as np
import pytest

import hlatc


def _loss_after_a_step(step: hlatc.Step) -> float:
    out = step.run({**step.init_state(seed=3), **step.example_batch(seed=5)})
    return float(out["loss"])


def test_blocked_attention_computes_the_plain_graphs_loss():
    plain = hlatc.compile_step(model="tiny", target="cpu", precision="fp32")
    tiled = hlatc.compile_step(
        model="tiny", target="cpu", precision="fp32", kernels={"attention": "blocked:4"}
    )
    assert plain.config["kernels"]["attention"] == "hlo"
    assert tiled.config["kernels"] == {
        "attention": "blocked:4",
        "softmax": "fused",
        "rmsnorm": "hlo",
        "swiglu": "hlo",
        "cross-entropy": "hlo",
    }
    assert plain.hlo_text != tiled.hlo_text
    np.testing.assert_allclose(_loss_after_a_step(tiled), _loss_after_a_step(plain), rtol=1e-6)


def test_a_request_that_does_not_apply_falls_back_with_a_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = hlatc.compile_step(model="tiny", target="cpu", kernels={"attention": "blocked:5"})
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert messages == [
        "kernel attention=blocked:5 does not apply (a tile of 5 does not cut a sequence "
        "of 16 into whole tiles); attention takes hlo"
    ]
    assert step.config["kernels"]["attention"] == "hlo"


@pytest.mark.parametrize(
    "kernels, says",
    [
        ({"attn": "blocked"}, "unknown kernel point 'attn'"),
        ({"attention": "flash"}, "has no implementation 'flash'; it has: hlo, blocked, looped, imported"),
        ({"attention": "blocked:x"}, "'x' is not a tile size"),
    ],
)
def test_bad_requests_raise_config_error(kernels, says):
    with pytest.raises(hlatc.ConfigError) as e:
        hlatc.compile_step(model="tiny", target="cpu", kernels=kernels)
    # The code `hlatc compile --kernel` prints for the same request.
    assert e.value.code == "option.kernels"
    # Named: the point, implementation or tile refused, which no field holds.
    assert says in str(e.value)


@pytest.mark.parametrize("kernels", [["attention=blocked"], {"attention": 4}, "blocked"])
def test_kernels_that_are_not_a_dict_of_str_are_refused(kernels):
    with pytest.raises(TypeError) as e:
        hlatc.compile_step(model="tiny", target="cpu", kernels=kernels)
    assert isinstance(e.value, hlatc.UsageTypeError)
    assert (e.value.code, e.value.argument) == ("usage.invalid", "kernels")


def test_plan_prices_the_layout_with_blocked_attention():
    p = hlatc.plan(
        model="llama3.2-1b",
        seq_len=2048,
        layout="tp=32",
        kernels={"attention": "blocked"},
    )
    (c,) = p.candidates
    assert c.layout.endswith(",attention=blocked")
    assert "--kernel attention=blocked" in c.command


_NKI = str(
    __import__("pathlib").Path(__file__).resolve().parents[2]
    / "tests/fixtures/kernels/nki_flash_attention.json"
)

# Tiny's shapes with the 512 positions NKI's flash kernels take at least.
_TINY_512 = {
    "model_type": "llama",
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}


def test_nki_flash_attention_is_the_neuron_steps_calls_and_runs_on_cpu_by_reference():
    def step(target, kernels=None):
        return hlatc.compile_step(
            config=_TINY_512,
            batch_size=1,
            seq_len=512,
            precision="fp32",
            target=target,
            kernels=kernels,
        )

    neuron = step("neuron", {"attention": f"imported:{_NKI}"})
    assert neuron.hlo_text.count('custom_call_target="AwsNeuronCustomNativeKernel"') == 2
    assert neuron.config["kernels"]["attention"] == f"imported:{_NKI}"
    on_cpu = step("cpu", {"attention": f"imported:{_NKI}"})
    assert "AwsNeuronCustomNativeKernel" not in on_cpu.hlo_text
    np.testing.assert_allclose(
        _loss_after_a_step(on_cpu), _loss_after_a_step(step("cpu")), rtol=1e-5
    )
