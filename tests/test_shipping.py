"""A package that works wherever it is installed, and answers carrying every figure a capacity planner reads."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from roofline_opt import api, catalog
from roofline_opt.catalog import cards
from roofline_opt.catalog.prices import owned_usd_per_hour
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, build_parser, main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import feasible_points
from roofline_opt.optimize.queries import top_n
from roofline_opt.optimize.sweep import frontier_answers

SMALL = {"preset": "paper", "tp_degrees": (1, 2, 4, 8), "pp_degrees": (1, 2), "max_batch": 256}
SMALL_CLI = ["--preset", "paper", "--tp-degrees", "1,2,4,8", "--pp-degrees", "1,2", "--max-batch", "256"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ----------------------------------------------------------------------------------------------- catalog


@pytest.mark.parametrize(
    ("name", "card"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.3-70b"),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b"),
        ("Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("meta-llama/llama-2-70b-chat-hf", "llama-2-70b"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
    ],
)
def test_huggingface_ids_and_their_variants_resolve_to_cards(name: str, card: str) -> None:
    assert catalog.resolve_alias(name) == card
    assert catalog.load_model(name) == catalog.load_model(card)


def test_an_alias_with_a_precision_suffix_sets_the_bits() -> None:
    model, bits = catalog.resolve_model("meta-llama/Meta-Llama-3-70B-int8")
    assert (model.name, bits) == ("llama-3-70b", 8)


def test_an_unknown_huggingface_id_is_a_one_line_error() -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        catalog.load_model("meta-llama/Llama-9-1T")


def test_a_user_folder_adds_cards_next_to_the_packaged_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    card = (catalog.REPO_ROOT / "models" / "llama-3-8b.yaml").read_text().replace('name: "llama-3-8b"', "name: tiny")
    (tmp_path / "models" / "tiny.yaml").write_text(card.replace("n_layers: 32", "n_layers: 4"))
    monkeypatch.setenv(catalog.DATA_ENV, str(tmp_path))
    names = [m.name for m in catalog.list_models()]
    assert "tiny" in names and "llama-3-8b" in names
    assert catalog.load_model("tiny").n_layers == 4


def test_an_empty_catalog_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cards, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(cards, "PACKAGED_DATA", tmp_path / "absent")
    code, out, err = run(capsys, "models")
    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert err.startswith("roofline-opt: error: catalog: has no model cards") and err.count("\n") == 1


def test_a_broken_user_card_is_a_one_line_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "instances" / "gpus").mkdir(parents=True)
    (tmp_path / "instances" / "gpus" / "broken.yaml").write_text("name: broken\nhbm_bytes: [\n")
    monkeypatch.setenv(catalog.DATA_ENV, str(tmp_path))
    code, _, err = run(capsys, "gpus")
    assert code == EXIT_BAD_INPUT
    assert "broken.yaml" in err and "not valid YAML" in err and err.count("\n") == 1


def test_clusters_and_example_files_are_found_by_name_or_catalog_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Path(catalog.cluster_file("hgx-h100")).name.startswith("hgx-h100.")
    assert Path(catalog.cluster_file("instances/clusters/hgx-h100.yaml")).is_file()
    assert Path(catalog.data_file("examples/observed.csv")).is_file()
    with pytest.raises(InvalidInput, match="Did you mean 'hgx-h100'"):
        catalog.cluster_file("hgx-h10")


# ----------------------------------------------------------------------------------------------- prices


def test_every_accelerator_price_is_on_demand_rental_with_date_and_source() -> None:
    for gpu in catalog.list_gpus():
        assert gpu.price_basis == "on-demand rental", gpu.name
        assert gpu.price_date and gpu.price_source, gpu.name


def test_gb200_is_not_cheaper_per_hour_than_b200_on_the_same_basis() -> None:
    assert catalog.load_gpu("gb200").usd_per_hour > catalog.load_gpu("b200").usd_per_hour


def test_an_owned_hardware_card_derives_its_hourly_price(tmp_path: Path) -> None:
    owned = {
        "purchase_usd": 30000,
        "amortisation_years": 4,
        "power_kw": 1.2,
        "pue": 1.3,
        "usd_per_kwh": 0.1,
        "availability": 0.9,
    }
    card = yaml.safe_load((catalog.REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml").read_text())
    for key in ("usd_per_hour", "price_basis", "price_date", "price_source"):
        card.pop(key)
    path = tmp_path / "my-h100.yaml"
    path.write_text(yaml.safe_dump({**card, "name": "my-h100", "owned": owned}))
    gpu = catalog.load_gpu(str(path))
    expected = 30000 / (4 * 8760 * 0.9) + 1.2 * 1.3 * 0.1
    assert gpu.usd_per_hour == pytest.approx(expected) == owned_usd_per_hour(**owned)
    assert gpu.price_basis.startswith("owned")


def test_price_overrides_change_the_question_and_the_cost() -> None:
    base = api.fastest("llama-3-8b", "h100-sxm", **SMALL)
    dearer = api.fastest("llama-3-8b", "h100-sxm", usd_per_gpu_hour="h100-sxm=5.38", **SMALL)
    assert dearer["usd_per_gpu_hour"] == 5.38
    assert dearer["usd_per_mtok"] == pytest.approx(base["usd_per_mtok"] * 5.38 / base["usd_per_gpu_hour"])
    with pytest.raises(InvalidInput, match="usd_per_gpu_hour"):
        api.question("llama-3-8b", "h100-sxm", usd_per_gpu_hour="h200=3")


# ----------------------------------------------------------------------------------------------- answers


def test_answers_carry_the_planner_fields_consistently() -> None:
    rec = api.cheapest("llama-3-70b", "h100-sxm", min_tok_s=40.0, demand_tok_s=20000, **SMALL)
    assert (rec["model"], rec["context"], rec["preset"], rec["weight_bits"]) == ("llama-3-70b", 8000, "paper", 16)
    assert rec["layout"] == f"tp{rec['tp']}{'(2d)' if rec['tp_2d'] else ''}pp{rec['pp']}ep{rec['ep']}"
    assert rec["total_gpus"] == rec["n_gpus"] * rec["replicas"] > rec["n_gpus"]
    assert rec["tok_s_per_gpu"] == pytest.approx(rec["throughput_tok_s"] / rec["n_gpus"])
    assert rec["usd_per_hour"] == pytest.approx(rec["total_gpus"] * rec["usd_per_gpu_hour"])
    assert 0 < rec["mfu_fraction"] < 1
    assert isinstance(rec["batch"], int) and isinstance(rec["usd_per_mtok"], float)


def test_frames_of_several_questions_concatenate_with_typed_columns() -> None:
    a = api.frontier("llama-3-8b", "h100-sxm", points=4, **SMALL)
    b = api.frontier("llama-3-8b", "h100-sxm", points=4, **{**SMALL, "context": 1000})
    both = pd.concat([a, b], ignore_index=True)
    assert set(both["context"]) == {8000, 1000}
    assert both["batch"].dtype.kind == "i" and both["usd_per_mtok"].dtype.kind == "f"
    assert both["preferred"].dtype == bool and pd.api.types.is_string_dtype(both["layout"])
    assert len(a) <= 5


def test_evaluate_of_an_answer_gives_the_answers_figures() -> None:
    """One default context: re-evaluating a query's setup with defaults reproduces its figures."""
    rec = api.fastest("llama-3-70b", "h100-sxm", max_usd_per_mtok=3.0, tp_modes="1d")
    again = api.evaluate("llama-3-70b", "h100-sxm", rec["tp"], rec["pp"], rec["batch"])
    for field in ("tok_s_per_request", "usd_per_mtok", "tok_s_per_gpu", "mfu_fraction", "layout", "context"):
        assert again[field] == rec[field], field


