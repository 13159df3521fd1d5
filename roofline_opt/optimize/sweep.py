"""Frontier: re-solve the persistent fastest-under-budget model over budgets from the cheapest to the fastest setup.

Budgets are spaced geometrically between the cheapest setup's cost and the fastest setup's cost; each point is a
proven optimum re-evaluated exactly. Points that repeat a setup are kept once, and only efficient points are kept
(see ``pareto``). Progress goes to a callback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import enumerate_best
from roofline_opt.optimize.queries import (
    SolverOptions,
    check_method,
    enumerated_points,
    prepare,
    solve_cheapest,
    solve_fastest,
)
from roofline_opt.optimize.queries import (
    cheapest as cheapest_query,
)
from roofline_opt.optimize.results import Answer
from roofline_opt.optimize.space import Question

if TYPE_CHECKING:
    import pandas as pd

Progress = Callable[[int, int], None]


def budgets(cheapest_usd: float, fastest_usd: float, points: int) -> np.ndarray:
    """Geometric budgets from the cheapest cost to the fastest setup's cost, both ends included."""
    if points < 2:
        raise InvalidInput("--points", f"must be an integer >= 2. Got {points} instead")
    if fastest_usd <= cheapest_usd:
        return np.array([cheapest_usd])
    return np.geomspace(cheapest_usd, fastest_usd, points)


def _mip_solvers(question: Question, options: SolverOptions | None):
    prep = prepare(question, options)
    return lambda budget: solve_fastest(prep, budget), lambda: solve_cheapest(prep, question.min_tok_s_per_request)


def _enumeration_solvers(question: Question):
    pts = enumerated_points(question)
    return (lambda budget: enumerate_best(question, "fastest", budget, pts)), (
        lambda: enumerate_best(question, "cheapest", question.min_tok_s_per_request, pts)
    )


def frontier_answers(
    question: Question,
    points: int = 50,
    options: SolverOptions | None = None,
    progress: Progress | None = None,
    method: str = "mip",
    utility_exponent: float | None = 4.0,
) -> list[Answer]:
    """The speed-vs-cost frontier as answers, one per distinct optimal setup, cheapest first, including the exact
    maximiser of speed^a / price (a = ``utility_exponent``; None skips that search).

    With a TPOT limit the frontier starts at the cheapest setup meeting it (slower points are dropped)."""
    check_method(method)
    fastest_within, cheapest_of_all = (
        _mip_solvers(question, options) if method == "mip" else _enumeration_solvers(question)
    )
    cheapest = cheapest_of_all()
    fastest = fastest_within(None)
    if cheapest is None:
        cheapest_query(question, None, method, options)  # raises Infeasible naming the TPOT limit
    assert cheapest is not None and fastest is not None  # a feasible space has both ends
    grid = budgets(cheapest.usd_per_mtok, fastest.usd_per_mtok, points)
    answers: list[Answer] = []
    for i, budget in enumerate(grid):
        answer = fastest_within(float(budget) * (1 + 1e-9)) if i else cheapest
        if answer is not None and (not answers or answer.setup != answers[-1].setup):
            answers.append(answer)
        if progress is not None:
            progress(i + 1, len(grid))
    if answers[-1].setup != fastest.setup:
        answers.append(fastest)
    speed = question.min_tok_s_per_request
    if speed is not None:
        answers = [a for a in answers if a.tok_s_per_request >= speed * (1 - 1e-9)]
    answers = pareto(answers)
    if utility_exponent is None:
        return answers
    return pareto(answers + preferred_search(answers, fastest_within, utility_exponent))


def utility(answer: Answer, exponent: float) -> float:
    """log(speed^a / price): the notebook's preference among frontier points."""
    return exponent * np.log(answer.tok_s_per_request) - np.log(answer.usd_per_mtok)


def preferred_search(
    frontier: list[Answer], fastest_within: Callable[[float], Answer | None], exponent: float
) -> list[Answer]:
    """The frontier point between the sampled ones that beats their best speed^a / price, if any.

    A gap (lo, hi) holds setups costing more than ``lo`` and less than ``hi.price`` and so running no faster than
    ``hi``: none scores above hi.speed^a / lo, and the gap is dropped when that bound is no better than the best
    score. Otherwise the fastest setup P within a budget m is solved: setups costing between P's price and m are
    slower and dearer than P, so the gaps left are (lo, P) and (m, hi). m is the geometric middle of the gap (the
    gaps shrink geometrically), except under the best point found so far, whose own gap that bound never drops:
    there m is just below hi (1e-7), which settles (P, hi) at once. The maximum over the whole frontier is found
    whatever the sampling (to 1e-7 relative).
    """
    best = max(utility(a, exponent) for a in frontier)
    found: Answer | None = None
    gaps = [(lo.usd_per_mtok, hi) for lo, hi in zip(frontier[:-1], frontier[1:], strict=True)]
    while gaps:
        lo_cost, hi = gaps.pop()
        bound = exponent * np.log(hi.tok_s_per_request) - np.log(lo_cost)
        if bound <= best + 1e-9 or hi.usd_per_mtok <= lo_cost * (1 + 1e-7):
            continue
        under_best = utility(hi, exponent) >= best - 1e-9
        budget = hi.usd_per_mtok * (1 - 1e-7) if under_best else float(np.sqrt(lo_cost * hi.usd_per_mtok))
        inside = fastest_within(budget)
        if not under_best:
            gaps.append((budget, hi))
        if inside is None or inside.usd_per_mtok <= lo_cost * (1 + 1e-9) or inside.usd_per_mtok > budget:
            continue
        if utility(inside, exponent) > best:
            found, best = inside, utility(inside, exponent)
        gaps.append((lo_cost, inside))
    return [] if found is None else [found]


def pareto(answers: list[Answer]) -> list[Answer]:
    """The efficient answers, cheapest first: each strictly faster than every cheaper one.

    Every answer is optimal to within the MIP gap; near-ties inside that gap could otherwise put a marginally slower
    setup after a faster one. The figures compared are the exact re-evaluated ones.
    """
    kept: list[Answer] = []
    for answer in sorted(answers, key=lambda a: (a.usd_per_mtok, -a.tok_s_per_request)):
        if not kept or answer.tok_s_per_request > kept[-1].tok_s_per_request:
            kept.append(answer)
    return kept


def preferred_index(frame: pd.DataFrame, utility_exponent: float = 4.0) -> int:
    """Row maximising speed^a / price (the notebook's choice of one frontier point; a = 4 there). The frontier of
    ``frontier_answers`` holds the exact maximiser, so this is the maximum over the whole frontier."""
    score = utility_exponent * np.log(frame["tok_s_per_request"]) - np.log(frame["usd_per_mtok"])
    return int(np.argmax(score.to_numpy()))


def is_monotone(frame: pd.DataFrame) -> bool:
    """More budget never buys less speed: speed and cost rise together along the frontier."""
    speed = frame["tok_s_per_request"].to_numpy()
    cost = frame["usd_per_mtok"].to_numpy()
    return bool(np.all(np.diff(speed) >= -1e-9 * speed[:-1]) and np.all(np.diff(cost) >= -1e-9 * cost[:-1]))
