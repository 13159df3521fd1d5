"""Fleet planning: several models with real demands on one pool of GPUs (a cluster graph or counts), one MIP.

Decisions, all in one Pyomo model solved by HiGHS (``formulation``): per model, integer replica counts per candidate
layout (layouts may be mixed); each candidate's batch is the largest its TPOT limit and memory allow, which maximises
its throughput (``candidates``: exact, by bisection on the evaluator); placement onto the graph as stage counts per
scale-up domain (a TP group inside one domain, pipeline stages on distinct domains, no GPU used twice, per-type
counts); the objective is provisioned $/hour (idle capacity is paid, physics.md 10.6) or the most weighted demand
served (then the least cost serving it). With a demand profile, per-period replica counts and a reserved/on-demand
split of GPUs per type minimise the day's cost. A model with ``serving: disagg`` is a prefill pool (n instances of
one prefill layout, sized for its demand and TTFT limit, at a percentile through physics.queueing) and decode
instances (with a percentile, their TPOT limit at it through physics.tpot_percentiles), the KV transfer priced
over the cluster graph's links (``kv``). Decoded plans are placed on GPU ids (``placement``), checked against the
graph, and every instance is re-evaluated by the evaluator (``results``).
``enumerate`` is the brute-force oracle for small fleets; ``baseline`` plans each model alone and packs the results,
for comparison.

Formulation (see ``formulation`` for the constraint list):

    min  sum_k price_g(k) n_k x_k                                   ($/hour; objective cost)
    s.t. sum_{k of m} u r_k x_k >= D_m                              (every model's demand, utilisation cap u)
         sum_d y_kd = p_k x_k,  y_kd <= x_k if p_k > 1              (stages placed, on distinct domains)
         sum_k t_k y_kd <= s_d                                      (domain capacity: no GPU twice)
         x_k, y_kd integer >= 0

May import: like the rest of ``optimize`` (physics, catalog, topology, base modules, Pyomo).
"""

from roofline_opt.optimize.fleet.parse import load_fleet_file, parse_fleet
from roofline_opt.optimize.fleet.plan import plan_fleet
from roofline_opt.optimize.fleet.problem import Fleet, FleetModel, Pool
from roofline_opt.optimize.fleet.results import FleetPlan

__all__ = ["Fleet", "FleetModel", "FleetPlan", "Pool", "load_fleet_file", "parse_fleet", "plan_fleet"]