def test_the_cli_evaluate_default_context_is_the_queries(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "evaluate",
        "--model",
        "llama-3-8b",
        "--gpu",
        "h100-sxm",
        "--tp",
        "1",
        "--pp",
        "1",
        "--batch",
        "8",
        "--json",
    )
    assert code == EXIT_OK
    row = json.loads(out)[0]
    expected = api.evaluate("llama-3-8b", "h100-sxm", 1, 1, 8)
    assert row["context"] == 8000 and row["tok_s_per_request"] == pytest.approx(expected["tok_s_per_request"])


def _best_per_layout(question, kind: str, target: float) -> list[tuple[tuple, float]]:
    """Oracle: the best objective of every layout meeting the target, best first (ties by layout)."""
    pts = feasible_points(question)
    speed, cost = 1.0 / pts.time_per_token_s, pts.usd_per_mtok
    ok = cost <= target if kind == "fastest" else speed >= target
    value = -speed if kind == "fastest" else cost
    best: dict[int, float] = {}
    for j, v in zip(pts.layout_index[ok], value[ok], strict=True):
        best[int(j)] = min(best.get(int(j), math.inf), float(v))
    lay = pts.layouts
    # a layout's 1-D and 2-D tensor-parallel twins are one alternative (top_n lists the better of the two)
    keyed: dict[tuple, float] = {}
    for j, v in best.items():
        key = (
            question.gpus[lay.gpu_index[j]].name,
            int(lay.weight_bits[j]),
            int(lay.tp[j]),
            int(lay.pp[j]),
            int(lay.ep[j]),
            int(lay.gamma[j]),
        )
        keyed[key] = min(keyed.get(key, math.inf), v)
    return sorted(keyed.items(), key=lambda kv: kv[1])


