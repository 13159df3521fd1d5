"""Command-line entry point: maps arguments to API calls and our errors to one line plus an exit code.

Exit codes: 0 answered, 1 a well-formed question nobody can answer (infeasible), 2 bad input (or an output that cannot
be written, standard output closed or full), 3 solver failure, 4 internal error (a bug: the message asks to report
it), 130 interrupted by SIGINT, 143 by SIGTERM, 129 by SIGHUP (handled like SIGTERM). Each sub-command lives in its
own module of this package and registers itself through ``add_parser``.

May import: every layer below (api, fidelity, report, topology, catalog, physics, base modules). Nothing imports
the CLI but ``roofline_opt.__main__``.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from roofline_opt.errors import MAX_REPORT_CHARS, Infeasible, InvalidInput, SolverFailure, one_line

EXIT_OK, EXIT_INFEASIBLE, EXIT_BAD_INPUT, EXIT_SOLVER, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_SIGINT, EXIT_SIGTERM, EXIT_SIGHUP = 128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGHUP
INTERRUPTING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that end a run as interrupted (exit 128 + the signal): temporary files removed, no output written."""
REPEAT_RAISE_S = 0.5
"""A signal this soon after the one that interrupted the run is only remembered (a burst of Ctrl-C never interrupts
the cleanup or the one-line report); a later one interrupts again (the first may have been swallowed by a library)."""


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
  plan        a fleet of models on one cluster
              roofline-opt plan instances/fleets/chat-and-code.yaml
  launch      recipes for a saved answer (or --emit DIR on fastest, cheapest, frontier, plan)
              roofline-opt launch run1/answer.json --engine vllm --out run1/recipes
  study       many questions on Dask  roofline-opt study instances/studies/hbm-value.yaml --out hbm.parquet
  models      model catalog           roofline-opt models
  gpus        accelerator catalog     roofline-opt gpus
  cluster     cluster graphs          roofline-opt cluster show hgx-h100
                                      roofline-opt cluster draw hgx-h100 --out hgx-h100.png
                                      roofline-opt cluster build instances/clusters/torus-4x4.yaml --out t.graphml
  validate    model vs measured rows  roofline-opt validate --measured examples/measured_points.csv
  calibrate   fit efficiencies        roofline-opt calibrate --measured examples/measured_points.csv --gpu h100-sxm
  reproduce   the paper's figures     roofline-opt reproduce --only llama-3-70b --out reproduce
  sensitivity assumptions moved       roofline-opt sensitivity --model llama-3-70b --gpu h100-sxm --out sens
  simulate    serving at load         roofline-opt simulate --model llama-3-8b --gpu h100-sxm --tp 1 --pp 1 --batch 64
                                        --isl 2000 --osl 200 --rate-req-s 4

Every figure assumes decoding with 8000 tokens already in each sequence's KV cache (--context) unless told.
Query commands take --question FILE.yaml (any of their flags) and --save-dir DIR (a folder to repeat the run from).
Exit codes: 0 answered, 1 no setup answers the question (reason printed), 2 bad input, 3 solver failure,
4 internal error (please report it), 130/143/129 interrupted (SIGINT/SIGTERM/SIGHUP).
"""


def package_version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("roofline-opt")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _Version(argparse._VersionAction):
    """``--version``, looked up only when asked (importlib.metadata is a measurable part of start-up)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        self.version = f"roofline-opt {package_version()}"
        super().__call__(parser, namespace, values, option_string)


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2, and shows every flag's default."""

    def __init__(self, *args, **kwargs) -> None:
        from roofline_opt.cli.helpfmt import Formatter

        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InvalidInput(self.prog.removeprefix("roofline-opt").strip() or "arguments", message)


