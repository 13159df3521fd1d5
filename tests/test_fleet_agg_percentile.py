"""Aggregated fleet models with their TTFT and TPOT limits at a percentile: the MIP against brute force, every row
re-checked with the queueing models at its batch, the batch the same cap as a single-model answer's, and the
infeasibility message naming the limit that refuses."""

from __future__ import annotations

import pytest
from fleet_cases import OPTIONS, fleet_of, solved

from roofline_opt.errors import Infeasible
from roofline_opt.optimize.fleet import plan_fleet
from roofline_opt.optimize.testing import assert_same_fleet_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics import queueing
from roofline_opt.physics import requests as rq
from roofline_opt.physics import tpot_percentiles as tq

SMALL = {"tp_degrees": [1, 2, 4], "pp_degrees": [1, 2], "tp_modes": ["1d"], "max_batch": 512}


def _agg(name: str, req_s: float, tpot_ms: float, ttft_ms: float | None = None, **extra) -> dict:
    """An aggregated llama-3-8b entry of 2,000 / 400 tokens per request."""
    entry = {"name": name, "model": "llama-3-8b", "demand_req_s": req_s, "isl": 2000, "osl": 400, "tpot_ms": tpot_ms}
    return {**entry, **({} if ttft_ms is None else {"ttft_ms": ttft_ms}), **SMALL, **extra}


FLEETS = {
    "p90 TTFT and TPOT": {
        "gpus": {"h100-sxm": 32},
        "models": [_agg("chat", 60, 40, 250, percentile=90), _agg("code", 30, 30, percentile=90)],
    },
    "p99 TTFT beside a model on the mean": {
        "gpus": {"h100-sxm": 32},
        "models": [_agg("chat", 60, 40, 250, percentile=99), _agg("code", 30, 30)],
    },
    "bursty p90 on two accelerator types": {
        "gpus": {"h100-sxm": 8, "a100-80gb": 8},
        "models": [
            {**_agg("chat", 20, 50, 400, percentile=90, burstiness=4), "tp_degrees": [1, 2], "max_batch": 256},
            {**_agg("code", 10, 40), "tp_degrees": [1, 2], "max_batch": 256},
        ],
    },
    "served within a budget at p90": {
        "gpus": {"h100-sxm": 16},
        "objective": "served",
        "max_usd_per_hour": 20,
        "models": [_agg("chat", 60, 40, 250, percentile=90), {**_agg("code", 30, 30), "weight": 0.5}],
    },
}


@pytest.fixture(scope="module")
def plans() -> dict:
    return solved(FLEETS)


@pytest.mark.parametrize("key", list(FLEETS))
def test_the_mip_equals_brute_force_with_aggregated_percentile_limits(plans, key) -> None:
    assert_same_fleet_optimum(*plans[key])


def _at_batch(spec, fm, row, batch: float) -> tuple[float, float]:
    """(TTFT, TPOT) at the model's percentile of the row's layout loaded to mean decode batch ``batch``."""
    q = fm.question
    gpu = spec.pool.gpu(row["gpu"])
    layout = ev.Layout.of(row["tp"], row["tp_2d"], row["pp"], q.context, 1, row["ep"], row["kv_bits"])
    args = (q.model, gpu, q.preset_on(gpu), row["weight_bits"], layout, batch)
    p, w, chunk = q.slo_percentile, q.whole_requests, float(row["chunk_tokens"])
    ttft = float(queueing.aggregated_percentile_ttft_s(p, *args, w, chunk, q.arrival_scv))
    tpot = float(tq.aggregated_percentile_tpot_s(p, *args, w, chunk, q.arrival_scv))
    return ttft, tpot


@pytest.mark.parametrize("key", list(FLEETS))
def test_every_row_reports_and_meets_its_limits_at_the_percentile_at_its_batch(plans, key) -> None:
    spec, mip, _ = plans[key]
    by_name = {m.name: m for m in spec.models}
    for row in mip.rows:
        fm = by_name[row["model"]]
        assert row["meets_limits"]
        if fm.question.slo_percentile is None:
            continue
        ttft, tpot = _at_batch(spec, fm, row, float(row["batch"]))
        assert row["tpot_ms"] == pytest.approx(tpot * 1e3, rel=1e-9)
        assert tpot <= fm.max_time_per_token_s * (1 + 1e-9)
        if fm.question.max_ttft_s is not None:
            assert row["ttft_ms"] == pytest.approx(ttft * 1e3, rel=1e-9)
            assert ttft <= fm.question.max_ttft_s * (1 + 1e-9)


