"""Lazy tables: a query starts from one coarse row per layout over its whole batch range, whose chords bound the
evaluator from below; only the rows a query's screening keeps are cut where a collective changes protocol (and MoE
chords refined), and the answers equal those from tables cut in full and the enumeration oracle."""

from __future__ import annotations

import numpy as np
import pytest

from roofline_opt import api
from roofline_opt.optimize import queries
from roofline_opt.optimize.enumerate import enumerate_best, feasible_points
from roofline_opt.optimize.formulation import CHEAPEST, FASTEST, choice_bounds, target_batch_bounds
from roofline_opt.optimize.queries import Prepared, SolverOptions, prepare, smallest, solve_cheapest, solve_fastest
from roofline_opt.optimize.tables import build_tables, refine_rows

BOUND_RTOL = 1e-9
"""Relative slack for a chord compared with the evaluator (the chord's own rounding)."""


def _moe_spec():
    """MoE target, EP, two accelerators and precisions, speculative decoding: every kind of term in the chords."""
    return api.question(
        "mixtral-8x22b",
        ("h100-sxm", "mi300x"),
        weight_bits=(16, 8),
        ep_degrees=(1, 2, 4, 8),
        tp_degrees=(2, 4, 8),
        pp_degrees=(1, 2),
        draft="llama-3-8b",
        gamma_max=2,
        max_batch=256,
    )


def _dense_spec():
    return api.question("llama-3-70b", "h100-sxm", preset="paper", draft="llama-3-8b", gamma_max=3, max_batch=512)


def _chord_tau_s(t, rows, batch):
    """The tables' time per token (seconds) of ``rows`` at ``batch``: the largest piece."""
    return (t.pieces_a0[rows] + t.pieces_a1[rows] * batch[:, None]).max(axis=1) * t.time_unit_s


@pytest.mark.parametrize("make", [_moe_spec, _dense_spec])
def test_coarse_rows_bound_every_enumerated_point_from_below_and_touch_at_both_ends(make):
    q = make()
    t, pts = build_tables(q, coarse=True), feasible_points(q)
    row_of = {int(j): r for r, j in enumerate(t.layout_of)}
    assert len(row_of) == len(t)  # one row per layout
    rows = np.array([row_of[int(j)] for j in pts.layout_index])

    chord = _chord_tau_s(t, rows, pts.batch.astype(float))

    assert np.all((t.batch_lo[rows] <= pts.batch) & (pts.batch <= t.batch_hi[rows]))
    assert np.all(chord <= pts.time_per_token_s * (1 + BOUND_RTOL))
    ends = (pts.batch == t.batch_lo[rows]) | (pts.batch == t.batch_hi[rows])
    assert ends.sum() >= len(t)
    np.testing.assert_allclose(chord[ends], pts.time_per_token_s[ends], rtol=BOUND_RTOL)
    assert np.any(chord < pts.time_per_token_s * (1 - 1e-6))  # coarse: strictly optimistic somewhere


def test_refining_a_coarse_row_only_raises_its_chords():
    q = _moe_spec()
    t = build_tables(q, coarse=True)
    rows = np.arange(0, len(t), 7)
    refined = refine_rows(t, q, rows)
    new = np.flatnonzero(refined.refined)
    assert len(new) > len(rows) and not refined.refined[: len(t) - len(rows)].any()
    coarse_row = {int(t.layout_of[r]): int(r) for r in rows}
    for r in new:
        batch = np.arange(refined.batch_lo[r], refined.batch_hi[r] + 1.0)
        before = _chord_tau_s(t, np.full(len(batch), coarse_row[int(refined.layout_of[r])]), batch)
        after = _chord_tau_s(refined, np.full(len(batch), r), batch)
        assert np.all(after >= before * (1 - BOUND_RTOL))


def _answers(prep: Prepared, budgets, speeds):
    return [solve_fastest(prep, b) for b in budgets] + [solve_cheapest(prep, s) for s in speeds]


def test_lazily_refined_tables_give_the_answers_of_tables_cut_in_full_and_of_the_oracle():
    q = _moe_spec()
    pts = feasible_points(q)
    cheapest = enumerate_best(q, "cheapest", None, pts)
    budgets = [cheapest.usd_per_mtok * f for f in (1.0 + 1e-9, 1.5, 3.0, 10.0)] + [None]
    speeds = [None, cheapest.tok_s_per_request * 2.0, cheapest.tok_s_per_request * 5.0]

    lazy = _answers(prepare(q), budgets, speeds)
    full = _answers(Prepared(q, build_tables(q), SolverOptions()), budgets, speeds)
    oracle = [enumerate_best(q, "fastest", b, pts) for b in budgets] + [
        enumerate_best(q, "cheapest", s, pts) for s in speeds
    ]

    assert [a.setup for a in lazy] == [a.setup for a in full]
    assert [a.figures for a in lazy] == [a.figures for a in full]
    for a, o in zip(lazy, oracle, strict=True):
        assert a.tok_s_per_request == pytest.approx(o.tok_s_per_request, rel=1e-5)
        assert a.usd_per_mtok == pytest.approx(o.usd_per_mtok, rel=1e-5)


