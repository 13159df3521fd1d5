"""Costs within the range the solver and the printed figures can hold.

A price near the cap of a card's numbers ($1e300 per GPU-hour) with step times of seconds or more prices tokens
beyond the largest float, and the tables, the enumeration and the answer would each overflow in their own way. Such a
question is refused in one line, before either method runs, so both methods give the same verdict
(docs/concepts/exactness.md).
"""

from __future__ import annotations

import numpy as np

from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.pieces import target_step
from roofline_opt.optimize.space import Question, layouts
from roofline_opt.physics import requests as rq

MAX_USD_PER_MTOK = 1e305
"""Largest cost per million output tokens a layout may reach at batch 1, its dearest point: ~1/1800 of the largest
float, the headroom for the sums and products of costs (disaggregated pairs, fleets, the tables' natural-unit
coefficients). A card at the cap of a card's numbers ($1e300 per GPU-hour) stays answerable with steps of up to
~5 s on 64 GPUs (n_gpus x step seconds up to 360)."""


def check_costs_representable(question: Question) -> None:
    """Refuse a question some layout of which prices output above ``MAX_USD_PER_MTOK`` at batch 1.

    Parameters
    ----------
    question : Question
        The question both methods answer.

    Raises
    ------
    InvalidInput
        Naming ``usd_per_gpu_hour``, the accelerator, the step time and the largest price that can be answered.
    """
    lay = layouts(question)
    worst: dict[int, tuple[float, float, int]] = {}  # per accelerator: $/Mtok per $/GPU-hour, step s, GPUs
    for gpu_index, bits, group in lay.groups():
        step_s = np.broadcast_to(target_step(question, gpu_index, bits, lay, group, 1.0).step_time_s, group.shape)
        with np.errstate(over="ignore"):
            per_usd_hour = rq.usd_per_mtok(lay.n_gpus[group], 1 / 3600, step_s, 1.0, question.max_utilisation)
        per_usd_hour = np.where(np.isfinite(step_s), per_usd_hour, -np.inf)  # a step that never ends: no price's fault
        k = int(np.argmax(per_usd_hour))
        if per_usd_hour[k] > worst.get(gpu_index, (-np.inf,))[0]:
            worst[gpu_index] = (float(per_usd_hour[k]), float(step_s[k]), int(lay.n_gpus[group][k]))
    for gpu_index, (factor, dearest_step_s, n_gpus) in worst.items():
        gpu = question.gpus[gpu_index]
        with np.errstate(over="ignore"):
            dearest = factor * gpu.usd_per_hour
        if dearest <= MAX_USD_PER_MTOK:
            continue
        raise InvalidInput(
            "usd_per_gpu_hour",
            f"{gpu.name} at ${gpu.usd_per_hour:g} per GPU-hour with a {dearest_step_s:.3g} s step on {n_gpus} GPUs "
            f"prices output above ${MAX_USD_PER_MTOK:g} per million tokens, beyond the range roofline-opt computes "
            f"in; a price of at most ${MAX_USD_PER_MTOK / factor:.3g} per GPU-hour can be answered",
        )
