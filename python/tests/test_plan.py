"""hlatc.plan: hlatc plan's search from Python, the same candidates typed."""

import pathlib

import pytest

import hlatc


def test_one_layout_is_priced_with_its_command_and_memory():
    p = hlatc.plan(
        model="hlat-7b",
        nodes=16,
        precision="bf16-master",
        layout="tp=8,dp=64,sp,zero1",
        price=21.5,
    )
    assert isinstance(p, hlatc.Plan)
    assert (p.model, p.instance, p.nodes, p.seq_len) == ("hlat-7b", "trn1.32xlarge", 16, 4096)
    [c] = p.candidates
    assert isinstance(c, hlatc.Candidate)
    assert (c.tp, c.pp, c.dp, c.sequence_parallel, c.zero1) == (8, 1, 64, True, True)
    assert (c.remat, c.micro_batch, c.precision) == ("core-attention", 1, "bf16-master")
    # The SDK measured 81 to 101 seq/s for this layout (the built-in fit's runs).
    assert 81 < c.seq_per_s < 110
    assert c.tokens_per_s == pytest.approx(c.seq_per_s * 4096)
    assert c.step_seconds == pytest.approx(1024 / c.seq_per_s)
    assert 0.2 < c.mfu < 0.5
    assert c.fits and c.exact and p.best() is not None
    assert c.memory_per_rank == sum(c.memory.values())
    assert c.memory["parameters"] > 0
    assert c.cost_per_4m_tokens == pytest.approx(21.5 * 16 * 4e6 / c.tokens_per_s / 3600)
    total = sum(c.breakdown[k] for k in ("matmul", "memory", "link", "network", "latency", "launch"))
    assert total - c.breakdown["overlapped"] == pytest.approx(c.step_seconds)
    assert c.command.startswith(
        "hlatc compile --model hlat-7b --batch-size 1024 --seq-len 4096 --precision bf16-master "
        "--chip trn1 "
        "--tp 8 --dp 64 --sequence-parallel --zero1")
    assert c.command.endswith(" --out build/plan")


def test_a_search_ranks_every_layout_those_that_fit_first():
    p = hlatc.plan(model="tiny", nodes=1, global_batch=64, seq_len=16, precision="fp32", top=2)
    assert len(p.candidates) >= 10
    fits = [c.fits for c in p.candidates]
    assert fits == sorted(fits, reverse=True)
    rates = [c.seq_per_s for c in p.candidates if c.fits]
    assert rates[2:] == sorted(rates[2:], reverse=True)
    assert all(c.exact for c in p.candidates[:2])
    assert p.seconds > 0
    # Every layout fits, so a twin with more remat than one that fits is
    # left out (without stages), and so is FSDP gathering its weights again
    # where its twin that keeps them fits (or a twin of that with less
    # remat does); each is named with the twin that decided it.
    assert p.pruned
    evaluated = {c.layout for c in p.candidates}
    pruned = dict(p.pruned)
    for layout, why in p.pruned:
        twin = why.split(" ")[0]
        if "reshard=always" in layout:
            assert why.endswith("gathers less, and fits"), why
            assert twin == layout.replace(",reshard=always", "")
            assert twin in evaluated or pruned[twin].endswith("recomputes less and fits")
        else:
            assert "remat=none" not in layout
            assert why.endswith("recomputes less and fits"), why
            assert twin in evaluated


def test_a_mixture_of_experts_is_searched_over_ep_under_its_capacity_factor():
    p = hlatc.plan(model="tiny-moe", nodes=1, global_batch=64, seq_len=16,
                   precision="bf16-master", capacity_factor=1.25, top=1)
    assert {c.ep for c in p.candidates} == {1, 2, 4}
    assert {c.ep_exchange for c in p.candidates} == {"all-to-all"}
    best = p.candidates[0]
    assert " --capacity-factor 1.25 " in best.command
    assert best.ep == 1 or f" --ep {best.ep} " in best.command
    [c] = hlatc.plan(model="tiny-moe", nodes=1, global_batch=64, seq_len=16,
                     layout="dp=32,ep=4,ep_exchange=all-gather").candidates
    assert (c.ep, c.ep_exchange) == (4, "all-gather")
    with pytest.raises(hlatc.UsageError) as caught:
        hlatc.plan(model="tiny-moe", capacity_factor=0.0)
    assert caught.value.code == "option.capacity_factor"
    assert caught.value.argument == "capacity_factor"


