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

Scaling. HiGHS drops coefficients below 1e-9 and refuses some above 1e15, and its tolerances are absolute, so the
model's numbers must stay near 1 for any valid card (a price of $1e-14 or $1e300 per GPU-hour, a hop latency of
1e30 s, 1e25 bytes of memory). The slots hold their rows in units of their own (``Scales``, chosen per query from
the rows loaded): tau in ``Scales.time`` tables' time units, cost in ``Scales.usd`` dollars, memory as a share of
the capacity. Targets and lambda stay in natural units in their parameters and are divided by the units
(mutable ``time_unit``/``usd_unit``) inside the constraints.

Component families: pick/batch/tau (and, for cheapest, cost) variables; the slot's coefficients as mutable
parameters (batch_lo/hi, piece_a0/a1, mem_a0/a1 (shares of the capacity), usd_per_mtok_coef, cost_floor); one_choice,
batch_range_lo/hi, time_piece, memory_capacity, budget, speed_target, cost_ratio/cost_at_floor constraints;
objective ``objective``. A model has a fixed number of *slots*, each holding one
choice (a table row) at a time, so one model loaded into HiGHS answers every query of a question.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.core as pyo

from roofline_opt.optimize.space import SCREEN_RTOL, TARGET_RTOL
from roofline_opt.optimize.tables import Tables

FASTEST, CHEAPEST = "fastest", "cheapest"
ROW_PARAMETERS = ("batch_lo", "batch_hi", "mem_a0", "mem_a1", "usd_per_mtok_coef", "cost_floor")
PIECE_PARAMETERS = ("piece_a0", "piece_a1")
MIP_TARGET_RTOL = TARGET_RTOL + SCREEN_RTOL
"""Slack of the target-tightened batch ranges: a little wider than the exact test's (see space.SCREEN_RTOL)."""


@dataclass(frozen=True)
class Scales:
    """Units of a loaded model: ``time`` tables' time units per unit of tau, ``usd`` dollars per unit of cost."""

    time: float = 1.0
    usd: float = 1.0


