"""Hardening 3 (issues 27 and 29), outputs and interruptions: no output replaces one of the run's inputs (through
links too), regular files under /dev/shm are replaced, concurrent writes land whole, a saved question repeats its
answer exactly, a closed stdout is exit 2, signal bursts and SIGHUP end as documented, and over-long file names are
exit 2 naming the option."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hardening import EVALUATE, SMALL_QUERY, assert_one_line, hidden_leftovers, run

from roofline_opt import api, cli, files
from roofline_opt.catalog import REPO_ROOT
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_SIGHUP, EXIT_SIGINT

CARD = REPO_ROOT / "instances" / "gpus" / "h100-sxm.yaml"
CLUSTER = REPO_ROOT / "instances" / "clusters" / "pod-4x-hgx-h100.yaml"
LONG = "y" * 300
"""A path component longer than any file system's NAME_MAX (255): ENAMETOOLONG."""


def query_without_gpu() -> list[str]:
    """SMALL_QUERY without its --gpu (the tests give their own)."""
    i = SMALL_QUERY.index("--gpu")
    return SMALL_QUERY[:i] + SMALL_QUERY[i + 2 :]


# ----------------------------------------------------------------------------------------------- outputs onto inputs


def test_csv_onto_the_question_file_is_refused_and_the_question_stays(tmp_path, capsys):
    question = tmp_path / "q.yaml"
    question.write_text("model: llama-3-8b\ngpu: h100-sxm\nmax-batch: 64\n")
    before = question.read_text()

    code, _, err = run(capsys, "fastest", "--question", str(question), "--csv", str(question))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert question.read_text() == before


def test_csv_onto_the_gpu_card_through_a_symlink_is_refused(tmp_path, capsys):
    card = tmp_path / "card.yaml"
    shutil.copy(CARD, card)
    link = tmp_path / "out.csv"
    link.symlink_to(card.name)

    code, _, err = run(capsys, "fastest", *query_without_gpu(), "--gpu", str(card), "--csv", str(link))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert card.read_text() == CARD.read_text()


def test_csv_onto_a_hard_link_of_the_workload_is_refused(tmp_path, capsys):
    workload = tmp_path / "w.csv"
    workload.write_text("isl,osl,weight\n1000,100,1\n")
    os.link(workload, tmp_path / "out.csv")

    code, _, err = run(capsys, "fastest", *SMALL_QUERY, "--workload", str(workload), "--csv", str(tmp_path / "out.csv"))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert workload.read_text() == "isl,osl,weight\n1000,100,1\n"


def test_plot_onto_the_cluster_file_is_refused(tmp_path, capsys):
    cluster = tmp_path / "c.yaml"
    shutil.copy(CLUSTER, cluster)

    plot = tmp_path / "p.png"
    code, _, err = run(
        capsys,
        "frontier",
        "--model",
        "llama-3-8b",
        "--cluster",
        str(cluster),
        "--tp-degrees",
        "8",
        "--pp-degrees",
        "1",
        "--points",
        "2",
        "--plot",
        str(plot),
        "--csv",
        str(cluster),
    )

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert cluster.read_text() == CLUSTER.read_text()
    assert not plot.exists()


def test_save_dir_holding_the_question_file_is_refused_before_solving(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "question.yaml").write_text("model: llama-3-8b\ngpu: h100-sxm\nmax-batch: 64\n")

    code, _, err = run(capsys, "fastest", "--question", str(folder / "question.yaml"), "--save-dir", str(folder))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--save-dir", "input file")
    assert sorted(p.name for p in folder.iterdir()) == ["question.yaml"]


def test_validate_csv_onto_the_measured_file_is_refused(tmp_path, capsys):
    measured = tmp_path / "m.csv"
    shutil.copy(REPO_ROOT / "examples" / "measured_synthetic.csv", measured)
    before = measured.read_text()

    code, _, err = run(capsys, "validate", "--measured", str(measured), "--csv", str(measured))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert measured.read_text() == before


def test_plan_csv_onto_the_cluster_file_the_fleet_names_is_refused(tmp_path, capsys):
    shutil.copy(CLUSTER, tmp_path / "pod.yaml")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "cluster: pod.yaml\nmodels:\n  - name: code\n    model: llama-3.1-8b\n    demand_tok_s: 2000\n    tpot_ms: 20\n"
    )

    code, _, err = run(capsys, "plan", str(fleet), "--csv", str(tmp_path / "pod.yaml"))

    assert_one_line(err, code, EXIT_BAD_INPUT, "--csv", "input file")
    assert (tmp_path / "pod.yaml").read_text() == CLUSTER.read_text()


