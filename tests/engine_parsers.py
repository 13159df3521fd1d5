"""The engines' own command-line parsers, rebuilt from the dumps in tests/data/engine_args (tools/engine_args.py made
them from each engine's release, importing its own parser-building function on a CPU-only machine).

``parser(name)`` is an argparse parser with the same options, actions, nargs, choices and int/float/str types as the
engine's; ``PROGRAMS`` says which dump parses which emitted program and how many leading words (the program and its
positional model) to skip. TensorRT-LLM is not here: its PyPI package is a stub that downloads from NVIDIA's index.
"""

from __future__ import annotations

import argparse
import functools
import json
from pathlib import Path

DUMPS = Path(__file__).parent / "data" / "engine_args"
TYPES = {"int": int, "float": float, "str": str}
PROGRAMS = {
    ("vllm", "serve"): ("vllm-serve", 3),
    ("vllm", "bench"): ("vllm-bench-serve", 3),
    ("python3", "-m", "sglang.launch_server"): ("sglang-launch-server", 3),
    ("python3", "-m", "sglang_router.launch_router"): ("sglang-router", 3),
    ("vllm-router",): ("vllm-router", 1),
    ("python3", "-m", "dynamo.vllm"): ("dynamo-vllm", 3),
    ("python3", "-m", "dynamo.frontend"): ("dynamo-frontend", 3),
}
"""Leading words of an emitted command -> (the dump that parses it, words before its options)."""


def dump(name: str) -> dict:
    return json.loads((DUMPS / f"{name}.json").read_text(encoding="utf-8"))


@functools.cache
def parser(name: str) -> argparse.ArgumentParser:
    """An argparse parser with the options of the dumped engine parser ``name``."""
    p = argparse.ArgumentParser(prog=name, allow_abbrev=False, add_help=False, exit_on_error=False)
    for arg in dump(name)["arguments"]:
        kind, options = arg["action"], arg["options"]
        if kind in ("store_true", "store_false", "store_const", "count"):
            p.add_argument(*options, action=kind if kind != "store_const" else "store_true")
            continue
        if kind == "boolean_optional":
            p.add_argument(*[o for o in options if not o.startswith("--no-")], action=argparse.BooleanOptionalAction)
            continue
        convert = TYPES.get(arg["type"] or "")
        choices = arg["choices"]
        if choices is not None and convert is not None:
            choices = [convert(c) for c in choices]
        kwargs = {"action": "append" if kind == "append" else "store", "choices": choices, "type": convert}
        if arg["nargs"] is not None:
            kwargs["nargs"] = arg["nargs"]
        p.add_argument(*options, **kwargs)
    return p


def program_of(argv: list[str]) -> tuple[str, int] | None:
    """The dump that parses this command and the words to skip, or None (a program no dump covers)."""
    for lead, found in PROGRAMS.items():
        if tuple(argv[: len(lead)]) == lead:
            return found
    return None


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse an emitted command with its engine's parser; raises ValueError naming what the parser refused."""
    found = program_of(argv)
    if found is None:
        raise LookupError(f"no engine parser for {argv[:3]}")
    name, skip = found
    try:
        namespace, extra = parser(name).parse_known_args(argv[skip:])
    except (argparse.ArgumentError, SystemExit) as exc:
        raise ValueError(f"{name} refuses {argv}: {exc}") from exc
    if extra:
        raise ValueError(f"{name} does not know {extra}")
    return namespace
