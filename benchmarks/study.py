"""Study benchmark, run by hand: ``python benchmarks/study.py [--repeat 3] [--questions 2000] [--fresh N]
[--interleaved]``.

One study of N fastest-under-budget questions (2 models x 2 accelerators x 2 precisions x contexts x 25 budgets)
answered four ways, interleaved in every repetition so that they share the machine's load:

- loop: a plain loop in this process over the same batches (execute.answer_batch, the worker's own code: tables
  shared along each budget sweep), no Dask and no files;
- 1 worker / 2 workers: ``run_study`` against a freshly started embedded cluster of that many single-threaded worker
  processes (runner.local_cluster, the one ``study`` starts; started before the clock, so cluster start-up is
  reported separately), rows written as Parquet chunks and assembled into the output file;
- naive: one ``api.fastest_answer`` per question (no shared tables), timed on the first 200 questions.

The 1-worker overhead over the loop is split in two, because on a shared virtual machine the same answering runs
10-20% faster or slower from one ten-second stretch to the next:

- the study's own wall time: the study's wall seconds minus the seconds the worker spent answering (the rows'
  ``question_solve_s``), less the loop's own time outside answering. This is what Dask, the chunk writes and the
  assembly add, and it does not depend on how fast the machine answered meanwhile;
- the answering ratio: the worker's answering seconds over the loop's, which carries the machine's drift.

``--fresh N`` runs N fresh processes one after the other, each answering the loop and the 1-worker study, in
alternating order (loop first, then study first) so that a drift during the pair cancels over the runs.
``--interleaved`` answers the study's tasks alternately in a plain process (no Dask) and on one worker, a task at a
time, to compare the speed of answering in both places without the drift between ten-second stretches.
``--control N`` runs the same loop in two fresh processes, N times: the spread of two identical runs, against which
the end-to-end overhead's spread is read.
``--thread-cpu N`` answers every question as one batch N times in a fresh plain process and N times on a fresh
1-worker cluster, alternating which goes first, and reports the answering thread's wall, user and system CPU seconds
and voluntary context switches: whether a worker answers slower because it waits (GIL, scheduling) or because the
same work costs it more CPU.

Prints per-repetition wall and CPU seconds (CPU: the worker processes' as the OS counts them, and the driver's, which
holds the scheduler, the nannies and the client), the CPU of the driver's and the workers' event loops, the ratios of
each repetition, their medians and ranges, and the load average before and after.
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
from dataclasses import dataclass
from pathlib import Path

import yaml

from roofline_opt import api
from roofline_opt.study import execute, load_study
from roofline_opt.study.runner import group_key, local_cluster, plan_tasks, run_study

BUDGETS = [round(0.4 * 1.15**i, 4) for i in range(25)]


@dataclass(frozen=True)
class Run:
    """One way of answering the study: wall and CPU seconds, the seconds spent answering questions (the sum of the
    rows' question_solve_s), and for a study the cluster's start-up and the CPU of the driver and workers' event
    loops."""

    wall_s: float
    cpu_s: float
    answering_s: float
    start_s: float = 0.0
    event_loops_cpu_s: float = 0.0

    def overhead(self, loop: Run) -> dict[str, float]:
        """This 1-worker study against the loop: end-to-end wall and CPU overhead, the study's own wall time as a
        share of the loop's, and the answering ratio."""
        own_s = (self.wall_s - self.answering_s) - (loop.wall_s - loop.answering_s)
        return {
            "wall": self.wall_s / loop.wall_s - 1,
            "cpu": self.cpu_s / loop.cpu_s - 1,
            "own": own_s / loop.wall_s,
            "answering": self.answering_s / loop.answering_s,
            "event_loops": self.event_loops_cpu_s / loop.cpu_s,
        }


def describe(ratios: dict[str, float]) -> str:
    return (
        f"overhead wall {ratios['wall']:+.1%}, CPU {ratios['cpu']:+.1%} = the study's own wall time "
        f"{ratios['own']:+.1%} of the loop's, answering x{ratios['answering']:.3f} (driver + worker event loops "
        f"{ratios['event_loops']:.1%} of the loop's CPU)"
    )


def summary(name: str, values: list[float], percent: bool = True) -> str:
    shown = (lambda v: f"{v:+.1%}") if percent else (lambda v: f"{v:.3f}")
    return f"{name} median {shown(statistics.median(values))} ({shown(min(values))} to {shown(max(values))})"


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


def answering_s(rows) -> float:
    return float(sum(row["question_solve_s"] for row in rows))


def plain_loop(study) -> Run:
    """The same batches answered in this process, cold cache (as a fresh worker has)."""
    execute._cache().clear()
    rows = []
    start, cpu = time.perf_counter(), time.process_time()
    for task in plan_tasks(study.questions, 1):
        rows += execute.answer_batch(task[0].kind, [(q.id, q.values) for q in task])
    return Run(time.perf_counter() - start, time.process_time() - cpu, answering_s(rows))


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


def on_cluster(study, folder: Path, workers: int) -> Run:
    """run_study against the study's own embedded cluster (runner.local_cluster), started before the clock; CPU is
    the workers' and the driver's."""
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
    answering = float(report.frame["question_solve_s"].sum())
    cpu = driver + worker_cpu_after - worker_cpu
    return Run(wall, cpu, answering, started - start, driver + worker_loop_after - worker_loop)


def naive(study, n: int = 200) -> float:
    """Seconds per question of one API call per question (tables rebuilt every time)."""
    questions = study.questions[:n]
    start = time.perf_counter()
    for q in questions:
        v = q.values
        space = {k: v[k] for k in execute.question_parameters() if k in v}
        try:
            api.fastest_answer(api.question(**space), max_usd_per_mtok=v["max_usd_per_mtok"])
        except Exception:  # infeasible budgets are answers too
            pass
    return (time.perf_counter() - start) / len(questions)


def fresh_pair(questions: int, study_first: bool) -> None:
    """The 1-worker study's overhead over the loop, both run in this fresh process: a line, then the ratios (JSON)."""
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
        if study_first:
            one = on_cluster(study, Path(tmp), 1)
            loop = plain_loop(study)
        else:
            loop = plain_loop(study)
            one = on_cluster(study, Path(tmp), 1)
    ratios = one.overhead(loop)
    order = "study, then loop" if study_first else "loop, then study"
    print(
        f"fresh process ({order}): loop {loop.wall_s:.2f}s ({loop.cpu_s:.2f}s CPU), 1 worker {one.wall_s:.2f}s "
        f"({one.cpu_s:.2f}s CPU); {describe(ratios)}; load {os.getloadavg()[0]:.1f}"
    )
    print(json.dumps(ratios))


def fresh(questions: int, runs: int) -> None:
    """``runs`` fresh processes, alternating which of the loop and the study goes first."""
    ratios = []
    for i in range(runs):
        command = [sys.executable, __file__, "--pair", "--questions", str(questions)]
        command += ["--study-first"] if i % 2 else []
        line, ratio = subprocess.run(command, capture_output=True, text=True, check=True).stdout.splitlines()[-2:]
        print(line, flush=True)
        ratios.append(json.loads(ratio))
    print(f"{len(ratios)} fresh processes:")
    for key, name in (("wall", "overhead wall"), ("cpu", "overhead CPU"), ("own", "the study's own wall time")):
        print("  " + summary(name, [r[key] for r in ratios]))
    print("  " + summary("answering ratio worker/loop", [r["answering"] for r in ratios], percent=False))


def serve(questions: int) -> None:
    """Answer the study's task number read from each line of stdin (cold cache), print its answering seconds: the
    plain loop's side of ``--interleaved``, in a process with no Dask in it."""
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
    tasks = plan_tasks(study.questions, 1)
    print("ready", flush=True)
    for line in sys.stdin:
        task = tasks[int(line)]
        execute._cache().clear()
        print(answering_s(execute.answer_batch(task[0].kind, [(q.id, q.values) for q in task])), flush=True)


def loop_alone(questions: int) -> None:
    """The plain loop alone in this fresh process: its wall seconds (the control's half)."""
    with tempfile.TemporaryDirectory() as tmp:
        print(plain_loop(load_study(study_file(Path(tmp), questions))).wall_s)


def thread_usage(items: tuple) -> dict[str, float]:
    """Answer ``items`` on this thread (cold cache): its wall, user and system CPU seconds, voluntary switches."""
    import resource

    execute._cache().clear()
    before, start = resource.getrusage(resource.RUSAGE_THREAD), time.perf_counter()
    execute.answer_batch("fastest", items)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_THREAD)
    return {
        "wall_s": wall,
        "user_s": after.ru_utime - before.ru_utime,
        "sys_s": after.ru_stime - before.ru_stime,
        "switches": after.ru_nvcsw - before.ru_nvcsw,
    }


