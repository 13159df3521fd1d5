"""Study benchmark, run by hand: ``python benchmarks/study.py [--repeat 3] [--questions 2000]``.

One study of N fastest-under-budget questions (2 models x 2 accelerators x 2 precisions x contexts x 25 budgets)
answered four ways, interleaved in every repetition so that they share the machine's load:

- loop: a plain loop in this process over the same batches (execute.answer_batch, the worker's own code: tables
  shared along each budget sweep), no Dask and no files;
- 1 worker / 2 workers: ``run_study`` against a freshly started LocalCluster of that many single-threaded worker
  processes (started before the clock, so cluster start-up is reported separately), rows written as Parquet chunks
  and assembled into the output file;
- naive: one ``api.fastest_answer`` per question (no shared tables), timed on the first 200 questions.

Prints per-repetition seconds and the ratios of each repetition, their medians, and the load average before and
after (the machine is shared).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from roofline_opt import api
from roofline_opt.study import execute, load_study
from roofline_opt.study.runner import plan_tasks, run_study

BUDGETS = [round(0.4 * 1.15**i, 4) for i in range(25)]


def study_file(folder: Path, questions: int) -> Path:
    contexts = max(1, questions // (2 * 2 * 2 * len(BUDGETS)))
    study = {
        "name": "bench",
        "kind": "fastest",
        "fixed": {"tp_degrees": [1, 2, 4, 8, 16], "pp_degrees": [1, 2, 4]},
        "axes": {
            "model": ["llama-3-8b", "llama-3-70b"],
            "gpu": ["h100-sxm", "h200"],
            "weight_bits": [16, 8],
            "context": [1000 + 2000 * i for i in range(contexts)],
            "max_usd_per_mtok": BUDGETS,
        },
    }
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


def plain_loop(study) -> float:
    """The same batches answered in this process, with a cold cache (as a fresh worker has)."""
    execute._cache().clear()
    start = time.perf_counter()
    for task in plan_tasks(study.questions, 1):
        execute.answer_batch(task[0].kind, [(q.id, q.values) for q in task])
    return time.perf_counter() - start


def on_cluster(study, folder: Path, workers: int) -> tuple[float, float]:
    """(seconds to start the cluster, seconds of run_study against it)."""
    from distributed import LocalCluster

    start = time.perf_counter()
    kwargs = {"threads_per_worker": 1, "dashboard_address": ":0", "silence_logs": logging.ERROR}
    with LocalCluster(n_workers=workers, **kwargs) as cluster:
        started = time.perf_counter()
        out = folder / f"out-{workers}-{time.time_ns()}.parquet"
        report = run_study(study, out, scheduler=cluster.scheduler_address)
        assert report.answered_now == len(study.questions)
        return started - start, time.perf_counter() - started


def naive(study, n: int = 200) -> float:
    """Seconds per question of one API call per question (tables rebuilt every time)."""
    questions = study.questions[:n]
    start = time.perf_counter()
    for q in questions:
        v = q.values
        space = {k: v[k] for k in execute.question_parameters() if k in v}
        try:
            api.fastest_answer(api.question(**space), v["max_usd_per_mtok"])
        except Exception:  # infeasible budgets are answers too
            pass
    return (time.perf_counter() - start) / len(questions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2000)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), args.questions))
        n = len(study.questions)
        print(f"{n} questions, {len(plan_tasks(study.questions, 1))} budget sweeps")
        rows = []
        for rep in range(args.repeat):
            loop = plain_loop(study)
            start1, one = on_cluster(study, Path(tmp), 1)
            start2, two = on_cluster(study, Path(tmp), 2)
            rows.append((loop, one, two, start1, start2))
            print(
                f"rep {rep + 1}: loop {loop:.1f}s, 1 worker {one:.1f}s (+{start1:.1f}s start), 2 workers {two:.1f}s "
                f"(+{start2:.1f}s start); overhead 1 worker / loop {one / loop - 1:+.1%}, speed-up {one / two:.2f}x, "
                f"with start-up {(one + start1) / (two + start2):.2f}x; load {os.getloadavg()[0]:.1f}"
            )
        per_question = naive(study)
    loop, one, two = (statistics.median(r[i] for r in rows) for i in range(3))
    print(f"median: loop {loop:.1f}s ({loop / n * 1e3:.1f} ms/question), 1 worker {one:.1f}s, 2 workers {two:.1f}s")
    print(f"median per repetition: overhead {statistics.median(r[1] / r[0] - 1 for r in rows):+.1%}, "
          f"speed-up {statistics.median(r[1] / r[2] for r in rows):.2f}x")  # fmt: skip
    print(f"naive loop (one api call per question, no shared tables): {per_question * 1e3:.1f} ms/question")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
