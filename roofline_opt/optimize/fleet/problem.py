"""The fleet question as frozen inputs: models with demands and latency limits, the GPU pool, objective and prices."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline_opt.optimize.space import Question
from roofline_opt.physics import requests as rq
from roofline_opt.physics.specs import GpuSpec

COST, SERVED = "cost", "served"
OBJECTIVES = (COST, SERVED)
DEFAULT_ON_DEMAND_FACTOR = 1.0
DEFAULT_RESERVED_FACTOR = 0.6
"""Without prices: on-demand GPUs at the catalog rental price, reserved ones at 60% of it (a typical 1-year
commitment discount; stated wherever a profile is planned)."""


@dataclass(frozen=True)
class FleetModel:
    """One model of the fleet: its search space (a Question), its demand and its latency limit.

    demand_tok_s has one value per period (one period without a profile). demand_unit is what the user gave
    ("req_s" or "tok_s"); tok_per_request converts (osl) when requests were given. max_time_per_token_s is the TPOT
    limit from tpot_ms or min_tok_s (None: no limit). weight values one served unit of demand (objective served).
    A model whose question offers disaggregated serving only is planned as a prefill pool and a decode pool. The
    question's ``slo_percentile`` (50, 90 or 99) puts its TTFT and TPOT limits on that percentile (c_a^2
    ``arrival_scv``): a prefill pool's at the model's demand (physics.queueing), an aggregated or decode instance's at
    the load of its batch (fully loaded, as single-model answers); None: TTFT at no load, the mean TPOT.
    """

    name: str
    question: Question
    demand_tok_s: tuple[float, ...]
    demand_unit: str = "tok_s"
    tok_per_request: float | None = None
    max_time_per_token_s: float | None = None
    weight: float = 1.0

    @property
    def percentile(self) -> float | None:
        """The percentile the TTFT limit holds at, or None."""
        return self.question.slo_percentile if self.question.queued_ttft else None

    @property
    def tpot_percentile(self) -> float | None:
        """The percentile the TPOT limit holds at (aggregated and decode instances), or None."""
        return self.question.slo_percentile if self.question.queued_tpot else None

    @property
    def mean_time_per_token_limit_s(self) -> float | None:
        """The limit on the steady-state time per token (None without one, or when it holds at a percentile)."""
        return None if self.question.queued_tpot else self.max_time_per_token_s

    @property
    def disaggregated(self) -> bool:
        """Planned as prefill and decode pools (the question offers disaggregated serving only)."""
        return self.question.workload is not None and self.question.serving == (rq.DISAGG,)

    def value_per_tok_s(self) -> float:
        """Objective value of one served tok/s: weight per request/s when demand came in requests."""
        if self.demand_unit != "req_s":
            return self.weight
        assert self.tok_per_request is not None  # a demand in requests/s is given with its tokens per request
        return self.weight / self.tok_per_request


@dataclass(frozen=True)
class Domain:
    """A scale-up domain of one GPU type: its GPU ids in graph order (empty ids in count mode)."""

    gpu: str
    size: int
    gpu_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pool:
    """The GPUs a fleet may use: per type a count (None = unlimited) and, with a cluster graph, its domains.

    Without a graph there is no placement: a type only limits the GPU count. reserved/on_demand prices ($ per
    GPU-hour) matter for demand profiles only.
    """

    gpus: tuple[GpuSpec, ...]
    counts: dict[str, int | None]
    domains: tuple[Domain, ...] = ()
    cluster: Any = field(default=None, compare=False, repr=False)
    cluster_name: str | None = None
    reserved_usd_per_hour: dict[str, float] = field(default_factory=dict)
    on_demand_usd_per_hour: dict[str, float] = field(default_factory=dict)
    kv_partners: dict[tuple[str, str], GpuSpec] = field(default_factory=dict)
    """Per (prefill type, decode type) of a disaggregated model: the decode accelerator as the KV transfer sees it
    (``kv.kv_partner``), set by the parser."""

    @property
    def has_graph(self) -> bool:
        return self.cluster is not None

    def gpu(self, name: str) -> GpuSpec:
        return next(g for g in self.gpus if g.name == name)

    def largest_domain(self, name: str) -> int | None:
        """Largest scale-up domain of a type (None without a graph)."""
        sizes = [d.size for d in self.domains if d.gpu == name]
        return max(sizes) if sizes else None


@dataclass(frozen=True)
class Fleet:
    """Everything a plan fixes: models, pool, objective, budget, utilisation cap and the number of periods."""

    models: tuple[FleetModel, ...]
    pool: Pool
    objective: str = COST
    max_usd_per_hour: float | None = None
    max_utilisation: float = 1.0
    period_hours: float = 1.0

    @property
    def periods(self) -> int:
        return len(self.models[0].demand_tok_s)

    @property
    def has_profile(self) -> bool:
        return self.periods > 1
