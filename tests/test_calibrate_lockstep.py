"""calibrate's leave-one-out fits run in lockstep (issue 29: 10,000 rows within 60 s): each held-out row's fit is
the one a search of its own would find, and each distinct setup is evaluated once per parameter point."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from roofline_opt import catalog
from roofline_opt.fidelity.calibrate import (
    LOO_STEPS,
    ONE,
    _coordinate_search,
    _fit,
    _fit_many,
    _fit_preset,
    _leave_one_out,
    _Problem,
)
from roofline_opt.fidelity.measured import map_row, read_measured

SYNTHETIC = Path(__file__).resolve().parent / "data" / "measured_synthetic.csv"


def _problem(repeat: int = 1) -> _Problem:
    rows = [r for r in map(map_row, read_measured(SYNTHETIC)) if r.setup is not None and not r.reasons]
    rows = [r for r in rows if r.setup.gpu_card == "h100-sxm" and r.measured_tok_s_per_request is not None] * repeat
    measured = np.array([r.measured_tok_s_per_request for r in rows])
    return _Problem([r.setup for r in rows], measured, catalog.load_gpu("h100-sxm"))


def test_each_held_out_fit_equals_a_search_of_its_own() -> None:
    problem = _problem()
    values, _ = _fit(problem)
    lockstep = _leave_one_out(problem, values)
    n = len(problem.measured_tok_s_per_request)
    for i in range(n):
        keep = np.arange(n) != i
        ((_, alone, _),) = _fit_many(lambda v, _, keep=keep: np.array([problem.loss(v, keep)]), ONE, values, LOO_STEPS)
        assert lockstep[i] == problem.log_errors(_fit_preset(alone))[i]


def test_repeated_rows_share_their_setups_evaluation() -> None:
    problem = _problem(repeat=3)
    assert problem.n_setups * 3 == len(problem.measured_tok_s_per_request)
    assert sum(len(g.indices) for g in problem.groups) == problem.n_setups


def test_fits_that_part_at_a_grid_s_last_candidate_each_end_at_their_own_minimum() -> None:
    def losses(values: np.ndarray, members: np.ndarray) -> np.ndarray:
        x = np.log(values[0])
        own = {0: 0.0 if abs(x - 1.0) < 1e-9 else 1.0, 1: x**2}  # member 0 only improves at the last candidate
        return np.array([own[int(m)] for m in members])

    ends = _coordinate_search(
        losses, np.array([0, 1]), np.ones(1), np.full(1, np.e**-5), np.full(1, np.e**5), [True], (1.0,)
    )
    found = {int(m): float(np.log(v[0])) for members, v in ends for m in members}
    assert found == {0: 1.0, 1: 0.0}
