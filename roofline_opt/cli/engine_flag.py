"""--engine and --profile: the engine whose profile prices every figure (and whose recipe --emit writes).

One engine (``--engine vllm``) selects its packaged profile (docs/profiles/) and, with --emit, its recipe only. A
comma list (``--engine vllm,sglang``, or ``dynamo``) is for --emit alone: recipes for each, figures under the neutral
profile. Without --engine: the neutral profile (the default preset), and recipes for all three engines.
``--profile FILE`` gives a profile YAML (a packaged name, or one ``calibrate`` writes); its engine must match
--engine when both are given.
"""

from __future__ import annotations

import argparse

from roofline_opt.errors import InvalidInput

ENGINE_HELP = (
    "serving engine: vllm, sglang or trtllm. Its profile (efficiencies per accelerator family, memory reserve, "
    "default chunk and KV precision, deployable layouts; docs/profiles/) prices every figure, and --emit writes its "
    "recipe only. A comma list (or dynamo) only with --emit: recipes for each, figures under the neutral profile "
    "(default: the neutral profile, and recipes for vllm, sglang and trtllm)"
)
PROFILE_HELP = (
    "engine profile: a packaged name (neutral, vllm, sglang, trtllm, atom) or a profile YAML file such as the one "
    "`roofline-opt calibrate --out` writes; wins over --engine's packaged profile (their engines must match)"
)


def add_profile_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--profile FILE (commands that have --engine through launch_cmd.add_emit_flags add only this)."""
    p.add_argument("--profile", metavar="FILE.yaml", help=PROFILE_HELP)


def add_engine_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """--engine NAME and --profile FILE, for commands without --emit."""
    p.add_argument("--engine", metavar="NAME", help=ENGINE_HELP.split(". A comma list")[0] + " (default: neutral)")
    add_profile_flag(p)


def physics_engine(args: argparse.Namespace) -> str | None:
    """The engine whose profile prices the figures: --engine when it names one engine with a profile, None without
    --engine or for a recipe list given with --emit; a list or dynamo without --emit is an error."""
    from roofline_opt.catalog.profiles import ENGINE_KEYS

    text = getattr(args, "engine", None)
    if text is None:
        return None
    names = [n.strip().lower() for n in str(text).split(",") if n.strip()]
    if len(names) == 1 and names[0] in ENGINE_KEYS:
        return names[0]
    if getattr(args, "emit", None):
        return None
    msg = (
        f"names one engine for the figures: {', '.join(ENGINE_KEYS)}; a comma list (or dynamo) only with --emit DIR. "
        f"Got {text!r} instead."
    )
    raise InvalidInput("--engine", msg)
