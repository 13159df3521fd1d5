"""Results on disk: Parquet part files written as rows arrive, and the study's one output assembled from them.

Rows are appended in chunks to ``OUT.parts/`` (each part written by ``files.write_output``, so a part is whole or
absent); an interrupted run loses at most the rows not yet written. The output file (``OUT``, and a CSV
on request) holds one row per question of the current study, in the study's order, and is written by
``files.write_output``: replaced atomically, through a symlink to its target, written through to a device.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from roofline_opt import files
from roofline_opt.errors import InvalidInput

RETRIED_STATUSES = ("error",)
"""Rows that a re-run answers again (a crash or a lost worker); infeasible and invalid questions are answers."""


def parts_dir(out: Path) -> Path:
    return out.with_name(out.name + ".parts")


def _arrow_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns mixing Python types (16 and "16,8") as text, so Parquet has one type per column."""
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype != "object":
            continue
        present = frame[column].notna()
        if len({type(v) for v in frame.loc[present, column]}) > 1:
            frame[column] = frame[column].where(~present, frame[column].astype(str)).where(present, None)
    return frame


def typed_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Rows as a frame whose whole-number and yes/no columns stay so where some rows lack them (nullable dtypes)."""
    frame = pd.DataFrame(list(rows))
    for column in frame.columns:
        values = [r[column] for r in rows if r.get(column) is not None]
        if values and all(isinstance(v, bool) for v in values):
            frame[column] = frame[column].astype("boolean")
        elif values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[column] = frame[column].astype("Int64")
    return frame


def part_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Rows as an Arrow table typed by Arrow itself, one column per key in order of first appearance; rows mixing
    Python types in a column (16 and "16,8") go through ``typed_frame``. A chunk costs a quarter of the pandas path,
    and ``read_part`` gives the same frame either way (whole numbers and yes/no as nullable dtypes)."""
    keys = dict.fromkeys(k for row in rows for k in row)
    try:
        return pa.table({k: pa.array([row.get(k) for row in rows]) for k in keys})
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.Table.from_pandas(_arrow_safe(typed_frame(rows)), preserve_index=False)


NULLABLE = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
"""Arrow types read as pandas' nullable dtypes, as ``typed_frame`` makes them."""


SCHEMA_KEY = b"roofline_opt.schema_sha256"
"""Part-file metadata: a hash of the column names and types, which Parquet's page checksums do not cover."""


def _schema_hash(schema: pa.Schema) -> bytes:
    return hashlib.sha256(schema.remove_metadata().to_string().encode()).hexdigest().encode()


def read_part(path: Path) -> pd.DataFrame:
    """A part file's rows (``read_part_table`` as a frame)."""
    return _to_pandas(read_part_table(path))


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=NULLABLE.get)


def read_part_table(path: Path) -> pa.Table:
    """A part file's rows. Page checksums, the schema's hash and a full validation of the table catch a file changed
    after writing (a flipped byte could otherwise read as another answer or column, or fail later as text that is not
    UTF-8); parts written before the hash was added are read without it."""
    table = pq.read_table(path, page_checksum_verification=True)
    table.validate(full=True)
    stored = (table.schema.metadata or {}).get(SCHEMA_KEY)
    if stored is not None and stored != _schema_hash(table.schema):
        raise ValueError(f"{path}: the columns differ from those written")
    return table


class Store:
    """The part files of one output: what is answered already, and chunks appended as they arrive."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.parts = parts_dir(out)
        self._written = 0
        self.unreadable: set[Path] = set()
        """Part files that are not Parquet files of rows (cut short by a crash, or changed by hand): skipped, so their
        questions are answered again."""

    def clear(self) -> None:
        """Forget every earlier result (``--fresh``)."""
        if self.parts.is_dir():
            for part in self.parts.iterdir():
                part.unlink()

    def readable_parts(self) -> Iterator[tuple[Path, pa.Table]]:
        """Each part file that reads back whole, in the order written (a later row of a question supersedes it)."""
        paths = sorted(self.parts.glob("part-*.parquet")) if self.parts.is_dir() else []
        for path in paths:
            try:
                table = read_part_table(path)
            except Exception:  # a damaged file fails in many ways (Arrow, thrift, UTF-8 decoding): its rows are lost
                table = None
            if table is None or not {"question_id", "status"} <= set(table.column_names):
                self.unreadable.add(path)
            elif table.num_rows:
                yield path, table

    def rows(self) -> pd.DataFrame:
        """Every row written so far, the latest row of each question only (all in memory: for small stores)."""
        frames = [_to_pandas(table) for _, table in self.readable_parts()]
        if not frames:
            return pd.DataFrame(columns=["question_id", "status"])
        return pd.concat(frames, ignore_index=True).drop_duplicates("question_id", keep="last")

    def answered_ids(self) -> np.ndarray:
        """Ids (ASCII bytes) of the questions a re-run skips, one part in memory at a time."""
        latest: dict[bytes, bool] = {}
        for _, table in self.readable_parts():
            ids = table.column("question_id").to_pylist()
            statuses = table.column("status").to_pylist()
            for qid, status in zip(ids, statuses, strict=True):
                latest[str(qid).encode()] = status not in RETRIED_STATUSES
        return np.array([qid for qid, done in latest.items() if done], dtype=bytes)

    def answered(self) -> set[str]:
        """Ids of the questions a re-run skips."""
        return {qid.decode() for qid in self.answered_ids()}

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write one chunk of rows as a new part file (whole or absent)."""
        if not rows:
            return
        try:
            self.parts.mkdir(exist_ok=True)
        except OSError as exc:
            raise InvalidInput("--out", f"cannot create {str(self.parts)!r}: {exc.strerror or exc}") from exc
        self._written += 1
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self._written:06d}.parquet"
        table = part_table(rows)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), SCHEMA_KEY: _schema_hash(table.schema)})
        files.write_output(self.parts / name, lambda f: pq.write_table(table, f, write_page_checksum=True), "--out")
