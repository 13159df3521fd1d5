"""Running a study on Dask: an embedded LocalCluster by default, or a running cluster's scheduler.

Questions that share tables (the same question at several targets) go to one task, largest sweeps split into
batches so every worker has work; results stream back with ``as_completed`` and are written in chunks. Dask is
imported here only, so other commands do not pay for it.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

import numpy as np
import pandas as pd
import pyarrow as pa

from roofline_opt import api, catalog, checks
from roofline_opt.errors import InvalidInput
from roofline_opt.study import execute
from roofline_opt.study.assemble import Assembled, Inputs, assemble
from roofline_opt.study.spec import PATH_KEYS, Questions, Study, StudyQuestion, group_digest, target_order
from roofline_opt.study.store import Store

TASKS_PER_WORKER = 8
"""Aim for this many tasks per worker so that the last ones finish together."""
MIN_BATCH, MAX_BATCH = 8, 128
"""Questions per task: at most about n / (workers x TASKS_PER_WORKER), within MAX_BATCH; a sweep of up to MIN_BATCH
targets is never cut, and short sweeps are packed together up to that size. Every task costs Dask some 5-10 ms of
CPU in the worker and the driver (measured), so a task of 128 questions of ~5 ms each keeps that near 1%."""
FLUSH_S = 20.0
"""Write a chunk at least this often (seconds) even when it holds fewer than ``chunk_rows`` rows."""

QUIET_DASK = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "500ms",
}
"""Dask settings of the embedded cluster and of our client: no statistical profiler of the workers' tasks, slower
event-loop ticks and monitors. Dask's defaults (a profile sample every 10 ms, a tick every 20 ms in the scheduler,
every nanny, worker and client) cost about 7% of a core while a study runs, more than the study's own driver work
(benchmarks/results-study-2026-11-30.txt); memory limits still apply, checked twice a second."""
MAX_WORKERS = 256
"""Most worker processes of the embedded cluster (``--workers``): each is a Python process of some 150 MB, and
asking for a million made the command hang while it started them."""
CONNECT_TIMEOUT = "30s"
IN_FLIGHT_PER_WORKER = 4
"""Tasks sent ahead per worker thread: enough that none waits for the driver, few enough that the driver holds a
few hundred questions' inputs rather than the study's."""
LABELS_KEPT = 100
"""New questions whose labels a run report keeps (the command shows the first ten and counts the rest)."""
"""How long to try reaching a running scheduler."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunReport:
    """What a run did: questions in the study (distinct), answered before, answered now, rows of questions no longer
    in the study, the number of new questions and the labels of the first LABELS_KEPT, the output's rows by status,
    part files skipped as unreadable. ``frame`` reads the output back whole."""

    total: int
    answered_before: int
    answered_now: int
    dropped: int
    new: int
    new_labels: tuple[str, ...]
    status_counts: dict[str, int]
    assembled: Assembled
    unreadable_parts: tuple[Path, ...] = ()

    @property
    def frame(self) -> pd.DataFrame:
        return self.assembled.frame()


def group_key(q: StudyQuestion) -> bytes:
    """Questions with equal keys differ only in their target and share a prepared question on a worker."""
    return group_digest(dict(q.inputs), api.TARGETS.get(q.kind))