def all_items(questions: int) -> tuple:
    """Every question of the study, in task order, as one batch."""
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
    return tuple((q.id, q.values) for task in plan_tasks(study.questions, 1) for q in task)


def thread_cpu(questions: int, pairs: int) -> None:
    """A fresh plain process and a fresh 1-worker cluster each answer every question as one batch, ``pairs`` times,
    alternating which goes first: the answering thread's wall and CPU in each."""
    from distributed import Client

    items = all_items(questions)
    command = [sys.executable, __file__, "--usage-alone", "--questions", str(questions)]
    ratios = []
    for i in range(pairs):
        usage = {}
        for where in ("worker", "plain") if i % 2 else ("plain", "worker"):
            if where == "plain":
                usage[where] = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
                continue
            with local_cluster(1) as cluster, Client(cluster) as client:
                usage[where] = client.submit(thread_usage, items, pure=False).result()
        ratios.append(usage["worker"]["user_s"] / usage["plain"]["user_s"])
        print(
            "; ".join(
                f"{where} {u['wall_s']:.2f}s wall, {u['user_s']:.2f}s user, {u['sys_s']:.2f}s sys, "
                f"{u['switches']:.0f} switches"
                for where, u in usage.items()
            )
            + f"; user worker/plain {ratios[-1]:.3f}",
            flush=True,
        )
    print(summary(f"{pairs} pairs: user CPU worker/plain", ratios, percent=False))
    print(f"  worker above 1.03 in {sum(r > 1.03 for r in ratios)} of {pairs}")


