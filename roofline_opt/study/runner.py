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
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from roofline_opt import api, catalog, checks
from roofline_opt.errors import InvalidInput
from roofline_opt.study import execute
from roofline_opt.study.spec import PATH_KEYS, Study, StudyQuestion
from roofline_opt.study.store import Store, typed_frame

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
"""How long to try reaching a running scheduler."""

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class RunReport:
    """What a run did: questions in the study, answered before, answered now, and the new ones' labels; part files
    skipped as unreadable."""

    total: int
    answered_before: int
    answered_now: int
    dropped: int
    new_labels: tuple[str, ...]
    frame: pd.DataFrame
    unreadable_parts: tuple[Path, ...] = ()


def group_key(q: StudyQuestion) -> str:
    """Questions with equal keys differ only in their target and share a prepared question on a worker."""
    target = api.TARGETS.get(q.kind)
    return repr([(k, v) for k, v in q.inputs if k != target]) if target else q.id


def plan_tasks(questions: Sequence[StudyQuestion], workers: int) -> list[list[StudyQuestion]]:
    """Batches of whole sweeps (questions sharing tables, by target), about TASKS_PER_WORKER per worker."""
    groups: dict[str, list[StudyQuestion]] = defaultdict(list)
    for q in questions:
        groups[group_key(q)].append(q)
    size = max(1, min(MAX_BATCH, math.ceil(len(questions) / max(1, workers * TASKS_PER_WORKER))))
    cut = max(size, MIN_BATCH)
    tasks: list[list[StudyQuestion]] = [[]]
    for group in groups.values():
        target = api.TARGETS.get(group[0].kind)
        if target:
            group.sort(key=lambda q: _target_order(q.values.get(target)))
        for chunk in (group[i : i + cut] for i in range(0, len(group), cut)):
            if tasks[-1] and len(tasks[-1]) + len(chunk) > size:
                tasks.append([])
            tasks[-1] += chunk  # short sweeps and single questions share a task
    return [task for task in tasks if task]


def _target_order(value: Any) -> tuple[int, float]:
    """Targets ascending, no target after them, values that are not numbers (invalid rows) last."""
    if value is None:
        return (1, 0.0)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return (2, 0.0)
    return (2, 0.0) if math.isnan(number) else (0, number)


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
    """Answer every question not answered before, writing chunks as they arrive; then assemble the output."""
    if workers is not None:
        checks.positive_int("--workers", workers, maximum=MAX_WORKERS)
    store = Store(out)
    if fresh:
        store.clear()
    done = store.answered()
    ids = {q.id for q in study.questions}
    todo = [q for q in study.questions if q.id not in done]
    new = tuple(label(study, q) for q in todo)
    answered_now = 0
    if todo:
        answered_now = _submit(todo, store, workers, scheduler, chunk_rows, progress)
    frame = store.assemble([q.id for q in study.questions], inputs_frame(study), csv)
    unreadable = tuple(sorted(store.unreadable))
    return RunReport(len(ids), len(ids & done), answered_now, len(done - ids), new, frame, unreadable)


def _submit(
    todo: Sequence[StudyQuestion],
    store: Store,
    workers: int | None,
    scheduler: str | None,
    chunk_rows: int,
    progress: Progress | None,
) -> int:
    """Send the tasks, write rows in chunks as they arrive; on any interruption the rows received are written."""
    from distributed import as_completed

    buffer: list[dict[str, Any]] = []
    answered = 0
    last_flush = time.monotonic()
    with dask_client(workers, scheduler) as client:
        tasks = plan_tasks(todo, max(1, sum(client.nthreads().values())))
        futures = {}
        for task in tasks:
            batch = execute.Batch(task[0].kind, tuple((q.id, _absolute(q.values)) for q in task))
            futures[client.submit(execute.answer_task, batch, pure=False)] = task
        try:
            for future in as_completed(futures):
                task = futures.pop(future)
                try:
                    rows = list(future.result().rows)
                except Exception as exc:  # a lost worker: its questions become error rows, retried next run
                    rows = _lost_rows(task, exc)
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


def inputs_frame(study: Study) -> pd.DataFrame:
    """One row per question: its id and the inputs the study file sets (``in_`` + flag), in file order."""
    rows = []
    for q in study.questions:
        values = q.values
        rows.append({"question_id": q.id, **{f"in_{k}": values.get(k) for k in study.keys}})
    return typed_frame(rows)


def label(study: Study, q: StudyQuestion) -> str:
    """The inputs the study file sets, as ``key=value`` text."""
    values = q.values
    return ", ".join(f"{k}={values.get(k)}" for k in study.keys)
