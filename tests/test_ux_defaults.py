"""The questions users mean (issue 24): costs named by scope, limits stated, modern defaults, names that resolve,
messages that read whole. Figures are computed from the evaluator or the solver here, never hard-coded."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from roofline_opt import api, catalog, checks
from roofline_opt.cli import EXIT_INFEASIBLE, EXIT_OK, main
from roofline_opt.errors import Infeasible, InvalidInput, one_line
from roofline_opt.optimize.hints import wider_questions

SMALL = ["--tp-degrees", "4,8", "--pp-degrees", "1", "--tp-modes", "1d", "--max-batch", "256"]
HF_CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == EXIT_OK
    return json.loads(capsys.readouterr().out)


def test_a_decode_only_cost_carries_its_scope_in_its_name_and_a_field(capsys):
    record = _json(capsys, "cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL, "--tpot-ms", "30")
    assert record["cost_scope"] == "decode_only"
    assert record["usd_per_mtok_decode_only"] == record["usd_per_mtok"]
    assert "usd_per_mtok_whole_request" not in record


def test_a_whole_request_cost_has_a_name_of_its_own(capsys):
    argv = ["cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL, "--tpot-ms", "30"]
    record = _json(capsys, *argv, "--isl", "4000", "--osl", "1000")
    assert record["cost_scope"] == "whole_request"
    assert record["usd_per_mtok_whole_request"] == record["usd_per_mtok"]
    assert "usd_per_mtok_decode_only" not in record
    assert record["ttft_ms"] == pytest.approx(record["ttft_s"] * 1e3)


def test_the_decode_only_headline_says_prefill_is_excluded(capsys):
    assert main(["cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert "decode only" in lines[0] and "prefill excluded" in lines[0]
    assert "usd_per_mtok_decode_only" in lines[1] and "time_per_token_ms" in lines[1]


@pytest.mark.parametrize(
    ("flags", "said"), [([], "TTFT not limited: --ttft-ms"), (["--ttft-ms", "1000"], "TTFT <= 1000 ms")]
)
def test_the_headline_states_the_ttft_limit_in_force(flags, said, capsys):
    argv = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", *SMALL, "--isl", "1000", "--osl", "200"]
    assert main([*argv, "--tpot-ms", "30", *flags]) == EXIT_OK
    headline = capsys.readouterr().out.splitlines()[0]
    assert said in headline and "TPOT <= 30 ms" in headline


def test_deepseek_defaults_to_its_native_fp8_with_expert_parallelism_and_dp_attention():
    q = api.question("deepseek-v3", "h200")
    assert q.weight_bits == (8,)
    assert q.ep_degrees == (1, 8, 16, 32, 64)
    assert q.dp_attention


def test_the_paper_preset_keeps_the_notebooks_defaults_for_moe_models():
    q = api.question("deepseek-v3", "h200", preset="paper")
    assert (q.weight_bits, q.ep_degrees, q.dp_attention) == ((16,), (1,), False)


def test_a_dense_model_is_offered_no_expert_parallelism():
    q = api.question("llama-3-70b", "h100-sxm")
    assert (q.weight_bits, q.ep_degrees, q.dp_attention) == ((16,), (1,), False)


def test_mixtral_is_offered_only_ep_degrees_dividing_its_eight_experts():
    assert api.question("mixtral-8x7b", "h200").ep_degrees == (1, 8)


def test_no_dp_attention_turns_the_moe_default_off(capsys):
    argv = ["fastest", "--model", "mixtral-8x7b", "--gpu", "h200", *SMALL, "--no-dp-attention"]
    assert _json(capsys, *argv)["dp_attention"] is False


def test_an_infeasible_answer_names_the_options_that_make_it_feasible_and_their_figures():
    q = api.question("deepseek-v3", "h200", weight_bits=16, ep_degrees=1, dp_attention=False, max_batch=2048)
    cheapest = api.cheapest_answers(q)[0].usd_per_mtok
    budget = cheapest * 0.7
    with pytest.raises(Infeasible) as caught:
        api.fastest_answers(q, max_usd_per_mtok=budget)
    from roofline_opt.optimize.hints import with_hints

    message = str(with_hints(caught.value, q, "fastest", budget, api.solver_options(None, 1e-6)))
    assert "feasible with more offered" in message
    reached = 0
    for flags, wider in wider_questions(q):
        try:
            answer = api.fastest_answers(wider, max_usd_per_mtok=budget)[0]
        except Infeasible:
            assert f"with {flags}:" not in message
            continue
        reached += 1
        assert f"with {flags}: {checks.figure(answer.tok_s_per_request)} tok/s per request" in message
    assert reached >= 1


def test_a_draft_without_gamma_max_offers_speculative_decoding():
    assert api.question("llama-3-70b", "h100-sxm", draft="llama-3-8b").gamma_max == 4
    assert api.question("llama-3-70b", "h100-sxm", draft="llama-3-8b", gamma_max=0).gamma_max == 0
    assert api.question("llama-3-70b", "h100-sxm").gamma_max == 0


@pytest.mark.parametrize("name", ["H100", "h100", "H100-SXM", "H100 SXM", "h100_sxm"])
def test_accelerator_names_resolve_in_any_case_and_through_aliases(name):
    assert catalog.load_gpu(name).name == "h100-sxm"


def test_a_misspelt_accelerator_suggests_the_right_card_whatever_its_case():
    with pytest.raises(InvalidInput, match="Did you mean 'h100-sxm'"):
        catalog.load_gpu("H100-SX")


def test_a_huggingface_folder_in_the_current_folder_needs_no_trailing_slash(tmp_path, monkeypatch):
    shutil.copytree(HF_CONFIGS / "Meta-Llama-3-8B", tmp_path / "Meta-Llama-3-8B")
    monkeypatch.chdir(tmp_path)
    assert catalog.load_model("Meta-Llama-3-8B") == catalog.load_model("Meta-Llama-3-8B/")


def test_figures_in_messages_are_grouped_and_never_exponents():
    assert [checks.figure(v) for v in (1e5, 2.5, 0.0012345, 999.96)] == ["100,000", "2.5", "0.001234", "1,000"]


def test_long_messages_are_cut_between_words():
    text = " ".join(["word"] * 200)
    cut = one_line(text, 100)
    assert cut.endswith("word...") and len(cut) <= 100


def test_an_infeasible_speed_reads_whole_with_a_grouped_number(capsys):
    code = main(["cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL, "--min-tok-s", "100000"])
    err = capsys.readouterr().err
    assert code == EXIT_INFEASIBLE
    assert "100,000 tok/s" in err and "e+0" not in err and not err.strip().endswith("...")


def test_disaggregated_evaluate_reports_the_whole_unit(capsys):
    argv = [
        "evaluate",
        "--model",
        "llama-3-70b",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--pp",
        "1",
        "--batch",
        "64",
        "--isl",
        "2000",
        "--osl",
        "500",
        "--serving",
        "disagg",
        "--prefill-gpu",
        "h100-sxm",
        "--prefill-tp",
        "4",
        "--prefill-instances",
        "2",
        "--decode-instances",
        "3",
    ]
    assert main([*argv, "--json"]) == EXIT_OK
    row = json.loads(capsys.readouterr().out)[0]
    h100, h200 = catalog.load_gpu("h100-sxm").usd_per_hour, catalog.load_gpu("h200").usd_per_hour
    assert row["n_gpus"] == 2 * 4 + 3 * 8
    assert row["usd_per_hour"] == pytest.approx(2 * 4 * h100 + 3 * 8 * h200)


def test_evaluate_names_a_dp_attention_layout_as_the_queries_do(capsys):
    argv = [
        "evaluate",
        "--model",
        "deepseek-v3",
        "--weight-bits",
        "8",
        "--gpu",
        "h200",
        "--tp",
        "16",
        "--pp",
        "1",
        "--ep",
        "16",
        "--dp-attention",
        "--batch",
        "256",
    ]
    assert main([*argv, "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)[0]["layout"] == "dp16ep16"


COMMANDS_AND_SUBCOMMANDS = (
    "evaluate",
    "fastest",
    "cheapest",
    "frontier",
    "plan",
    "models",
    "gpus",
    "cluster",
    "cluster show",
    "cluster draw",
    "cluster build",
    "validate",
    "calibrate",
    "reproduce",
    "sensitivity",
    "study",
)


@pytest.mark.parametrize("command", COMMANDS_AND_SUBCOMMANDS)
def test_every_command_and_subcommand_shows_an_example_of_itself(command, capsys):
    with pytest.raises(SystemExit):
        main([*command.split(), "--help"])
    text = capsys.readouterr().out
    examples = text.split("\nexample", 1)[1]
    assert f"roofline-opt {command}" in examples


def test_the_query_flags_are_grouped_by_what_they_change(capsys):
    from roofline_opt.cli.query_cmds import FLAG_GROUPS, SHARED_HELP

    assert sorted(f for flags in FLAG_GROUPS.values() for f in flags) == sorted(SHARED_HELP)
    with pytest.raises(SystemExit):
        main(["cheapest", "--help"])
    text = capsys.readouterr().out
    assert all(f"\n{title}:\n" in text for title in FLAG_GROUPS)


def test_plan_help_describes_the_fleet_file(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    text = capsys.readouterr().out
    assert all(key in text for key in ("cluster:", "gpus:", "objective:", "models:", "demand_req_s", "tpot_ms"))


def test_kv_bits_help_states_the_default_the_answer_uses(capsys):
    with pytest.raises(SystemExit):
        main(["cheapest", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default 16, whatever the weight precision)" in text and "--kv-bits" in text


def test_a_shipped_study_file_opens_from_any_folder(tmp_path, monkeypatch):
    from roofline_opt.study import load_study

    monkeypatch.chdir(tmp_path)
    assert load_study("instances/studies/hbm-value.yaml").questions


def test_a_profile_plan_names_its_columns_as_json_does_and_explains_the_row_price(capsys):
    assert main(["plan", "instances/fleets/day-profile.yaml"]) == EXIT_OK
    out = capsys.readouterr().out
    header = out.splitlines()[1].split()
    assert {"weight_bits", "usd_per_gpu_hour", "usd_per_hour", "effective_usd_per_mtok"} <= set(header)
    assert "a row's usd_per_hour is its GPUs at usd_per_gpu_hour" in out


def test_top_n_never_lists_a_1d_and_a_2d_twin_of_one_layout():
    q = api.question("llama-3-70b", "h100-sxm", tp_degrees=(8,), pp_degrees=(1, 2), max_batch=512)
    answers = api.cheapest_answers(q, min_tok_s=30, top_n=3)
    keys = [(a.setup.gpu, a.setup.weight_bits, a.setup.tp, a.setup.pp, a.setup.ep) for a in answers]
    assert len(keys) == len(set(keys))


def test_top_n_by_enumeration_excludes_the_same_twins():
    q = api.question("llama-3-70b", "h100-sxm", tp_degrees=(8,), pp_degrees=(1, 2), max_batch=256)
    mip = [a.setup.layout for a in api.cheapest_answers(q, min_tok_s=30, top_n=3)]
    assert mip == [a.setup.layout for a in api.cheapest_answers(q, min_tok_s=30, method="enumerate", top_n=3)]


def _drawn(monkeypatch, draw):
    from roofline_opt.report import plots

    figures = []
    monkeypatch.setattr(plots, "save_figure_atomic", lambda figure, path, field: figures.append(figure))
    draw(plots)
    return figures[0].axes[0]


def test_answers_within_a_narrow_cost_range_are_drawn_on_a_linear_axis_from_zero(monkeypatch):
    import pandas as pd

    frame = pd.DataFrame(
        {
            "tok_s_per_request": [30.06, 30.05],
            "usd_per_mtok": [1.410, 1.411],
            "gpu": ["h100-sxm"] * 2,
            "layout": ["tp8pp1ep1", "tp8pp2ep1"],
            "batch": [141, 282],
        }
    )
    ax = _drawn(monkeypatch, lambda plots: plots.plot_answers(frame, "x.png", title="t"))
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    low, high = ax.get_xlim()
    assert high - low >= 0.1 * 30.06


def test_a_mixed_gpu_frontier_plot_has_a_legend_entry_per_accelerator_and_precision(monkeypatch):
    import pandas as pd

    frame = pd.DataFrame(
        {
            "tok_s_per_request": [10.0, 20.0, 30.0],
            "usd_per_mtok": [1.0, 2.0, 4.0],
            "gpu": ["a100-80gb", "h100-sxm", "h100-sxm"],
            "weight_bits": [8, 8, 16],
            "preferred": [False, True, False],
        }
    )
    ax = _drawn(monkeypatch, lambda plots: plots.plot_frontier(frame, "x.png", title="t"))
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {
        "a100-80gb 8-bit (achievable setups)",
        "h100-sxm 8-bit (achievable setups)",
        "h100-sxm 16-bit (achievable setups)",
    } <= set(labels)


def test_a_study_summary_with_many_series_gives_each_its_own_colour_and_marker():
    from roofline_opt.report.facets import series_styles

    styles = series_styles([f"series {i}" for i in range(24)])
    assert len(set(styles.values())) == 24


def test_a_large_cluster_is_drawn_aggregated_with_one_bundle_per_switch_and_tier(tmp_path, monkeypatch):
    from roofline_opt import topology
    from roofline_opt.cli import cluster_cmds

    cluster = topology.load_cluster(catalog.cluster_file("pod-128x-hgx-h100"), cluster_cmds.known_gpu_names())
    ax = cluster_cmds._figure(cluster).axes[0]
    assert "drawn aggregated" in ax.get_title()
    drawn = sum(len(c.get_segments()) for c in ax.collections if hasattr(c, "get_segments"))
    assert drawn < cluster.number_of_edges() / 50


def test_two_bandwidth_tiers_of_one_link_kind_are_drawn_in_different_colours():
    from roofline_opt import topology
    from roofline_opt.cli import cluster_cmds

    cluster = topology.load_cluster(catalog.cluster_file("pod-4x-hgx-h100"), cluster_cmds.known_gpu_names())
    ax = cluster_cmds._figure(cluster).axes[0]
    colours = {
        c.get_label(): tuple(c.get_colors()[0]) for c in ax.collections if c.get_label().startswith("infiniband")
    }
    assert len(colours) == 2 and len(set(colours.values())) == 2


def test_the_validate_table_names_its_columns_as_json_does(capsys):
    assert main(["validate", "--measured", "examples/measured_points.csv", "--json"]) == EXIT_OK
    fields = set(json.loads(capsys.readouterr().out)[0])
    assert main(["validate", "--measured", "examples/measured_points.csv"]) == EXIT_OK
    header = capsys.readouterr().out.splitlines()[0].split()
    assert set(header) <= fields