def control(questions: int, pairs: int) -> None:
    """The same loop in two fresh processes one after the other, ``pairs`` times: how far the ratio of two identical
    runs strays on this machine, the noise that the study's end-to-end overhead is read against."""
    command = [sys.executable, __file__, "--loop-alone", "--questions", str(questions)]
    ratios = []
    for _ in range(pairs):
        runs = (subprocess.run(command, capture_output=True, text=True, check=True) for _ in "ab")
        first, second = (float(run.stdout) for run in runs)
        ratios.append(second / first - 1)
        print(f"loop {first:.2f}s, then the same loop {second:.2f}s: {ratios[-1]:+.1%}", flush=True)
    print(summary(f"{pairs} pairs of identical loops: second/first", ratios))
    print(summary("  absolute difference", [abs(r) for r in ratios]))


def interleaved(questions: int) -> None:
    """Each task answered by a plain process (no Dask) and by one worker, alternately, cold caches both: the
    answering seconds of each, without the drift between ten-second stretches."""
    from distributed import Client

    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
    tasks = plan_tasks(study.questions, 1)
    command = [sys.executable, __file__, "--serve", "--questions", str(questions)]
    here = there = 0.0
    with (
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as plain,
        local_cluster(1) as cluster,
        Client(cluster) as client,
    ):
        assert plain.stdin is not None and plain.stdout is not None
        assert plain.stdout.readline().strip() == "ready"

        def local(i: int) -> float:
            plain.stdin.write(f"{i}\n")
            plain.stdin.flush()
            return float(plain.stdout.readline())

        def remote(i: int) -> float:
            batch = execute.Batch(tasks[i][0].kind, tuple((q.id, q.values) for q in tasks[i]))
            client.submit(lambda: execute._cache().clear(), pure=False).result()
            return answering_s(client.submit(execute.answer_task, batch, pure=False).result().rows)

        for i in range(len(tasks)):
            if i % 2:
                here, there = here + local(i), there + remote(i)
            else:
                there, here = there + remote(i), here + local(i)
        plain.stdin.close()
    print(
        f"interleaved by task ({len(tasks)} tasks): plain process {here:.2f}s, worker {there:.2f}s answering; "
        f"ratio worker/plain {there / here:.3f}"
    )


