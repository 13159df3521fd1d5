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
    from roofline_opt.cli import catalog_cmds, cluster_cmds, evaluate_cmd, fidelity_cmds, query_cmds

    parser = OneLineParser(prog="roofline-opt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in (evaluate_cmd, query_cmds, catalog_cmds, cluster_cmds, fidelity_cmds):
        module.add_parsers(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like SIGINT so that every cleanup path (temporary files and folders) runs."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[None]:
    """Turn SIGTERM into an exception like SIGINT's for the duration of a command (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


def _error(kind: str, message: object) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"roofline-opt: {kind}: {one_line(message)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user: our errors as one line and their exit code, anything
    else as an internal error (exit 4) asking to report it."""
    with _sigterm_as_sigint(), _guarded_stdout():
        try:
            args = build_parser().parse_args(argv)
            code = int(args.func(args) or EXIT_OK)
            sys.stdout.flush()
            return code
        except InvalidInput as exc:
            _error("error", exc)
            return EXIT_BAD_INPUT
        except Infeasible as exc:
            _error("infeasible", exc)
            return EXIT_INFEASIBLE
        except SolverFailure as exc:
            _error("solver failure", exc)
            return EXIT_SOLVER
        except BrokenPipeError:
            _silence_stdout()
            return EXIT_OK
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            _error("interrupted", "SIGTERM" if terminated else "SIGINT")
            return EXIT_SIGTERM if terminated else EXIT_SIGINT
        except StdoutFailed as exc:
            _silence_stdout()
            _error("error", f"cannot write to standard output: {exc}")
            return EXIT_BAD_INPUT
        except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, reported on one line
            return _internal(exc)


def _internal(exc: BaseException) -> int:
    _error("internal error", f"{type(exc).__name__}: {exc} (a bug in roofline-opt: please report it with the command)")
    return EXIT_INTERNAL
