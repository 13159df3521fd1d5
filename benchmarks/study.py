"""Study benchmark, run by hand: ``python benchmarks/study.py [--repeat 3] [--questions 2000] [--fresh N]``.

One study of N fastest-under-budget questions (2 models x 2 accelerators x 2 precisions x contexts x 25 budgets)
answered four ways, interleaved in every repetition so that they share the machine's load:

- loop: a plain loop in this process over the same batches (execute.answer_batch, the worker's own code: tables
  shared along each budget sweep), no Dask and no files;
- 1 worker / 2 workers: ``run_study`` against a freshly started embedded cluster of that many single-threaded worker
  processes (runner.local_cluster, the one ``study`` starts; started before the clock, so cluster start-up is
  reported separately), rows written as Parquet chunks and assembled into the output file;
- naive: one ``api.fastest_answer`` per question (no shared tables), timed on the first 200 questions.

``--fresh N`` instead runs N fresh processes one after the other, each answering the loop and then the 1-worker study
(the overhead alone, measured minutes apart less often than between repetitions in one long process).

Prints per-repetition wall and CPU seconds (CPU: the worker processes' as the OS counts them, and the driver's, which
holds the scheduler, the nannies and the client; so the overhead is also measured independently of other load on a
shared machine), the CPU that is Dask's and the study's own work rather than answering (the driver's and the workers'
main threads, whose event loops receive tasks and send rows; questions are answered on the worker's task thread),
the ratios of each repetition, their medians, and the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from roofline_opt import api
from roofline_opt.study import execute, load_study
from roofline_opt.study.runner import group_key, local_cluster, plan_tasks, run_study

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


def plain_loop(study) -> tuple[float, float]:
    """(wall, CPU seconds) of the same batches answered in this process, cold cache (as a fresh worker has)."""
    execute._cache().clear()
    start, cpu = time.perf_counter(), time.process_time()
    for task in plan_tasks(study.questions, 1):
        execute.answer_batch(task[0].kind, [(q.id, q.values) for q in task])
    return time.perf_counter() - start, time.process_time() - cpu


def workers_cpu(cluster) -> tuple[float, float]:
    """CPU seconds (user + system) of the cluster's worker processes so far, and of their main threads alone (Dask's
    event loop: messages, (de)serialising, monitors; the questions are answered on another thread), read from the OS
    (no extra client)."""
    import psutil

    total = loop = 0.0
    for nanny in cluster.workers.values():
        process = psutil.Process(nanny.pid)
        times = process.cpu_times()
        total += times.user + times.system
        loop += sum(t.user_time + t.system_time for t in process.threads() if t.id == nanny.pid)
    return total, loop


def on_cluster(study, folder: Path, workers: int) -> tuple[float, float, float, float]:
    """(seconds to start the embedded cluster, wall seconds of run_study against it, CPU seconds of workers and
    driver, CPU seconds of the driver and the workers' event loops); the cluster is the study's own
    (runner.local_cluster), started before the clock."""
    start = time.perf_counter()
    with local_cluster(workers) as cluster:
        started = time.perf_counter()
        (worker_cpu, worker_loop), driver_cpu = workers_cpu(cluster), time.process_time()
        out = folder / f"out-{workers}-{time.time_ns()}.parquet"
        report = run_study(study, out, scheduler=cluster.scheduler_address)
        wall = time.perf_counter() - started
        driver = time.process_time() - driver_cpu
        worker_cpu_after, worker_loop_after = workers_cpu(cluster)
        assert report.answered_now == len(study.questions)
        cpu = driver + worker_cpu_after - worker_cpu
        return started - start, wall, cpu, driver + worker_loop_after - worker_loop


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


def fresh_pair(questions: int) -> None:
    """The 1-worker study's overhead over the loop, both run in this fresh process: a line, then the ratios (JSON)."""
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
        loop, loop_cpu = plain_loop(study)
        _, one, one_cpu, one_dask = on_cluster(study, Path(tmp), 1)
    print(
        f"fresh process: loop {loop:.2f}s ({loop_cpu:.2f}s CPU), 1 worker {one:.2f}s ({one_cpu:.2f}s CPU); overhead "
        f"wall {one / loop - 1:+.1%}, CPU {one_cpu / loop_cpu - 1:+.1%} (driver + worker event loop "
        f"{one_dask / loop_cpu:.1%}); load {os.getloadavg()[0]:.1f}"
    )
    print(json.dumps({"wall": one / loop - 1, "cpu": one_cpu / loop_cpu - 1}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--fresh", type=int, default=0, metavar="N", help="instead: N fresh processes, each running "
                        "the loop and then the 1-worker study")  # fmt: skip
    parser.add_argument("--pair", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pair:
        fresh_pair(args.questions)
        return
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    if args.fresh:
        command = [sys.executable, __file__, "--pair", "--questions", str(args.questions)]
        ratios = []
        for _ in range(args.fresh):
            line, ratio = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-2:]
            print(line, flush=True)
            ratios.append(json.loads(ratio))
        wall, cpu = (statistics.median(r[k] for r in ratios) for k in ("wall", "cpu"))
        print(f"medians of {len(ratios)}: overhead wall {wall:+.1%}, CPU {cpu:+.1%}")
        print(f"load average after: {os.getloadavg()}")
        return
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), args.questions))
        n = len(study.questions)
        sweeps = len({group_key(q) for q in study.questions})
        print(f"{n} questions, {sweeps} budget sweeps, {len(plan_tasks(study.questions, 1))} tasks on 1 worker")
        rows = []
        for rep in range(args.repeat):
            loop, loop_cpu = plain_loop(study)
            start1, one, one_cpu, one_dask = on_cluster(study, Path(tmp), 1)
            start2, two, two_cpu, _ = on_cluster(study, Path(tmp), 2)
            rows.append((loop, one, two, one_cpu / loop_cpu - 1, one_dask / loop_cpu))
            print(
                f"rep {rep + 1}: loop {loop:.1f}s ({loop_cpu:.1f}s CPU), 1 worker {one:.1f}s ({one_cpu:.1f}s CPU, "
                f"+{start1:.1f}s start), 2 workers {two:.1f}s ({two_cpu:.1f}s CPU, +{start2:.1f}s start); "
                f"overhead 1 worker / loop: wall {one / loop - 1:+.1%}, CPU {one_cpu / loop_cpu - 1:+.1%} "
                f"(driver + worker event loop {one_dask:.2f}s CPU = {one_dask / loop_cpu:.1%} of the loop's); "
                f"speed-up {one / two:.2f}x (with start-up {(one + start1) / (two + start2):.2f}x); "
                f"load {os.getloadavg()[0]:.1f}"
            )
        per_question = naive(study)
    loop, one, two = (statistics.median(r[i] for r in rows) for i in range(3))
    print(f"median: loop {loop:.1f}s ({loop / n * 1e3:.1f} ms/question), 1 worker {one:.1f}s, 2 workers {two:.1f}s")
    wall_overhead = statistics.median(r[1] / r[0] - 1 for r in rows)
    cpu_overhead = statistics.median(r[3] for r in rows)
    speed_up = statistics.median(r[1] / r[2] for r in rows)
    dask_share = statistics.median(r[4] for r in rows)
    print(
        f"medians: overhead wall {wall_overhead:+.1%}, CPU {cpu_overhead:+.1%} (of which driver + worker event loop "
        f"{dask_share:.1%}), speed-up {speed_up:.2f}x"
    )
    print(f"naive loop (one api call per question, no shared tables): {per_question * 1e3:.1f} ms/question")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