def test_a_dropless_mixture_of_experts_is_advised_a_capacity_factor():
    layout = "tp=8,dp=128,ep=8,sp,zero1,remat=full-layer,micro_batch=1"
    p = hlatc.plan(model="mixtral-8x7b", nodes=32, precision="bf16-master", layout=layout)
    advice = p.capacity_advice
    assert isinstance(advice, hlatc.CapacityAdvice)
    assert advice.factor == 1.25
    assert advice.dropless_seq_per_s == p.best().seq_per_s
    assert advice.capped.seq_per_s > 2 * advice.dropless_seq_per_s
    assert " --capacity-factor 1.25 " in advice.capped.command
    capped = hlatc.plan(model="mixtral-8x7b", nodes=32, precision="bf16-master",
                        layout=layout, capacity_factor=1.25)
    assert capped.capacity_advice is None
    assert capped.best().seq_per_s == advice.capped.seq_per_s


def test_bad_layouts_and_calibration_files_raise_hlatc_errors(tmp_path: pathlib.Path):
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.plan(model="hlat-7b", nodes=1, layout="tp=8,zero=1")
    assert (e.value.argument, e.value.category) == ("layout", "invalid")
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.plan(model="hlat-7b", instance="p5.48xlarge")  # type: ignore[arg-type]
    assert (e.value.argument, e.value.category) == ("instance", "out_of_range")
    bad = tmp_path / "runs.csv"
    bad.write_text("model,sdk\nhlat-7b,2.16\n")
    with pytest.raises(hlatc.FileError) as e:
        hlatc.plan(model="hlat-7b", calibration=bad)
    assert (e.value.code, e.value.path) == ("plan.calibration", str(bad))
    # Named: the line and the column missing, which no field holds.
    assert "runs.csv:1: no 'instance' column" in str(e.value)


def test_a_measured_run_appends_a_row_that_a_calibration_reads(tmp_path: pathlib.Path):
    runs = tmp_path / "runs.csv"
    for seq_per_s in (90.0, 95.5):
        hlatc.append_measured_run(
            runs, model="hlat-7b", instance="trn1.32xlarge", nodes=16, tp=8, dp=64,
            sequence_parallel=True, zero1=True, seq_per_s=seq_per_s, global_batch=1024,
            seq_len=4096, sdk="2.21", source="my-cluster",
        )
    lines = runs.read_text().splitlines()
    assert lines[0].startswith("model,sdk,instance,nodes,tp,pp,dp,")
    assert lines[1:] == [
        f"hlat-7b,2.21,trn1.32xlarge,16,8,1,64,true,true,core-attention,1,1024,4096,bf16-master,{v},my-cluster"
        for v in ("90", "95.5")
    ]
    # A plan fitted to those two runs predicts their layout near them.
    p = hlatc.plan(model="hlat-7b", nodes=16, precision="bf16-master",
                   layout="tp=8,dp=64,sp,zero1", calibration=runs)
    assert 85 < p.candidates[0].seq_per_s < 100
    # Nodes the layout does not fill: the counts conflict, none out of range.
    with pytest.raises(hlatc.UsageError) as e:
        hlatc.append_measured_run(
            runs, model="hlat-7b", instance="trn1.32xlarge", nodes=2, tp=8, dp=64,
            seq_per_s=1.0, global_batch=1024, seq_len=4096,
        )
    assert (e.value.argument, e.value.category) == ("nodes", "conflict")


@pytest.mark.parametrize(
    "kwargs, code, argument",
    [
        ({"price": -1.0}, "plan.option.price", "price"),
        ({"price": float("nan")}, "plan.option.price", "price"),
        ({"precision": "fp64"}, "plan.option.precision", "precision"),
        ({"seq_len": 0}, "plan.option.seq_len", "seq_len"),
        ({"seq_len": 1}, "plan.option.seq_len", "seq_len"),
    ],
)
def test_plan_refuses_what_the_cli_refuses_naming_the_keyword(kwargs, code, argument):
    # One check for both front ends (PlanOptions::check), each naming the
    # option its own way: here as the keyword.
    with pytest.raises(hlatc.UsageError) as caught:
        hlatc.plan(model="tiny", **kwargs)
    assert caught.value.code == code
    assert caught.value.argument == argument
    # The message is the point here: it spells the option as Python does,
    # `price=`, where the CLI says `--price`.
    assert str(caught.value).startswith(f"{argument}="), str(caught.value)
    want = "unsupported" if argument == "precision" else "out_of_range"
    assert caught.value.category == want


