"""A study's outputs: caps on what it starts, outputs that never replace its inputs, and parts and results that
appear whole, together or not at all (issues 27 and 29)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from roofline_opt import files
from roofline_opt.cli import EXIT_BAD_INPUT, main
from roofline_opt.errors import InvalidInput
from roofline_opt.study import load_study, summary
from roofline_opt.study.assemble import assemble
from roofline_opt.study.runner import MAX_WORKERS, run_study
from roofline_opt.study.store import Store, parts_dir

pytest.importorskip("distributed")

STUDY = {
    "name": "outputs",
    "kind": "cheapest",
    "fixed": {"preset": "paper", "gpu": "h100-sxm", "tp_degrees": [1, 2], "pp_degrees": [1]},
    "axes": {"model": ["llama-3-8b"], "min_tok_s": [25, 50]},
}
INPUTS = pd.DataFrame({"question_id": ["a", "b"], "in_gpu": ["h100-sxm", "h200"]})


def study_file(folder: Path) -> Path:
    path = folder / "outputs.yaml"
    path.write_text(yaml.safe_dump(STUDY), encoding="utf-8")
    return path


def answered_store(folder: Path) -> Store:
    store = Store(folder / "out.parquet")
    store.append([{"question_id": "a", "status": "ok", "tp": 1, "message": "answer-a"}])
    store.append([{"question_id": "b", "status": "ok", "tp": 2, "message": "answer-b"}])
    return store


def test_workers_beyond_the_cap_are_refused_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["study", str(study_file(tmp_path)), "--workers", "1000000", "--out", str(tmp_path / "o.parquet")])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_INPUT
    assert err == f"roofline-opt: error: --workers: must be at most {MAX_WORKERS}. Got '1000000' instead."
    assert not (tmp_path / "o.parquet").exists() and not parts_dir(tmp_path / "o.parquet").exists()


def test_the_api_refuses_workers_beyond_the_cap_too(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=f"--workers: must be at most {MAX_WORKERS}"):
        run_study(load_study(study_file(tmp_path)), tmp_path / "o.parquet", workers=MAX_WORKERS + 1)


@pytest.mark.parametrize("flag", ["--csv", "--summary-md"])
def test_an_output_naming_the_study_file_is_refused_and_the_file_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    path = study_file(tmp_path)
    before = path.read_bytes()
    link = tmp_path / "link.md"
    link.symlink_to(path)
    code = main(["study", str(path), flag, str(link), "--out", str(tmp_path / "o.parquet")])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_INPUT and err.startswith(f"roofline-opt: error: {flag}: must not be the input file")
    assert path.read_bytes() == before


def test_an_output_naming_a_file_the_questions_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload = tmp_path / "workload.yaml"
    workload.write_text("classes: []\n", encoding="utf-8")
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "fixed": {**STUDY["fixed"], "workload": str(workload)}}), "utf-8")
    code = main(["study", str(path), "--csv", str(workload), "--out", str(tmp_path / "o.parquet")])
    assert code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("roofline-opt: error: --csv: must not be the input file")
    assert workload.read_text(encoding="utf-8") == "classes: []\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_csv_that_cannot_be_written_leaves_no_parquet_output(tmp_path: Path) -> None:
    store = answered_store(tmp_path)
    with pytest.raises(InvalidInput, match="--csv: cannot write '/dev/full'"):
        assemble(store, ["a", "b"], INPUTS, csv=Path("/dev/full"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet.parts"]


def test_a_csv_that_cannot_be_written_keeps_the_previous_parquet_output(tmp_path: Path) -> None:
    store = answered_store(tmp_path)
    assemble(store, ["a"], INPUTS.iloc[:1])
    before = store.out.read_bytes()
    with pytest.raises(InvalidInput, match="--csv: cannot write"):
        assemble(store, ["a", "b"], INPUTS, csv=tmp_path / "no-such-folder" / "rows.csv")
    assert store.out.read_bytes() == before


def test_parquet_and_csv_hold_the_same_rows(tmp_path: Path) -> None:
    store = answered_store(tmp_path)
    assemble(store, ["a", "b"], INPUTS, csv=tmp_path / "rows.csv")
    parquet, csv = pd.read_parquet(store.out), pd.read_csv(tmp_path / "rows.csv")
    assert parquet["question_id"].tolist() == csv["question_id"].tolist() == ["a", "b"]
    assert parquet["tp"].tolist() == csv["tp"].tolist() == [1, 2]


def test_an_output_symlink_to_a_regular_file_of_another_name_gets_parquet(tmp_path: Path) -> None:
    target, link = tmp_path / "rows.dat", tmp_path / "link.parquet"
    target.write_text("not parquet", encoding="utf-8")
    link.symlink_to(target)
    store = Store(link)
    store.append([{"question_id": "a", "status": "ok"}])
    assemble(store, ["a"], INPUTS.iloc[:1])
    assert link.is_symlink() and pq.read_table(target).column("question_id").to_pylist() == ["a"]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _offset_of(path: Path, text: bytes) -> int:
    offset = path.read_bytes().find(text)
    assert offset >= 0
    return offset


def test_a_changed_byte_in_a_part_s_values_makes_it_unreadable_not_another_answer(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.append([{"question_id": "a", "status": "ok", "message": "answer-text"}])
    part = next(store.parts.iterdir())
    _flip(part, _offset_of(part, b"answer-text"))
    assert store.answered() == set() and store.unreadable == {part}


def test_a_changed_column_name_in_a_part_s_footer_makes_it_unreadable(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.append([{"question_id": "a", "status": "ok", "usd_per_mtok": 1.5}])
    part = next(store.parts.iterdir())
    _flip(part, _offset_of(part, b"usd_per_mtok"))  # the footer's schema (after the values), no page checksum
    assert store.answered() == set() and store.unreadable == {part}


def test_a_part_with_text_that_is_not_utf8_is_unreadable(tmp_path: Path) -> None:
    store = Store(tmp_path / "out.parquet")
    store.append([{"question_id": "a", "status": "ok"}])
    part = next(store.parts.iterdir())
    pq.write_table(pq.read_table(part).set_column(1, "status", [["\udcff".encode("utf-8", "surrogatepass")]]), part)
    assert store.answered() == set() and store.unreadable == {part}


def test_a_damaged_part_then_a_re_run_neither_loses_nor_duplicates_rows(tmp_path: Path) -> None:
    store = answered_store(tmp_path)
    damaged = sorted(store.parts.iterdir())[0]
    _flip(damaged, _offset_of(damaged, b"answer-a"))
    assert store.answered() == {"b"}
    store.append([{"question_id": "a", "status": "ok", "tp": 1, "message": "answer-a"}])  # the re-run's answer
    frame = assemble(store, ["a", "b"], INPUTS).frame()
    assert frame["question_id"].tolist() == ["a", "b"] and frame["tp"].tolist() == [1, 2]
    assert pd.read_parquet(store.out)["question_id"].tolist() == ["a", "b"]


def _with_summary(folder: Path, summary: dict[str, str]) -> Path:
    path = folder / "outputs.yaml"
    path.write_text(yaml.safe_dump({**STUDY, "summary": summary}), encoding="utf-8")
    return path


def test_a_summary_x_that_is_no_input_of_the_study_is_refused_before_any_question_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _with_summary(tmp_path, {"x": "nope"})
    out = tmp_path / "o.parquet"
    code = main(["study", str(path), "--out", str(out), "--summary-md", str(tmp_path / "s.md")])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_BAD_INPUT
    assert err.startswith(f"roofline-opt: error: {path}: summary: x: must be one of ")
    assert not out.exists() and not parts_dir(out).exists()


def test_an_unknown_summary_key_is_refused_naming_the_keys_it_may_set(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"summary: key: must be one of x, y, facet\. Got 'colour' instead"):
        load_study(_with_summary(tmp_path, {"colour": "model"}))


def test_a_summary_input_may_be_spelled_as_its_flag(tmp_path: Path) -> None:
    assert load_study(_with_summary(tmp_path, {"x": "--min-tok-s", "facet": "model"})).summary == {
        "x": "min_tok_s",
        "facet": "model",
    }


def _answered_frame(status: str) -> pd.DataFrame:
    """The output of STUDY's two questions as the summary reads it: inputs, status and one figure when answered."""
    fixed = {f"in_{k}": [str(v)] * 2 for k, v in STUDY["fixed"].items()}
    frame = pd.DataFrame(fixed | {"in_model": ["llama-3-8b"] * 2, "in_min_tok_s": [25, 50], "status": [status] * 2})
    return frame.assign(usd_per_mtok=[1.5, 2.5]) if status == "ok" else frame