def test_a_write_onto_a_file_read_in_the_same_run_is_refused_at_write_time(tmp_path):
    source = tmp_path / "in.yaml"
    source.write_text("a: 1\n")
    with files.inputs_tracked():
        files.read_text(source, "--in", files.MAX_CARD_BYTES)
        with pytest.raises(files.InvalidInput, match="must not be the input file"):
            files.write_text_atomic(source, "replaced\n", "--out")
    files.write_text_atomic(source, "replaced\n", "--out")  # outside a run nothing is tracked

    assert source.read_text() == "replaced\n"


# ----------------------------------------------------------------------------------------------- where outputs land


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_csv_onto_a_regular_file_in_dev_shm_replaces_it(capsys):
    out = Path("/dev/shm") / f"roofline-opt-test-{os.getpid()}.csv"
    out.write_text("old,header\n1,2\n")
    try:
        code, _, _ = run(capsys, *EVALUATE, "--csv", str(out))
        again, _, _ = run(capsys, *EVALUATE, "--csv", str(out))
        frame = pd.read_csv(out)
    finally:
        out.unlink(missing_ok=True)

    assert (code, again) == (EXIT_OK, EXIT_OK)
    assert list(frame["model"]) == ["llama-3-8b"]


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_cluster_build_twice_onto_dev_shm_leaves_one_graph(capsys):
    out = Path("/dev/shm") / f"roofline-opt-test-{os.getpid()}.graphml"
    try:
        first, _, _ = run(
            capsys, "cluster", "build", str(REPO_ROOT / "instances" / "clusters" / "hgx-h100.yaml"), "--out", str(out)
        )
        second, _, _ = run(
            capsys, "cluster", "build", str(REPO_ROOT / "instances" / "clusters" / "hgx-h100.yaml"), "--out", str(out)
        )
        text = out.read_text()
    finally:
        out.unlink(missing_ok=True)

    assert (first, second) == (EXIT_OK, EXIT_OK)
    assert text.count("<graphml") == 1


def test_csv_to_dev_stdout_redirected_to_a_file_writes_into_the_file(tmp_path):
    out = tmp_path / "out.txt"
    with open(out, "w") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "roofline_opt", *EVALUATE, "--csv", "/dev/stdout"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )

    assert done.returncode == EXIT_OK
    text = out.read_text()
    assert text.startswith("model,") and "bottleneck" in text.splitlines()[-2]  # the CSV, then the table


def test_concurrent_writers_of_one_csv_never_leave_a_torn_file(tmp_path):
    out = tmp_path / "out.csv"
    frames = {n: pd.DataFrame({"writer": [n] * 20_000, "value": range(20_000)}) for n in (1, 2)}
    errors: list[BaseException] = []

    def write_many(n: int) -> None:
        try:
            for _ in range(15):
                files.write_csv(out, frames[n], "--csv")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    writers = [threading.Thread(target=write_many, args=(n,)) for n in frames]
    for w in writers:
        w.start()
    seen = []
    while any(w.is_alive() for w in writers):
        if out.exists():
            seen.append(pd.read_csv(out))
    for w in writers:
        w.join()

    assert errors == []
    assert seen, "the reader never saw the file"
    for frame in [*seen, pd.read_csv(out)]:
        assert len(frame) == 20_000 and frame["writer"].nunique() == 1
    assert hidden_leftovers(tmp_path) == []


# ----------------------------------------------------------------------------------------------- a saved question


@pytest.mark.parametrize(
    "argv",
    [
        ["fastest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--max-usd-per-mtok", "1"],
        ["cheapest", *SMALL_QUERY, "--min-tok-s", "30", "--top-n", "2"],
        ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--isl", "1001", "--osl", "3"],
        ["frontier", *SMALL_QUERY, "--points", "3", "--usd-per-gpu-hour", "h100-sxm=2.123456789"],
        ["fastest", *query_without_gpu(), "--gpu", str(REPO_ROOT / "examples" / "owned-h100.yaml")],
    ],
    ids=["fastest", "top-n", "whole-requests", "price-override", "owned-card"],
)
def test_a_saved_question_repeats_exactly_the_same_answer(tmp_path, capsys, argv):
    folder = tmp_path / "run"
    code, first, _ = run(capsys, *argv, "--save-dir", str(folder), "--json")
    again, second, _ = run(capsys, argv[0], "--question", str(folder / "question.yaml"), "--json")

    def answers(text):
        parsed = json.loads(text)
        return [
            {k: v for k, v in a.items() if k != "solve_seconds"}
            for a in (parsed if isinstance(parsed, list) else [parsed])
        ]

    assert (code, again) == (EXIT_OK, EXIT_OK)
    assert answers(second) == answers(first)


