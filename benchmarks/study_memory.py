"""Driver memory of a million-question study, run by hand: ``python benchmarks/study_memory.py [--questions N]``.

Phases, each reported as the process's resident memory (peak so far, ``ru_maxrss``) and wall time:
1. load the study (``benchmarks/study.py``'s grid of fastest-under-budget questions, N of them);
2. plan its tasks (``task_indices``) and make the first tasks' batches, as ``run_study`` sends them;
3. fill a store with one answered row per question in shuffled order, parts of 200 rows (a template row from a
   real answer, its id replaced), as if every question had been answered;
4. assemble the output (``study.assemble``: row groups of 50,000, spilled by row group) and read its status column.

The run itself (Dask, workers answering) is measured with the command: ``roofline-opt study FILE --workers 1``
sampled with /proc/PID/status (see the closing note of issue 29 for the figures).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))

import study as study_bench  # noqa: E402

from roofline_opt.study import execute, load_study  # noqa: E402
from roofline_opt.study.assemble import assemble  # noqa: E402
from roofline_opt.study.runner import _absolute, batch_of, study_inputs, task_indices  # noqa: E402
from roofline_opt.study.store import Store  # noqa: E402

PART_ROWS = 200


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase(name: str, start: float) -> float:
    now = time.perf_counter()
    print(f"{name}: peak {peak_mb():.0f} MB, {now - start:.1f} s", flush=True)
    return now


def template_row(study) -> dict:
    """The row a worker gives for the study's first question."""
    q = study.questions[0]
    return dict(execute.answer_task(execute.Batch(study.kind, ((q.id, _absolute(q.values)),))).rows[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"start: peak {peak_mb():.0f} MB (imports)")
    with tempfile.TemporaryDirectory() as folder:
        t = time.perf_counter()
        study = load_study(study_bench.study_file(Path(folder), args.questions))
        t = phase(f"1. load {len(study.questions)} questions", t)
        tasks = task_indices(study.questions, 1)
        batches = [batch_of(study.questions, task) for task in tasks[:8]]
        t = phase(f"2. plan {len(tasks)} tasks, make {len(batches)} batches", t)
        row = template_row(study)
        store = Store(Path(folder) / "out.parquet")
        order = np.random.default_rng(0).permutation(len(study.questions))
        for start in range(0, len(order), PART_ROWS):
            ids = study.questions.ids[order[start : start + PART_ROWS]]
            store.append([{**row, "question_id": qid.decode()} for qid in ids])
        t = phase(f"3. store of {len(order)} rows in {-(-len(order) // PART_ROWS)} parts", t)
        assembled = assemble(store, study.questions.ids, study_inputs(study))
        rows = pq.read_table(assembled.out, columns=["status"]).num_rows
        phase(f"4. assemble {rows} rows ({assembled.status_counts})", t)


if __name__ == "__main__":
    main()
