"""A regularised, bounded fit of the efficiency parameters to measured rows, with identification and leave-one-out.

The loss, in natural-log parameters u = ln(value), z_r = ln(estimate_r / measured_r) / ROW_LOG_SCALE:

    sum_rows 2 (sqrt(1 + z_r^2) - 1) + sum_fitted_j ((u_j - u_prior_j) / PRIOR_LOG_WIDTH)^2

i.e. a Gaussian prior of width PRIOR_LOG_WIDTH on each fitted parameter's log-deviation from the prior profile's
value, and rows scattered by ROW_LOG_SCALE about the model with a soft-L1 (robust) loss: quadratic within the scale,
linear beyond it, so a few rows the model misdescribes do not drag the fit (the errors reported are medians). It is
minimised by projected Levenberg-Marquardt inside ``BOUNDS`` (iteratively reweighted Gauss-Newton steps,
central-difference Jacobians, every point of every fit evaluated at once by ``Components``).

A parameter is fitted only when the rows identify it: taken in order of the rows' Fisher information (J^T J /
ROW_LOG_SCALE^2 at the prior), its information conditional on the parameters already chosen (the Schur complement)
must reach IDENTIFIED_INFORMATION / PRIOR_LOG_WIDTH^2 (the rows know it at least as well as the prior does), and at
most rows - 1 parameters are fitted. The others are held at the prior profile's value, with the reason.
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
"""Prior standard deviation of ln(value / prior value): a factor of 1.5 is one standard deviation."""

ROW_LOG_SCALE = 0.2
"""Scatter of ln(measured / estimate) assumed per row (the issue's 14-22% median errors)."""

IDENTIFIED_INFORMATION = 1.0
"""A parameter is identified when the rows' conditional Fisher information on its log is at least this many times the
prior's (1 / PRIOR_LOG_WIDTH^2)."""

STEP = 1e-4
"""Central-difference step in ln(value)."""

MAX_ITERATIONS = 60
LOO_ITERATIONS = 20
CHUNK_POINTS = 4000
"""Parameter points evaluated at once (bounds the memory of points x steps arrays)."""


Predict = Callable[[np.ndarray], np.ndarray]
"""Estimated tok/s per request of every row (points x rows) at parameter points (points x PARAMETERS)."""


def _chunked(predict: Predict, points: np.ndarray) -> np.ndarray:
    return np.concatenate([predict(points[i : i + CHUNK_POINTS]) for i in range(0, len(points), CHUNK_POINTS)])


@dataclass(frozen=True)
class Identification:
    """Which parameters the rows identify, the information behind each and the reason a held one is held."""

    fitted: tuple[str, ...]
    information: dict[str, float]
    held_because: dict[str, str]


def identify(predict: Predict, measured: np.ndarray, prior: np.ndarray) -> Identification:
    """Greedy choice by conditional Fisher information at the prior (module docstring)."""
    n = len(measured)
    jac = _jacobian(predict, np.log(prior)[None, :], np.ones((1, n)))[0] / ROW_LOG_SCALE
    info = jac.T @ jac
    need = IDENTIFIED_INFORMATION / PRIOR_LOG_WIDTH**2
    order = sorted(range(len(PARAMETERS)), key=lambda j: -info[j, j])
    chosen: list[int] = []
    information, held = {}, {}
    for j in order:
        if chosen:
            a = info[np.ix_(chosen, chosen)]
            b = info[np.ix_(chosen, [j])]
            conditional = float(info[j, j] - (b.T @ np.linalg.pinv(a) @ b)[0, 0])
        else:
            conditional = float(info[j, j])
        information[PARAMETERS[j]] = conditional
        if len(chosen) + 1 > n - 1:
            held[PARAMETERS[j]] = f"{n} rows fit at most {max(n - 1, 0)} parameters (rows >= parameters + 1)"
        elif conditional < need:
            held[PARAMETERS[j]] = (
                f"rows do not identify it: information {conditional:.3g} < {need:.3g} (the prior's)"
                + (" given " + ", ".join(PARAMETERS[c] for c in chosen) if chosen else "")
            )
        else:
            chosen.append(j)
    return Identification(tuple(PARAMETERS[j] for j in sorted(chosen)), information, held)


def _residuals(predict: Predict, u: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """ln(estimate / measured) of every row (fits x rows) at log-parameters u (fits x PARAMETERS)."""
    return np.log(_chunked(predict, np.exp(u))) - np.log(measured)


def _jacobian(predict: Predict, u: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """d residual / d u (fits x rows x PARAMETERS), central differences, rows scaled by ``weights`` (fits x rows)."""
    k = u.shape[1]
    shifts = np.concatenate([np.eye(k), -np.eye(k)]) * STEP
    points = (u[:, None, :] + shifts[None]).reshape(-1, k)
    values = np.log(_chunked(predict, np.exp(points))).reshape(len(u), 2 * k, -1)
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
    """Minimise the loss for each fit (one per row of ``weights``, fits x rows: 1 counts a row, 0 leaves it out),
    ``free`` parameters moving inside BOUNDS from ``start`` (default the prior), the rest held at the prior.
    Returns values (fits x PARAMETERS)."""
    weights = np.ones((1, len(measured))) if weights is None else weights
    m = len(weights)
    u0 = np.log(prior)
    lo = np.log([BOUNDS[p][0] for p in PARAMETERS])
    hi = np.log([BOUNDS[p][1] for p in PARAMETERS])
    on = np.array([p in free for p in PARAMETERS])
    if not on.any():
        return np.tile(prior, (m, 1))
    u = (
        np.tile(np.clip(u0, lo, hi), (m, 1))
        if start is None
        else np.log(np.tile(start, (m, 1)) if start.ndim == 1 else start)
    )
    u = np.where(on, np.clip(u, lo, hi), u0)

    def loss(u: np.ndarray, weights: np.ndarray) -> np.ndarray:
        z = _residuals(predict, u, measured) * weights / ROW_LOG_SCALE
        rows = np.sum(2.0 * (np.sqrt(1.0 + z**2) - 1.0), axis=1)
        return rows + np.sum(np.where(on, (u - u0) / PRIOR_LOG_WIDTH, 0.0) ** 2, axis=1)

    current = loss(u, weights)
    damping = np.full(m, 1e-3)
    active = np.ones(m, dtype=bool)
    idx = np.flatnonzero(on)
    for _ in range(iterations):
        if not active.any():
            break
        a = np.flatnonzero(active)
        z = _residuals(predict, u[a], measured) * weights[a] / ROW_LOG_SCALE
        jac = _jacobian(predict, u[a], weights[a])[:, :, idx] / ROW_LOG_SCALE
        robust = 1.0 / np.sqrt(1.0 + z**2)  # soft-L1: each row's weight in the Gauss-Newton step (IRLS)
        prior_r = (u[a][:, idx] - u0[idx]) / PRIOR_LOG_WIDTH
        gradient = np.einsum("mrk,mr->mk", jac, robust * z) + prior_r / PRIOR_LOG_WIDTH
        hessian = np.einsum("mrk,mr,mrl->mkl", jac, robust, jac) + np.eye(len(idx)) / PRIOR_LOG_WIDTH**2
        trial = u[a].copy()
        scaled = (
            hessian + damping[a, None, None] * np.eye(len(idx)) * np.diagonal(hessian, axis1=1, axis2=2)[:, None, :]
        )
        trial[:, idx] = np.clip(trial[:, idx] - np.linalg.solve(scaled, gradient[..., None])[..., 0], lo[idx], hi[idx])
        new = loss(trial, weights[a])
        better = new < current[a]
        moved = np.max(np.abs(trial - u[a]), axis=1)
        u[a[better]] = trial[better]
        current[a[better]] = new[better]
        damping[a] = np.where(better, damping[a] / 3, damping[a] * 10)
        done = (better & (moved < 1e-9)) | (damping[a] > 1e8)
        active[a[done]] = False
    return np.exp(u)


def leave_one_out(
    predict: Predict, measured: np.ndarray, prior: np.ndarray, free: tuple[str, ...], full: np.ndarray
) -> np.ndarray:
    """ln(estimate / measured) of each row under the fit to the other rows (started from the full fit)."""
    n = len(measured)
    if n < 2 or not free:
        return np.log(predict(full[None, :])[0] / measured)
    out = np.empty(n)
    size = max(1, CHUNK_POINTS // (2 * len(free) + 1))
    for first in range(0, n, size):
        rows = np.arange(first, min(n, first + size))
        weights = np.ones((len(rows), n))
        weights[np.arange(len(rows)), rows] = 0.0
        values = fit(
            predict, measured, prior, free, weights, start=np.tile(full, (len(rows), 1)), iterations=LOO_ITERATIONS
        )
        predicted = _chunked(predict, values)
        out[rows] = np.log(predicted[np.arange(len(rows)), rows] / measured[rows])
    return out
