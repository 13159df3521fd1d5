"""The requests a simulation serves: arrival times with prompt and output lengths, drawn or read from a trace."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.queueing import Arrivals
from roofline_opt.physics.requests import Workload

MAX_REQUESTS = 200_000
"""Most requests one simulation serves (a trace is also bounded by files.MAX_CSV_ROWS)."""
TRACE_COLUMNS = ("arrival_s", "isl", "osl")


@dataclass(frozen=True)
class Requests:
    """Requests sorted by arrival: arrival_s (seconds), isl and osl (tokens), as arrays of one length; prefix: the
    cached prefix tokens of each (None: none)."""

    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    prefix: np.ndarray | None = None

    @property
    def cached(self) -> np.ndarray:
        """Cached prefix tokens of each request (zeros without a prefix)."""
        return np.zeros_like(self.isl) if self.prefix is None else self.prefix

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def workload(self) -> Workload:
        """The request classes of these requests, weighted by their counts."""
        rows, counts = np.unique(np.stack([self.isl, self.osl, self.cached], axis=1), axis=0, return_counts=True)
        isl, osl, prefix = (tuple(int(v) for v in rows[:, k]) for k in range(3))
        return Workload(isl, osl, tuple(float(c) for c in counts), prefix if any(prefix) else ())


def draw(arrivals: Arrivals, workload: Workload, n: int, seed: int) -> Requests:
    """``n`` requests arriving as ``arrivals``, each of a class drawn by the workload's weights (first at t = 0)."""
    rng = np.random.default_rng(seed)
    times = np.concatenate([[0.0], np.cumsum(arrivals.gaps_s(rng, n - 1))])
    k = rng.choice(len(workload.isl), size=n, p=workload._w())
    prefix = np.asarray(workload.cached)[k] if workload.prefix else None
    return Requests(times, np.asarray(workload.isl)[k], np.asarray(workload.osl)[k], prefix)


def read_trace(path: str | os.PathLike[str], field: str, max_isl: int, max_osl: int) -> Requests:
    """A trace CSV (columns arrival_s, isl, osl; one row per request, any order), read within files' bounds."""
    from roofline_opt import files

    frame = files.read_csv_cells(path, field, TRACE_COLUMNS, "request")
    rows = []
    for line, row in enumerate(frame.to_dict("records"), start=2):
        label = f"{files.located(field, path)} line {line}"
        rows.append(
            (
                checks.positive_float(f"{label}: arrival_s", row["arrival_s"], allow_zero=True, maximum=1e9),
                checks.positive_int(f"{label}: isl", row["isl"], maximum=max_isl),
                checks.positive_int(f"{label}: osl", row["osl"], maximum=max_osl),
            )
        )
    table = np.asarray(sorted(rows), dtype=float)
    if len(table) < 2 or table[-1, 0] <= table[0, 0]:
        raise InvalidInput(field, f"{path} needs at least two requests at distinct arrival_s times")
    return Requests(table[:, 0] - table[0, 0], table[:, 1].astype(int), table[:, 2].astype(int))