def test_a_summary_y_naming_no_output_column_is_refused_suggesting_the_closest(tmp_path: Path) -> None:
    study = load_study(_with_summary(tmp_path, {"y": "usd_per_mtk"}))

    with pytest.raises(InvalidInput) as exc:
        summary.markdown(_answered_frame("ok"), study)

    assert exc.value.field == f"{study.path}: summary: y"
    assert exc.value.message == (
        "must name a column of the study's output, like usd_per_mtok. Got 'usd_per_mtk' instead. "
        "Did you mean 'usd_per_mtok'?"
    )


def test_a_summary_y_of_a_study_without_answers_shows_the_statuses(tmp_path: Path) -> None:
    study = load_study(_with_summary(tmp_path, {"y": "usd_per_mtok"}))

    assert summary.layout(_answered_frame("infeasible"), study).y == "status"


def test_a_summary_y_naming_no_output_column_writes_no_summary_or_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _with_summary(tmp_path, {"y": "usd_per_mtk"})
    views = [tmp_path / "s.md", tmp_path / "s.html"]
    code = main(["study", str(path), "--out", str(tmp_path / "o.parquet"), "--workers", "1"] + _views(views))

    err = capsys.readouterr().err
    assert code == EXIT_BAD_INPUT and err.count("\n") == 1
    assert err.startswith(f"roofline-opt: error: {path}: summary: y: must name a column of the study's output")
    assert not any(view.exists() for view in views)


def _views(paths: list[Path]) -> list[str]:
    return ["--summary-md", str(paths[0]), "--html", str(paths[1])]


def test_loading_a_study_reports_progress_until_every_question_is_made(tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    study = load_study(study_file(tmp_path), lambda done, total: calls.append((done, total)))
    assert len(study.questions) == 2
    assert calls == [(0, 2), (2, 2)]


def test_a_study_file_above_the_size_cap_is_named_as_a_study_file(tmp_path: Path) -> None:
    path = study_file(tmp_path)
    path.write_text(path.read_text() + "#" * files.MAX_CARD_BYTES)
    with pytest.raises(InvalidInput, match="is larger than 1 MiB, the limit for a study file"):
        load_study(path)