@pytest.mark.parametrize(("kind", "target"), [("fastest", 2.0), ("cheapest", 60.0)])
def test_top_n_lists_the_best_distinct_layouts_as_enumeration_does(kind: str, target: float) -> None:
    q = api.question("llama-3-70b", ("h100-sxm", "a100-80gb"), **SMALL)
    oracle = _best_per_layout(q, kind, target)
    answers = top_n(q, kind, target, 5)
    figure = (lambda a: -a.tok_s_per_request) if kind == "fastest" else (lambda a: a.usd_per_mtok)
    assert len({a.setup.layout_key for a in answers}) == 5
    for answer, (_, value) in zip(answers, oracle[:5], strict=True):
        assert figure(answer) == pytest.approx(value, rel=1e-6)
    by_enumeration = top_n(q, kind, target, 5, method="enumerate")
    assert [figure(a) for a in by_enumeration] == pytest.approx([v for _, v in oracle[:5]], rel=1e-9)


def test_top_n_beyond_the_layouts_meeting_the_target_lists_them_all() -> None:
    q = api.question("llama-3-8b", "h100-sxm", tp_degrees=(1, 2), pp_degrees=(1,), tp_modes="1d", max_batch=64)
    assert len(top_n(q, "fastest", None, 10)) == 2


def _utility(speed: np.ndarray, cost: np.ndarray, a: float) -> np.ndarray:
    return a * np.log(speed) - np.log(cost)


@pytest.mark.parametrize("exponent", [2.0, 4.0])
def test_the_preferred_point_is_the_same_whatever_the_points_and_is_the_enumerated_maximum(exponent: float) -> None:
    q = api.question("llama-3-70b", "h100-sxm", **SMALL)
    preferred = set()
    for points in (2, 5, 13):
        frame = api.frontier_frame(q, points=points, utility_exponent=exponent)
        row = frame[frame["preferred"]].iloc[0]
        preferred.add((row["layout"], row["batch"], round(row["usd_per_mtok"], 9)))
    pts = feasible_points(q)
    best = _utility(1.0 / pts.time_per_token_s, pts.usd_per_mtok, exponent).max()
    assert len(preferred) == 1
    (_, _, cost), row = next(iter(preferred)), frame[frame["preferred"]].iloc[0]
    assert _utility(row["tok_s_per_request"], cost, exponent) == pytest.approx(best, rel=1e-6)


def test_the_preferred_point_search_agrees_under_enumeration() -> None:
    q = api.question("llama-3-8b", "h100-sxm", **SMALL)
    mip = frontier_answers(q, 3, utility_exponent=4.0)
    oracle = frontier_answers(q, 3, method="enumerate", utility_exponent=4.0)
    best = max(_utility(a.tok_s_per_request, a.usd_per_mtok, 4.0) for a in mip)
    assert best == pytest.approx(max(_utility(a.tok_s_per_request, a.usd_per_mtok, 4.0) for a in oracle), rel=1e-9)


# ----------------------------------------------------------------------------------------------- CLI conventions


def test_version_and_a_user_help_with_one_example_per_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("roofline-opt ")
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in (
        "evaluate",
        "fastest",
        "cheapest",
        "frontier",
        "models",
        "gpus",
        "cluster",
        "validate",
        "calibrate",
        "reproduce",
        "sensitivity",
    ):
        assert f"roofline-opt {command}" in text, command


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += [sub, *_subparsers(sub)]
    return out


