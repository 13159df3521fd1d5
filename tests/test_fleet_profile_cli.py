"""Fleet planning over a demand profile (reserved vs on-demand GPUs) and the ``plan`` command."""

from __future__ import annotations

import json

import pytest

from roofline_opt import api
from roofline_opt.cli import main
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.fleet import parse_fleet, plan_fleet
from roofline_opt.optimize.queries import SolverOptions

OPTIONS = SolverOptions(mip_gap=1e-9)
EXAMPLE = "instances/fleets/chat-and-code.yaml"
SPACE = {"tp_degrees": [1, 2, 4, 8], "pp_degrees": [1], "tp_modes": ["1d"], "max_batch": 512}
PROFILE = [2000, 9000, 16000, 12000, 4000, 9000]
PRICES = {"h100-sxm": {"reserved": 1.2, "on_demand": 3.0}}


def _profile_fleet(profile: list[float]) -> dict:
    model = {"name": "code", "model": "llama-3-8b", "tpot_ms": 20, **SPACE, "demand_profile": {"tok_s": profile}}
    return {"gpus": {"h100-sxm": "unlimited"}, "prices": PRICES, "models": [model]}


def test_the_reserved_on_demand_split_minimises_the_days_cost() -> None:
    """Brute force over the reserved count, with each period's fewest GPUs from single-period plans."""
    plan = plan_fleet(parse_fleet(_profile_fleet(PROFILE), api.question), "mip", OPTIONS)
    need = []
    for demand in PROFILE:
        alone = plan_fleet(parse_fleet(_profile_fleet([demand]), api.question), "mip", OPTIONS)
        need.append(alone.cluster["gpus_used"]["h100-sxm"])
    best = min(len(PROFILE) * 1.2 * r + 3.0 * sum(max(0, n - r) for n in need) for r in range(max(need) + 1))
    assert plan.cluster["usd_total"] == pytest.approx(best, rel=1e-9)
    reserved = plan.cluster["reserved_gpus"]["h100-sxm"]
    on_demand = plan.cluster["on_demand_gpus"]["h100-sxm"]
    assert 0 < reserved < max(need)
    assert [reserved + o for o in on_demand] >= need
    # a period may use more of the GPUs already reserved at no cost (an equal optimum: HiGHS 1.7 picks one)
    used = [p["h100-sxm"] for p in plan.cluster["gpus_used_per_period"]]
    assert all(n <= u <= reserved + o for n, u, o in zip(need, used, on_demand, strict=True))


def test_each_period_serves_its_own_demand() -> None:
    plan = plan_fleet(parse_fleet(_profile_fleet(PROFILE), api.question), "mip", OPTIONS)
    served = {}
    for row in plan.rows:
        served[row["period"]] = served.get(row["period"], 0.0) + row["served_tok_s"]
    assert [served[t] for t in range(len(PROFILE))] == pytest.approx(PROFILE, rel=1e-12)


def test_plan_prints_the_tables_placement_solver_line_and_saving(capsys) -> None:
    assert main(["plan", EXAMPLE, "--compare"]) == 0
    out = capsys.readouterr().out
    assert "effective_usd_per_mtok" in out
    assert "placement (instance: TP group per pipeline stage):" in out
    assert "solver: mip, optimal" in out
    assert "the plan saves $" in out


def test_plan_json_csv_and_plot(tmp_path, capsys) -> None:
    csv, png = tmp_path / "plan.csv", tmp_path / "plan.png"
    assert main(["plan", EXAMPLE, "--json", "--csv", str(csv), "--plot", str(png)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert {"rows", "models", "cluster", "placement", "solve"} <= set(record)
    assert csv.read_text().splitlines()[0].startswith("period,model,model_spec,gpu")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_plan_bad_input_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: {h100-sxm: 8}\nmodels: [{model: llama-3-8b, demand_tok_s: 10, colour: red}]\n")
    assert main(["plan", str(bad), "--csv", str(tmp_path / "out.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "models[0].colour" in err
    assert not (tmp_path / "out.csv").exists()


def test_plan_infeasible_fleet_exits_1_with_the_reason(tmp_path, capsys) -> None:
    short = tmp_path / "short.yaml"
    short.write_text("gpus: {h100-sxm: 8}\nmodels: [{model: llama-3-8b, demand_tok_s: 200000, tpot_ms: 20}]\n")
    assert main(["plan", str(short)]) == 1
    assert "more h100-sxm GPUs" in capsys.readouterr().err


def test_a_profile_on_a_graph_places_every_period_validly() -> None:
    from roofline_opt.optimize.fleet.placement import PlacedInstance, placement_problems

    model = {"name": "code", "model": "llama-3-8b", "tpot_ms": 20, **SPACE, "demand_profile": {"tok_s": PROFILE[:3]}}
    spec = parse_fleet(
        {"cluster": {"nodes": 2, "node_type": "hgx-h100"}, "prices": PRICES, "models": [model]}, api.question
    )
    plan = plan_fleet(spec, "mip", OPTIONS)
    assert len(plan.placement) == 3
    for period, instances in enumerate(plan.placement):
        placed = [
            PlacedInstance(
                i["instance"], i["model"], 0, i["gpu"], i["tp"], i["pp"], tuple(tuple(s) for s in i["stages"])
            )
            for i in instances
        ]
        assert placement_problems(spec.pool.cluster, placed) == []
        gpus = sum(i["tp"] * i["pp"] for i in instances)
        assert gpus == plan.cluster["gpus_used_per_period"][period]["h100-sxm"]


def test_the_api_takes_a_dict_with_a_networkx_graph() -> None:
    from roofline_opt import topology

    graph = topology.single_node("hgx-h100")
    fleet = {"cluster": graph, "models": [{"model": "llama-3-8b", "demand_tok_s": 5000, "tpot_ms": 20, **SPACE}]}
    plan = api.plan(fleet)
    assert plan.models[0]["served_tok_s"] == pytest.approx(5000)
    assert plan.solve["status"] == "optimal"


def test_enumerate_refuses_fleets_beyond_its_stated_limit() -> None:
    fleet = {"gpus": {"h100-sxm": 128}, "models": [{"model": "llama-3-8b", "demand_tok_s": 5000, "tpot_ms": 20}]}
    with pytest.raises(InvalidInput, match="enumerate handles small fleets only"):
        plan_fleet(parse_fleet(fleet, api.question), "enumerate")


def test_plan_by_enumeration_from_the_command_line(tmp_path, capsys) -> None:
    small = tmp_path / "small.yaml"
    small.write_text(
        "gpus: {h100-sxm: 8}\nmodels: [{model: llama-3-8b, demand_tok_s: 6000, tpot_ms: 20, tp_degrees: [1, 2, 4],"
        " pp_degrees: [1], tp_modes: [1d], max_batch: 256}]\n"
    )
    assert main(["plan", str(small), "--method", "enumerate", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["solve"]["method"] == "enumerate"
    assert main(["plan", str(small), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cluster"]["usd_per_hour"] == record["cluster"]["usd_per_hour"]