def _sort_arrays(questions: Sequence[StudyQuestion]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group keys and target orders: a study's ``Questions`` hold them, a plain list of questions is computed."""
    if isinstance(questions, Questions):
        return questions.group_keys, questions.target_rank, questions.target_value
    orders = [target_order(q.values.get(api.TARGETS.get(q.kind, ""))) for q in questions]
    keys = np.array([group_key(q) for q in questions], dtype="S16")
    return keys, np.array([o[0] for o in orders], dtype=np.int8), np.array([o[1] for o in orders], dtype=float)


def task_indices(questions: Sequence[StudyQuestion], workers: int) -> list[np.ndarray]:
    """Batches of whole sweeps (questions sharing tables, by target), about TASKS_PER_WORKER per worker, as the
    questions' positions: groups in order of first appearance, each group's targets ascending; a group longer than
    the batch size is cut, short groups share a batch."""
    n = len(questions)
    if n == 0:
        return []
    keys, rank, value = _sort_arrays(questions)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    group = np.argsort(np.argsort(first, kind="stable"), kind="stable")[inverse.ravel()]  # by first appearance
    order = np.lexsort((value, rank, group))
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    size = max(1, min(MAX_BATCH, math.ceil(n / max(1, workers * TASKS_PER_WORKER))))
    cut = max(size, MIN_BATCH)
    tasks: list[list[np.ndarray]] = [[]]
    filled = 0
    for members in np.split(order, bounds):
        for start in range(0, len(members), cut):
            chunk = members[start : start + cut]
            if filled and filled + len(chunk) > size:
                tasks.append([])
                filled = 0
            tasks[-1].append(chunk)  # short sweeps and single questions share a task
            filled += len(chunk)
    return [np.concatenate(task) for task in tasks if task]


def plan_tasks(questions: Sequence[StudyQuestion], workers: int) -> list[list[StudyQuestion]]:
    """``task_indices`` as the questions themselves."""
    return [[questions[int(i)] for i in task] for task in task_indices(questions, workers)]


def _absolute(inputs: dict[str, Any]) -> dict[str, Any]:
    """Files named by relative paths made absolute, so workers with another working folder find them."""
    out = dict(inputs)
    for key in PATH_KEYS:
        value = out.get(key)
        if isinstance(value, str) and value:
            names = [n.strip() for n in value.split(",")]
            out[key] = ",".join(str(Path(n).resolve()) if _is_path(n) else n for n in names)
    return out


def _is_path(name: str) -> bool:
    return "/" in name or os.sep in name or name.endswith(catalog.cards.PATH_SUFFIXES)


@contextmanager
def local_cluster(workers: int | None) -> Iterator[Any]:
    """The embedded cluster: ``workers`` single-threaded processes (default: the machine's cores), QUIET_DASK set,
    each importing the solver stack as it starts (``preload``), not on its first task."""
    import dask
    from distributed import LocalCluster

    n = workers or os.cpu_count() or 1
    kwargs = {"n_workers": n, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0"}
    kwargs["preload"] = [execute.__name__]
    with dask.config.set(QUIET_DASK), LocalCluster(**kwargs, silence_logs=logging.ERROR) as cluster:
        yield cluster


@contextmanager
def dask_client(workers: int | None, scheduler: str | None) -> Iterator[Any]:
    """A client of the running cluster at ``scheduler``, or of an embedded one with ``workers`` processes."""
    import dask
    from distributed import Client

    if scheduler:
        try:
            with dask.config.set(QUIET_DASK):
                client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            msg = f"must be the address of a running Dask scheduler (tcp://host:8786). Got {scheduler!r}: {reason}"
            raise InvalidInput("--scheduler", msg) from exc
        with client:
            yield client
        return
    with local_cluster(workers) as cluster, dask.config.set(QUIET_DASK), Client(cluster) as client:
        yield client


def _lost_rows(task: Sequence[StudyQuestion], exc: BaseException) -> list[dict[str, Any]]:
    """Rows for a task whose worker failed as a whole (killed, out of memory): retried by the next run."""
    message = f"worker failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
    return [{"question_id": q.id, "kind": q.kind, "status": "error", "message": message} for q in task]


def run_study(
    study: Study,
    out: Path,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    chunk_rows: int = 200,
    fresh: bool = False,
    csv: Path | None = None,
    progress: Progress | None = None,
) -> RunReport:
    """Answer every question not answered before, writing chunks as they arrive; then assemble the output.

    The driver holds the study's compact arrays, the tasks in flight and one row group of the output at a time,
    not the questions or the rows (docs/how-to/study.md, "Memory").
    """
    if workers is not None:
        checks.positive_int("--workers", workers, maximum=MAX_WORKERS)
    store = Store(out)
    if fresh:
        store.clear()
    done = store.answered_ids()
    ids = study.questions.ids
    before = np.isin(ids, done)
    todo = np.flatnonzero(~before)
    new = tuple(label(study, study.questions[int(i)]) for i in todo[:LABELS_KEPT])
    answered_now = 0
    if len(todo):
        answered_now = _submit(study.questions, todo, store, workers, scheduler, chunk_rows, progress)
    assembled = assemble(store, ids, study_inputs(study), csv)
    unique = np.unique(ids)
    return RunReport(
        total=len(unique),
        answered_before=int(np.isin(unique, done).sum()),
        answered_now=answered_now,
        dropped=int((~np.isin(done, unique)).sum()),
        new=len(todo),
        new_labels=new,
        status_counts=assembled.status_counts,
        assembled=assembled,
        unreadable_parts=tuple(sorted(store.unreadable)),
    )


def _submit(
    questions: Questions,
    todo: np.ndarray,
    store: Store,
    workers: int | None,
    scheduler: str | None,
    chunk_rows: int,
    progress: Progress | None,
) -> int:
    """Send the tasks, at most IN_FLIGHT_PER_WORKER per worker at a time, and write rows in chunks as they arrive;
    on any interruption the rows received are written."""
    from distributed import as_completed

    buffer: list[dict[str, Any]] = []
    answered = 0
    last_flush = time.monotonic()
    with dask_client(workers, scheduler) as client:
        threads = max(1, sum(client.nthreads().values()))
        pending = iter(task_indices(_Subset(questions, todo), threads))
        futures: dict[Any, np.ndarray] = {}

        def send() -> Any:
            task = next(pending, None)
            if task is None:
                return None
            members = todo[task]
            future = client.submit(execute.answer_task, batch_of(questions, members), pure=False)
            futures[future] = members
            return future

        first = [f for f in (send() for _ in range(threads * IN_FLIGHT_PER_WORKER)) if f is not None]
        try:
            completed = as_completed(first)
            for future in completed:
                members = futures.pop(future)
                try:
                    rows = list(future.result().rows)
                except Exception as exc:  # a lost worker: its questions become error rows, retried next run
                    rows = _lost_rows([questions[int(i)] for i in members], exc)
                future.release()
                following = send()
                if following is not None:
                    completed.add(following)
                buffer += rows
                answered += len(rows)
                if progress is not None:
                    progress(answered, len(todo))
                if len(buffer) >= chunk_rows or time.monotonic() - last_flush >= FLUSH_S:
                    store.append(buffer)
                    buffer, last_flush = [], time.monotonic()
        finally:
            store.append(buffer)
            client.cancel(list(futures))
    return answered


def batch_of(questions: Questions, positions: np.ndarray) -> execute.Batch:
    """The task a worker answers for the questions at ``positions``, made only when it is sent."""
    return execute.Batch(
        questions.kind, tuple((questions[i].id, _absolute(questions[i].values)) for i in positions.tolist())
    )


class _Subset(Sequence[StudyQuestion]):
    """The questions at ``positions`` of a study's questions, with their sort arrays (for ``task_indices``)."""

    def __init__(self, questions: Questions, positions: np.ndarray) -> None:
        self.questions, self.positions = questions, positions
        self.group_keys = questions.group_keys[positions]
        self.target_rank = questions.target_rank[positions]
        self.target_value = questions.target_value[positions]

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, index: int) -> StudyQuestion: ...

    @overload
    def __getitem__(self, index: slice) -> list[StudyQuestion]: ...

    def __getitem__(self, index: int | slice) -> StudyQuestion | list[StudyQuestion]:
        if isinstance(index, slice):
            return [self.questions[int(i)] for i in self.positions[index]]
        return self.questions[int(self.positions[index])]


def study_inputs(study: Study) -> Inputs:
    """The inputs the study file sets (``in_`` + flag) beside each question's id, made a row group at a time, each
    column with one type over the study: whole numbers, numbers, yes/no, or text where values mix types."""
    types = {k: _column_type(study.questions.values_of(k)) for k in study.keys}
    schema = pa.schema([pa.field("question_id", pa.string())] + [pa.field(f"in_{k}", t) for k, t in types.items()])

    def frame(start: int, stop: int) -> pd.DataFrame:
        questions = study.questions
        columns: dict[str, Any] = {"question_id": [questions.ids[i].decode() for i in range(start, stop)]}
        given = [questions.given(i) for i in range(start, stop)]
        for key, kind in types.items():
            values = [g.get(key) for g in given]
            if pa.types.is_string(kind):
                values = [None if v is None else str(v) for v in values]
            columns[f"in_{key}"] = pd.array(values, dtype=_PANDAS.get(str(kind), object))
        return pd.DataFrame(columns)

    return Inputs(frame, schema)


_PANDAS: dict[str, Any] = {"int64": "Int64", "bool": "boolean", "double": "Float64"}


def _column_type(values: list[Any]) -> pa.DataType:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.null()
    if kinds == {bool}:
        return pa.bool_()
    if kinds == {int}:
        return pa.int64()
    if kinds <= {int, float}:
        return pa.float64()
    return pa.string()


def inputs_frame(study: Study) -> pd.DataFrame:
    """One row per question: its id and the inputs the study file sets (``in_`` + flag), in file order (whole)."""
    return study_inputs(study).frame(0, len(study.questions))


def label(study: Study, q: StudyQuestion) -> str:
    """The inputs the study file sets, as ``key=value`` text."""
    values = q.values
    return ", ".join(f"{k}={values.get(k)}" for k in study.keys)
