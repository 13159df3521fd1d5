"""A question under an engine profile: which profile (--engine / --profile), and what it changes in the question.

The profile sets the physics per accelerator (``Question.profile``, read through ``Question.preset_on``), the
defaults a question leaves open (prefill chunk, KV precision) and the layouts offered: features the engine cannot
deploy are not offered by default and refused when asked for. 2-D TP stays what it is without a profile, offered
only on request (``--tp-modes``), whatever the profile says.
"""

from __future__ import annotations

import dataclasses

from roofline_opt import checks
from roofline_opt.catalog.profiles import ENGINE_KEYS, load_profile
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.space import Question
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.requests import DISAGG


def resolve_profile(
    engine: str | None, profile: str | EngineProfile | None, preset: str = "default"
) -> EngineProfile | None:
    """The profile a question runs under: ``profile`` (a packaged name, a YAML file or an EngineProfile), else the
    packaged profile of ``engine``, else None (the preset alone, as without profiles)."""
    if engine is not None:
        engine = checks.choice("engine", str(engine).strip(), ENGINE_KEYS)
    if profile is None and engine is None:
        return None
    if preset != "default":
        field = "profile" if profile is not None else "engine"
        raise InvalidInput(field, f"sets the physics itself (its base preset); drop --preset {preset}")
    chosen = profile if isinstance(profile, EngineProfile) else load_profile(profile or engine or "", "profile")
    if engine is not None and chosen.engine and chosen.engine != engine:
        msg = f"describes {chosen.engine}, not the --engine given ({engine}). Give one of them, or matching ones."
        raise InvalidInput("profile", msg)
    return chosen


def _refuse(profile: EngineProfile, field: str, what: str) -> None:
    msg = f"asks for {what}, which {profile.engine or profile.name} does not deploy (profile {profile.name!r})"
    raise InvalidInput(field, msg)


def apply_profile(q: Question, profile: EngineProfile | None, *, kv_bits_given: bool, chunk_given: bool) -> Question:
    """``q`` under ``profile``: its shared preset, defaults and deployable layouts (``q`` itself without one)."""
    if profile is None:
        return q
    changes: dict = {"preset": profile.shared_preset(), "profile": profile}
    if not kv_bits_given and profile.default_kv_bits is not None:
        changes["kv_bits"] = (profile.default_kv_bits,)
    elif 4 in q.kv_bits and not profile.deploys("kv4"):
        _refuse(profile, "kv_bits", "a 4-bit KV cache")
    if not chunk_given and profile.default_chunk_tokens is not None:
        changes["chunk_tokens"] = (profile.default_chunk_tokens,)
    if not profile.deploys("pp"):
        changes["pp_degrees"] = (1,)
    if not profile.deploys("ep"):
        changes["ep_degrees"] = (1,)
    if not profile.deploys("dp_attention"):
        changes["dp_attention"] = False
    if q.draft is not None:
        kind = "mtp" if q.draft.name.endswith("-mtp") else "draft"
        if not profile.deploys(kind):
            _refuse(profile, "draft", "MTP modules as speculator" if kind == "mtp" else "a draft model")
    if DISAGG in q.serving and not profile.deploys("disagg"):
        _refuse(profile, "serving", "disaggregated serving")
    return dataclasses.replace(q, **changes)
