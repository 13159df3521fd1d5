"""The Pyomo model of one deployment question, built from coefficient tables (no physics, no solver here).

Design (a disjunctive, convex-hull formulation). Every *choice* c is a layout (accelerator, precision, TP degree and
mode, PP, EP, draft length) together with a batch interval [lo_c, hi_c] on which each term of the time per token is
affine or convex (tables.py). Binary ``pick[c]`` selects one choice; integer ``batch[c]`` and continuous ``tau[c]``
(time per generated token, in the tables' time unit) are zero unless picked. Inside a picked choice the time is the
maximum of affine pieces, which a minimisation reproduces exactly with ``tau[c] >= a0 * pick[c] + a1 * batch[c]``.
Concave parts of the physics (which NCCL protocol is fastest, which memory/compute bound applies at the next
interval) are disjunctions over choices, so the solver picks the branch, never a linearised approximation of it.
The dollar cost ``n_gpus x price x tau / batch`` is a ratio: a budget X becomes the linear
``coef_c tau_c <= X batch_c`` per choice, and "cheapest" minimises the ratio by Dinkelbach's method over the
objective ``sum cost_c - lambda sum batch_c`` with ``cost_c >= coef_c tau_c``. A disaggregated choice (x prefill and
y decode instances) also has a cost floor f_c, the cost when its prefill side limits it: its cost is
max(coef_c tau_c / batch_c, f_c), so ``cost_c >= f_c batch_c`` too, and a budget below f_c excludes the choice.

Component families: pick/batch/tau variables; one_choice, batch_range_lo/hi, time_piece, memory_capacity,
budget, speed_target constraints; objective ``objective``.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo

from roofline_opt.optimize.space import TARGET_RTOL
from roofline_opt.optimize.tables import Tables

FASTEST, CHEAPEST = "fastest", "cheapest"


def define_choice_variables(m: pyo.ConcreteModel, t: Tables) -> None:
    """pick[c] in {0,1}; batch[c] integer in [0, hi_c]; tau[c] >= 0, time per generated token (tables' unit)."""
    m.C = pyo.RangeSet(0, len(t) - 1)
    m.P = pyo.RangeSet(0, t.pieces_a0.shape[1] - 1)
    m.pick = pyo.Var(m.C, domain=pyo.Binary)
    m.batch = pyo.Var(m.C, domain=pyo.NonNegativeIntegers, bounds=lambda m, c: (0, float(t.batch_hi[c])))
    m.tau = pyo.Var(m.C, domain=pyo.NonNegativeReals)


def define_choice_constraints(m: pyo.ConcreteModel, t: Tables) -> None:
    """sum pick = 1; lo_c pick_c <= batch_c <= hi_c pick_c; tau_c >= a0 pick_c + a1 batch_c for every piece.

    lo_c and hi_c are mutable: a query tightens them to the whole batches its target allows (see
    ``target_batch_bounds``), a valid integer-rounding cut that keeps the LP relaxation's batch integral.
    """
    m.one_choice = pyo.Constraint(expr=sum(m.pick[c] for c in m.C) == 1)
    m.batch_lo = pyo.Param(m.C, mutable=True, initialize=lambda m, c: float(t.batch_lo[c]))
    m.batch_hi = pyo.Param(m.C, mutable=True, initialize=lambda m, c: float(t.batch_hi[c]))
    m.batch_range_lo = pyo.Constraint(m.C, rule=lambda m, c: m.batch_lo[c] * m.pick[c] <= m.batch[c])
    m.batch_range_hi = pyo.Constraint(m.C, rule=lambda m, c: m.batch[c] <= m.batch_hi[c] * m.pick[c])
    m.time_piece = pyo.Constraint(
        m.C,
        m.P,
        rule=lambda m, c, k: m.tau[c] >= float(t.pieces_a0[c, k]) * m.pick[c] + float(t.pieces_a1[c, k]) * m.batch[c],
    )


def define_memory_constraints(m: pyo.ConcreteModel, t: Tables) -> None:
    """Per-device (or aggregate, paper preset) memory in GB: a0 pick_c + a1 batch_c <= capacity pick_c."""
    m.memory_capacity = pyo.Constraint(
        m.C,
        rule=lambda m, c: (
            float(t.mem_a0_gb[c]) * m.pick[c] + float(t.mem_a1_gb[c]) * m.batch[c] <= float(t.mem_cap_gb[c]) * m.pick[c]
        ),
    )


def define_budget_constraints(m: pyo.ConcreteModel, t: Tables) -> None:
    """usd_per_mtok <= budget, per choice: coef_c tau_c <= budget * batch_c (budget is a mutable parameter).

    Stated per choice rather than summed, the constraint keeps each disjunct's convex hull separate, so the LP
    relaxation cannot meet the budget by mixing a fast and a cheap choice.
    """
    m.budget_usd_per_mtok = pyo.Param(mutable=True, initialize=1e9)
    unit = cost_unit(t)
    m.budget = pyo.Constraint(
        m.C,
        rule=lambda m, c: (
            float(t.usd_per_mtok_coef[c] / unit) * m.tau[c] <= (m.budget_usd_per_mtok / unit) * m.batch[c]
        ),
    )


COST_COEF_RANGE = (1e-3, 1e3)
"""Budget rows whose cost coefficients lie in this range are handed to HiGHS as they are."""


def cost_unit(t: Tables) -> float:
    """Dollars one unit of the budget rows stands for: 1 for ordinary prices, else a power of ten near the median
    cost coefficient, so that a card priced at $1e300/h (or 1e-300) still gives HiGHS coefficients near 1."""
    coef = t.usd_per_mtok_coef[t.usd_per_mtok_coef > 0]
    typical = float(np.median(coef)) if len(coef) else 1.0
    if COST_COEF_RANGE[0] <= typical <= COST_COEF_RANGE[1]:
        return 1.0
    return float(10.0 ** np.round(np.log10(typical)))


def define_speed_constraints(m: pyo.ConcreteModel) -> None:
    """Time per token <= the target's (tok/s per request >= target), per choice: tau_c <= max_time * pick_c."""
    m.max_time_per_token = pyo.Param(mutable=True, initialize=1e12)
    m.speed_target = pyo.Constraint(m.C, rule=lambda m, c: m.tau[c] <= m.max_time_per_token * m.pick[c])


def define_cost_variables(m: pyo.ConcreteModel, t: Tables) -> None:
    """cost[c] >= coef_c tau_c and >= floor_c batch_c: $/Mtok times the batch (the Dinkelbach numerator)."""
    m.cost = pyo.Var(m.C, domain=pyo.NonNegativeReals)
    m.cost_ratio = pyo.Constraint(m.C, rule=lambda m, c: m.cost[c] >= float(t.usd_per_mtok_coef[c]) * m.tau[c])
    floors = t.floors
    m.cost_floor = pyo.Constraint(
        [c for c in m.C if floors[c] > 0], rule=lambda m, c: m.cost[c] >= float(floors[c]) * m.batch[c]
    )


def target_batch_bounds(
    t: Tables, max_usd_per_mtok: float | None = None, max_time_per_token: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Whole-batch range of each choice implied by its budget or speed constraint (hi < lo: choice excluded).

    Budget: coef (a0 + a1 b) <= X b for every piece gives b >= coef a0 / (X - coef a1), rounded up.
    Speed: a0 + a1 b <= max_time for every piece gives b <= (max_time - a0) / a1, rounded down.
    """
    lo, hi = t.batch_lo.copy(), t.batch_hi.copy()
    a0, a1 = t.pieces_a0, t.pieces_a1
    if max_usd_per_mtok is not None:
        coef = t.usd_per_mtok_coef[:, None]
        room = max_usd_per_mtok * (1 + TARGET_RTOL) - coef * a1
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            need = np.where(room > 0, coef * a0 / np.where(room > 0, room, 1.0), np.where(a0 <= 0, 0.0, np.inf))
        lo = np.maximum(lo, np.ceil(need.max(axis=1)))
        lo = np.where(t.floors > max_usd_per_mtok * (1 + TARGET_RTOL), np.inf, lo)
    if max_time_per_token is not None:
        max_time = max_time_per_token * (1 + TARGET_RTOL)
        with np.errstate(divide="ignore", invalid="ignore"):
            allow = np.where(
                a1 > 0,
                (max_time - a0) / np.where(a1 > 0, a1, 1.0),
                np.where(a0 <= max_time, np.inf, -np.inf),
            )
        hi = np.minimum(hi, np.floor(allow.min(axis=1)))
    return lo, hi


def choice_bounds(t: Tables, kind: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Each choice's best objective within its target batch range (inf when the range is empty).

    Time per token rises with the batch and cost per token falls, so a choice's fastest point is its smallest
    allowed batch and its cheapest point its largest: these values are the MIP restricted to that choice.
    """
    ok = (hi >= lo) & np.isfinite(lo)
    b = np.where(kind == FASTEST, lo, hi)
    b = np.where(ok, b, 1.0)
    tau = (t.pieces_a0 + t.pieces_a1 * b[:, None]).max(axis=1)
    value = tau if kind == FASTEST else np.maximum(t.usd_per_mtok_coef * tau / b, t.floors)
    return np.where(ok, value, np.inf)


def set_batch_bounds(m: pyo.ConcreteModel, lo: np.ndarray, hi: np.ndarray) -> None:
    """Load a query's batch range into the model; an empty range excludes the choice."""
    for c in m.C:
        empty = hi[c] < lo[c] or not np.isfinite(lo[c])
        m.batch_lo[c].set_value(1.0 if empty else float(lo[c]))
        m.batch_hi[c].set_value(0.0 if empty else float(hi[c]))


def build_model(t: Tables, kind: str) -> pyo.ConcreteModel:
    """The unsolved model: ``fastest`` minimises tau under a budget, ``cheapest`` the Dinkelbach objective.

    ``objective_scale`` (mutable) brings the objective near 1 whatever the model's time scale: HiGHS cannot tell
    objective values near 1e-7 apart (a model with nanosecond steps otherwise ends 3% from the optimum).
    """
    m = pyo.ConcreteModel(name=f"roofline_opt_{kind}")
    m.objective_scale = pyo.Param(mutable=True, initialize=1.0)
    define_choice_variables(m, t)
    define_choice_constraints(m, t)
    define_memory_constraints(m, t)
    if kind == FASTEST:
        define_budget_constraints(m, t)
        m.objective = pyo.Objective(expr=m.objective_scale * sum(m.tau[c] for c in m.C), sense=pyo.minimize)
    else:
        define_speed_constraints(m)
        define_cost_variables(m, t)
        m.dinkelbach_lambda = pyo.Param(mutable=True, initialize=0.0)
        m.objective = pyo.Objective(
            expr=m.objective_scale * sum(m.cost[c] - m.dinkelbach_lambda * m.batch[c] for c in m.C),
            sense=pyo.minimize,
        )
    return m
