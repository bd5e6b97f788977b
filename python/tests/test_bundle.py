"""`hlatc.Bundle`: every tensor of a bundle's manifest, flat (the decoder
layers' runs expanded), against the compiled step's own signature."""

from __future__ import annotations

import json

import pytest

import hlatc
from hlatc import _hlatc

SHAPE = dict(model="tiny", target="cpu", batch_size=4, seq_len=8, precision="fp32")


def signature(program: str, step: hlatc.Step) -> list:
    return ([(program, "input", i, t.name, tuple(t.shape), t.dtype, t.role, t.parameter, t.layer)
             for i, t in enumerate(step.inputs)]
            + [(program, "output", i, t.name, tuple(t.shape), t.dtype, t.role, t.parameter,
                t.layer) for i, t in enumerate(step.outputs)])


def flat(bundle: hlatc.Bundle) -> list:
    return [(t.program, t.kind, t.index, t.name, t.shape, t.dtype, t.role, t.parameter, t.layer)
            for t in bundle]


def test_a_bundle_of_one_program_lists_every_tensor(tmp_path):
    step = hlatc.compile_step(**SHAPE)
    step.write_bundle(str(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    # The manifest holds the layers as runs: fewer entries than tensors.
    assert len(manifest["inputs"]) < len(step.inputs)
    bundle = hlatc.Bundle(tmp_path / "b")
    assert bundle.programs == ["step"] and bundle.format == manifest["format"]
    assert flat(bundle) == signature("step", step)
    assert len(bundle) == len(step.inputs) + len(step.outputs) == 97
    t = next(t for t in bundle.inputs() if t.name == "model.layers.1.mlp.down_proj.weight")
    assert (t.index, t.shape, t.dtype, t.role, t.layer) == (12, (32, 48), "f32", "parameter", 1)
    # Each tensor states its parameter and layer; its name only spells them.
    m = next(t for t in step.inputs if t.name == "adam_v.model.layers.1.mlp.down_proj.weight")
    assert (m.role, m.parameter, m.layer) == ("adam_v", "model.layers.1.mlp.down_proj.weight", 1)
    head = next(t for t in bundle.inputs() if t.name == "adam_m.lm_head.weight")
    assert (head.parameter, head.layer) == ("lm_head.weight", None)
    assert all((t.parameter is None) == (t.role not in ("parameter", "adam_m", "adam_v"))
               for t in bundle)
    assert [t.name for t in bundle.outputs()][:3] == ["loss", "grad_norm", "learning_rate"]


@pytest.mark.parametrize("layout, programs", [
    ({"grad_accum": 2}, ["micro_step", "apply_step"]),
    ({"pp": 2, "grad_accum": 2}, ["warm_up", "steady", "cool_down", "apply_step"]),
])
def test_a_bundle_of_several_programs_lists_each(tmp_path, layout, programs):
    step = hlatc.compile_step(**SHAPE, **layout)
    step.write_bundle(str(tmp_path / "b"))
    bundle = hlatc.Bundle(str(tmp_path / "b"))
    # One spelling: each program is named as its folder, its Step attribute,
    # its summary's key and `hlatc check --format json`'s program.
    assert bundle.programs == programs
    assert [p["name"] for p in bundle.manifest["programs"]] == programs
    assert [p["dir"] for p in bundle.manifest["programs"]] == programs
    assert set(programs) <= set(step.summary)
    assert set(programs) <= set(_hlatc.choices()["program"])
    want = [row for name in programs for row in signature(name, getattr(step, name))]
    assert flat(bundle) == want
    assert {t.program for t in bundle.inputs("apply_step")} == {"apply_step"}
    # A program the bundle does not hold is refused, naming those it does.
    for other in ("nope", "micro step", "step"):
        with pytest.raises(hlatc.UsageError) as e:
            bundle.outputs(other)
        assert (e.value.argument, e.value.category) == ("program", "not_found")
        assert all(p in str(e.value) for p in programs), str(e.value)
    with pytest.raises(hlatc.UsageTypeError) as e:
        bundle.inputs(5)  # type: ignore[arg-type]
    assert e.value.argument == "program" and isinstance(e.value, TypeError)


def test_an_accumulation_bundle_of_the_old_spelling_still_opens(tmp_path):
    # Bundles written before the one spelling named accumulation's programs
    # `micro step` and `apply step` (the folders were micro_step/ and
    # apply_step/ then too).
    step = hlatc.compile_step(**SHAPE, grad_accum=2)
    step.write_bundle(tmp_path / "b")
    top = tmp_path / "b" / "manifest.json"
    manifest = json.loads(top.read_text())
    for p, old in zip(manifest["programs"], ["micro step", "apply step"]):
        p["name"] = old
    top.write_text(json.dumps(manifest))
    bundle = hlatc.Bundle(tmp_path / "b")
    assert bundle.programs == ["micro_step", "apply_step"]
    assert len(bundle.inputs("micro_step")) == len(step.micro_step.inputs)
    manifest["programs"][0]["name"] = "macro step"
    top.write_text(json.dumps(manifest))
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "b")
    assert (e.value.code, e.value.path) == ("artifact.file", str(top))
    # Named: the program refused and one the bundle could hold.
    assert "'macro step'" in str(e.value) and "micro_step" in str(e.value)


def test_what_is_not_a_bundle_is_refused_by_name(tmp_path):
    # Each the CLI's code for a bundle it cannot read (`hlatc run`'s), and
    # the file at fault: the directory, then its manifest.
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "missing")
    assert (e.value.code, e.value.path) == ("artifact.file", str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "empty")
    manifest = tmp_path / "empty" / "manifest.json"
    assert (e.value.code, e.value.path) == ("artifact.file", str(manifest))
    # The manifest named is the one missing.
    assert "missing" in str(e.value) and not manifest.exists()
    manifest.write_text('{"format": "other/1"}')
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "empty")
    assert (e.value.code, e.value.path) == ("artifact.file", str(manifest))
    # Named: the format found, which no field holds.
    assert "'other/1'" in str(e.value)
    # A later format is named, with those this hlatc reads; not "no 'inputs'
    # list", as it once said.
    (tmp_path / "empty" / "manifest.json").write_text('{"format": "hlatc-bundle/9"}')
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "empty")
    assert "'hlatc-bundle/9'" in str(e.value) and "inputs" not in str(e.value)
    assert all(repr(f) in str(e.value) for f in _hlatc.BUNDLE_FORMATS)
    (tmp_path / "empty" / "manifest.json").write_text(
        '{"format": "hlatc-bundle/1", "inputs": [{"layers": [0, 2]}], "outputs": []}')
    with pytest.raises(hlatc.FileError) as e:
        hlatc.Bundle(tmp_path / "empty")
    assert (e.value.code, e.value.path) == ("artifact.file", str(manifest))
    # Named: the listing whose entry cannot be read.
    assert "'inputs'" in str(e.value)


