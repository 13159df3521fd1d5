"""`roofline-opt study` answers every question of a study file on a real Dask cluster, as the single commands do.

The cluster is a Dask scheduler and two worker processes started here (the `dask scheduler` / `dask worker`
programs) and stopped afterwards; the embedded run starts its own LocalCluster.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from roofline_opt import catalog
from roofline_opt.cli import EXIT_BAD_INPUT, EXIT_OK, main
from roofline_opt.errors import InvalidInput
from roofline_opt.study import StudyQuestion, execute, load_study
from roofline_opt.study.assemble import assemble
from roofline_opt.study.runner import local_cluster, plan_tasks, run_study
from roofline_opt.study.store import Store, parts_dir

pytest.importorskip("distributed")

SMALL = {"preset": "paper", "tp_degrees": [1, 2, 4, 8], "pp_degrees": [1, 2], "max_batch": 256}
SMALL_FLAGS = ["--preset", "paper", "--tp-degrees", "1,2,4,8", "--pp-degrees", "1,2", "--max-batch", "256"]
COMPARED = (
    "gpu",
    "weight_bits",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "batch",
    "gamma",
    "replicas",
    "n_gpus",
    "total_gpus",
    "tok_s_per_request",
    "usd_per_mtok",
    "time_per_token_s",
    "throughput_tok_s",
    "mfu_fraction",
    "bottleneck",
    "fits_in_memory",
    "method",
    "solver_status",
)
"""Answer fields compared with the single commands (solve times and gaps of a warm re-solve may differ)."""


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Dask scheduler and two single-threaded workers in their own processes; all three stopped at the end."""
    from distributed import Client

    folder = tmp_path_factory.mktemp("dask")
    spec = folder / "scheduler.json"
    common = {"cwd": folder, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--scheduler-file",
                str(spec),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
            ],
            **common,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not spec.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(spec.read_text())["address"]
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "distributed.cli.dask_worker",
                        address,
                        "--nworkers",
                        "1",
                        "--nthreads",
                        "1",
                        "--no-dashboard",
                    ],
                    **common,
                )
            )
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for proc in reversed(procs):  # workers first, so none waits for a scheduler that is gone
            proc.terminate()
            proc.wait(timeout=30)


def write_study(folder: Path, name: str, study: dict[str, Any]) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