def repeated(questions: int, repeat: int) -> None:
    """Loop, 1-worker and 2-worker studies in each repetition, in one long process."""
    with tempfile.TemporaryDirectory() as tmp:
        study = load_study(study_file(Path(tmp), questions))
        n = len(study.questions)
        sweeps = len({group_key(q) for q in study.questions})
        print(f"{n} questions, {sweeps} budget sweeps, {len(plan_tasks(study.questions, 1))} tasks on 1 worker")
        rows = []
        for rep in range(repeat):
            loop = plain_loop(study)
            one = on_cluster(study, Path(tmp), 1)
            two = on_cluster(study, Path(tmp), 2)
            ratios = one.overhead(loop)
            rows.append((loop, one, two, ratios))
            print(
                f"rep {rep + 1}: loop {loop.wall_s:.1f}s ({loop.cpu_s:.1f}s CPU), 1 worker {one.wall_s:.1f}s "
                f"({one.cpu_s:.1f}s CPU, +{one.start_s:.1f}s start), 2 workers {two.wall_s:.1f}s ({two.cpu_s:.1f}s "
                f"CPU, +{two.start_s:.1f}s start); {describe(ratios)}; speed-up {one.wall_s / two.wall_s:.2f}x "
                f"(with start-up {(one.wall_s + one.start_s) / (two.wall_s + two.start_s):.2f}x); "
                f"load {os.getloadavg()[0]:.1f}"
            )
        per_question = naive(study)
    loop_s, one_s, two_s = (statistics.median(r[i].wall_s for r in rows) for i in range(3))
    print(
        f"median: loop {loop_s:.1f}s ({loop_s / n * 1e3:.1f} ms/question), "
        f"1 worker {one_s:.1f}s, 2 workers {two_s:.1f}s"
    )
    for key, name in (("wall", "overhead wall"), ("cpu", "overhead CPU"), ("own", "the study's own wall time")):
        print("  " + summary(name, [r[3][key] for r in rows]))
    print("  " + summary("answering ratio worker/loop", [r[3]["answering"] for r in rows], percent=False))
    print("  " + summary("speed-up on 2 workers", [r[1].wall_s / r[2].wall_s for r in rows], percent=False))
    print(f"naive loop (one api call per question, no shared tables): {per_question * 1e3:.1f} ms/question")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument(
        "--fresh",
        type=int,
        default=0,
        metavar="N",
        help="instead: N fresh processes, each running the loop and the 1-worker study, in alternating order",
    )
    parser.add_argument(
        "--interleaved", action="store_true", help="instead: the tasks answered here and on one worker alternately"
    )
    parser.add_argument(
        "--control",
        type=int,
        default=0,
        metavar="N",
        help="instead: N pairs of fresh processes answering the same loop, the machine's noise",
    )
    parser.add_argument(
        "--thread-cpu",
        type=int,
        default=0,
        metavar="N",
        help="instead: N pairs of a fresh plain "
        "process and a fresh worker answering every question, their thread's CPU",
    )
    parser.add_argument("--pair", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--usage-alone", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--loop-alone", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--study-first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.usage_alone:
        print(json.dumps(thread_usage(all_items(args.questions))))
        return
    if args.serve or args.loop_alone:
        (serve if args.serve else loop_alone)(args.questions)
        return
    if args.pair:
        fresh_pair(args.questions, args.study_first)
        return
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    if args.fresh:
        fresh(args.questions, args.fresh)
    elif args.control:
        control(args.questions, args.control)
    elif args.thread_cpu:
        thread_cpu(args.questions, args.thread_cpu)
    elif args.interleaved:
        interleaved(args.questions)
    else:
        repeated(args.questions, args.repeat)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
