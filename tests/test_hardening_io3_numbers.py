"""Hardening 3 (issues 27, 29 and 26), numbers and names as documented: YAML numbers are ASCII decimals (no
hexadecimal, octal, sexagesimal or digit separators) and a number written as text is refused by number fields, in
cards, clusters, fleets and question files; duplicate keys and columns in other spellings are refused; a broken user
card is an error; fleet demands are range-checked; tables cached by question are those of the question's cluster
graph; every CSV we write is formula-safe."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from hardening import EVALUATE, SMALL_QUERY, assert_one_line, run

from roofline_opt import api, checks, files
from roofline_opt.catalog import DATA_ENV, REPO_ROOT
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK
from roofline_opt.errors import Infeasible
from roofline_opt.optimize.space import graph_fingerprint

CARD = REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml"
MODEL = REPO_ROOT / "models" / "llama-3-8b.yaml"
CLUSTER = REPO_ROOT / "instances" / "clusters" / "pod-4x-hgx-h100.yaml"

NOT_DECIMAL = ["0x1000", "4_096", "1:08:16", "010000"]
"""Plain YAML values YAML 1.1 reads as 4096 (4096 with 010000 as octal): none is an ASCII decimal."""
TEXT_NUMBERS = ["!!str 4096", "'4096'", '"4096"']
"""Numbers written as text."""


@pytest.mark.parametrize("value", NOT_DECIMAL)
def test_yaml_refuses_numbers_yaml_1_1_reads_in_another_base_naming_the_key(value):
    with pytest.raises(files.InvalidInput, match=r"card.yaml: hidden: must be an ASCII decimal number"):
        files.load_yaml(f"hidden: {value}\n", "card.yaml")


@pytest.mark.parametrize("value", ["4096", "-1.5", "1e15", "1.0e+15", ".5", "0"])
def test_yaml_reads_ascii_decimals_as_numbers(value):
    assert files.load_yaml(f"x: {value}\n", "f.yaml")["x"] == float(value)


@pytest.mark.parametrize("value", TEXT_NUMBERS)
def test_a_number_written_as_text_stays_text_and_number_fields_refuse_it(value):
    loaded = files.load_yaml(f"x: {value}\n", "f.yaml")["x"]

    assert loaded == "4096" and isinstance(loaded, checks.NumericText)
    with pytest.raises(files.InvalidInput, match="a number written as text"):
        checks.positive_int("f.yaml: x", loaded)
    with pytest.raises(files.InvalidInput, match="a number written as text"):
        checks.positive_float("f.yaml: x", loaded)


def test_text_that_spells_a_number_is_still_text_where_text_is_wanted(tmp_path, capsys):
    card = tmp_path / "card.yaml"
    lines = CARD.read_text().splitlines()
    card.write_text("\n".join("price_date: '2025'" if line.startswith("price_date:") else line for line in lines))

    code, _, err = run(capsys, *EVALUATE[:3], "--gpu", str(card), *EVALUATE[5:])

    assert (code, err) == (EXIT_OK, "")


@pytest.mark.parametrize("value", NOT_DECIMAL + TEXT_NUMBERS)
def test_a_model_card_refuses_a_non_decimal_or_text_number_naming_the_field(tmp_path, capsys, value):
    card = tmp_path / "m.yaml"
    lines = MODEL.read_text().splitlines()
    card.write_text("\n".join(f"n_layers: {value}" if line.startswith("n_layers:") else line for line in lines))

    code, _, err = run(capsys, "evaluate", "--model", str(card), *EVALUATE[3:])

    assert_one_line(err, code, EXIT_BAD_INPUT, "m.yaml: n_layers")


@pytest.mark.parametrize("value", NOT_DECIMAL + TEXT_NUMBERS)
def test_a_gpu_card_refuses_a_non_decimal_or_text_number_naming_the_field(tmp_path, capsys, value):
    card = tmp_path / "g.yaml"
    lines = CARD.read_text().splitlines()
    card.write_text("\n".join(f"hbm_bytes: {value}" if line.startswith("hbm_bytes:") else line for line in lines))

    code, _, err = run(capsys, *EVALUATE[:3], "--gpu", str(card), *EVALUATE[5:])

    assert_one_line(err, code, EXIT_BAD_INPUT, "g.yaml: hbm_bytes")


@pytest.mark.parametrize("value", ["'4'", "!!str 4", "0x4", "04", "4_0"])
def test_a_cluster_file_refuses_nodes_written_as_text_or_not_in_decimal(tmp_path, capsys, value):
    cluster = tmp_path / "c.yaml"
    cluster.write_text(f"name: c\nnodes: {value}\nnode_type: hgx-h100\n")

    code, _, err = run(capsys, "cluster", "show", str(cluster))

    assert_one_line(err, code, EXIT_BAD_INPUT, "nodes")


@pytest.mark.parametrize("value", NOT_DECIMAL + TEXT_NUMBERS)
def test_a_question_file_refuses_a_non_decimal_or_text_number_naming_the_flag(tmp_path, capsys, value):
    question = tmp_path / "q.yaml"
    question.write_text(f"model: llama-3-8b\ngpu: h100-sxm\nmax-batch: {value}\n")

    code, _, err = run(capsys, "fastest", "--question", str(question))

    assert_one_line(err, code, EXIT_BAD_INPUT, "q.yaml: max-batch")


def test_a_question_file_giving_one_flag_in_two_spellings_is_refused(tmp_path, capsys):
    question = tmp_path / "q.yaml"
    question.write_text("model: llama-3-8b\ngpu: h100-sxm\nmax-batch: 64\nmax_batch: 128\n")

    code, _, err = run(capsys, "fastest", "--question", str(question))

    assert_one_line(err, code, EXIT_BAD_INPUT, "q.yaml: max_batch", "max-batch", "give each flag once")


def test_a_config_json_giving_a_number_as_text_is_refused_naming_the_field(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": "4096", "num_hidden_layers": 32, "num_attention_heads": 32, '
        '"num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}'
    )

    code, _, err = run(capsys, "evaluate", "--model", str(config), *EVALUATE[3:])

    assert_one_line(err, code, EXIT_BAD_INPUT, "config.json: hidden_size", "not text")


# ----------------------------------------------------------------------------------------------- fleets


def fleet_with_demand(folder, demand: str):
    shutil.copy(CLUSTER, folder / "pod.yaml")
    fleet = folder / "fleet.yaml"
    fleet.write_text(
        "cluster: pod.yaml\nmodels:\n  - name: code\n    model: llama-3.1-8b\n"
        f"    demand_tok_s: {demand}\n    tpot_ms: 20\n"
    )
    return fleet


@pytest.mark.parametrize("demand", ["0", "1e-300", "2e12", "'2000'", "0x7d0"])
def test_a_fleet_demand_outside_its_range_or_not_a_number_is_exit_2(tmp_path, capsys, demand):
    code, _, err = run(capsys, "plan", str(fleet_with_demand(tmp_path, demand)))

    assert_one_line(err, code, EXIT_BAD_INPUT, "demand_tok_s")


def test_an_error_inside_a_fleet_file_names_the_file(tmp_path, capsys):
    fleet = fleet_with_demand(tmp_path, "-5")

    code, _, err = run(capsys, "plan", str(fleet))

    assert_one_line(err, code, EXIT_BAD_INPUT, f"roofline-opt: error: {fleet}: models[0].demand_tok_s: must be")


def test_a_missing_fleet_file_names_it_with_its_absolute_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)

    code, _, err = run(capsys, "plan", "no-fleet.yaml")

    assert_one_line(err, code, EXIT_BAD_INPUT, "FLEET: must be an existing YAML file. Got 'no-fleet.yaml' instead")
    assert f"(no such file {tmp_path / 'no-fleet.yaml'})" in err


def test_a_fleet_cluster_file_that_is_missing_is_named_as_the_fleet_s_cluster_key(tmp_path, capsys):
    fleet = fleet_with_demand(tmp_path, "100")
    (tmp_path / "pod.yaml").unlink()

    code, _, err = run(capsys, "plan", str(fleet))

    assert_one_line(err, code, EXIT_BAD_INPUT, f"{fleet}: cluster: must be an existing cluster file. Got 'pod.yaml'")
    assert f"(no such file {tmp_path / 'pod.yaml'}" in err


def test_a_fleet_demand_profile_may_have_an_idle_period(tmp_path, capsys):
    shutil.copy(CLUSTER, tmp_path / "pod.yaml")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "cluster: pod.yaml\nmodels:\n  - name: code\n    model: llama-3.1-8b\n"
        "    demand_profile: {tok_s: [2000, 0]}\n    tpot_ms: 20\n"
    )

    code, _, err = run(capsys, "plan", str(fleet))

    assert (code, err) == (EXIT_OK, "")


# ----------------------------------------------------------------------------------------------- CSVs and overrides


def test_from_csv_with_a_column_given_twice_is_refused_naming_it(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("model,gpu,tp,pp,batch,tp\nllama-3-8b,h100-sxm,1,1,1,2\n")

    code, _, err = run(capsys, "evaluate", "--from-csv", str(rows))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--from-csv: tp", "given twice")


def test_a_price_override_given_twice_is_refused(capsys):
    code, _, err = run(capsys, "fastest", *SMALL_QUERY, "--usd-per-gpu-hour", "h100-sxm=2,h100-sxm=3")

    assert_one_line(err, code, EXIT_BAD_INPUT, "--usd-per-gpu-hour: h100-sxm", "given twice")


def test_an_override_equal_to_the_card_price_keeps_the_card_basis(capsys):
    plain = api.question("llama-3-8b", "h100-sxm")
    same = api.question("llama-3-8b", "h100-sxm", usd_per_gpu_hour={"h100-sxm": plain.gpus[0].usd_per_hour})

    assert same.gpus == plain.gpus


def test_study_csv_is_formula_safe(tmp_path, capsys):
    card = tmp_path / "g.yaml"
    card.write_text(CARD.read_text().replace('name: "h100-sxm"', "name: '=HYPERLINK(1)'"))
    study = tmp_path / "s.yaml"
    study.write_text(
        f"kind: fastest\nfixed: {{gpu: '{card}', tp_degrees: [1], pp_degrees: [1], max_batch: 8}}\n"
        "axes: {model: [llama-3-8b]}\n"
    )

    code, _, err = run(
        capsys,
        "study",
        str(study),
        "--out",
        str(tmp_path / "o.parquet"),
        "--workers",
        "1",
        "--csv",
        str(tmp_path / "o.csv"),
    )

    assert code == EXIT_OK, err
    assert pd.read_csv(tmp_path / "o.csv")["gpu"].tolist() == ["'=HYPERLINK(1)"]


# ----------------------------------------------------------------------------------------------- user cards


def test_a_broken_user_card_among_valid_ones_is_an_error_naming_it(tmp_path, capsys, monkeypatch):
    gpus = tmp_path / "instances" / "gpus"
    gpus.mkdir(parents=True)
    (gpus / "mine.yaml").write_text(CARD.read_text().replace('name: "h100-sxm"', 'name: "mine"'))
    (gpus / "broken.yaml").write_text("name: broken\nhbm_bytes: [\n")
    monkeypatch.setenv(DATA_ENV, str(tmp_path))

    code, _, err = run(capsys, *EVALUATE[:3], "--gpu", "mine", *EVALUATE[5:])

    assert_one_line(err, code, EXIT_BAD_INPUT, "broken.yaml", DATA_ENV)


def test_valid_user_cards_load(tmp_path, capsys, monkeypatch):
    gpus = tmp_path / "instances" / "gpus"
    gpus.mkdir(parents=True)
    (gpus / "mine.yaml").write_text(CARD.read_text().replace('name: "h100-sxm"', 'name: "mine"'))
    monkeypatch.setenv(DATA_ENV, str(tmp_path))

    code, _, err = run(capsys, *EVALUATE[:3], "--gpu", "mine", *EVALUATE[5:])

    assert (code, err) == (EXIT_OK, "")


# ----------------------------------------------------------------------------------------------- cached tables


def test_an_edited_cluster_file_is_not_answered_from_the_previous_graphs_tables(tmp_path):
    cluster = tmp_path / "c.yaml"
    space = {"cluster": str(cluster), "demand_tok_s": 10_000, "tp_degrees": (8,), "pp_degrees": (1,)}
    cluster.write_text("name: c\nnodes: 4\nnode_type: hgx-h100\n")
    four = api.cheapest("llama-3-70b", None, **space)
    cluster.write_text("name: c\nnodes: 1\nnode_type: hgx-h100\n")

    with pytest.raises(Infeasible, match="there are 8"):
        api.cheapest("llama-3-70b", None, **space)
    assert four["total_gpus"] > 8  # the demand needs more than one server: only the 4-server answer has them


def test_questions_on_different_graphs_differ_and_on_the_same_file_are_equal(tmp_path):
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: c\nnodes: 2\nnode_type: hgx-h100\n")
    first = api.question("llama-3-8b", None, cluster=str(cluster))
    again = api.question("llama-3-8b", None, cluster=str(cluster))
    cluster.write_text("name: c\nnodes: 2\nnode_type: hgx-h100\nnic_gb_s: 25\n")
    edited = api.question("llama-3-8b", None, cluster=str(cluster))

    assert first == again and hash(first) == hash(again)
    assert edited != first
    assert graph_fingerprint(first.cluster) != graph_fingerprint(edited.cluster)