def test_save_dir_answer_csv_is_formula_safe(tmp_path, capsys):
    card = tmp_path / "=cmd.yaml"
    card.write_text(CARD.read_text().replace('name: "h100-sxm"', "name: '=HYPERLINK(1)'"))
    folder = tmp_path / "run"

    code, _, err = run(capsys, "fastest", *query_without_gpu(), "--gpu", str(card), "--save-dir", str(folder))

    assert (code, err) == (EXIT_OK, "")
    assert pd.read_csv(folder / "answer.csv")["gpu"].tolist() == ["'=HYPERLINK(1)"]


# ----------------------------------------------------------------------------------------------- standard output


@pytest.mark.parametrize(
    "argv",
    [["models"], ["cluster", "show", "hgx-h100", "--json"], ["fastest", *SMALL_QUERY], EVALUATE],
    ids=["models", "cluster-show-json", "fastest", "evaluate"],
)
def test_a_closed_stdout_is_exit_2_on_one_line_not_a_lost_answer(argv):
    done = subprocess.run(
        [sys.executable, "-m", "roofline_opt", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
        check=False,
        preexec_fn=lambda: os.close(1),
    )

    assert_one_line(done.stderr.decode(), done.returncode, EXIT_BAD_INPUT, "standard output", "closed")


# ----------------------------------------------------------------------------------------------- signals


def burst(signum: int, count: int = 5, gap_s: float = 0.001) -> threading.Thread:
    """A thread that sends this process ``count`` signals ``gap_s`` apart."""

    def send() -> None:
        for _ in range(count):
            os.kill(os.getpid(), signum)
            time.sleep(gap_s)

    return threading.Thread(target=send)


@pytest.fixture
def signals_remembered():
    """The handlers cli.run installs around main: a signal outside the command is remembered, never raised."""
    previous = {s: signal.signal(s, cli._remember) for s in cli.INTERRUPTING_SIGNALS}
    yield
    for s, handler in previous.items():
        signal.signal(s, handler)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, EXIT_SIGINT), (signal.SIGHUP, EXIT_SIGHUP)])
def test_a_burst_of_signals_during_a_run_is_one_line_and_its_exit_code(
    tmp_path, capsys, monkeypatch, signals_remembered, signum, code
):
    senders = []

    def slow(rows, **_):
        senders.append(burst(signum))
        senders[0].start()
        time.sleep(5)  # the first signal interrupts this sleep
        pytest.fail("not interrupted")

    monkeypatch.setattr(api, "evaluate_setups", slow)
    monkeypatch.setattr(cli, "_received", [])
    out = tmp_path / "out.csv"

    got, _, err = run(capsys, *EVALUATE, "--csv", str(out))
    senders[0].join()

    assert_one_line(err, got, code, "interrupted", signal.Signals(signum).name)
    assert list(tmp_path.iterdir()) == []


def test_a_signal_a_library_swallowed_still_stops_every_output(tmp_path, capsys, monkeypatch):
    def swallowed(rows, **_):
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt:
            pass  # a library catching broadly
        return pd.DataFrame({"model": ["x"]})

    monkeypatch.setattr(api, "evaluate_setups", swallowed)
    out = tmp_path / "out.csv"

    code, _, err = run(capsys, *EVALUATE, "--csv", str(out))

    assert_one_line(err, code, 143, "interrupted", "SIGTERM")
    assert not out.exists() and hidden_leftovers(tmp_path) == []