COMMANDS = {
    "evaluate": ("evaluate_cmd", "figures of fully specified setups (flags, or --from-csv FILE)"),
    "fastest": ("query_cmds", "the most tok/s per request within a budget in $/Mtok"),
    "cheapest": ("query_cmds", "the least $/Mtok at a speed in tok/s per request"),
    "frontier": ("query_cmds", "the speed-vs-cost frontier from the cheapest to the fastest setup"),
    "plan": ("plan_cmd", "plan a fleet: several models, their demands and latency limits on one cluster, one MIP"),
    "launch": ("launch_cmd", "launch recipes for a saved answer: engine flags, Kubernetes manifests, the benchmark"),
    "models": (
        "catalog_cmds",
        "list the model cards: parameters (billions), KV bytes per token, layers, experts, source",
    ),
    "gpus": (
        "catalog_cmds",
        "list the accelerator cards: dense TFLOP/s per precision, HBM GB and TB/s, scale-up size, $/h with its basis "
        "and date",
    ),
    "cluster": ("cluster_cmds", "inspect, draw and build cluster topology graphs"),
    "validate": ("fidelity_cmds", "measured serving figures against the roofline bound"),
    "calibrate": ("fidelity_cmds", "fit efficiency caps to measurements and write an accelerator card"),
    "reproduce": ("fidelity_cmds", "the paper's headline comparisons with our integer frontiers"),
    "sensitivity": ("fidelity_cmds", "how the optimum moves when contested assumptions move"),
    "study": ("study_cmd", "answer every question of a study file (a grid or a list) on Dask, into one Parquet file"),
    "simulate": ("simulate_cmd", "serve arrivals or a trace on one setup step by step: TTFT/TPOT percentiles at load"),
}
"""Every command, in the order ``--help`` lists them: the module of this package that registers it (its
``add_parsers`` adds the module's commands, each with the help given here) and its one-line help."""


def command_help(name: str) -> str:
    """The one-line help of a command, as ``roofline-opt --help`` lists it."""
    return COMMANDS[name][1]


def _named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (the first word that is not an option: the top level's options take no value)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line. Given ``argv``, only the command it names is built in full; the others are listed with
    their help and their modules are not imported, so a command starts with only what it uses."""
    import importlib

    parser = OneLineParser(
        prog="roofline-opt",
        description="Proven-optimal LLM serving setups (parallelism, batch, precision, accelerator) for a budget\n"
        "in $/Mtok or a speed in tok/s per request, from the roofline model of Erdil 2025, solved exactly by HiGHS.",
        epilog=EXAMPLES,
    )
    parser.add_argument("--version", action=_Version, version="")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser, metavar="COMMAND")
    full = {module for module, _ in COMMANDS.values()} if argv is None else set()
    if argv is not None and (named := _named_command(argv)) is not None:
        full.add(COMMANDS[named][0])
    for name, (module, text) in COMMANDS.items():
        if module not in full:
            sub.add_parser(name, help=text)
        elif name == next(n for n, (m, _) in COMMANDS.items() if m == module):
            importlib.import_module(f"roofline_opt.cli.{module}").add_parsers(sub)
    return parser


_received: list[int] = []
"""Signals received during the running command: one a library swallowed (Pyomo catches broadly while it loads
HiGHS) still ends the run as interrupted."""
_last_raise = [-float("inf")]
"""When the handler last raised KeyboardInterrupt (time.monotonic)."""


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT, SIGTERM and SIGHUP alike: remember the signal, stop output writing, and raise KeyboardInterrupt so that
    every cleanup path runs, unless the run was interrupted less than REPEAT_RAISE_S ago (a burst)."""
    from roofline_opt import files

    _received.append(signum)
    files.stop_writing()
    now = time.monotonic()
    if now - _last_raise[0] >= REPEAT_RAISE_S:
        _last_raise[0] = now
        raise KeyboardInterrupt


def _quiet_unraisable(previous: Callable[[Any], object]) -> Callable[[Any], None]:
    """``sys.unraisablehook`` for a command: the handler's KeyboardInterrupt, raised where Python cannot propagate it
    (a weakref or garbage-collector callback, such as importlib's module-lock cleanup), is not printed: the signal is
    in ``_received``, which still ends the run as interrupted on one line. Everything else goes to ``previous``."""

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _received:
            return
        previous(unraisable)

    return hook


def _remember(signum: int, frame: object) -> None:
    """Outside a command (before main, after it): a signal is remembered, never raised where nothing catches it."""
    _received.append(signum)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """Handle SIGTERM and SIGHUP as SIGINT for the duration of a command (main thread only), then restore the
    handlers."""
    from roofline_opt import files

    _received.clear()
    _last_raise[0] = -float("inf")
    files.stop_writing(False)
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _interrupt) for s in INTERRUPTING_SIGNALS}
    unraisable = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(unraisable)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sys.unraisablehook = unraisable
        files.stop_writing(False)


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


