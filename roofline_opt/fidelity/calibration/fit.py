"""A regularised, bounded fit of the efficiency parameters to measured rows, with identification and leave-one-out.

The loss, in natural-log parameters u = ln(value), z_r = ln(estimate_r / measured_r) / ROW_LOG_SCALE:

    sum_rows 2 (sqrt(1 + z_r^2) - 1) + sum_fitted_j ((u_j - u_prior_j) / PRIOR_LOG_WIDTH)^2

i.e. a Gaussian prior of width PRIOR_LOG_WIDTH on each fitted parameter's log-deviation from the prior profile's
value, and rows scattered by ROW_LOG_SCALE about the model with a soft-L1 (robust) loss: quadratic within the scale,
linear beyond it, so a few rows the model misdescribes do not drag the fit (the errors reported are medians). It is
minimised by projected Levenberg-Marquardt inside ``BOUNDS`` (iteratively reweighted Gauss-Newton steps,
central-difference Jacobians, every point of every fit evaluated at once by ``Components``).

The fit moves ``COORDINATES``: first a common speed scale (``SCALE_DIRECTION``: FLOP and HBM efficiency up by a
factor, the latency and launch factors down by it, so every time term but collective bandwidth scales together: the
physical counterpart of a per-accelerator median-ratio scale, with prior width SCALE_LOG_WIDTH), then each parameter's
own log-deviation (prior width PRIOR_LOG_WIDTH). A coordinate is fitted only when the rows identify it: the scale
first, then the others in order of the rows' Fisher information (J^T J / ROW_LOG_SCALE^2 at the prior), each one's
information conditional on the coordinates already chosen (the Schur complement) must reach IDENTIFIED_INFORMATION
times its prior's (1 / width^2: the rows know it at least as well as the prior does), and a fit of k coordinates
needs at least k + 1 rows. The others are held at the prior profile's value, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from roofline_opt.fidelity.calibration.components import PARAMETERS

BOUNDS: dict[str, tuple[float, float]] = {
    "flop_efficiency": (0.2, 0.95),
    "hbm_efficiency": (0.4, 0.95),
    "network_latency_factor": (0.5, 3.0),
    "kernel_launch_factor": (0.25, 2.0),
}
"""Physical ranges of the fitted values (docs/calibration.md states the sources of each)."""

PRIOR_LOG_WIDTH = float(np.log(1.5))
"""Prior standard deviation of a parameter's own ln(value / prior value): a factor of 1.5 is one standard deviation."""

SCALE_LOG_WIDTH = float(np.log(2.0))
"""Prior standard deviation of the common speed scale's log: engines and their versions differ by up to ~2x on the
same accelerator (issue 23: estimate / measured medians 0.94 to 2.5 across engines of one year)."""

SCALE_DIRECTION = np.array([1.0, 1.0, -1.0, -1.0])
"""d ln(value) / d ln(speed scale) of PARAMETERS: all time terms but collective bandwidth divided by the scale."""

COORDINATES = ("speed_scale", *PARAMETERS)
BASIS = np.vstack([SCALE_DIRECTION, np.eye(len(PARAMETERS))])
"""ln(values) = ln(prior) + coordinates @ BASIS (clipped to BOUNDS)."""
WIDTHS = np.array([SCALE_LOG_WIDTH] + [PRIOR_LOG_WIDTH] * len(PARAMETERS))

ROW_LOG_SCALE = 0.2
"""Scatter of ln(measured / estimate) assumed per row (the issue's 14-22% median errors)."""

IDENTIFIED_INFORMATION = 1.0
"""A parameter is identified when the rows' conditional Fisher information on its log is at least this many times the
prior's (1 / PRIOR_LOG_WIDTH^2)."""

STEP = 1e-4
"""Central-difference step of a coordinate."""

MAX_ITERATIONS = 60
LOO_ITERATIONS = 20
EXACT_LOO_ROWS = 300
"""Up to this many rows each held-out fit is a refit; beyond, one Gauss-Newton step from the full fit."""
CHUNK_POINTS = 4000
"""Parameter points evaluated at once (bounds the memory of points x steps arrays)."""


Predict = Callable[[np.ndarray], np.ndarray]
"""Estimated tok/s per request of every row (points x rows) at parameter points (points x PARAMETERS)."""


