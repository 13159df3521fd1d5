"""A study streams (issue 29): its questions are made when asked for, its tasks are planned from compact arrays, and
its output is assembled a row group at a time, with the same rows as assembling it whole."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from roofline_opt.study import assemble as assemble_module
from roofline_opt.study import load_study
from roofline_opt.study.assemble import assemble
from roofline_opt.study.runner import inputs_frame, plan_tasks, study_inputs, task_indices
from roofline_opt.study.spec import question_id
from roofline_opt.study.store import Store

GRID = {
    "kind": "fastest",
    "fixed": {"gpu": "h100-sxm", "tp_degrees": [1, 2]},
    "axes": {"model": ["llama-3-8b", "llama-3-70b"], "context": [1000, 2000, 4000], "max_usd_per_mtok": [1, 2.5]},
    "questions": [{"model": "llama-3-8b", "context": 500}, {"model": "llama-3-8b", "context": 500, "weight_bits": 8}],
}


def write(folder: Path, study: dict) -> Path:
    path = folder / "grid.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False), encoding="utf-8")
    return path


def test_questions_are_the_axes_product_last_axis_fastest_then_the_listed_ones(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, GRID))
    axes = GRID["axes"]
    expected = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
    expected += GRID["questions"]

    given = [{k: q.values[k] for k in ("model", "context", "max_usd_per_mtok")} for q in study.questions]

    assert len(study.questions) == 14
    assert given[:12] == expected[:12]
    assert [g["context"] for g in given[12:]] == [500, 500]
    assert study.questions[-1].values["weight_bits"] == 8


def test_a_question_made_on_demand_has_the_id_of_its_resolved_inputs(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, GRID))

    for q in study.questions:
        assert q.id == question_id("fastest", q.values)
    assert [q.id.encode() for q in study.questions] == list(study.questions.ids)


def test_tasks_from_the_arrays_equal_tasks_from_the_questions_themselves(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, GRID))
    listed = list(study.questions)

    from_arrays = [[q.id for q in task] for task in plan_tasks(study.questions, workers=1)]
    from_list = [[q.id for q in task] for task in plan_tasks(listed, workers=1)]

    assert from_arrays == from_list
    assert sorted(i for task in task_indices(study.questions, 1) for i in task) == list(range(14))


def test_a_sweep_s_targets_go_to_one_task_in_ascending_order(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, {**GRID, "axes": {**GRID["axes"], "max_usd_per_mtok": [9, 1, 4]}}))

    for task in plan_tasks(study.questions, workers=1):
        grid = [q for q in task if q.values["max_usd_per_mtok"] is not None]
        for _, sweep in itertools.groupby(grid, key=lambda q: (q.values["model"], q.values["context"])):
            budgets = [q.values["max_usd_per_mtok"] for q in sweep]
            assert len(budgets) == 3
            assert budgets == sorted(budgets)


def shuffled_store(folder: Path, ids: list[str]) -> Store:
    """Every question answered once in a shuffled order over parts of 3 rows, the first one answered twice (its
    later row wins), plus a row of a question the study no longer has; tp mixes whole numbers and text."""
    store = Store(folder / "out.parquet")
    order = np.random.default_rng(1).permutation(len(ids))
    rows = [{"question_id": ids[i], "status": "ok", "tp": int(i) if i % 2 else f"{i},8", "x": float(i)} for i in order]
    rows[-1:-1] = [{"question_id": "gone", "status": "ok", "tp": 1, "x": 0.5}]
    for start in range(0, len(rows), 3):
        store.append(rows[start : start + 3])
    store.append([{"question_id": ids[0], "status": "infeasible", "message": "again"}])
    return store


def test_assembling_by_row_groups_gives_the_rows_of_assembling_whole(tmp_path: Path, monkeypatch) -> None:
    study = load_study(write(tmp_path, GRID))
    ids = [q.id for q in study.questions] + [study.questions[3].id]  # a question listed twice
    store = shuffled_store(tmp_path, ids[:10])
    whole = assemble(store, ids, inputs_frame(study).iloc[list(range(14)) + [3]].reset_index(drop=True)).frame()
    monkeypatch.setattr(assemble_module, "ROWS_PER_GROUP", 4)

    grouped = assemble(store, ids, inputs_frame(study).iloc[list(range(14)) + [3]].reset_index(drop=True)).frame()

    pd.testing.assert_frame_equal(grouped, whole)
    assert grouped["question_id"].tolist() == ids
    assert grouped.loc[0, ["status", "message"]].tolist() == ["infeasible", "again"]
    assert grouped["status"].tolist()[10:14] == ["unanswered"] * 4
    assert grouped.loc[3, "x"] == grouped.loc[14, "x"]
    assert "gone" not in set(grouped["question_id"])


def test_a_column_mixing_whole_numbers_and_text_over_parts_is_text(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, GRID))
    ids = [q.id for q in study.questions]

    frame = assemble(shuffled_store(tmp_path, ids), ids, inputs_frame(study)).frame()

    assert frame.loc[1, "tp"] == "1" and frame.loc[2, "tp"] == "2,8"
    assert frame["x"].dtype == float


def test_the_study_s_input_columns_keep_one_type_over_every_row_group(tmp_path: Path) -> None:
    study = load_study(write(tmp_path, GRID))
    inputs = study_inputs(study)

    types = {f.name: str(f.type) for f in inputs.schema}

    assert types["in_context"] == "int64" and types["in_max_usd_per_mtok"] == "double"
    assert types["in_weight_bits"] == "int64"  # 8 in one listed question, missing (null) elsewhere
    first, last = inputs.frame(0, 4), inputs.frame(12, 14)
    assert list(first.dtypes) == list(last.dtypes)
    assert last["in_weight_bits"].tolist()[1] == 8 and pd.isna(first["in_weight_bits"]).all()


def test_the_csv_holds_the_rows_of_the_parquet_output(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(assemble_module, "ROWS_PER_GROUP", 4)
    study = load_study(write(tmp_path, GRID))
    ids = [q.id for q in study.questions]

    frame = assemble(shuffled_store(tmp_path, ids), ids, study_inputs(study), csv=tmp_path / "rows.csv").frame()

    csv = pd.read_csv(tmp_path / "rows.csv")
    assert csv["question_id"].tolist() == ids
    assert csv["status"].tolist() == frame["status"].tolist()
    assert not list(tmp_path.glob("out.parquet.parts/.spill-*"))


@pytest.mark.parametrize("rows_per_group", [1, 5, 100])
def test_the_output_has_one_row_per_question_whatever_the_row_group_size(tmp_path, monkeypatch, rows_per_group):
    monkeypatch.setattr(assemble_module, "ROWS_PER_GROUP", rows_per_group)
    study = load_study(write(tmp_path, GRID))
    ids = [q.id for q in study.questions]

    assembled = assemble(shuffled_store(tmp_path, ids), ids, study_inputs(study))

    assert assembled.rows == len(assembled.frame()) == 14
    assert assembled.status_counts == {"ok": 13, "infeasible": 1}