def test_every_flag_help_states_its_default_or_that_it_is_required() -> None:
    for sub in _subparsers(build_parser()):
        formatter = sub._get_formatter()
        for action in sub._actions:
            if not action.option_strings or action.dest in ("help",):
                continue
            text = formatter._get_help_string(action)
            assert "default" in text or "required" in text, f"{sub.prog} {action.option_strings[0]}: {text}"


def test_a_question_file_and_a_run_folder_repeat_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = tmp_path / "q.yaml"
    question.write_text(
        yaml.safe_dump(
            {
                "model": "llama-3-8b",
                "gpu": "h100-sxm",
                "tp-degrees": [1, 2, 4],
                "pp_degrees": 1,
                "max-usd-per-mtok": 0.5,
                "top-n": 2,
            }
        )
    )
    code, out, err = run(capsys, "fastest", "--question", str(question), "--save-dir", str(tmp_path / "run"), "--json")
    assert code == EXIT_OK, err
    first = json.loads(out)
    assert len(first) == 2
    saved = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert saved == ["answer.csv", "answer.json", "plot.png", "question.yaml"]
    resolved = yaml.safe_load((tmp_path / "run" / "question.yaml").read_text())
    assert resolved["context"] == 8000 and resolved["max-batch"] == 4096 and resolved["command"] == "fastest"
    code, out, _ = run(capsys, "fastest", "--question", str(tmp_path / "run" / "question.yaml"), "--json")
    again = json.loads(out)
    assert [(r["layout"], r["batch"]) for r in again] == [(r["layout"], r["batch"]) for r in first]
    assert json.loads((tmp_path / "run" / "answer.json").read_text()) == first


def test_a_flag_overrides_the_question_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = tmp_path / "q.yaml"
    question.write_text("model: llama-3-8b\ngpu: h100-sxm\ncontext: 1000\n")
    code, out, _ = run(capsys, "cheapest", "--question", str(question), "--context", "2000", *SMALL_CLI, "--json")
    assert code == EXIT_OK and json.loads(out)["context"] == 2000


def test_an_unknown_key_in_a_question_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    question = tmp_path / "q.yaml"
    question.write_text("model: llama-3-8b\ngpu: h100-sxm\nbudget: 3\n")
    code, _, err = run(capsys, "fastest", "--question", str(question))
    assert code == EXIT_BAD_INPUT and "q.yaml: budget: is not a flag of fastest" in err


def test_a_cluster_answer_shows_its_placement_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "fastest",
        "--model",
        "llama-3-70b",
        "--cluster",
        "pod-4x-hgx-h100",
        "--demand-tok-s",
        "3000",
        "--max-usd-per-mtok",
        "5",
    )
    assert code == EXIT_OK
    header, row = out.splitlines()[1], out.splitlines()[3]
    assert "placement" in header and "r0: [" in row


def test_cluster_draw_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_png = tmp_path / "c.png"
    code, out, _ = run(capsys, "cluster", "draw", "hgx-h100", "--out", str(out_png))
    assert code == EXIT_OK and out_png.is_file()
    assert out.startswith(f"wrote {out_png}")


# ----------------------------------------------------------------------------------------------- errors


def test_a_demand_beyond_the_gpus_says_how_many_it_needs_and_how_many_there_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(
        capsys,
        "cheapest",
        "--model",
        "llama-3-70b",
        "--gpu",
        "h100-sxm",
        "--demand-tok-s",
        "1e6",
        "--max-gpus",
        "64",
        *SMALL_CLI,
    )
    assert code == 1
    needed = int(err.split("needs at least ")[1].split(" GPUs")[0])
    assert needed > 64 and "and there are 64)" in err
    q = api.question("llama-3-70b", "h100-sxm", demand_tok_s=1e6, **SMALL)
    fewest = min(a.setup.n_gpus * a.setup.replicas for a in top_n(q, "cheapest", None, 40, "enumerate"))
    assert needed <= fewest < needed * 1.1  # a lower bound, at the best tok/s per GPU, and a close one


def test_a_cluster_too_small_for_the_demand_counts_its_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "cheapest", "--model", "llama-3-70b", "--cluster", "hgx-h100", "--demand-tok-s", "1e5")
    assert code == 1 and "and there are 8)" in err