def _chunked(predict: Predict, points: np.ndarray) -> np.ndarray:
    return np.concatenate([predict(points[i : i + CHUNK_POINTS]) for i in range(0, len(points), CHUNK_POINTS)])


_LOW_VALUES = np.array([BOUNDS[p][0] for p in PARAMETERS])
_HIGH_VALUES = np.array([BOUNDS[p][1] for p in PARAMETERS])


def values_at(prior: np.ndarray, coordinates: np.ndarray) -> np.ndarray:
    """Parameter values (fits x PARAMETERS) at coordinates (fits x COORDINATES), inside BOUNDS."""
    return np.clip(np.exp(np.log(prior) + coordinates @ BASIS), _LOW_VALUES, _HIGH_VALUES)


@dataclass(frozen=True)
class Identification:
    """Which coordinates the rows identify, the information behind each and why a held one is held."""

    fitted: tuple[str, ...]
    information: dict[str, float]
    held_because: dict[str, str]


def identify(predict: Predict, measured: np.ndarray, prior: np.ndarray) -> Identification:
    """Greedy choice by conditional Fisher information at the prior, the scale first (module docstring)."""
    n = len(measured)
    every = np.ones(len(COORDINATES), dtype=bool)
    jac = _jacobian(predict, prior, np.zeros((1, len(COORDINATES))), every, np.ones((1, n)))[0] / ROW_LOG_SCALE
    info = jac.T @ jac
    order = [0] + sorted(range(1, len(COORDINATES)), key=lambda j: -info[j, j])
    chosen: list[int] = []
    information, held = {}, {}
    for j in order:
        a, b = info[np.ix_(chosen, chosen)], info[np.ix_(chosen, [j])]
        conditional = float(info[j, j] - (b.T @ np.linalg.pinv(a) @ b)[0, 0]) if chosen else float(info[j, j])
        need = IDENTIFIED_INFORMATION / WIDTHS[j] ** 2
        information[COORDINATES[j]] = conditional
        if len(chosen) + 2 > n:
            held[COORDINATES[j]] = f"{n} rows fit at most {max(n - 1, 0)} coordinates (rows >= fitted + 1)"
        elif conditional < need:
            given = " given " + ", ".join(COORDINATES[c] for c in chosen) if chosen else ""
            held[COORDINATES[j]] = f"rows do not identify it: information {conditional:.3g} < {need:.3g}{given}"
        else:
            chosen.append(j)
    return Identification(tuple(COORDINATES[j] for j in sorted(chosen)), information, held)


