"""Launch recipes: from an answer to the engines' serve commands, Kubernetes manifests and the benchmark that checks
them (issue 25).

Modules, one concern each: ``flags`` (the flags per engine and version the recipes use, with their sources),
``answer`` (an answer record or fleet plan as the instances to launch), ``engines`` (serve commands per engine;
``Unsupported`` says why a decision cannot be expressed), ``manifests`` (Deployment / LeaderWorkerSet /
DynamoGraphDeployment), ``bench`` (the client command and the predicted figures), ``recipe`` (the folder).

May import: base modules, catalog (accelerator HBM, model ids) and optimize.space (its defaults). Nothing here
changes a figure: every predicted figure is the answer's own.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline_opt.checks import once_each
from roofline_opt.deploy.flags import ENGINES
from roofline_opt.errors import InvalidInput

DEFAULT_ENGINES = ("vllm", "sglang", "trtllm")
"""Engines a recipe folder holds unless --engine says otherwise (plus dynamo for disaggregated answers)."""


def parse_engines(text: str | None, disaggregated: bool, field: str = "--engine") -> tuple[str, ...]:
    """The engines asked for (comma-separated); default all three, and dynamo too for a disaggregated answer."""
    if text is None:
        return (*DEFAULT_ENGINES, "dynamo") if disaggregated else DEFAULT_ENGINES
    names = once_each(field, tuple(n.strip().lower() for n in str(text).split(",") if n.strip()))
    for name in names:
        if name not in ENGINES:
            raise InvalidInput(field, f"must be one or several of {', '.join(ENGINES)}. Got {name!r} instead.")
    if not names:
        raise InvalidInput(field, f"must name an engine: {', '.join(ENGINES)}")
    if "dynamo" in names and not disaggregated:
        raise InvalidInput(
            field, "dynamo recipes are for disaggregated answers (serving disagg); use vllm, sglang or trtllm"
        )
    return names


__all__: Sequence[str] = ("DEFAULT_ENGINES", "parse_engines")
