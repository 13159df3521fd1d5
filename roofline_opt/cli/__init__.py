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


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InvalidInput(self.prog.removeprefix("roofline-opt").strip() or "arguments", message)


def build_parser() -> argparse.ArgumentParser:
    from roofline_opt.cli import catalog_cmds, cluster_cmds, evaluate_cmd, fidelity_cmds, plan_cmd, query_cmds

    parser = OneLineParser(prog="roofline-opt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in (evaluate_cmd, query_cmds, plan_cmd, catalog_cmds, cluster_cmds, fidelity_cmds):
        module.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user for errors we can name."""
    try:
        args = build_parser().parse_args(argv)
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
