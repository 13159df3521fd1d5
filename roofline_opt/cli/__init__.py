"""Command-line entry point: maps arguments to API calls and our errors to one line plus an exit code.

Exit codes: 0 answered, 1 a well-formed question nobody can answer (infeasible), 2 bad input (or an output that cannot
be written), 3 solver failure, 4 internal error (a bug: the message asks to report it), 130 interrupted by SIGINT,
143 by SIGTERM. Each sub-command lives in its own module of this package and registers itself through ``add_parser``.

May import: every layer below (api, fidelity, report, topology, catalog, physics, base modules). Nothing imports
the CLI but ``roofline_opt.__main__``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from roofline_opt.errors import Infeasible, InvalidInput, SolverFailure, one_line

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InvalidInput(self.prog.removeprefix("roofline-opt").strip() or "arguments", message)


def build_parser() -> argparse.ArgumentParser:
    from roofline_opt.cli import (
        catalog_cmds,
        cluster_cmds,
        evaluate_cmd,
        fidelity_cmds,
        plan_cmd,
        query_cmds,
        study_cmd,
    )

    parser = OneLineParser(prog="roofline-opt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in (evaluate_cmd, query_cmds, plan_cmd, catalog_cmds, cluster_cmds, fidelity_cmds, study_cmd):
        module.add_parsers(sub)
    return parser


_received: list[int] = []
"""Signals received during the running command: one a library swallowed (Pyomo catches broadly while it loads
HiGHS) still ends the run as interrupted."""


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT and SIGTERM alike: remember the signal and raise KeyboardInterrupt, so every cleanup path runs."""
    _received.append(signum)
    raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Handle SIGTERM as SIGINT for the duration of a command (main thread only), then restore the handlers."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _silence_stdout() -> None:
    """Point stdout at the null device so the interpreter's final flush of unwritable output cannot fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class StdoutFailed(Exception):
    """Standard output cannot be written (a full device, an I/O error); a closed pipe stays a BrokenPipeError."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))


class _GuardedStdout:
    """stdout as the command sees it: a write or flush that fails becomes StdoutFailed, told apart from the
    OSErrors of a bug."""

    def __init__(self, stream: object) -> None:
        self._stream = stream

    def _guard(self, method: str, *args: object) -> object:
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutFailed(exc) from exc

    def write(self, text: str) -> object:
        return self._guard("write", text)

    def flush(self) -> object:
        return self._guard("flush")

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[None]:
    original = sys.stdout
    sys.stdout = _GuardedStdout(original)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout = original


def _error(kind: str, message: object, code: int) -> int:
    """Print the one line of a failed run and return its exit code; a run a signal reached ends as interrupted."""
    if _received:
        kind, message = "interrupted", signal.Signals(_received[0]).name
        code = 128 + _received[0]
    with contextlib.suppress(OSError, ValueError):
        print(f"roofline-opt: {kind}: {one_line(message)}", file=sys.stderr)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user: our errors as one line and their exit code, anything
    else as an internal error (exit 4) asking to report it."""
    with _signals_interrupt(), _guarded_stdout():
        try:
            args = build_parser().parse_args(argv)
            code = int(args.func(args) or EXIT_OK)
            sys.stdout.flush()
            return _error("interrupted", "", code) if _received else code
        except InvalidInput as exc:
            return _error("error", exc, EXIT_BAD_INPUT)
        except Infeasible as exc:
            return _error("infeasible", exc, EXIT_INFEASIBLE)
        except SolverFailure as exc:
            return _error("solver failure", exc, EXIT_SOLVER)
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_OK
        except KeyboardInterrupt:
            return _error("interrupted", "SIGINT", EXIT_SIGINT)
        except StdoutFailed as exc:
            _silence_stdout()
            return _error("error", f"cannot write to standard output: {exc}", EXIT_BAD_INPUT)
        except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, reported on one line
            report = f"{type(exc).__name__}: {exc} (a bug in roofline-opt: please report it with the command)"
            return _error("internal error", report, EXIT_INTERNAL)