def single(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    """Exit code, JSON answer (None when there is none) and error line of one single-question command."""
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == EXIT_OK else None, captured.err.strip()


def assert_row_equals(row: pd.Series, code: int, answer: dict[str, Any] | None, err: str) -> None:
    if answer is None:
        assert row["status"] != "ok"
        # the command line appends what would make the question feasible (optimize/hints.py); a study row keeps
        # the reason alone, so the command's line is the row's message plus, at most, those hints
        expected = f"roofline-opt: {'infeasible' if row['status'] == 'infeasible' else 'error'}: {row['message']}"
        assert err == expected or err.startswith(f"{expected}; feasible with more offered: with --")
        return
    assert code == EXIT_OK and row["status"] == "ok", row["message"]
    for field in COMPARED:
        assert row[field] == answer[field], field


def test_fastest_rows_equal_the_single_commands_row_for_row(
    scheduler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = {
        "kind": "fastest",
        "fixed": SMALL,
        "axes": {"model": ["llama-3-70b", "llama-3-8b"], "gpu": ["h100-sxm"], "max_usd_per_mtok": [0.5, 2, 3, 5]},
        "questions": [{"model": "llama-3-70b", "gpu": "a100-80gb,h100-sxm"}],
    }
    result = run_study(
        load_study(write_study(tmp_path, "fastest", study)), tmp_path / "out.parquet", scheduler=scheduler
    )
    frame = result.frame
    assert len(frame) == 9 and result.answered_now == 9
    assert (frame["status"] == "infeasible").sum() == 1  # $0.5/Mtok is below Llama 3 70B's cheapest setup
    for _, row in frame.iterrows():
        argv = ["fastest", "--model", row["in_model"], "--gpu", row["in_gpu"], *SMALL_FLAGS]
        if pd.notna(row["in_max_usd_per_mtok"]):
            argv += ["--max-usd-per-mtok", str(row["in_max_usd_per_mtok"])]
        assert_row_equals(row, *single(capsys, *argv))


def test_cheapest_rows_with_a_hypothetical_part_equal_the_single_commands_with_its_card(
    scheduler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = yaml.safe_load((catalog.REPO_ROOT / "instances/gpus/h100-sxm.yaml").read_text())
    card["hbm_bytes_per_s"] = card["notebook_hbm_bytes_per_s"] = 6.6e12  # paper reads the notebook's figure
    (tmp_path / "h100-2x-hbm.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    study = {
        "kind": "cheapest",
        "fixed": {**SMALL, "model": "llama-3-70b", "gpu": "h100-sxm"},
        "axes": {"hbm_bytes_per_s": [3.3e12, 6.6e12], "min_tok_s": [20, 60, 150]},
    }
    frame = run_study(
        load_study(write_study(tmp_path, "hbm", study)), tmp_path / "hbm.parquet", scheduler=scheduler
    ).frame
    assert list(frame["status"]) == ["ok", "ok", "infeasible", "ok", "ok", "ok"]
    base, doubled = frame["usd_per_mtok"][:2].to_numpy(), frame["usd_per_mtok"][3:5].to_numpy()
    assert (doubled < base).all()  # twice the bandwidth: memory-bound decoding gets cheaper at every speed
    for _, row in frame.iterrows():
        gpu = "h100-sxm" if row["in_hbm_bytes_per_s"] == 3.3e12 else str(tmp_path / "h100-2x-hbm.yaml")
        speed = str(row["in_min_tok_s"])
        argv = ["cheapest", "--model", "llama-3-70b", "--gpu", gpu, *SMALL_FLAGS, "--min-tok-s", speed]
        assert_row_equals(row, *single(capsys, *argv))


def test_whole_request_rows_equal_the_single_commands(
    scheduler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = {
        "kind": "cheapest",
        "fixed": {**SMALL, "model": "llama-3-70b", "gpu": "h100-sxm", "osl": 250, "serving": ["agg", "disagg"]},
        "axes": {"isl": [1000, 4000], "tpot_ms": [30, 60]},
    }
    frame = run_study(
        load_study(write_study(tmp_path, "requests", study)), tmp_path / "r.parquet", scheduler=scheduler
    ).frame
    assert list(frame["status"]) == ["ok"] * 4
    for _, row in frame.iterrows():
        lengths = ["--isl", str(row["in_isl"]), "--osl", "250", "--tpot-ms", str(row["in_tpot_ms"])]
        argv = ["cheapest", "--model", "llama-3-70b", "--gpu", "h100-sxm", *SMALL_FLAGS, *lengths]
        argv += ["--serving", "agg,disagg"]
        assert_row_equals(row, *single(capsys, *argv))


def test_frontier_row_is_the_preferred_point_of_the_single_command(
    scheduler: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = {"kind": "frontier", "fixed": {**SMALL, "gpu": "h100-sxm", "points": 8}, "axes": {"model": ["llama-3-8b"]}}
    row = run_study(
        load_study(write_study(tmp_path, "frontier", study)), tmp_path / "f.parquet", scheduler=scheduler
    ).frame.iloc[0]
    code, points, _ = single(
        capsys, "frontier", "--model", "llama-3-8b", "--gpu", "h100-sxm", *SMALL_FLAGS, "--points", "8"
    )
    preferred = next(p for p in points if p["preferred"])
    assert_row_equals(row, code, preferred, "")
    assert row["frontier_points"] == len(points)
    assert json.loads(row["frontier_json"])[-1]["tok_s_per_request"] == points[-1]["tok_s_per_request"]


def test_failing_questions_are_rows_with_their_reason_and_the_study_goes_on(scheduler: str, tmp_path: Path) -> None:
    study = {
        "kind": "cheapest",
        "fixed": {**SMALL, "gpu": "h100-sxm"},
        "questions": [
            {"model": "llama-3-8b", "min_tok_s": 50},
            {"model": "no-such-model", "min_tok_s": 50},
            {"model": "llama-3.1-405b", "min_tok_s": 10, "tp_degrees": [1, 2]},  # fits on no layout of <= 4 H100s
            {"model": "llama-3-8b", "min_tok_s": 1e6},  # faster than any setup
            {"model": "llama-3-8b", "min_tok_s": "fast"},
            {"model": "llama-3-8b", "min_tok_s": 100},
        ],
    }
    frame = run_study(
        load_study(write_study(tmp_path, "fail", study)), tmp_path / "fail.parquet", scheduler=scheduler
    ).frame
    assert list(frame["status"]) == ["ok", "invalid", "infeasible", "infeasible", "invalid", "ok"]
    assert list(frame["reason"][1:5]) == ["model", "memory", "target", "min_tok_s"]
    assert "no-such-model" in frame["message"][1] and "fastest setup reaches" in frame["message"][3]


def test_an_unexpected_error_is_a_row_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(kind: str, inputs: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(execute, "answer_record", broken)
    rows = execute.answer_batch("fastest", [("a", {"model": "llama-3-8b"}), ("b", {"model": "llama-3-8b"})])
    assert [r["status"] for r in rows] == ["error", "error"]
    assert rows[0]["message"] == "RuntimeError: disk on fire" and rows[1]["question_id"] == "b"


def budget_study(folder: Path, budgets: list[float]) -> Path:
    study = {
        "kind": "fastest",
        "fixed": {**SMALL, "gpu": "h100-sxm,a100-80gb"},
        "axes": {
            "model": ["llama-3-8b", "llama-3-70b"],
            "context": [0, 4000, 8000, 12000],
            "max_usd_per_mtok": budgets,
        },
    }
    return write_study(folder, "budgets", study)


def test_a_killed_run_resumes_where_it_stopped_and_matches_an_uninterrupted_one(scheduler: str, tmp_path: Path) -> None:
    path, out = budget_study(tmp_path, [1, 3]), tmp_path / "killed.parquet"
    command = [
        sys.executable,
        "-m",
        "roofline_opt",
        "study",
        str(path),
        "--out",
        str(out),
        "--scheduler",
        scheduler,
        "--chunk-rows",
        "3",
    ]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not list(parts_dir(out).glob("part-*.parquet")) and proc.poll() is None:
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    assert not out.exists(), "the run finished before it could be killed: make the study longer"
    study = load_study(path)
    resumed = run_study(study, out, scheduler=scheduler)
    assert 3 <= resumed.answered_before < len(study.questions)
    assert resumed.answered_before + resumed.answered_now == len(study.questions) == 16
    whole = run_study(study, tmp_path / "whole.parquet", scheduler=scheduler).frame
    columns = ["question_id", *(c for c in whole.columns if c.startswith("in_")), "status", *COMPARED]
    pd.testing.assert_frame_equal(resumed.frame[columns], whole[columns])


def test_a_changed_study_answers_only_its_new_questions_and_names_them(scheduler: str, tmp_path: Path) -> None:
    out = tmp_path / "grow.parquet"
    first = run_study(load_study(budget_study(tmp_path, [2])), out, scheduler=scheduler)
    grown = run_study(load_study(budget_study(tmp_path, [2, 4])), out, scheduler=scheduler)
    assert (first.answered_now, grown.answered_before, grown.answered_now) == (8, 8, 8)
    assert all("max_usd_per_mtok=4" in text for text in grown.new_labels)
    again = run_study(load_study(budget_study(tmp_path, [4])), out, scheduler=scheduler)
    assert (again.answered_now, again.dropped, len(again.frame)) == (0, 8, 8)


def test_an_unreadable_part_is_skipped_and_its_questions_answered_again(scheduler: str, tmp_path: Path) -> None:
    path, out = budget_study(tmp_path, [2]), tmp_path / "cut.parquet"
    first = run_study(load_study(path), out, scheduler=scheduler, chunk_rows=3)
    cut = sorted(parts_dir(out).glob("part-*.parquet"))[0]
    lost = len(pd.read_parquet(cut))
    cut.write_bytes(cut.read_bytes()[:100])  # cut short, as a power cut before the disk wrote it can leave it
    again = run_study(load_study(path), out, scheduler=scheduler)
    assert (again.answered_before, again.answered_now, again.unreadable_parts) == (8 - lost, lost, (cut,))
    columns = ["question_id", "status", *COMPARED]
    pd.testing.assert_frame_equal(again.frame[columns], first.frame[columns])


def test_a_part_file_without_rows_of_answers_is_skipped(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.append([{"question_id": "a", "status": "ok"}])
    foreign = parts_dir(store.out) / "part-zz.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(foreign)
    assert store.answered() == {"a"} and store.unreadable == {foreign}


def test_a_parts_folder_blocked_by_a_file_is_one_error_naming_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.parts.write_text("not a folder")
    with pytest.raises(InvalidInput, match="--out: cannot create .*out.parquet.parts"):
        store.append([{"question_id": "a", "status": "ok"}])


def test_an_output_path_that_is_a_symlink_stays_one_and_its_target_gets_the_rows(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target, link = tmp_path / "real" / "rows.parquet", tmp_path / "link.parquet"
    target.write_bytes(b"old")
    link.symlink_to(target)
    store = Store(link)
    store.append([{"question_id": "a", "status": "ok", "tp": 8}])
    assemble(store, ["a"], pd.DataFrame({"question_id": ["a"], "in_gpu": ["h100-sxm"]}))
    assert link.is_symlink() and link.resolve() == target
    assert pd.read_parquet(target)[["question_id", "in_gpu", "tp"]].values.tolist() == [["a", "h100-sxm", 8]]


def test_questions_differing_only_in_their_target_share_a_task(tmp_path: Path) -> None:
    study = load_study(budget_study(tmp_path, [4, 3, 2, 1]))
    tasks = plan_tasks(study.questions, workers=1)
    assert [len(t) for t in tasks] == [4] * 8  # 32 questions for 8 tasks: one whole sweep each
    for sweep in tasks:
        assert [q.values["max_usd_per_mtok"] for q in sweep] == [1, 2, 3, 4]
        assert len({(q.values["model"], q.values["context"]) for q in sweep}) == 1
    singles = [StudyQuestion(str(i), "frontier", (("context", i),)) for i in range(64)]
    assert [len(t) for t in plan_tasks(singles, workers=1)] == [8] * 8  # questions of their own packed together


def test_the_id_is_the_resolved_question_not_its_spelling(tmp_path: Path) -> None:
    spelled = {
        "kind": "cheapest",
        "questions": [
            {"model": "llama-3-8b", "gpu": "h100-sxm", "min_tok_s": 50},
            {"model": "llama-3-8b", "gpu": "h100-sxm", "min-tok-s": "5e1", "max_batch": 4096.0, "preset": "default"},
            {"model": "llama-3-8b", "gpu": "h100-sxm", "min_tok_s": 50, "context": 4000},
        ],
    }
    ids = [q.id for q in load_study(write_study(tmp_path, "ids", spelled)).questions]
    assert ids[0] == ids[1] != ids[2]


def test_a_question_drafting_with_mtp_is_answered_with_the_models_own_module(tmp_path: Path) -> None:
    """``draft: mtp`` names no card of its own (the module is the model's, whose card is in the id): it drafts."""
    question = {"model": "deepseek-v3", "gpu": "h200", "weight_bits": 8, "draft": "mtp", "gamma_max": 1}
    study = {"kind": "fastest", "questions": [{**question, "tp_degrees": [8], "pp_degrees": [1], "max_batch": 64}]}
    (q,) = load_study(write_study(tmp_path, "mtp", study)).questions
    row = execute.answer_row(q.kind, q.id, q.values)
    assert row["status"] == "ok", row["message"]
    assert row["gamma"] == 1


@pytest.mark.parametrize(
    ("study", "field"),
    [
        ({"kind": "fastest", "axes": {"model": ["llama-3-8b"], "gpu": ["h100-sxm"], "tp_degree": [1]}}, "axes"),
        ({"kind": "slowest", "axes": {"model": ["llama-3-8b"]}}, "kind"),
        ({"kind": "fastest", "axes": {"gpu": ["h100-sxm"]}}, "question 1"),
        ({"kind": "fastest"}, "axes"),
        ({"kind": "fastest", "axis": {"model": ["llama-3-8b"]}}, "key"),
    ],
)
def test_a_bad_study_file_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], study: dict[str, Any], field: str
) -> None:
    path = write_study(tmp_path, "bad", study)
    with pytest.raises(InvalidInput) as info:
        load_study(path)
    assert field in info.value.field
    assert main(["study", str(path), "--out", str(tmp_path / "bad.parquet")]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and not (tmp_path / "bad.parquet").exists()


def test_embedded_run_writes_parquet_csv_summary_plot_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    study = catalog.REPO_ROOT / "instances/studies/hbm-value.yaml"
    argv = ["study", str(study), "--workers", "1", "--csv", "hbm.csv", "--summary-plot", "hbm.png"]
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    frame = pd.read_parquet(tmp_path / "hbm-value.parquet")
    assert len(frame) == len(load_study(study).questions) == len(pd.read_csv(tmp_path / "hbm.csv"))
    assert (tmp_path / "hbm.png").read_bytes().startswith(b"\x89PNG")
    table = (tmp_path / "hbm.md").read_text()
    assert table.strip() in out and "| model | setting |" in table
    ok = frame[frame["status"] == "ok"]
    assert len(ok) and all(math.isfinite(v) for v in ok["usd_per_mtok"])
    assert main(["study", str(study)]) == EXIT_OK  # again: nothing new, no cluster started
    again = capsys.readouterr().out
    assert f"{len(frame)} answered before" in again and "0 new" in again and "answered 0 now" in again
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "hbm-value.parquet"), frame)


def test_other_commands_do_not_import_dask() -> None:
    """(pyarrow cannot be kept out: pandas 3 imports it whenever it is installed.)"""
    code = (
        "import sys; from roofline_opt.cli import main; main(['gpus']); "
        "print(sorted(m for m in ('dask', 'distributed') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_the_progress_bar_shows_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from roofline_opt.report import progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    clock = iter([100.0, 130.0, 190.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    terminal = Terminal()
    with progress.ProgressBar(terminal, width=10, eta=True) as bar:
        bar(1, 4)  # 30 s for one question: 90 s left
        bar(2, 4)  # 90 s for two: 90 s left
    drawn = terminal.getvalue().split("\r")[1:]
    assert drawn == ["[##        ] 1/4  eta 1m30s\x1b[K", "[#####     ] 2/4  eta 1m30s\x1b[K\n"]
    assert progress.format_duration(3725) == "1h02m" and progress.format_duration(59.4) == "59s"


def test_an_unreachable_scheduler_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from roofline_opt.study import runner

    monkeypatch.setattr(runner, "CONNECT_TIMEOUT", "1s")
    path = budget_study(tmp_path, [2])
    out = tmp_path / "nowhere.parquet"
    assert main(["study", str(path), "--out", str(out), "--scheduler", "tcp://127.0.0.1:9"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("roofline-opt: error: --scheduler: must be the address of a running Dask scheduler")
    assert err.count("\n") == 1 and not out.exists() and not list(parts_dir(out).glob("*"))


def test_a_worker_prepares_a_sweep_once_and_answers_as_a_fresh_question(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roofline_opt import api

    prepared = []
    monkeypatch.setattr(api, "prepared", lambda q, **kw: prepared.append(q) or api.prepare(q))
    execute._cache().clear()
    task = plan_tasks(load_study(budget_study(tmp_path, [1, 2, 3, 4])).questions, workers=1)[0]
    rows = execute.answer_batch("fastest", [(q.id, q.values) for q in task])
    assert len(prepared) == 1 and [r["status"] for r in rows] == ["ok"] * 4
    for q, row in zip(task, rows, strict=True):
        fresh = api.fastest_answer(prepared[0], max_usd_per_mtok=q.values["max_usd_per_mtok"]).to_record()
        assert {k: row[k] for k in COMPARED} == {k: fresh[k] for k in COMPARED}


def test_plan_rows_equal_the_single_fleet_plans(scheduler: str, tmp_path: Path) -> None:
    from roofline_opt import api

    fleets = [str(catalog.REPO_ROOT / "instances/fleets/chat-and-code.yaml"), str(tmp_path / "missing.yaml")]
    study = {"kind": "plan", "axes": {"fleet": fleets}}
    frame = run_study(
        load_study(write_study(tmp_path, "plan", study)), tmp_path / "plan.parquet", scheduler=scheduler
    ).frame
    assert list(frame["status"]) == ["ok", "invalid"] and "missing.yaml" in frame["message"][1]
    plan = api.plan(fleets[0])
    assert frame["usd_per_hour"][0] == plan.cluster["usd_per_hour"]
    assert frame["solver_status"][0] == plan.solve["status"]
    assert json.loads(frame["models_json"][0]) == json.loads(json.dumps(plan.models, default=str))


def test_chunks_keep_whole_numbers_and_yes_no_where_some_rows_lack_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    answered = {"question_id": "a", "status": "ok", "tp": 8, "fits_in_memory": True, "usd_per_mtok": 1.5}
    store.append([answered, {"question_id": "b", "status": "infeasible", "reason": "memory"}])
    store.append([{"question_id": "c", "status": "ok", "tp": 4, "fits_in_memory": False, "usd_per_mtok": 2}])
    rows = store.rows().set_index("question_id")
    assert str(rows["tp"].dtype) == "Int64" and str(rows["fits_in_memory"].dtype) == "boolean"
    assert rows["tp"].tolist() == [8, pd.NA, 4] and rows["fits_in_memory"].tolist() == [True, pd.NA, False]
    assert rows.loc[["a", "c"], "usd_per_mtok"].tolist() == [1.5, 2.0] and pd.isna(rows.loc["b", "usd_per_mtok"])
    assert rows.loc["b", "reason"] == "memory" and pd.isna(rows.loc["a", "reason"])


def test_a_chunk_mixing_types_in_a_column_keeps_them_as_text(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.append([{"question_id": "a", "status": "ok", "tp": 8}, {"question_id": "b", "status": "ok", "tp": "16,8"}])
    assert store.rows()["tp"].tolist() == ["8", "16,8"]


def test_the_embedded_cluster_has_quiet_workers_with_the_solver_stack_loaded_before_any_task(tmp_path: Path) -> None:
    from distributed import Client

    def state() -> tuple[Any, bool]:
        import dask

        return dask.config.get("distributed.worker.profile.enabled"), "roofline_opt.study.execute" in sys.modules

    with local_cluster(1) as cluster, Client(cluster) as client:
        assert list(client.run(state).values()) == [(False, True)]
        questions = load_study(budget_study(tmp_path, [2.0])).questions[:3]
        batch = execute.Batch("fastest", tuple((q.id, q.values) for q in questions))
        answers = client.submit(execute.answer_task, batch, pure=False).result()
    execute._cache().clear()
    expected = execute.answer_batch("fastest", batch.items)
    assert [row["question_id"] for row in answers.rows] == [q.id for q in questions]
    assert [row["status"] for row in answers.rows] == [row["status"] for row in expected] == ["ok"] * 3
    assert [row["usd_per_mtok"] for row in answers.rows] == [row["usd_per_mtok"] for row in expected]
