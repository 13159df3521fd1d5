"""A study's output assembled by row groups: one row per question in study order, never all rows in memory.

The parts are read once to find each question's latest row, once more to spill those rows into one Arrow file per
row group of ``ROWS_PER_GROUP`` questions (``OUT.parts/.spill-*``, removed after), and each row group is then read,
put in study order, joined with its questions' inputs and written as one Parquet row group (and CSV lines). The
columns are the union of the parts' columns, each with one type over all parts: a type where they agree, a float
where they mix integers and floats, text otherwise.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from roofline_opt import files
from roofline_opt.study.store import NULLABLE, Store, _arrow_safe, read_part_table

ROWS_PER_GROUP = 50_000
"""Questions per row group of the output: its rows in memory at once while assembling (some 50 MB)."""
SPILL_ROWS = 4096
"""Rows a row group's spill keeps in memory before writing them as one batch (a few MB over all row groups)."""
SPILL_PIECES = 32
"""Pieces (one per part) a row group's spill holds before copying them into one."""
NOT_ANSWERED = "not answered (the run was interrupted)"


@dataclass(frozen=True)
class Inputs:
    """The questions' inputs: ``frame(start, stop)`` gives rows ``[start, stop)`` (``question_id`` and the ``in_``
    columns), ``schema`` their Arrow types over the whole study, so every row group has the same columns."""

    frame: Callable[[int, int], pd.DataFrame]
    schema: pa.Schema

    @classmethod
    def of_frame(cls, frame: pd.DataFrame) -> Inputs:
        """The inputs of a frame held whole."""
        safe = _arrow_safe(frame)
        schema = pa.Schema.from_pandas(safe, preserve_index=False)
        return cls(lambda start, stop: safe.iloc[start:stop].reset_index(drop=True), schema)


@dataclass
class Assembled:
    """What ``assemble`` wrote: the output's path, the count of each status, the number of rows; ``frame()`` reads
    the output back whole (from the file, or kept from the run when the output is a device)."""

    out: Path
    status_counts: dict[str, int]
    rows: int
    kept: list[pd.DataFrame] | None = field(default=None, repr=False)

    def frame(self) -> pd.DataFrame:
        if self.kept is not None:
            return pd.concat(self.kept, ignore_index=True) if self.kept else pd.DataFrame()
        return pq.read_table(self.out).to_pandas(types_mapper=NULLABLE.get)


def assemble(
    store: Store, ids: Sequence[str] | np.ndarray, inputs: Inputs | pd.DataFrame, csv: Path | None = None
) -> Assembled:
    """Write the output of ``store`` for the questions ``ids`` (study order) atomically, and a CSV on request.

    Parameters
    ----------
    store : Store
        The part files.
    ids : sequence of str
        The study's question ids in study order.
    inputs : Inputs or DataFrame
        The questions' inputs, by position.
    csv : Path, optional
        A formula-safe CSV of the same rows, written once the Parquet file is complete and before it replaces the
        output (both appear together or neither).

    Returns
    -------
    Assembled
    """
    inputs = inputs if isinstance(inputs, Inputs) else Inputs.of_frame(inputs)
    keys = np.asarray(ids if isinstance(ids, np.ndarray) else [str(i) for i in ids]).astype(bytes)
    unique, where = np.unique(keys, return_inverse=True)
    where = where.ravel()
    latest_part = np.full(len(unique), -1, dtype=np.int64)
    latest_row = np.zeros(len(unique), dtype=np.int64)
    parts: list[Path] = []
    schemas: list[pa.Schema] = []
    for path, table in store.readable_parts():
        found, rows = _latest_positions(unique, table)
        latest_part[found], latest_row[found] = len(parts), rows
        parts.append(path)
        schema = table.schema.remove_metadata()
        if not any(schema.equals(seen) for seen in schemas):  # thousands of parts share a handful of schemas
            schemas.append(schema)
    schema = _answer_schema(schemas)
    special = _is_device(store.out)
    with _Spill(store.parts, schema, len(keys)) as spill:
        part_at = latest_part[where]
        order = np.argsort(part_at, kind="stable")
        bounds = np.searchsorted(part_at[order], np.arange(len(parts) + 1))
        for p, path in enumerate(parts):
            positions = order[bounds[p] : bounds[p + 1]]
            if len(positions):
                table = _conform(read_part_table(path), schema)
                spill.add(table.take(pa.array(latest_row[where[positions]])), positions)
        counts: Counter[str] = Counter()
        kept: list[pd.DataFrame] | None = [] if special else None

        columns = output_schema(inputs.schema, schema)

        def groups() -> Iterator[tuple[int, pd.DataFrame]]:
            for start, stop, answers in spill.groups():
                yield start, _joined(inputs.frame(start, stop), answers, start, columns)

        def write(f: Any) -> None:
            writer = None
            for _, frame in groups():
                counts.update(frame["status"])
                if kept is not None:
                    kept.append(frame)
                table = _table(frame, columns)
                writer = writer or pq.ParquetWriter(f, columns)
                writer.write_table(table)
            if writer is not None:
                writer.close()
            if csv is not None:
                files.write_output(csv, lambda c: _write_csv(c, groups()), "--csv")

        files.write_output(store.out, write, "--out")
    return Assembled(store.out, dict(counts), len(keys), kept)


