"""Command-line entry point: maps arguments to API calls and our errors to one line plus an exit code.

Exit codes: 0 answered, 1 a well-formed question nobody can answer (infeasible), 2 bad input, 3 solver failure.
Each sub-command lives in its own module of this package and registers itself through ``add_parser``.

May import: every layer below (api, fidelity, report, topology, catalog, physics, base modules). Nothing imports
the CLI but ``roofline_opt.__main__``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_SOLVER = 0, 1, 2, 3


EXAMPLES = """\
commands, one example each (every flag's default is in `roofline-opt COMMAND --help`):
  evaluate    figures of one setup
              roofline-opt evaluate --model llama-3-70b --gpu h100-sxm --tp 8 --pp 1 --batch 16
  fastest     most tok/s per request within a budget (--top-n 3 adds the runner-up layouts)
              roofline-opt fastest --model llama-3-70b --gpu h100-sxm,h200 --max-usd-per-mtok 2
  cheapest    least $/Mtok at a speed
              roofline-opt cheapest --model meta-llama/Llama-3.1-70B-Instruct --gpu h100-sxm --min-tok-s 50
  frontier    speed-vs-cost frontier and the preferred point
              roofline-opt frontier --model llama-3-70b --gpu h100-sxm --points 12 --plot frontier.png
  models      model catalog           roofline-opt models
  gpus        accelerator catalog     roofline-opt gpus
  cluster     cluster graphs          roofline-opt cluster show hgx-h100
                                      roofline-opt cluster draw hgx-h100 --out hgx-h100.png
                                      roofline-opt cluster build instances/clusters/torus-4x4.yaml --out t.graphml
  validate    model vs measured rows  roofline-opt validate --measured examples/measured_points.csv
  calibrate   fit efficiencies        roofline-opt calibrate --measured examples/measured_points.csv --gpu h100-sxm
  reproduce   the paper's figures     roofline-opt reproduce --only llama-3-70b --out reproduce
  sensitivity assumptions moved       roofline-opt sensitivity --model llama-3-70b --gpu h100-sxm --out sens

Every figure assumes decoding with 8000 tokens already in each sequence's KV cache (--context) unless told.
Query commands take --question FILE.yaml (any of their flags) and --save-dir DIR (a folder to repeat the run from).
Exit codes: 0 answered, 1 no setup answers the question (reason printed), 2 bad input, 3 solver failure.
"""


def package_version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roofline-opt")
    except PackageNotFoundError:
        return "unknown (not installed)"


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and shows every flag's default."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        from roofline_opt.cli.helpfmt import Formatter

        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InvalidInput(self.prog.removeprefix("roofline-opt").strip() or "arguments", message)


def build_parser() -> argparse.ArgumentParser:
    from roofline_opt.cli import catalog_cmds, cluster_cmds, evaluate_cmd, fidelity_cmds, plan_cmd, query_cmds

    parser = OneLineParser(
        prog="roofline-opt",
        description="Proven-optimal LLM serving setups (parallelism, batch, precision, accelerator) for a budget\n"
        "in $/Mtok or a speed in tok/s per request, from the roofline model of Erdil 2025, solved exactly by HiGHS.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action="version", version=f"roofline-opt {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser, metavar="COMMAND")
    for module in (evaluate_cmd, query_cmds, plan_cmd, catalog_cmds, cluster_cmds, fidelity_cmds):
        module.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user for errors we can name."""
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "question", None):
            from roofline_opt.cli.run_files import apply_question_file

            apply_question_file(args)
            args = parser.parse_args(argv)
        return int(args.func(args) or EXIT_OK)
    except InvalidInput as exc:
        print(f"roofline-opt: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Infeasible as exc:
        print(f"roofline-opt: infeasible: {exc}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except SolverFailure as exc:
        print(f"roofline-opt: solver failure: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except BrokenPipeError:
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        print("roofline-opt: interrupted", file=sys.stderr)
        return 130