def test_a_precision_without_a_flop_rate_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "fastest", "--model", "llama-3-70b", "--gpu", "a100-80gb", "--weight-bits", "4")
    assert code == 1
    assert "a100-80gb has no FLOP rate for 4-bit weights" in err and "search space is empty" not in err


@pytest.mark.parametrize(("value", "gb_s"), [("400Gb/s", 50.0), ("400 Gbps", 50.0), ("50GB/s", 50.0), (50, 50.0)])
def test_nic_bandwidths_accept_explicit_units(value: object, gb_s: float) -> None:
    from roofline_opt import topology

    graph = topology.from_spec({"nodes": 2, "node_type": "hgx-h100", "nic_gb_s": value})
    assert {a["bandwidth_gb_s"] for _, _, a in graph.edges(data=True) if a["kind"] == "infiniband"} == {gb_s}


def test_a_nic_bandwidth_written_in_gigabits_is_refused_with_the_fix() -> None:
    from roofline_opt import topology

    with pytest.raises(InvalidInput, match="If you meant 400 Gb/s, write '400Gb/s'"):
        topology.from_spec({"nodes": 2, "node_type": "hgx-h100", "nic_gb_s": 400})


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"sliding_window": 4096, "max_position_embeddings": 32768}, "sliding_window"),
        ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types"),
        ({"model_type": "jamba"}, "model_type"),
    ],
)
def test_hf_configs_the_model_would_misread_are_refused_by_name(tmp_path: Path, extra: dict, field: str) -> None:
    cfg = json.loads((Path(__file__).parent / "data" / "hf_configs" / "Meta-Llama-3-8B" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, **extra}))
    with pytest.raises(InvalidInput, match=f"config.json: {field}"):
        catalog.load_model(str(path))


def test_a_sliding_window_as_long_as_the_context_is_full_attention(tmp_path: Path) -> None:
    cfg = json.loads((Path(__file__).parent / "data" / "hf_configs" / "Meta-Llama-3-8B" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "sliding_window": 8192}))
    assert catalog.load_model(str(path)).n_layers == 32


# ----------------------------------------------------------------------------------------------- plots


@pytest.mark.parametrize(("low", "high"), [(1.992, 1.998), (0.05, 500.0), (3.1, 4.4), (0.0021, 0.0029)])
def test_log_dollar_axes_label_ticks_distinctly_in_dollars_over_any_range(low: float, high: float) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from roofline_opt.report import dollar_axis

    figure = Figure()
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.plot([1, 2], [low, high])
    ax.set_yscale("log")
    dollar_axis(ax.yaxis)
    figure.canvas.draw()
    ticks = [*ax.yaxis.get_major_ticks(), *ax.yaxis.get_minor_ticks()]
    shown = [(t.get_loc(), t.label1.get_text()) for t in ticks if t.label1.get_text() and low <= t.get_loc() <= high]
    assert len(shown) >= 2
    assert all(text.startswith("$") for _, text in shown)
    assert len({text for _, text in shown}) == len(shown)


def test_a_frontier_plot_and_its_gpu_axes_view_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for axes in ("cost", "gpu"):
        png = tmp_path / f"{axes}.png"
        code, _, err = run(
            capsys,
            "frontier",
            "--model",
            "llama-3-8b",
            "--gpu",
            "h100-sxm",
            "--points",
            "4",
            "--plot",
            str(png),
            "--plot-axes",
            axes,
            "--observed",
            "examples/observed.csv",
            *SMALL_CLI,
        )
        assert code == EXIT_OK, err
        assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_graph_whose_gpu_nic_is_written_in_gigabits_is_refused(tmp_path: Path) -> None:
    from roofline_opt import topology

    graph = topology.from_spec({"nodes": 2, "node_type": "hgx-h100"})
    for u, _, attrs in graph.edges(data=True):
        if attrs["kind"] == "infiniband" and graph.nodes[u]["kind"] == "gpu":
            attrs["bandwidth_gb_s"] = 400.0
    path = tmp_path / "c.graphml"
    topology.save_cluster(graph, str(path))
    with pytest.raises(InvalidInput, match="bandwidth_gb_s: is in GB/s per direction"):
        topology.load_cluster(str(path))
