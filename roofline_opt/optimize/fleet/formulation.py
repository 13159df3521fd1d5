"""The fleet MIP in Pyomo, built from candidates and the pool (no physics and no solver here).

Indices: k a candidate (model m(k), accelerator g(k), TP degree t_k, PP degree p_k, n_k = t_k p_k GPUs, throughput
r_k tok/s at its batch, all from the evaluator), d a scale-up domain of the graph (size s_d, accelerator g(d)),
t a period (one without a demand profile), u the utilisation cap.

- x[k,t] integer: replicas of candidate k.
- Demand (objective cost): sum_{k of m} u r_k x[k,t] >= D[m,t]. Objective served: served[m,t] <= D[m,t] and
  served[m,t] <= sum_{k of m} u r_k x[k,t]; maximise sum value_m served[m,t], then the least cost at that value.
- Placement (graph): y[k,d,t] integer stages of k in domain d (only where g(d) = g(k) and s_d >= t_k);
  sum_d y[k,d,t] = p_k x[k,t] (every stage placed); y[k,d,t] <= x[k,t] when p_k > 1 (an instance's stages on
  distinct domains); sum_k t_k y[k,d,t] <= s_d (no GPU used twice; a TP group inside one domain). These are exact:
  a domain's GPUs are interchangeable, and per candidate, stage counts with sum p x and each at most x split into
  x sets of p distinct domains (take the p domains with the most stages left, repeatedly). Identical domains are
  ordered by load (symmetry breaking).
- Counts (no graph, or a limited type): sum_{k of g} n_k x[k,t] <= count_g.
- Cost without a profile: sum_k price_g n_k x[k] $/hour (idle capacity is paid: physics.md 10.6). With a profile:
  reserved[g] and on_demand[g,t] integer GPUs, sum_{k of g} n_k x[k,t] <= reserved[g] + on_demand[g,t], day cost
  = hours x (sum_t sum_g reserved_price_g reserved[g] + on_demand_price_g on_demand[g,t]).
- Budget: hourly spend (per period with a profile) <= max_usd_per_hour.
- Shortage diagnosis (``extra_gpus``): counts become count_g + extra[g] without placement and sum extra is minimised.
- Disaggregated models (``candidates``: decode candidates, prefill candidates, prefill pools o = n_o copies of
  prefill candidate k(o) serving up to C_o of the demand): pool[o,t] binary, sum_{o of m} pool[o,t] <= 1 (one
  prefill pool); x[k,t] = sum_{o of k} n_o pool[o,t] for a prefill candidate; the demand row of m counts decode
  candidates only and sum_o C_o pool[o,t] >= D[m,t] (objective served: served[m,t] <= sum_o C_o pool[o,t]) is
  its prefill row; x[k,t] <= bound_k sum_{o of m with decode accelerator g(k)} pool[o,t] (decode instances only
  of the accelerator the pool's KV link was priced for). Prefill and decode instances are then placed, counted and
  paid like any other.

Replica counts are bounded by ceil(max_t D[m,t] / (u r_k)): more copies of one candidate than its model's demand
needs alone never lower the cost nor raise the served demand (a prefill candidate: its largest pool).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyomo.core as pyo

from roofline_opt.optimize.fleet.candidates import PREFILL, Candidate, PrefillPool
from roofline_opt.optimize.fleet.problem import COST, SERVED, Fleet


def replica_bound(fleet: Fleet, c: Candidate, pools: Sequence[PrefillPool] = (), k: int | None = None) -> int:
    """Most replicas of ``c`` (flat index ``k``) any optimal plan uses."""
    if c.role == PREFILL:
        return max((o.instances for o in pools if o.candidate == k), default=0)
    need = max(fleet.models[c.model].demand_tok_s)
    return max(1, math.ceil(need / (fleet.max_utilisation * c.throughput_tok_s) - 1e-9))


def _domain_pairs(fleet: Fleet, cands: Sequence[Candidate]) -> list[tuple[int, int]]:
    return [
        (k, d)
        for k, c in enumerate(cands)
        for d, dom in enumerate(fleet.pool.domains)
        if dom.gpu == c.gpu and dom.size >= c.tp
    ]


def _gpu_usage(m: pyo.ConcreteModel, cands: Sequence[Candidate], g: str, t: int):
    return sum(c.n_gpus * m.x[k, t] for k, c in enumerate(cands) if c.gpu == g)


DOMAINS, CLASSES = "domains", "classes"


def domain_classes(fleet: Fleet) -> dict[tuple[str, int], int]:
    """Identical scale-up domains grouped: (accelerator, size) -> how many."""
    out: dict[tuple[str, int], int] = {}
    for dom in fleet.pool.domains:
        out[dom.gpu, dom.size] = out.get((dom.gpu, dom.size), 0) + 1
    return out


def build_fleet_model(
    fleet: Fleet,
    cands: Sequence[Candidate],
    place: str = DOMAINS,
    extra_gpus: bool = False,
    pools: Sequence[PrefillPool] = (),
) -> pyo.ConcreteModel:
    """The unsolved fleet model (module docstring): ``place`` DOMAINS (exact placement), CLASSES (its relaxation
    over classes of identical domains) or None; ``extra_gpus`` the shortage diagnosis; ``pools`` the prefill pools
    of disaggregated models."""
    m = pyo.ConcreteModel(name="roofline_opt_fleet")
    pool, u = fleet.pool, fleet.max_utilisation
    m.K = pyo.RangeSet(0, len(cands) - 1)
    m.T = pyo.RangeSet(0, fleet.periods - 1)
    m.M = pyo.RangeSet(0, len(fleet.models) - 1)
    types = [g.name for g in pool.gpus]
    bound = [replica_bound(fleet, c, pools, k) for k, c in enumerate(cands)]
    m.x = pyo.Var(m.K, m.T, domain=pyo.NonNegativeIntegers, bounds=lambda _, k, t: (0, bound[k]))
    serving = [(k, c) for k, c in enumerate(cands) if c.role != PREFILL]  # prefill pools have their own rows
    capacity = {
        (i, t): sum(u * c.throughput_tok_s * m.x[k, t] for k, c in serving if c.model == i) for i in m.M for t in m.T
    }
    demand = {(i, t): fm.demand_tok_s[t] for i, fm in enumerate(fleet.models) for t in m.T}
    if fleet.objective == COST:
        m.demand = pyo.Constraint(m.M, m.T, rule=lambda m, i, t: capacity[i, t] >= demand[i, t])
    else:
        m.served = pyo.Var(m.M, m.T, domain=pyo.NonNegativeReals, bounds=lambda _, i, t: (0, demand[i, t]))
        m.served_capacity = pyo.Constraint(m.M, m.T, rule=lambda m, i, t: m.served[i, t] <= capacity[i, t])
        m.value = pyo.Expression(expr=sum(fleet.models[i].value_per_tok_s() * m.served[i, t] for i in m.M for t in m.T))
    if any(fm.disaggregated for fm in fleet.models):
        _prefill_pools(m, fleet, cands, pools, bound, demand)
    if place == DOMAINS and pool.has_graph and not extra_gpus:
        _placement(m, fleet, cands)
    elif place == CLASSES and pool.has_graph and not extra_gpus:
        _class_placement(m, fleet, cands)
    _counts(m, fleet, cands, types, extra_gpus)
    _cost(m, fleet, cands, types)
    if extra_gpus:
        m.objective = pyo.Objective(expr=sum(m.extra[g] for g in m.extra) + 1e-6 * m.cost, sense=pyo.minimize)
    elif fleet.objective == COST:
        m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
    else:
        m.min_value = pyo.Param(mutable=True, initialize=0.0)
        m.value_floor = pyo.Constraint(expr=m.value >= m.min_value)
        m.objective = pyo.Objective(expr=m.value, sense=pyo.maximize)
        m.cost_objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
        m.cost_objective.deactivate()
    return m


def _prefill_pools(m, fleet: Fleet, cands: Sequence[Candidate], pools: Sequence[PrefillPool], bound, demand) -> None:
    """One prefill pool per disaggregated model and period, its instances, its capacity, and decode instances only
    of its decode accelerator (module docstring)."""
    m.P = pyo.RangeSet(0, len(pools) - 1) if pools else pyo.Set(initialize=[])
    m.pool = pyo.Var(m.P, m.T, domain=pyo.Binary)
    disagg = [i for i, fm in enumerate(fleet.models) if fm.disaggregated]
    of_model = {i: [o for o, p in enumerate(pools) if p.model == i] for i in disagg}
    m.one_pool = pyo.Constraint(disagg, m.T, rule=lambda m, i, t: sum(m.pool[o, t] for o in of_model[i]) <= 1)
    prefill = [k for k, c in enumerate(cands) if c.role == PREFILL]
    m.prefill_instances = pyo.Constraint(
        prefill,
        m.T,
        rule=lambda m, k, t: (
            m.x[k, t] == sum(p.instances * m.pool[o, t] for o, p in enumerate(pools) if p.candidate == k)
        ),
    )

    def pooled(m, i, t):
        return sum(pools[o].capacity_tok_s * m.pool[o, t] for o in of_model[i])

    if fleet.objective == COST:
        m.prefill_demand = pyo.Constraint(disagg, m.T, rule=lambda m, i, t: pooled(m, i, t) >= demand[i, t])
    else:
        m.prefill_served = pyo.Constraint(disagg, m.T, rule=lambda m, i, t: m.served[i, t] <= pooled(m, i, t))
    decode = [k for k, c in enumerate(cands) if fleet.models[c.model].disaggregated and c.role != PREFILL]

    def partner(m, k, t):
        c = cands[k]
        linked = [o for o in of_model[c.model] if pools[o].decode_gpu == c.gpu]
        return m.x[k, t] <= bound[k] * sum(m.pool[o, t] for o in linked)

    m.decode_partner = pyo.Constraint(decode, m.T, rule=partner)


def _placement(m: pyo.ConcreteModel, fleet: Fleet, cands: Sequence[Candidate]) -> None:
    domains = fleet.pool.domains
    pairs = _domain_pairs(fleet, cands)
    m.KD = pyo.Set(initialize=pairs, dimen=2)
    m.y = pyo.Var(
        m.KD,
        m.T,
        domain=pyo.NonNegativeIntegers,
        bounds=lambda _, k, d, t: (0, domains[d].size // cands[k].tp),
    )
    by_k: dict[int, list[int]] = {}
    by_d: dict[int, list[int]] = {}
    for k, d in pairs:
        by_k.setdefault(k, []).append(d)
        by_d.setdefault(d, []).append(k)
    m.stages = pyo.Constraint(
        m.K, m.T, rule=lambda m, k, t: sum(m.y[k, d, t] for d in by_k.get(k, [])) == cands[k].pp * m.x[k, t]
    )
    multi = [(k, d) for k, d in pairs if cands[k].pp > 1]
    m.distinct = pyo.Constraint(multi, m.T, rule=lambda m, k, d, t: m.y[k, d, t] <= m.x[k, t])
    loaded = sorted(by_d)

    def load(m, d, t):
        return sum(cands[k].tp * m.y[k, d, t] for k in by_d[d])

    m.domain_capacity = pyo.Constraint(loaded, m.T, rule=lambda m, d, t: load(m, d, t) <= domains[d].size)
    twins = [
        (a, b)
        for a, b in zip(loaded, loaded[1:], strict=False)
        if (domains[a].gpu, domains[a].size) == (domains[b].gpu, domains[b].size)
    ]
    m.load_order = pyo.Constraint(twins, m.T, rule=lambda m, a, b, t: load(m, a, t) >= load(m, b, t))


def _class_placement(m: pyo.ConcreteModel, fleet: Fleet, cands: Sequence[Candidate]) -> None:
    """The placement summed over each class of n identical domains of size s (a relaxation of ``_placement``):
    z[k,c] stages of k in class c, sum_c z = p_k x_k, z <= n x_k (distinct domains), sum_k t_k z <= n s, and for
    j = 1..3 at most j n groups larger than s / (j + 1) (a domain holds at most j of them)."""
    classes = list(domain_classes(fleet).items())
    pairs = [
        (k, c)
        for k, cand in enumerate(cands)
        for c, ((g, size), _) in enumerate(classes)
        if g == cand.gpu and size >= cand.tp
    ]
    m.KC = pyo.Set(initialize=pairs, dimen=2)
    m.z = pyo.Var(m.KC, m.T, domain=pyo.NonNegativeIntegers)
    by_k: dict[int, list[int]] = {}
    by_c: dict[int, list[int]] = {}
    for k, c in pairs:
        by_k.setdefault(k, []).append(c)
        by_c.setdefault(c, []).append(k)
    m.class_stages = pyo.Constraint(
        m.K, m.T, rule=lambda m, k, t: sum(m.z[k, c, t] for c in by_k.get(k, [])) == cands[k].pp * m.x[k, t]
    )
    multi = [(k, c) for k, c in pairs if cands[k].pp > 1]
    m.class_distinct = pyo.Constraint(multi, m.T, rule=lambda m, k, c, t: m.z[k, c, t] <= classes[c][1] * m.x[k, t])

    def capacity(m, c, t):
        (_, size), n = classes[c]
        return sum(cands[k].tp * m.z[k, c, t] for k in by_c[c]) <= n * size

    m.class_capacity = pyo.Constraint(sorted(by_c), m.T, rule=capacity)
    cuts = [(c, j) for c in sorted(by_c) for j in (1, 2, 3)]

    def large_groups(m, c, j, t):
        (_, size), n = classes[c]
        large = [k for k in by_c[c] if cands[k].tp * (j + 1) > size]
        return sum(m.z[k, c, t] for k in large) <= j * n if large else pyo.Constraint.Skip

    m.class_large_groups = pyo.Constraint(cuts, m.T, rule=large_groups)


def _counts(m: pyo.ConcreteModel, fleet: Fleet, cands: Sequence[Candidate], types: list[str], extra: bool) -> None:
    counts = fleet.pool.counts
    limited = [g for g in types if counts.get(g) is not None]
    if extra:
        m.extra = pyo.Var(limited, domain=pyo.NonNegativeIntegers)

    def rule(m, g, t):
        if not any(c.gpu == g for c in cands):
            return pyo.Constraint.Skip
        room = counts[g] + (m.extra[g] if extra else 0)
        return _gpu_usage(m, cands, g, t) <= room

    m.gpu_count = pyo.Constraint(limited, m.T, rule=rule)


def _cost(m: pyo.ConcreteModel, fleet: Fleet, cands: Sequence[Candidate], types: list[str]) -> None:
    """``cost`` ($/hour, or $ over the profile) and the budget on hourly spend."""
    pool = fleet.pool
    if not fleet.has_profile:
        m.cost = pyo.Expression(expr=sum(c.instance_usd_per_hour * m.x[k, 0] for k, c in enumerate(cands)))
        if fleet.max_usd_per_hour is not None:
            m.budget = pyo.Constraint(expr=m.cost <= fleet.max_usd_per_hour)
        return
    m.reserved = pyo.Var(types, domain=pyo.NonNegativeIntegers)
    m.on_demand = pyo.Var(types, m.T, domain=pyo.NonNegativeIntegers)
    m.provisioned = pyo.Constraint(
        types, m.T, rule=lambda m, g, t: _gpu_usage(m, cands, g, t) <= m.reserved[g] + m.on_demand[g, t]
    )

    def hourly(m, t):
        return sum(
            pool.reserved_usd_per_hour[g] * m.reserved[g] + pool.on_demand_usd_per_hour[g] * m.on_demand[g, t]
            for g in types
        )

    m.cost = pyo.Expression(expr=fleet.period_hours * sum(hourly(m, t) for t in m.T))
    if fleet.max_usd_per_hour is not None:
        m.budget = pyo.Constraint(m.T, rule=lambda m, t: hourly(m, t) <= fleet.max_usd_per_hour)


def use_cost_objective(m: pyo.ConcreteModel, min_value: float) -> None:
    """Second phase of objective served: least cost among plans serving at least ``min_value``."""
    m.min_value.set_value(min_value)
    m.objective.deactivate()
    m.cost_objective.activate()


__all__ = ["COST", "SERVED", "build_fleet_model", "replica_bound", "use_cost_objective"]