def power_of_ten(values: np.ndarray) -> float:
    """A power of ten near the median of the positive finite values (1 when there are none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(10.0 ** np.round(np.log10(np.median(v)))) if len(v) else 1.0


def scales(t: Tables, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> Scales:
    """Units for the rows loaded with batch ranges lo/hi: near their median time per token at the fastest point and
    their median cost at the cheapest point (every row's figures over its range lie within a few decades of those)."""
    ok = (hi >= lo) & np.isfinite(lo)
    lo, hi = np.where(ok, lo, t.batch_lo[rows]), np.where(ok, hi, t.batch_hi[rows])
    tau_fast = (t.pieces_a0[rows] + t.pieces_a1[rows] * lo[:, None]).max(axis=1)
    tau_cheap = (t.pieces_a0[rows] + t.pieces_a1[rows] * hi[:, None]).max(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        cost = np.maximum(t.usd_per_mtok_coef[rows] * tau_cheap / hi, t.floors[rows])
    return Scales(time=power_of_ten(tau_fast), usd=power_of_ten(cost))


def define_choice_variables(m: pyo.ConcreteModel, slots: int, pieces: int) -> None:
    """pick[c] in {0,1}; batch[c] integer >= 0; tau[c] >= 0, time per generated token (tables' unit)."""
    m.C = pyo.RangeSet(0, slots - 1)
    m.P = pyo.RangeSet(0, pieces - 1)
    m.pick = pyo.Var(m.C, domain=pyo.Binary)
    m.batch = pyo.Var(m.C, domain=pyo.NonNegativeIntegers)
    m.tau = pyo.Var(m.C, domain=pyo.NonNegativeReals)


def define_choice_parameters(m: pyo.ConcreteModel, t: Tables | None) -> None:
    """The coefficients of the choice held by each slot: mutable (``load_choices`` puts table rows into them), or
    with ``t`` fixed to its rows, one slot per row (constants to Pyomo: a model of thousands of rows loads fast)."""
    values = None
    if t is not None:
        rows = np.arange(len(t))
        scale = scales(t, rows, t.batch_lo, t.batch_hi)
        values = row_values(t, rows, t.batch_lo, t.batch_hi, scale=scale)
        m.time_unit.set_value(scale.time)
        m.usd_unit.set_value(scale.usd)
    for name in (*ROW_PARAMETERS, *PIECE_PARAMETERS):
        index = (m.C,) if name in ROW_PARAMETERS else (m.C, m.P)
        if values is None:
            setattr(m, name, pyo.Param(*index, mutable=True, initialize=0.0))
        else:
            setattr(m, name, pyo.Param(*index, initialize=values[name]))


def define_choice_constraints(m: pyo.ConcreteModel) -> None:
    """sum pick = 1; lo_c pick_c <= batch_c <= hi_c pick_c; tau_c >= a0 pick_c + a1 batch_c for every piece.

    lo_c and hi_c are a query's target-tightened range (see ``target_batch_bounds``): a valid integer-rounding cut
    that keeps the LP relaxation's batch integral.
    """
    m.one_choice = pyo.Constraint(expr=sum(m.pick[c] for c in m.C) == 1)
    m.batch_range_lo = pyo.Constraint(m.C, rule=lambda m, c: m.batch_lo[c] * m.pick[c] <= m.batch[c])
    m.batch_range_hi = pyo.Constraint(m.C, rule=lambda m, c: m.batch[c] <= m.batch_hi[c] * m.pick[c])
    m.time_piece = pyo.Constraint(
        m.C, m.P, rule=lambda m, c, k: m.tau[c] >= m.piece_a0[c, k] * m.pick[c] + m.piece_a1[c, k] * m.batch[c]
    )


def define_memory_constraints(m: pyo.ConcreteModel) -> None:
    """Per-device (or aggregate, paper preset) memory as a share of the capacity: a0 pick_c + a1 batch_c <= pick_c
    (the tables' batch ranges already stop where memory runs out; this keeps the fit explicit in the model)."""
    m.memory_capacity = pyo.Constraint(
        m.C, rule=lambda m, c: m.mem_a0[c] * m.pick[c] + m.mem_a1[c] * m.batch[c] <= m.pick[c]
    )


def define_units(m: pyo.ConcreteModel) -> None:
    """``time_unit`` and ``usd_unit`` (mutable): the loaded rows' Scales, dividing the targets and lambda."""
    m.time_unit = pyo.Param(mutable=True, initialize=1.0)
    m.usd_unit = pyo.Param(mutable=True, initialize=1.0)


def define_budget_constraints(m: pyo.ConcreteModel) -> None:
    """usd_per_mtok <= budget, per choice: coef_c tau_c <= budget * batch_c (budget is a mutable parameter in
    $/Mtok; coef_c is loaded in the slot's units, so both sides are in ``usd_unit`` dollars).

    Stated per choice rather than summed, the constraint keeps each disjunct's convex hull separate, so the LP
    relaxation cannot meet the budget by mixing a fast and a cheap choice.
    """
    m.budget_usd_per_mtok = pyo.Param(mutable=True, initialize=1e9)
    m.budget = pyo.Constraint(
        m.C,
        rule=lambda m, c: m.usd_per_mtok_coef[c] * m.tau[c] <= (m.budget_usd_per_mtok / m.usd_unit) * m.batch[c],
    )


def define_speed_constraints(m: pyo.ConcreteModel) -> None:
    """Time per token <= the target's (tok/s per request >= target), per choice: tau_c <= max_time * pick_c
    (max_time in the tables' time unit, tau_c in ``time_unit`` of them)."""
    m.max_time_per_token = pyo.Param(mutable=True, initialize=1e12)
    m.speed_target = pyo.Constraint(m.C, rule=lambda m, c: m.tau[c] <= (m.max_time_per_token / m.time_unit) * m.pick[c])


def define_cost_variables(m: pyo.ConcreteModel) -> None:
    """cost[c] >= coef_c tau_c and >= floor_c batch_c: $/Mtok times the batch (the Dinkelbach numerator)."""
    m.cost = pyo.Var(m.C, domain=pyo.NonNegativeReals)
    m.cost_ratio = pyo.Constraint(m.C, rule=lambda m, c: m.cost[c] >= m.usd_per_mtok_coef[c] * m.tau[c])
    m.cost_at_floor = pyo.Constraint(m.C, rule=lambda m, c: m.cost[c] >= m.cost_floor[c] * m.batch[c])


def target_batch_bounds(
    t: Tables,
    max_usd_per_mtok: float | None = None,
    max_time_per_token: float | None = None,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Whole-batch range of each choice (or of ``rows``) implied by its budget or speed constraint (hi < lo: choice
    excluded).

    Budget: coef (a0 + a1 b) <= X b for every piece gives b >= coef a0 / (X - coef a1), rounded up.
    Speed: a0 + a1 b <= max_time for every piece gives b <= (max_time - a0) / a1, rounded down.
    """
    sel = slice(None) if rows is None else rows
    lo, hi = t.batch_lo[sel].copy(), t.batch_hi[sel].copy()
    a0, a1 = t.pieces_a0[sel], t.pieces_a1[sel]
    if max_usd_per_mtok is not None:
        coef = t.usd_per_mtok_coef[sel][:, None]
        room = max_usd_per_mtok * (1 + MIP_TARGET_RTOL) - coef * a1
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            need = np.where(room > 0, coef * a0 / np.where(room > 0, room, 1.0), np.where(a0 <= 0, 0.0, np.inf))
        lo = np.maximum(lo, np.ceil(need.max(axis=1)))
        lo = np.where(t.floors[sel] > max_usd_per_mtok * (1 + MIP_TARGET_RTOL), np.inf, lo)
    if max_time_per_token is not None:
        max_time = max_time_per_token * (1 + MIP_TARGET_RTOL)
        with np.errstate(divide="ignore", invalid="ignore"):
            allow = np.where(
                a1 > 0,
                (max_time - a0) / np.where(a1 > 0, a1, 1.0),
                np.where(a0 <= max_time, np.inf, -np.inf),
            )
        hi = np.minimum(hi, np.floor(allow.min(axis=1)))
    return lo, hi


def choice_bounds(t: Tables, kind: str, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Each choice's (or each of ``rows``') best objective within its target batch range (inf when it is empty).

    Time per token rises with the batch and cost per token falls, so a choice's fastest point is its smallest
    allowed batch and its cheapest point its largest: these values are the MIP restricted to that choice.
    """
    sel = slice(None) if rows is None else rows
    ok = (hi >= lo) & np.isfinite(lo)
    b = np.where(kind == FASTEST, lo, hi)
    b = np.where(ok, b, 1.0)
    tau = (t.pieces_a0[sel] + t.pieces_a1[sel] * b[:, None]).max(axis=1)
    value = tau if kind == FASTEST else np.maximum(t.usd_per_mtok_coef[sel] * tau / b, t.floors[sel])
    return np.where(ok, value, np.inf)


def row_values(
    t: Tables, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, slots: int | None = None, scale: Scales = Scales()
) -> dict:
    """Parameter values (by name, keyed by slot or (slot, piece)) that put table ``rows`` into the first slots with
    batch ranges ``lo``/``hi``, in the units ``scale``; a row with an empty range, and every slot beyond the rows, is
    excluded (range 1..0, coefficients zero)."""
    slots = len(rows) if slots is None else slots
    held = np.resize(rows, slots) if len(rows) else np.zeros(slots, dtype=int)
    empty = (hi < lo) | ~np.isfinite(lo)
    off = (np.arange(slots) >= len(rows)) | np.resize(empty, slots)
    on = held[~off]  # an excluded slot's coefficients are zeros: none can be out of HiGHS's range

    def live(column: np.ndarray) -> np.ndarray:
        out = np.zeros((slots, *column.shape[1:]))
        out[~off] = column
        return out

    cap = t.mem_cap_gb[on]
    columns = {
        "batch_lo": np.where(off, 1.0, np.resize(lo, slots)),
        "batch_hi": np.where(off, 0.0, np.resize(hi, slots)),
        "mem_a0": live(t.mem_a0_gb[on] / cap),
        "mem_a1": live(t.mem_a1_gb[on] / cap),
        "usd_per_mtok_coef": live(t.usd_per_mtok_coef[on] * scale.time / scale.usd),
        "cost_floor": live(t.floors[on] / scale.usd),
    }
    values: dict[str, dict] = {name: dict(enumerate(column.tolist())) for name, column in columns.items()}
    for name, table in (("piece_a0", t.pieces_a0), ("piece_a1", t.pieces_a1)):
        block = live(table[on] / scale.time).tolist()
        values[name] = {(c, k): v for c, row in enumerate(block) for k, v in enumerate(row)}
    return values


def load_choices(
    m: pyo.ConcreteModel, t: Tables, rows: np.ndarray, lo: np.ndarray, hi: np.ndarray, scale: Scales = Scales()
) -> None:
    """Put table ``rows`` into the slots of a model built with ``slots`` in the units ``scale`` (see ``row_values``)."""
    for name, values in row_values(t, rows, lo, hi, len(m.C), scale).items():
        getattr(m, name).store_values(values, check=False)
    m.time_unit.set_value(scale.time)
    m.usd_unit.set_value(scale.usd)


def build_model(t: Tables, kind: str, slots: int | None = None) -> pyo.ConcreteModel:
    """The unsolved model over ``slots`` choice slots (default: one per row of ``t``, fixed to them).

    ``fastest`` minimises tau under a budget, ``cheapest`` the Dinkelbach objective. The model's structure depends
    only on the number of slots and pieces, so one model loaded into HiGHS serves every query of a question: a query
    loads its best rows (``load_choices``) and targets into the mutable parameters.
    ``objective_scale`` (mutable) brings the objective near 1 whatever the model's time scale: HiGHS cannot tell
    objective values near 1e-7 apart (a model with nanosecond steps otherwise ends 3% from the optimum).
    """
    n = len(t) if slots is None else slots
    m = pyo.ConcreteModel(name=f"roofline_opt_{kind}")
    m.objective_scale = pyo.Param(mutable=True, initialize=1.0)
    define_choice_variables(m, n, t.pieces_a0.shape[1])
    define_units(m)
    define_choice_parameters(m, t if slots is None else None)
    define_choice_constraints(m)
    define_memory_constraints(m)
    if kind == FASTEST:
        define_budget_constraints(m)
        m.objective = pyo.Objective(expr=m.objective_scale * sum(m.tau[c] for c in m.C), sense=pyo.minimize)
    else:
        define_speed_constraints(m)
        define_cost_variables(m)
        m.dinkelbach_lambda = pyo.Param(mutable=True, initialize=0.0)
        m.objective = pyo.Objective(
            expr=m.objective_scale * sum(m.cost[c] - (m.dinkelbach_lambda / m.usd_unit) * m.batch[c] for c in m.C),
            sense=pyo.minimize,
        )
    return m