@pytest.mark.parametrize(
    "changes, argument, category",
    [
        ({"model": "llama-9000"}, "model", "invalid"),
        ({"sequence_parallel": True, "tp": 1, "dp": 512}, "sequence_parallel", "conflict"),
        ({"remat": "stage"}, "remat", "conflict"),
        # Not divided by the replicas: a conflict, where 0 would be out of range.
        ({"global_batch": 1000}, "global_batch", "conflict"),
        ({"global_batch": 0}, "global_batch", "out_of_range"),
        ({"seq_per_s": -1.0}, "seq_per_s", "out_of_range"),
        ({"sdk": "2,21"}, "sdk", "invalid"),
    ],
)
def test_a_run_the_reader_would_refuse_is_not_appended(tmp_path, changes, argument, category):
    runs = tmp_path / "runs.csv"
    row = dict(model="hlat-7b", instance="trn1.32xlarge", nodes=16, tp=8, dp=64,
               seq_per_s=90.0, global_batch=1024, seq_len=4096)
    row.update(changes)
    with pytest.raises(hlatc.UsageError) as caught:
        hlatc.append_measured_run(runs, **row)
    assert (caught.value.argument, caught.value.category) == (argument, category)
    assert "line 0" not in str(caught.value)
    assert not runs.exists()


def test_plan_writes_its_json_and_chart_and_checks_their_folder_first(tmp_path):
    out_json, out_png = tmp_path / "plan.json", tmp_path / "plan.png"
    p = hlatc.plan(model="tiny", layout="tp=1", json=out_json, plot=out_png)
    written = __import__("json").loads(out_json.read_text())
    assert written["candidates"][0]["layout"] == p.candidates[0].layout
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(hlatc.UsageError) as caught:
        hlatc.plan(model="tiny", json=tmp_path / "missing" / "plan.json")
    assert caught.value.code == "plan.option.json"
    assert (caught.value.argument, caught.value.category) == ("json", "invalid")


_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _median_and_worst(errors):
    e = sorted(abs(r.relative_error) for r in errors)
    n = len(e)
    median = e[n // 2] if n % 2 else (e[n // 2 - 1] + e[n // 2]) / 2
    return median, e[-1]


def test_report_and_predict_give_the_clis_figures_without_a_search():
    # With neither a model nor a layout, only the reports: as `hlatc plan
    # --report --predict` prints them (planner.md's figures).
    p = hlatc.plan(report=True, predict=_ROOT / "data/planner/sdk-other-runs.csv")
    assert not p.searched and p.model is None and p.candidates == []
    assert p.best() is None
    assert "built-in fit" in p.calibrated_on
    r = p.report
    assert isinstance(r, hlatc.CalibrationReport)
    assert r.runs == len(r.in_sample) == len(r.leave_one_out) > 10
    assert set(r.parameters) == {"matmul", "memory", "link", "network", "latency", "launch"}
    median, worst = _median_and_worst(r.leave_one_out)
    assert round(100 * median, 1) == 2.5 and round(100 * worst, 1) == 18.9
    e = r.in_sample[0]
    assert isinstance(e, hlatc.PredictedRun)
    assert e.relative_error == pytest.approx(e.predicted_seq_per_s / e.measured_seq_per_s - 1)
    assert e.run.startswith(r.path)
    predicted = p.predicted
    assert isinstance(predicted, hlatc.Prediction)
    assert predicted.path.endswith("sdk-other-runs.csv")
    median, worst = _median_and_worst(predicted.errors)
    assert round(100 * median, 1) == 7.5 and round(100 * worst, 1) == 24.4


def test_a_report_beside_a_search_and_its_errors_name_the_argument(tmp_path):
    p = hlatc.plan(model="tiny", layout="tp=1", report=True)
    assert p.searched and p.model == "tiny" and len(p.candidates) == 1
    assert p.report is not None and p.predicted is None
    with pytest.raises(hlatc.FileError) as e:
        hlatc.plan(predict=tmp_path / "missing.csv")
    assert e.value.path == str(tmp_path / "missing.csv")
    with pytest.raises(hlatc.UsageTypeError) as t:
        hlatc.plan(report="yes")  # type: ignore[arg-type]
    assert t.value.argument == "report"