def test_a_query_refines_few_of_many_layouts():
    q = api.question(
        "mixtral-8x22b",
        ("h100-sxm", "h200", "b200"),
        weight_bits=(16, 8),
        ep_degrees=(1, 2, 4, 8),
        draft="llama-3-8b",
        gamma_max=4,
    )
    prep = prepare(q)
    layouts = len(prep.tables)
    solve_fastest(prep, 2.0)
    refined_layouts = len(np.unique(prep.tables.layout_of[prep.tables.refined]))
    assert layouts > 1000
    assert 0 < refined_layouts < layouts // 10


def test_screening_in_order_of_untargeted_bounds_keeps_the_rows_of_screening_every_row(monkeypatch):
    monkeypatch.setattr(queries, "SCAN_FIRST", 4)
    prep = prepare(_moe_spec())
    cheapest = solve_cheapest(prep, None)
    fastest = solve_fastest(prep, None)
    targets = [(FASTEST, {"max_usd_per_mtok": cheapest.usd_per_mtok * f}) for f in (1.0, 1.3, 2.0, 4.0, 1e3)] + [
        (CHEAPEST, {"max_time_per_token": 1.0 / (fastest.tok_s_per_request * f * prep.tables.time_unit_s)})
        for f in (1.0, 0.8, 0.5, 0.2, 1e-3)
    ]
    scanned = []
    for kind, target in targets:
        rows, _, _, bound, ahead = prep._screen(kind, target)
        lo, hi = target_batch_bounds(prep.tables, **target)
        every = choice_bounds(prep.tables, kind, lo, hi)
        np.testing.assert_array_equal(rows[ahead], smallest(every, queries.REFINE_AHEAD))
        np.testing.assert_array_equal(bound[ahead], every[rows[ahead]])
        scanned.append(len(rows))
    assert min(scanned) < len(prep.tables)  # the scan stopped early at least once


@pytest.mark.parametrize("k", [1, 3, 8, 64, 500])
def test_smallest_is_the_head_of_a_stable_argsort(k):
    rng = np.random.default_rng(k)
    values = rng.integers(0, 20, 300).astype(float)
    values[rng.integers(0, 300, 40)] = np.inf
    values[rng.integers(0, 300, 5)] = np.nan
    for v in (values, values[np.isfinite(values)], np.full(50, np.inf)):
        np.testing.assert_array_equal(smallest(v, k), np.argsort(v, kind="stable")[:k])


MOE_CARDS = ("deepseek-v3", "gpt-4-paper", "mixtral-8x7b", "mixtral-8x22b", "qwen3-235b-a22b", "qwen3-30b-a3b")


@pytest.mark.parametrize("card", MOE_CARDS)
def test_every_piece_of_a_moe_step_is_concave_in_the_batch_so_chords_bound_it_from_below(card):
    """Coarse chords are optimistic only if each max() piece (launch + network + attention classes + GEMM memory, or
    + GEMM compute) is concave in the batch. The expert-activation traffic u(tok) x tok is convex at small batches on
    its own; the expert weights u(tok) x W dominate it for every MoE card of the catalog, layouts with EP and DP
    attention too."""
    from roofline_opt import catalog
    from roofline_opt.physics import evaluator as ev
    from roofline_opt.physics.specs import DEFAULT, PAPER

    model, gpu = catalog.load_model(card), catalog.load_gpu("h100-sxm")
    batch = np.arange(1.0, 513.0)
    layouts = [ev.Layout.of(tp, False, pp, 2000, s, ep) for tp, pp, ep, s in [(1, 1, 1, 1), (8, 1, 8, 1), (8, 2, 2, 3)]]
    layouts.append(ev.Layout.of(8, False, 1, 2000, 1, 8, dp_attention=True))
    for preset in (DEFAULT, PAPER):
        for layout in layouts:
            step = ev.step(model, gpu, preset, 8, layout, batch)
            for piece in (step.gemm_memory_s, step.gemm_compute_s):
                term = step.serial_s + piece
                assert np.all(np.diff(term, 2) <= 1e-12 * term[2:]), (card, preset.name, layout.tp, layout.pp)