def _log_estimates(predict: Predict, prior: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.log(_chunked(predict, values_at(prior, v)))


def _jacobian(predict: Predict, prior: np.ndarray, v: np.ndarray, on: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """d ln(estimate) / d coordinate (fits x rows x free coordinates), central differences, rows x ``weights``."""
    idx = np.flatnonzero(on)
    k = len(idx)
    shifts = np.zeros((2 * k, len(COORDINATES)))
    shifts[np.arange(k), idx] = STEP
    shifts[k + np.arange(k), idx] = -STEP
    points = (v[:, None, :] + shifts[None]).reshape(-1, len(COORDINATES))
    values = _log_estimates(predict, prior, points).reshape(len(v), 2 * k, -1)
    jac = (values[:, :k] - values[:, k:]) / (2 * STEP)
    return np.transpose(jac, (0, 2, 1)) * weights[:, :, None]


def fit(
    predict: Predict,
    measured: np.ndarray,
    prior: np.ndarray,
    free: tuple[str, ...],
    weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
    iterations: int = MAX_ITERATIONS,
) -> np.ndarray:
    """Minimise the loss for each fit (one per row of ``weights``, fits x rows: 1 counts a row, 0 leaves it out) over
    the ``free`` COORDINATES from ``start`` (fits x COORDINATES; default 0, the prior). Returns the coordinates."""
    weights = np.ones((1, len(measured))) if weights is None else weights
    m = len(weights)
    on = np.array([c in free for c in COORDINATES])
    v = np.zeros((m, len(COORDINATES))) if start is None else np.array(start, dtype=float)
    if not on.any():
        return v
    log_measured = np.log(measured)

    def loss(v: np.ndarray, weights: np.ndarray) -> np.ndarray:
        z = (_log_estimates(predict, prior, v) - log_measured) * weights / ROW_LOG_SCALE
        return np.sum(2.0 * (np.sqrt(1.0 + z**2) - 1.0), axis=1) + np.sum((v / WIDTHS) ** 2, axis=1)

    current = loss(v, weights)
    damping = np.full(m, 1e-3)
    active = np.ones(m, dtype=bool)
    idx = np.flatnonzero(on)
    eye = np.eye(len(idx))
    for _ in range(iterations):
        if not active.any():
            break
        a = np.flatnonzero(active)
        z = (_log_estimates(predict, prior, v[a]) - log_measured) * weights[a] / ROW_LOG_SCALE
        jac = _jacobian(predict, prior, v[a], on, weights[a]) / ROW_LOG_SCALE
        robust = 1.0 / np.sqrt(1.0 + z**2)  # soft-L1: each row's weight in the Gauss-Newton step (IRLS)
        gradient = np.einsum("mrk,mr->mk", jac, robust * z) + v[a][:, idx] / WIDTHS[idx] ** 2
        hessian = np.einsum("mrk,mr,mrl->mkl", jac, robust, jac) + np.diag(1.0 / WIDTHS[idx] ** 2)
        scaled = hessian + damping[a, None, None] * eye * np.diagonal(hessian, axis1=1, axis2=2)[:, None, :]
        trial = v[a].copy()
        trial[:, idx] -= np.linalg.solve(scaled, gradient[..., None])[..., 0]
        new = loss(trial, weights[a])
        better = new < current[a]
        moved = np.max(np.abs(trial - v[a]), axis=1)
        v[a[better]] = trial[better]
        current[a[better]] = new[better]
        damping[a] = np.where(better, damping[a] / 3, damping[a] * 10)
        done = (better & (moved < 1e-9)) | (damping[a] > 1e8)
        active[a[done]] = False
    return v


def leave_one_out(
    predict: Predict, measured: np.ndarray, prior: np.ndarray, free: tuple[str, ...], full: np.ndarray
) -> np.ndarray:
    """ln(estimate / measured) of each row under the fit to the other rows, from the full fit's coordinates ``full``:
    refitted (``fit``) up to EXACT_LOO_ROWS rows; beyond, one Gauss-Newton step of the loss without the row from the
    full fit (``_one_step_held_out``: where one row in hundreds moves the fit by a small step)."""
    n = len(measured)
    if n < 2 or not free:
        return np.log(predict(values_at(prior, full[None, :]))[0] / measured)
    if n > EXACT_LOO_ROWS:
        return _one_step_held_out(predict, measured, prior, free, full)
    out = np.empty(n)
    size = max(1, CHUNK_POINTS // (2 * len(free) + 1))
    for first in range(0, n, size):
        rows = np.arange(first, min(n, first + size))
        weights = np.ones((len(rows), n))
        weights[np.arange(len(rows)), rows] = 0.0
        values = fit(
            predict, measured, prior, free, weights, start=np.tile(full, (len(rows), 1)), iterations=LOO_ITERATIONS
        )
        predicted = _chunked(predict, values_at(prior, values))
        out[rows] = np.log(predicted[np.arange(len(rows)), rows] / measured[rows])
    return out


def _one_step_held_out(
    predict: Predict, measured: np.ndarray, prior: np.ndarray, free: tuple[str, ...], full: np.ndarray
) -> np.ndarray:
    """Each row's held-out log error after one Gauss-Newton step, from the full fit, of the loss without the row
    (its gradient and reweighted Hessian less the row's terms), the row's error moved linearly along the step."""
    on = np.array([c in free for c in COORDINATES])
    idx = np.flatnonzero(on)
    v = full[None, :]
    z = (_log_estimates(predict, prior, v)[0] - np.log(measured)) / ROW_LOG_SCALE
    jac = _jacobian(predict, prior, v, on, np.ones((1, len(measured))))[0] / ROW_LOG_SCALE
    robust = 1.0 / np.sqrt(1.0 + z**2)
    gradient = jac.T @ (robust * z) + full[idx] / WIDTHS[idx] ** 2
    hessian = jac.T @ (robust[:, None] * jac) + np.diag(1.0 / WIDTHS[idx] ** 2)
    without_gradient = gradient[None, :] - (robust * z)[:, None] * jac
    without_hessian = hessian[None] - robust[:, None, None] * jac[:, :, None] * jac[:, None, :]
    step = -np.linalg.solve(without_hessian, without_gradient[..., None])[..., 0]
    return ROW_LOG_SCALE * (z + np.sum(jac * step, axis=1))