class _ClosedStdout:
    """sys.stdout when the process started with descriptor 1 closed (``>&-``): Python made it None and would drop
    the answer silently; writing to it fails instead."""

    def write(self, text: str) -> int:
        raise StdoutFailed(OSError(errno.EBADF, "it is closed (redirect it to /dev/null to discard the answer)"))

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[None]:
    original = sys.stdout
    sys.stdout = _GuardedStdout(_ClosedStdout() if original is None else original)
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
        print(f"roofline-opt: {kind}: {one_line(message, MAX_REPORT_CHARS)}", file=sys.stderr)
    return code


def _occupy_closed_standard_descriptors() -> None:
    """Open the null device on descriptors 0-2 the process started without, so that no file this run opens gets one
    of them (a library writing to descriptor 1 would write into it); sys.stdout stays None and fails on writing."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            with contextlib.suppress(OSError):
                opened = os.open(os.devnull, os.O_RDWR)
                if opened != fd:
                    os.dup2(opened, fd)
                    os.close(opened)


def run() -> NoReturn:
    """The console entry point (and ``python -m roofline_opt``): main's exit code. Between commands a signal is only
    remembered, and a run a signal reached leaves through os._exit once its output is flushed: after a
    KeyboardInterrupt raised inside some library code, CPython can turn the interpreter's exit into death by SIGINT
    (exit -2) whatever code main returned (1 run in 15 of an interrupted frontier)."""
    if threading.current_thread() is threading.main_thread():
        for s in INTERRUPTING_SIGNALS:
            signal.signal(s, _remember)
    _occupy_closed_standard_descriptors()
    code = main()
    if _received:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def _named_option(argv: Sequence[str], args: argparse.Namespace | None, filename: object) -> str:
    """The option (or positional argument) whose value holds ``filename``, for an OS error about that name."""
    name = str(filename or "")
    for i, word in enumerate(argv):
        if not name or (name not in word and word not in name) or not word:
            continue
        if word.startswith("--") and "=" in word:
            return word.split("=", 1)[0]
        if i > 0 and argv[i - 1].startswith("-") and not argv[i - 1].lstrip("-")[:1].isdigit():
            return argv[i - 1]
        for dest, value in vars(args or argparse.Namespace()).items():
            if value == word:
                return dest.upper()
    return "a file name"


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never lets a traceback reach the user: our errors as one line and their exit code, anything
    else as an internal error (exit 4) asking to report it."""
    from roofline_opt import files

    argv = sys.argv[1:] if argv is None else list(argv)
    with _signals_interrupt(), _guarded_stdout(), files.inputs_tracked():
        try:
            return _main(argv)
        except KeyboardInterrupt:  # a later signal while the first one's report was being written
            return 128 + _received[0] if _received else EXIT_SIGINT


def _main(argv: list[str]) -> int:
    args = None
    try:
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        if getattr(args, "question", None):
            from roofline_opt.cli.run_files import apply_question_file

            apply_question_file(args)
            args = parser.parse_args(argv)
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
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            return _internal(exc)
        option = _named_option(argv, args, exc.filename)
        what = one_line(repr(str(exc.filename)), 80)
        msg = f"{option}: a name too long for a file (a path component over 255 characters): {what}"
        return _error("error", msg, EXIT_BAD_INPUT)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: a bug, reported on one line
        return _internal(exc)


def _internal(exc: BaseException) -> int:
    report = f"{type(exc).__name__}: {exc} (a bug in roofline-opt: please report it with the command)"
    return _error("internal error", report, EXIT_INTERNAL)
