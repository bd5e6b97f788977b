"""hlatc's training step run by JAX.

`load(step)` compiles the step's HLO with JAX's own XLA for a JAX device and
returns a function that takes and gives JAX arrays by name, with the
carried state's buffers donated (each state input is updated in place;
the arrays passed in are deleted). A JAX user gets hlatc's step (its
passes, precision policy and compile speed) on any backend JAX runs on.

Tested with jax and jaxlib 0.10.2 (the `jax` extra). JAX is imported only
when `load` is called.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import hlatc


class StepFunction:
    """The step compiled by JAX. Call it with every input by name (NumPy or
    JAX arrays); it returns every output by name as JAX arrays."""

    def __init__(self, step: "hlatc.Step", device: Any) -> None:
        import jax
        from jax._src.lib import xla_client as xc

        if step.world_size != 1:
            raise hlatc.UsageError(
                f"hlatc.jax runs one-rank steps; this one runs on {step.world_size} ranks "
                "(run it with Step.run_ranks)"
            )
        self.device = device if device is not None else jax.devices()[0]
        module = step.module()
        passes = []
        if self.device.platform != "neuron":
            # Neuron's custom calls as the same math in plain HLO.
            passes.append("lower-neuron-calls")
        if self.device.platform == "cpu":
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
        self._executable = self.device.client.compile_and_load(
            stablehlo, xc.DeviceList((self.device,)), options
        )
        self.input_names: List[str] = [t.name for t in step.inputs]
        self.output_names: List[str] = [t.name for t in step.outputs]
        self._jax = jax

    def __call__(self, inputs: Mapping[str, Any]) -> Dict[str, Any]:
        missing = [n for n in self.input_names if n not in inputs]
        if missing:
            raise hlatc.UsageError(f"no input {', '.join(repr(m) for m in missing[:5])}"
                                   f"{' and more' if len(missing) > 5 else ''}")
        extra = sorted(set(inputs) - set(self.input_names))
        if extra:
            raise hlatc.UsageError(f"the step takes no input named {', '.join(extra)}")
        args = [self._jax.device_put(inputs[n], self.device) for n in self.input_names]
        results = self._executable.execute_sharded(args)
        outputs = results.disassemble_into_single_device_arrays()
        return {n: o[0] for n, o in zip(self.output_names, outputs)}


def load(step: "hlatc.Step", device: Optional[Any] = None) -> StepFunction:
    """`step` compiled by JAX for `device` (JAX's first device by default)."""
    return StepFunction(step, device)
