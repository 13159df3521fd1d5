"""Interrupted runs clean up: SIGTERM is handled like SIGINT, an interrupted plot leaves no temporary file, multi-file
outputs (reproduce, sensitivity --out) appear whole or not at all; a bug is exit 4 on one line."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import types
import weakref
from pathlib import Path

import pandas as pd
import pytest
from hardening import SMALL_QUERY, assert_one_line, hidden_leftovers, run
from matplotlib.figure import Figure

from roofline_opt import api, cli, fidelity, files
from roofline_opt.cli import EXIT_INTERNAL, EXIT_SIGINT, EXIT_SIGTERM

reproduce_module = importlib.import_module("roofline_opt.fidelity.reproduce")


def signal_self(signum: int):
    """A stand-in for a slow step that the user interrupts: the signal arrives while it runs."""

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises before this ends
        pytest.fail("the signal did not interrupt")

    return interrupted


def half_written_then(signum: int):
    """Figure.savefig that writes part of the image, then is interrupted by ``signum``."""

    def savefig(self, f, **kwargs):
        f.write(b"\x89PNG half an image")
        signal_self(signum)()

    return savefig


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, EXIT_SIGTERM), (signal.SIGINT, EXIT_SIGINT)])
def test_a_plot_interrupted_while_saving_leaves_no_file_and_no_temporary(tmp_path, capsys, monkeypatch, signum, code):
    monkeypatch.setattr(Figure, "savefig", half_written_then(signum))
    plot, csv = tmp_path / "frontier.png", tmp_path / "frontier.csv"

    got, _, err = run(capsys, "frontier", *SMALL_QUERY, "--points", "3", "--plot", str(plot), "--csv", str(csv))

    assert_one_line(err, got, code, "interrupted", signal.Signals(signum).name)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_interrupted_plot_keeps_the_previous_plot_whole(tmp_path, capsys, monkeypatch):
    plot = tmp_path / "frontier.png"
    plot.write_bytes(b"previous plot")
    monkeypatch.setattr(Figure, "savefig", half_written_then(signal.SIGTERM))

    code, _, _ = run(capsys, "frontier", *SMALL_QUERY, "--points", "3", "--plot", str(plot))

    assert code == EXIT_SIGTERM
    assert plot.read_bytes() == b"previous plot" and hidden_leftovers(tmp_path) == []


def test_the_sigterm_handler_is_restored_after_a_command(capsys):
    before = signal.getsignal(signal.SIGTERM)

    run(capsys, "models")

    assert signal.getsignal(signal.SIGTERM) is before


def test_reproduce_interrupted_after_one_case_leaves_no_folder(tmp_path, capsys, monkeypatch):
    original, calls = reproduce_module.compare_case, []

    def second_case_interrupted(case, context, points):
        calls.append(case.key)
        if len(calls) == 2:
            signal_self(signal.SIGINT)()
        return original(case, context, points)

    monkeypatch.setattr(reproduce_module, "compare_case", second_case_interrupted)
    out = tmp_path / "reproduce"

    code, _, err = run(
        capsys, "reproduce", "--out", str(out), "--only", "llama-3-8b,llama-3-70b", "--points", "2", "--context", "0"
    )

    assert_one_line(err, code, EXIT_SIGINT, "interrupted")
    assert calls == ["llama-3-8b", "llama-3-70b"]
    assert list(tmp_path.iterdir()) == []


def test_reproduce_interrupted_keeps_an_existing_folder_as_it_was(tmp_path, capsys, monkeypatch):
    out = tmp_path / "reproduce"
    out.mkdir()
    (out / "comparison.csv").write_text("previous\n")
    monkeypatch.setattr(reproduce_module, "compare_case", signal_self(signal.SIGTERM))

    code, _, _ = run(capsys, "reproduce", "--out", str(out), "--only", "llama-3-8b", "--context", "0")

    assert code == EXIT_SIGTERM
    assert {p.name: p.read_text() for p in out.iterdir()} == {"comparison.csv": "previous\n"}
    assert hidden_leftovers(tmp_path) == []


def test_sensitivity_out_interrupted_while_plotting_leaves_no_folder(tmp_path, capsys, monkeypatch):
    table = pd.DataFrame({"group": ["baseline"], "variant": ["baseline"]})
    monkeypatch.setattr(fidelity, "sensitivity", lambda q, points, progress=None: type("R", (), {"table": table})())

    def plot_half_then_interrupted(result, path, title):
        path.write_bytes(b"half a plot")
        signal_self(signal.SIGTERM)()

    monkeypatch.setattr(fidelity, "plot_sensitivity", plot_half_then_interrupted)
    out = tmp_path / "sens"

    code, _, err = run(capsys, "sensitivity", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--out", str(out))

    assert_one_line(err, code, EXIT_SIGTERM, "interrupted")
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------- output folders


def test_an_output_folder_appears_with_all_its_files_at_once(tmp_path):
    out = tmp_path / "out"
    with files.output_folder(out) as staging:
        (staging / "a.csv").write_text("a\n")
        assert not out.exists()
        (staging / "b.csv").write_text("b\n")

    assert sorted(p.name for p in out.iterdir()) == ["a.csv", "b.csv"]
    assert hidden_leftovers(tmp_path) == []


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
def test_an_output_folder_whose_writer_fails_never_appears(tmp_path, failure):
    out = tmp_path / "out"
    with pytest.raises(failure), files.output_folder(out) as staging:
        (staging / "a.csv").write_text("a\n")
        raise failure

    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_into_an_existing_one_replaces_its_files_and_keeps_the_others(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep\n")
    (out / "a.csv").write_text("old\n")
    with files.output_folder(out) as staging:
        (staging / "a.csv").write_text("new\n")

    assert {p.name: p.read_text() for p in out.iterdir()} == {"mine.txt": "keep\n", "a.csv": "new\n"}
    assert hidden_leftovers(tmp_path) == []


def test_an_output_folder_onto_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_text("a file\n")

    with pytest.raises(files.InvalidInput, match="must be a folder"), files.output_folder(tmp_path / "out"):
        pass


# ----------------------------------------------------------------------------------------------- internal errors


def test_a_bug_is_exit_4_on_one_line_asking_to_report_it(capsys, monkeypatch):
    def broken(rows, **_):
        return 1 / 0

    monkeypatch.setattr(api, "evaluate_setups", broken)

    code, _, err = run(
        capsys, "evaluate", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--pp", "1", "--batch", "1"
    )

    assert_one_line(err, code, EXIT_INTERNAL, "internal error", "ZeroDivisionError", "please report it")


# ----------------------------------------------------------------------------------------------- a real signal


def _solving(pid: int) -> bool:
    """Whether the process has loaded HiGHS (it is inside the command, past interpreter start-up)."""
    try:
        return "highspy" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see when the command runs")
def test_sigterm_to_a_running_frontier_exits_143_on_one_line_and_writes_nothing(tmp_path):
    argv = [
        "frontier",
        "--model",
        "llama-3-70b",
        "--gpu",
        "h100-sxm,h200,b200",
        "--weight-bits",
        "16,8,4",
        "--points",
        "1000",
        "--plot",
        "f.png",
        "--csv",
        "f.csv",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "roofline_opt", *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not _solving(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)

    assert_one_line(err.decode(), proc.returncode, EXIT_SIGTERM, "interrupted", "SIGTERM")
    assert list(tmp_path.iterdir()) == []


class Exited(Exception):
    """How the stand-ins for os._exit and sys.exit report the code they were given."""

    def __init__(self, how: str, code: int) -> None:
        super().__init__(how, code)
        self.how, self.code = how, code


def exit_recorder(how: str):
    def leave(code: int) -> None:
        raise Exited(how, code)

    return leave


def test_a_run_a_signal_ended_leaves_through_os_exit_with_its_code(monkeypatch):
    """CPython can turn the exit after a KeyboardInterrupt raised in library code into death by SIGINT (exit -2): an
    interrupted run leaves through os._exit, with the code main chose."""
    monkeypatch.setattr(os, "_exit", exit_recorder("os._exit"))
    monkeypatch.setattr(sys, "exit", exit_recorder("sys.exit"))
    monkeypatch.setattr(cli, "_received", [])
    monkeypatch.setattr(cli, "main", lambda: cli._received.append(signal.SIGTERM) or EXIT_SIGTERM)
    with pytest.raises(Exited) as exited:
        cli.run()
    assert (exited.value.how, exited.value.code) == ("os._exit", EXIT_SIGTERM)


def test_a_run_no_signal_reached_leaves_through_sys_exit(monkeypatch):
    monkeypatch.setattr(os, "_exit", exit_recorder("os._exit"))
    monkeypatch.setattr(sys, "exit", exit_recorder("sys.exit"))
    monkeypatch.setattr(cli, "_received", [])
    monkeypatch.setattr(cli, "main", lambda: 2)
    with pytest.raises(Exited) as exited:
        cli.run()
    assert (exited.value.how, exited.value.code) == ("sys.exit", 2)


def _signal_inside_a_weakref_callback() -> None:
    """SIGTERM delivered while Python runs a weakref callback, where an exception cannot propagate (as importlib's
    module-lock cleanup is when a signal lands mid-import)."""

    class Held:
        pass

    held = Held()
    ref = weakref.ref(held, lambda _: signal.raise_signal(signal.SIGTERM))
    del held
    assert ref() is None


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_a_signal_inside_a_callback_prints_nothing_and_is_remembered(monkeypatch):
    printed: list[object] = []  # what the interpreter's hook would print as "Exception ignored in ..."
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    with cli._signals_interrupt():
        _signal_inside_a_weakref_callback()
        received = list(cli._received)
    assert received == [signal.SIGTERM]
    assert printed == []
    assert sys.unraisablehook == printed.append


def test_other_unraisable_errors_still_reach_the_previous_hook():
    seen = []
    hook = cli._quiet_unraisable(seen.append)
    error = types.SimpleNamespace(exc_value=ValueError("a bug"))
    hook(error)
    assert seen == [error]