def test_each_batch_is_the_largest_whose_percentiles_meet_the_limits(plans) -> None:
    """One more sequence would break a limit at the percentile or the chunk budget (B I / O <= chunk): the batch is
    the cap (memory does not bind in this fleet)."""
    spec, mip, _ = plans["p90 TTFT and TPOT"]
    by_name = {m.name: m for m in spec.models}
    for row in mip.rows:
        fm = by_name[row["model"]]
        ttft, tpot = _at_batch(spec, fm, row, float(row["batch"] + 1))
        ttft_limit = fm.question.max_ttft_s or float("inf")
        over_budget = row["batch"] + 1 > rq.stable_batch_limit(fm.question.whole_requests, float(row["chunk_tokens"]))
        assert over_budget or ttft > ttft_limit * (1 + 1e-12) or tpot > fm.max_time_per_token_s * (1 + 1e-12)


def test_a_percentile_plans_smaller_batches_than_the_same_limits_on_the_mean_and_no_load(plans) -> None:
    spec, mip, _ = plans["p99 TTFT beside a model on the mean"]
    data = FLEETS["p99 TTFT beside a model on the mean"]
    steady = plan_fleet(
        fleet_of({**data, "models": [{k: v for k, v in m.items() if k != "percentile"} for m in data["models"]]}),
        "mip",
        OPTIONS,
    )

    def chat(plan, field):
        return max(r[field] for r in plan.rows if r["model"] == "chat")

    assert chat(mip, "batch") < chat(steady, "batch")
    assert chat(mip, "ttft_ms") > chat(steady, "ttft_ms")
    assert mip.usd_per_hour > steady.usd_per_hour


def test_the_model_summary_names_the_percentiles(plans) -> None:
    _, mip, _ = plans["p90 TTFT and TPOT"]
    chat, code = mip.models
    assert (chat["ttft_percentile"], chat["tpot_percentile"]) == (90, 90)
    assert (code["ttft_percentile"], code["tpot_percentile"]) == (None, 90)


def test_an_unreachable_ttft_percentile_names_the_limit_and_the_quickest_layout() -> None:
    entry = {**_agg("chat", 5, 40, 30, percentile=99), "tp_degrees": [1, 2], "pp_degrees": [1], "max_batch": 256}
    with pytest.raises(Infeasible, match=r"model chat .*cannot meet ttft 30 ms at p99 on h100-sxm: the quickest"):
        plan_fleet(fleet_of({"gpus": {"h100-sxm": 8}, "models": [entry]}), "mip", OPTIONS)


def test_an_unreachable_tpot_percentile_names_the_tpot_limit() -> None:
    entry = {**_agg("chat", 5, 3, percentile=90), "tp_degrees": [1, 2], "pp_degrees": [1], "max_batch": 256}
    with pytest.raises(Infeasible, match=r"cannot meet tpot 3 ms at p90 on h100-sxm: the quickest layout takes"):
        plan_fleet(fleet_of({"gpus": {"h100-sxm": 8}, "models": [entry]}), "mip", OPTIONS)


def test_an_unreachable_no_load_ttft_names_the_ttft_limit_not_memory() -> None:
    entry = {**_agg("chat", 5, 40, 10), "tp_degrees": [1, 2], "pp_degrees": [1], "max_batch": 256}
    with pytest.raises(Infeasible, match=r"cannot meet ttft 10 ms on h100-sxm") as err:
        plan_fleet(fleet_of({"gpus": {"h100-sxm": 8}, "models": [entry]}), "mip", OPTIONS)
    assert "memory" not in str(err.value)


def test_a_plan_names_the_models_whose_ttft_percentile_runs_past_what_was_checked(capsys) -> None:
    """instances/fleets/p90-slos.yaml: rag (300 output tokens) runs its chunk budget 64% busy, past the 50% checked
    for 200+ tokens; chat (400 tokens) 44%."""
    from roofline_opt.cli import main

    assert main(["plan", "instances/fleets/p90-slos.yaml"]) == 0
    text = capsys.readouterr().out
    assert "rag: queueing: the chunk budget is up to 64% busy" in text
    assert "chat: queueing:" not in text