def _is_device(path: Path) -> bool:
    try:
        return not os.path.isfile(path) and os.path.exists(path)
    except OSError:
        return False


def _write_csv(f: Any, groups: Iterator[tuple[int, pd.DataFrame]]) -> None:
    for start, frame in groups:
        f.write(files.csv_text(frame, header=start == 0).encode("utf-8"))


def _latest_positions(unique: np.ndarray, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``unique`` of the part's questions that the study has, and the row of each (the last row of a
    question the part holds twice)."""
    ids = np.asarray([str(v).encode() for v in table.column("question_id").to_pylist()], dtype=bytes)
    rows = np.arange(len(ids))[::-1]
    ids = ids[::-1]
    ids, first = np.unique(ids, return_index=True)  # the first of the reversed rows: the part's last row of each id
    rows = rows[first]
    at = np.clip(np.searchsorted(unique, ids), 0, max(len(unique) - 1, 0))
    known = (unique[at] == ids) if len(unique) else np.zeros(len(ids), dtype=bool)
    return at[known], rows[known]


def _answer_schema(schemas: list[pa.Schema]) -> pa.Schema:
    """The union of the parts' columns in order of appearance, each with one type (see the module's docstring)."""
    types: dict[str, set[pa.DataType]] = {}
    for schema in schemas:
        for f in schema:
            types.setdefault(f.name, set())
            if not pa.types.is_null(f.type):
                types[f.name].add(f.type)
    fields = []
    for name, seen in types.items():
        if len(seen) <= 1:
            fields.append(pa.field(name, next(iter(seen), pa.null())))
        elif all(pa.types.is_integer(t) or pa.types.is_floating(t) for t in seen):
            fields.append(pa.field(name, pa.float64()))
        else:
            fields.append(pa.field(name, pa.string()))
    return pa.schema(fields)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A part's table with the output's columns and types (absent columns null; mixed types as text)."""
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        column = table.column(f.name)
        if column.type == f.type:
            columns.append(column)
        elif pa.types.is_string(f.type) and not pa.types.is_null(column.type):
            columns.append(pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string()))
        else:
            columns.append(column.cast(f.type))
    return pa.Table.from_arrays(columns, schema=schema)