def _solving(pid: int) -> bool:
    try:
        return "highspy" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see when the command runs")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_burst_into_a_running_frontier_never_kills_it_or_prints_a_traceback(tmp_path, signum):
    argv = [
        "frontier",
        "--model",
        "llama-3-70b",
        "--gpu",
        "h100-sxm,h200",
        "--weight-bits",
        "16,8",
        "--points",
        "300",
        "--csv",
        "f.csv",
    ]
    for delay_s in (0.0, 0.3):
        proc = subprocess.Popen(
            [sys.executable, "-m", "roofline_opt", *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while not _solving(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(delay_s)
        for _ in range(5):
            proc.send_signal(signum)
            time.sleep(0.001)
        _, err = proc.communicate(timeout=120)

        assert_one_line(err.decode(), proc.returncode, 128 + signum, "interrupted", signal.Signals(signum).name)
        assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------------- long names


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["fastest", "--question", f"{LONG}.yaml"], "--question"),
        (["plan", f"{LONG}.yaml"], "FLEET"),
        (["validate", "--measured", f"{LONG}.csv"], "--measured"),
        (["cluster", "show", f"{LONG}.yaml"], "FILE"),
        (["study", f"{LONG}.yaml", "--out", "o.parquet"], "STUDY"),
        (["evaluate", "--from-csv", f"{LONG}.csv"], "--from-csv"),
        (["fastest", *SMALL_QUERY, "--workload", f"{LONG}.csv"], "--workload"),
        (["fastest", *SMALL_QUERY, "--draft", f"{LONG}.yaml"], "--draft"),
        (["frontier", *SMALL_QUERY, "--observed", f"{LONG}.csv"], "--observed"),
        (["fastest", *SMALL_QUERY, "--save-dir", LONG], "--save-dir"),
        (["frontier", *SMALL_QUERY, "--plot", f"{LONG}.png"], "--plot"),
        (["fastest", *SMALL_QUERY, "--csv", "x" * 5000], "--csv"),
        (["reproduce", "--out", LONG], "--out"),
        (["fastest", "--model", "llama-3-8b", "--cluster", f"{LONG}.yaml"], "--cluster"),
        (
            [
                "cluster",
                "build",
                str(REPO_ROOT / "instances" / "clusters" / "hgx-h100.yaml"),
                "--out",
                f"{LONG}.graphml",
            ],
            "--out",
        ),
        (["fastest", "--model", LONG, "--gpu", "h100-sxm"], "--model"),
        (["fastest", "--model", "m" * 100_000, "--gpu", "h100-sxm"], "--model"),
    ],
    ids=lambda v: v if isinstance(v, str) else v[0],
)
def test_a_file_name_too_long_is_exit_2_naming_the_option(tmp_path, capsys, monkeypatch, argv, option):
    monkeypatch.chdir(tmp_path)

    code, _, err = run(capsys, *argv)

    assert_one_line(err, code, EXIT_BAD_INPUT, option)
    assert list(tmp_path.iterdir()) == []


INLINE_SPEC = (
    "{groups: ["
    + ", ".join(
        f"{{node_type: {kind}, nodes: 1, nic_gb_s: {bw}}}"
        for kind, bw in [
            ("hgx-h100", 50),
            ("hgx-a100", 25),
            ("hgx-h100", 40),
            ("hgx-a100", 20),
            ("hgx-h100", 30),
            ("hgx-a100", 30),
        ]
    )
    + "]}"
)


def test_cluster_build_takes_an_inline_spec_longer_than_a_file_name(tmp_path, capsys):
    assert len(INLINE_SPEC) > 255
    out = tmp_path / "c.graphml"

    code, text, err = run(capsys, "cluster", "build", INLINE_SPEC, "--out", str(out))

    assert (code, err) == (EXIT_OK, "")
    assert "24 x h100-sxm, 24 x a100-80gb" in text and out.exists()


def test_fastest_takes_an_inline_cluster_spec_longer_than_a_file_name(capsys):
    code, text, err = run(
        capsys,
        "fastest",
        "--model",
        "llama-3-8b",
        "--cluster",
        INLINE_SPEC,
        "--tp-degrees",
        "8",
        "--pp-degrees",
        "1",
        "--json",
    )

    assert (code, err) == (EXIT_OK, "")
    assert json.loads(text)["gpu"] in {"h100-sxm", "a100-80gb"}


def test_cluster_show_takes_an_inline_spec_longer_than_a_file_name(capsys):
    code, text, err = run(capsys, "cluster", "show", INLINE_SPEC)

    assert (code, err) == (EXIT_OK, "")
    assert "48 gpu" in text.splitlines()[0]


def test_a_question_file_above_the_size_cap_is_named_as_a_question_file(tmp_path, capsys):
    question = tmp_path / "q.yaml"
    question.write_text("model: llama-3-8b\ngpu: h100-sxm\n" + "#" * files.MAX_CARD_BYTES)

    code, _, err = run(capsys, "fastest", "--question", str(question))

    assert code == EXIT_BAD_INPUT
    assert "is larger than 1 MiB, the limit for a question file" in err