def test_trn2_and_trn3_bundles_name_their_chip_and_a_cpu_one_refuses_a_chip(tmp_path):
    assert hlatc.compile_step(model="tiny").summary["chip"] == "trn1"
    assert hlatc.compile_step(model="tiny", target="cpu").summary["chip"] is None
    for chip, core in [("trn2", 24 << 30), ("trn3", 36 << 30)]:
        step = hlatc.compile_step(model="tiny", chip=chip)
        assert step.summary["chip"] == chip
        step.write_bundle(tmp_path / chip)
        flags = json.loads((tmp_path / chip / "compile_flags.json").read_text())
        # The integer flags are pinned, so the bundle compiles the same
        # under the SDK after 2.32.
        assert flags[:5] == [
            "--framework=XLA",
            f"--target={chip}",
            "--logical-nc-config=2",
            "--native-int64=enabled",
            "--implicit-integer-downcast=none",
        ]
        manifest = json.loads((tmp_path / chip / "manifest.json").read_text())
        assert manifest["neuron"]["chip"] == chip
        assert manifest["neuron"]["hbm_per_core"] == core
        assert manifest["neuron"]["env"]["NEURON_LOGICAL_NC_CONFIG"] == "2"
    # A chip the target does not take, against a name of no chip.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(model="tiny", target="cpu", chip="trn2")
    assert (e.value.argument, e.value.category) == ("chip", "conflict")
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.compile_step(model="tiny", chip="trn4")  # type: ignore[arg-type]
    assert e.value.code == "usage.out_of_range"
    assert (e.value.argument, e.value.category) == ("chip", "out_of_range")


def test_the_listed_bundle_gives_the_manifest_and_each_program_s_listing(tmp_path):
    # `hlatc.Bundle`'s reader, the library's: the manifests as Python
    # values (no JSON text), each program's entries with runs read out.
    step = hlatc.compile_step(**SHAPE, grad_accum=2)
    step.write_bundle(tmp_path / "b")
    listed = _hlatc.ListedBundle(tmp_path / "b")
    top = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert listed.manifest == top and listed.format == top["format"]
    assert [p.name for p in listed.programs] == [p["name"] for p in top["programs"]]
    for p in listed.programs:
        assert p.manifest == str(tmp_path / "b" / p.name / "manifest.json")
        own = getattr(step, p.name)
        assert [(t["index"], t["name"], t["shape"], t["dtype"]) for t in p.inputs] == [
            (i, t.name, list(t.shape), t.dtype) for i, t in enumerate(own.inputs)]
        assert [t["name"] for t in p.outputs] == [t.name for t in own.outputs]
    bundle = hlatc.Bundle(tmp_path / "b")
    assert bundle.manifest == top
    assert len(bundle) == sum(len(p.inputs) + len(p.outputs) for p in listed.programs)