class _Spill:
    """Rows spilled into one Arrow stream file per row group, with their study positions; removed on exit."""

    def __init__(self, folder: Path, schema: pa.Schema, n: int) -> None:
        self.folder = folder
        self.schema = schema.append(pa.field(_POSITION, pa.int64()))
        self.n = n
        self.groups_n = -(-n // ROWS_PER_GROUP)
        self._writers: dict[int, tuple[Any, Path]] = {}
        self._buffered: dict[int, list[pa.Table]] = {}
        self._buffered_rows: dict[int, int] = {}

    def __enter__(self) -> _Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        for writer, path in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(OSError):
                path.unlink()
        self._writers.clear()

    def add(self, table: pa.Table, positions: np.ndarray) -> None:
        """Rows with their study positions; kept per row group until SPILL_ROWS of them are written at once."""
        order = np.argsort(positions, kind="stable")
        table = table.take(pa.array(order)).append_column(_POSITION, pa.array(positions[order], pa.int64()))
        group = positions[order] // ROWS_PER_GROUP
        cuts = np.flatnonzero(np.diff(group)) + 1
        for start, stop in zip(np.r_[0, cuts], np.r_[cuts, len(group)], strict=True):
            g = int(group[start])
            pieces = self._buffered.setdefault(g, [])
            pieces.append(table.slice(start, stop - start))
            self._buffered_rows[g] = self._buffered_rows.get(g, 0) + int(stop - start)
            if self._buffered_rows[g] >= SPILL_ROWS:
                self._flush(g)
            elif len(pieces) >= SPILL_PIECES:
                self._buffered[g] = [_compact(pieces)]

    def _flush(self, g: int) -> None:
        if self._buffered.get(g):
            self._writer(g).write_table(_compact(self._buffered.pop(g)))
        self._buffered_rows[g] = 0

    def _writer(self, g: int) -> Any:
        if g not in self._writers:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f".spill-{os.getpid()}-{g:06d}.arrow"
            self._writers[g] = (ipc.new_stream(pa.OSFile(str(path), "wb"), self.schema), path)
        return self._writers[g][0]

    def groups(self) -> Iterator[tuple[int, int, pa.Table]]:
        """(start, stop, rows of questions start..stop-1 that have answers, with their positions) per row group."""
        for g in range(self.groups_n):
            start, stop = g * ROWS_PER_GROUP, min(self.n, (g + 1) * ROWS_PER_GROUP)
            self._flush(g)
            if g in self._writers:
                writer, path = self._writers[g]
                writer.close()  # closing twice is allowed: a second pass (the CSV) reads the files again
                with pa.memory_map(str(path)) as source:
                    table = ipc.open_stream(source).read_all()
            else:
                table = self.schema.empty_table()
            yield start, stop, table


_POSITION = "__position__"


def _compact(pieces: list[pa.Table]) -> pa.Table:
    """Pieces as one table of one chunk, copied: each slice of a part's rows would keep the part alive and carry
    its own array objects (some 25 KB of metadata a piece, which at a million questions came to hundreds of MB)."""
    return pa.concat_tables(pieces).combine_chunks()


def output_schema(inputs: pa.Schema, answers: pa.Schema) -> pa.Schema:
    """The output's columns: the inputs, then the answers' (but their question_id), with status and message."""
    fields = [*inputs, *(f for f in answers if f.name not in inputs.names)]
    for name in ("status", "message"):
        if name not in [f.name for f in fields]:
            fields.append(pa.field(name, pa.string()))
    return pa.schema(fields)


def _joined(inputs: pd.DataFrame, answers: pa.Table, start: int, schema: pa.Schema) -> pd.DataFrame:
    """The row group's inputs with each question's answer beside it (``unanswered`` where it has none)."""
    local = answers.column(_POSITION).to_numpy() - start if answers.num_rows else np.zeros(0, dtype=np.int64)
    frame = answers.drop_columns([_POSITION, "question_id"]).to_pandas(types_mapper=NULLABLE.get)
    frame.index = pd.Index(local)
    frame = inputs.join(frame.reindex(range(len(inputs))))
    answered = np.zeros(len(inputs), dtype=bool)
    answered[local] = True
    status = frame["status"] if "status" in frame else pd.Series(None, index=frame.index, dtype=object)
    frame["status"] = status.where(status.notna(), "unanswered")
    if "message" not in frame:
        frame["message"] = None
    if not answered.all():
        frame["message"] = frame["message"].astype(object)
        frame.loc[~answered, "message"] = NOT_ANSWERED
    return frame[schema.names]


def _table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
