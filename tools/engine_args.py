"""Dump the engines' own command-line parsers into tests/data/engine_args/*.json (what tests rebuild and parse with).

Run it with an interpreter where the engines are installed (a scratch venv; no GPU is needed): vLLM's CUDA wheel
imports on a CPU-only machine with ``VLLM_TARGET_DEVICE=cpu``, SGLang with a CPU build of torch, the routers and
Dynamo as they are. Each parser is the engine's own, built by its own function; the dump lists, per option, what
argparse checks: the option strings, the action (store, store_true, append, ...), nargs, choices and the type's
name. Nothing of the engines' code is copied. TensorRT-LLM is not dumped: its PyPI package is a stub that downloads
the wheel from NVIDIA's index, which this machine cannot reach.

Usage::

    VLLM_TARGET_DEVICE=cpu /path/to/venv/bin/python tools/engine_args.py [--out tests/data/engine_args]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _vllm_serve() -> argparse.ArgumentParser:
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser())


def _vllm_bench() -> argparse.ArgumentParser:
    from vllm.benchmarks.serve import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    p = FlexibleArgumentParser()
    add_cli_args(p)
    return p


def _sglang_server() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    return p


def _sglang_router() -> argparse.ArgumentParser:
    from sglang_router.router_args import RouterArgs

    p = argparse.ArgumentParser()
    RouterArgs.add_cli_args(p)
    return p


def _vllm_router() -> argparse.ArgumentParser:
    from vllm_router.router_args import RouterArgs

    p = argparse.ArgumentParser()
    RouterArgs.add_cli_args(p)
    return p


def _dynamo_vllm() -> argparse.ArgumentParser:
    """dynamo.vllm's worker parser: Dynamo's runtime and vLLM-worker groups, then vLLM's engine flags (as its
    ``_parse_cli_args`` assembles them)."""
    from dynamo.common.configuration.groups.runtime_args import DynamoRuntimeArgGroup
    from dynamo.vllm.backend_args import DynamoVllmArgGroup
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    p = argparse.ArgumentParser(allow_abbrev=False)
    DynamoRuntimeArgGroup().add_arguments(p)
    DynamoVllmArgGroup().add_arguments(p)
    engine = FlexibleArgumentParser(add_help=False)
    AsyncEngineArgs.add_cli_args(engine, async_args_only=False)
    known = {o for a in p._actions for o in a.option_strings}
    for action in engine._actions:
        if action.option_strings and not known & set(action.option_strings):
            p._add_action(action)
    return p


def _dynamo_frontend() -> argparse.ArgumentParser:
    from dynamo.frontend.frontend_args import FrontendArgGroup

    p = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(p)
    return p


PARSERS: dict[str, tuple[str, str, Callable[[], argparse.ArgumentParser]]] = {
    "vllm-serve": ("vllm", "vllm.entrypoints.common.cli_args.make_arg_parser", _vllm_serve),
    "vllm-bench-serve": ("vllm", "vllm.benchmarks.serve.add_cli_args", _vllm_bench),
    "sglang-launch-server": ("sglang", "sglang.srt.server_args.ServerArgs.add_cli_args", _sglang_server),
    "sglang-router": ("sglang-router", "sglang_router.router_args.RouterArgs.add_cli_args", _sglang_router),
    "vllm-router": ("vllm-router", "vllm_router.router_args.RouterArgs.add_cli_args", _vllm_router),
    "dynamo-vllm": ("ai-dynamo", "dynamo.vllm.args._parse_cli_args (its groups + vLLM engine args)", _dynamo_vllm),
    "dynamo-frontend": ("ai-dynamo", "dynamo.frontend.frontend_args.FrontendArgGroup", _dynamo_frontend),
}
"""Dump name -> (distribution, the engine function that builds the parser, how to build it)."""

ACTIONS = {
    argparse._StoreAction: "store",
    argparse._StoreTrueAction: "store_true",
    argparse._StoreFalseAction: "store_false",
    argparse._AppendAction: "append",
    argparse._StoreConstAction: "store_const",
    argparse._CountAction: "count",
    argparse.BooleanOptionalAction: "boolean_optional",
}


def _kind(action: argparse.Action) -> str:
    for cls in type(action).__mro__:
        if cls in ACTIONS:
            return ACTIONS[cls]
    return "store" if action.nargs != 0 else "store_true"  # an engine's own Action subclass: by its arity


def _type_name(action: argparse.Action) -> str | None:
    t = action.type
    if t in (int, float, str):
        return t.__name__
    return None if t is None else "other"


def dump(parser: argparse.ArgumentParser) -> list[dict]:
    out = []
    for a in parser._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        out.append(
            {
                "options": list(a.option_strings),
                "action": _kind(a),
                "nargs": a.nargs,
                "choices": None if a.choices is None else sorted(str(c) for c in a.choices),
                "type": _type_name(a),
            }
        )
    return out


def _version(dist: str) -> str:
    version = importlib.metadata.version(dist)
    if dist == "vllm":
        from vllm import _version

        version += f" (commit {getattr(_version, 'commit_id', None)})"
    return version


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "tests" / "data" / "engine_args"))
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (dist, built_by, build) in PARSERS.items():
        record = {"parser": name, "distribution": dist, "version": _version(dist), "built_by": built_by}
        record["arguments"] = dump(build())
        (out / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"{name}: {dist} {record['version']}, {len(record['arguments'])} options")


if __name__ == "__main__":
    main()
