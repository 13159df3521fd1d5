"""Result files of the standard benchmark clients, read from their documented schemas into one kind of record.

A ``BenchRun`` is one measured run in the clients' common terms: what was sent (model id, requests in flight, mean
prompt and output tokens), what came back (medians of TTFT and of the time per output token after the first, output
tokens and requests per second of the whole deployment) and the recipe id the run carries, if any. The format is
told by content, never by the file's name:

- **vLLM** ``vllm bench serve --save-result`` (``--append-result``: one object per line): the ``result_json`` of
  vllm-project/vllm vllm/benchmarks/serve.py @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1 (``completed``,
  ``total_input_tokens``, ``total_output_tokens``, ``output_throughput``, ``request_throughput``,
  ``median_ttft_ms``, ``median_tpot_ms``, ``max_concurrency``, ``num_prompts``, ``model_id`` and each
  ``--metadata KEY=VALUE`` as a top-level key).
- **SGLang** ``python -m sglang.bench_serving --output-file`` (JSON lines, one per run): the ``result`` dict of
  sgl-project/sglang python/sglang/bench_serving.py @ 0033168f0f58b2bc05aa0273bd475d9c01bafb1c (the same metric
  names as vLLM's, plus ``total_output_tokens_retokenized``, ``random_range_ratio`` and a measured ``concurrency``).
- **GenAI-Perf** ``profile_export_genai_perf.json``: one object per metric (``time_to_first_token``,
  ``inter_token_latency``, ``output_token_throughput``, ``request_throughput``, ``input_sequence_length``,
  ``output_sequence_length``, ``request_count``) with ``unit``, ``avg``, ``p50`` ...
  (triton-inference-server/perf_analyzer genai-perf/genai_perf/metrics/llm_metrics.py and statistics.py @
  263c5f6e0c7a6c15472a54409174981f67930cfe) and ``input_config``: the flat argparse namespace of older releases
  (genai-perf/genai_perf/export_data/json_exporter.py @ 4cc7650c23bc80d16a27c1049950d87f399c9b7a: ``concurrency``,
  ``request_rate``, ``artifact_dir``, ``model``) or the nested config of newer ones (json_exporter.py @ 263c5f6e:
  ``perf_analyzer.stimulus.concurrency``, ``output.artifact_directory``, ``model_names``).
- **AIPerf** ``profile_export_aiperf.json``: the same metric objects (ai-dynamo/aiperf
  aiperf/common/models/export_models.py @ db4f6397d11ee2d4cfbb41f70b2327315163dcf0, ``JsonExportData``) with
  ``benchmark_duration``, ``error_request_count`` and ``input_config`` the user config (``endpoint.model_names``,
  ``loadgen.concurrency``, ``output.artifact_directory``, ``cli_command``); ``profile_export_aiperf.csv``: the two
  tables of aiperf/exporters/csv_exporter.py @ db4f6397 (``Metric,avg,min,max,p1,...`` rows by metric header and
  unit, then ``Metric,Value``), which carries no settings.
- **GuideLLM** ``benchmarks.json``: a report (vllm-project/guidellm src/guidellm/benchmark/schemas/report.py @
  ee7a77457ba668b4b5ccb40f110518829893b36a) whose ``benchmarks`` each hold ``metrics`` (schemas/metrics.py:
  ``time_to_first_token_ms``, ``inter_token_latency_ms``, ``output_tokens_per_second``, ``prompt_token_count``,
  ``output_token_count``, ``request_totals``, each split ``successful`` / ``errored`` / ``incomplete`` / ``total``
  into ``mean``, ``median``, ...) and the scheduling strategy (``config.strategy``, ``args.strategy`` before v0.4:
  ``concurrent`` with ``streams``, ``synchronous``, ``throughput``, ``constant`` / ``poisson`` with ``rate``).

The time per output token is the clients' per-request ``(latency - TTFT) / (output tokens - 1)``: vLLM's and
SGLang's TPOT, GenAI-Perf's and AIPerf's inter-token latency, GuideLLM's ``inter_token_latency_ms`` (its
``time_per_output_token_ms`` counts the first token too and is not used). Every number is checked (a finite number
in its range); a file that is none of these formats, or holds a bad value, is one InvalidInput naming the file and
the field.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline_opt import checks
from roofline_opt.errors import InvalidInput

MAX_RESULT_BYTES = 64 << 20
"""Largest result file read (vLLM's ``--save-detailed`` lists every request's text)."""
MAX_RUNS = 10_000
"""Most runs one result file may hold (JSON lines, GuideLLM's benchmarks)."""
MAX_COUNT = 10**9
"""Largest request or token count a run may state."""
MAX_MS = 1e9
"""Longest latency a run may state, in ms (11.6 days)."""
MAX_RATE = 1e9
"""Largest tokens or requests per second a run may state."""
MAX_TEXT = 500
"""Longest model id or metadata text kept from a run."""
RECIPE_KEY = "roofline_recipe"
"""The vLLM ``--metadata`` key that carries a recipe id into the result file."""
RECIPE_ID_RE = re.compile(r"(?<![0-9a-z])((?:vllm|sglang|trtllm|dynamo)-[0-9a-f]{12})(?![0-9a-f])")
"""A recipe id (``deploy.recipe.recipe_id``) inside an artifact folder name or a command line."""
CLIENTS = ("vllm", "sglang", "genai-perf", "aiperf", "guidellm")
"""Result formats read, by the client that writes them."""


@dataclass(frozen=True)
class BenchRun:
    """One run of a benchmark client: settings sent and figures measured (None where the file does not say).

    ``concurrency`` is the cap on requests in flight the client held (vLLM/SGLang ``max_concurrency``, GenAI-Perf
    and AIPerf ``--concurrency``, GuideLLM's concurrent ``streams``); ``request_rate`` a target rate of a rate-based
    run (None: as fast as allowed). Throughputs are of the whole deployment the client loaded."""

    client: str
    source: str
    model: str | None = None
    completed: int | None = None
    failed: int | None = None
    num_prompts: int | None = None
    concurrency: int | None = None
    request_rate: float | None = None
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    duration_s: float | None = None
    output_tok_s: float | None = None
    requests_per_s: float | None = None
    median_ttft_ms: float | None = None
    mean_ttft_ms: float | None = None
    median_tpot_ms: float | None = None
    mean_tpot_ms: float | None = None
    recipe_id: str | None = None


class _Reader:
    """Checked access to one parsed object of ``source``; every refusal names the file and the field."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def _at(self, path: str) -> Any:
        value: Any = self.data
        for key in path.split("."):
            if not isinstance(value, Mapping) or key not in value:
                return None
            value = value[key]
        return value

    def number(self, path: str, maximum: float, integer: bool = False, zero: bool = False) -> float | None:
        """The number at ``path`` (dotted), None when absent or null; refused unless finite and in range."""
        value = self._at(path)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise InvalidInput(f"{self.source}: {path}", f"must be a number. Got {checks.shown(value)} instead.")
        low_ok = value >= 0 if zero else value > 0
        if not low_ok or value > maximum or (integer and value != int(value)):
            kind = "a whole number" if integer else "a number"
            bound = ">= 0" if zero else "> 0"
            msg = f"must be {kind} {bound} and <= {maximum:g}. Got {checks.shown(value)} instead."
            raise InvalidInput(f"{self.source}: {path}", msg)
        return float(value)

    def count(self, path: str) -> int | None:
        value = self.number(path, MAX_COUNT, integer=True, zero=True)
        return None if value is None else int(value)

    def text(self, path: str) -> str | None:
        value = self._at(path)
        if value is None:
            return None
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            value = value[0]  # GenAI-Perf / AIPerf model lists: the first model is the one benchmarked
        if not isinstance(value, str) or len(value) > MAX_TEXT or not value.isprintable():
            msg = f"must be printable text of at most {MAX_TEXT} characters. Got {checks.shown(value)} instead."
            raise InvalidInput(f"{self.source}: {path}", msg)
        return value or None


def _recipe_id(*texts: str | None) -> str | None:
    for text in texts:
        match = RECIPE_ID_RE.search(text.lower()) if text else None
        if match:
            return match.group(1)
    return None


def _mean_per_request(total: float | None, completed: int | None) -> float | None:
    return total / completed if total is not None and completed else None


# ----------------------------------------------------------------------------------------------- vLLM and SGLang

_SGLANG_KEYS = ("total_output_tokens_retokenized", "random_range_ratio", "accept_length", "input_throughput")
"""Keys SGLang's result has and vLLM's has not (vLLM's carries ``endpoint_type``/``model_id`` instead)."""


def _serving_run(r: _Reader, client: str) -> BenchRun:
    """vLLM's ``result_json`` or SGLang's ``result``: the same metric names."""
    completed = r.count("completed")
    rate = r.data.get("request_rate")
    # vLLM writes an unlimited rate as "inf", SGLang as the float (JSON Infinity)
    unlimited = rate == "inf" or isinstance(rate, float) and math.isinf(rate) and rate > 0
    return BenchRun(
        client=client,
        source=r.source,
        model=r.text("model_id"),
        completed=completed,
        failed=r.count("failed"),
        num_prompts=r.count("num_prompts"),
        concurrency=r.count("max_concurrency"),
        request_rate=None if unlimited else r.number("request_rate", MAX_RATE),
        mean_input_tokens=_mean_per_request(r.count("total_input_tokens"), completed),
        mean_output_tokens=_mean_per_request(r.count("total_output_tokens"), completed),
        duration_s=r.number("duration", MAX_MS),
        output_tok_s=r.number("output_throughput", MAX_RATE),
        requests_per_s=r.number("request_throughput", MAX_RATE),
        median_ttft_ms=r.number("median_ttft_ms", MAX_MS, zero=True),
        mean_ttft_ms=r.number("mean_ttft_ms", MAX_MS, zero=True),
        median_tpot_ms=r.number("median_tpot_ms", MAX_MS),
        mean_tpot_ms=r.number("mean_tpot_ms", MAX_MS),
        recipe_id=r.text(RECIPE_KEY),
    )


# ----------------------------------------------------------------------------------------------- GenAI-Perf, AIPerf


def _stat(r: _Reader, metric: str, stat: str, maximum: float, zero: bool = False) -> float | None:
    return r.number(f"{metric}.{stat}", maximum, zero=zero)


def _profile_run(r: _Reader, client: str) -> BenchRun:
    """A GenAI-Perf or AIPerf profile export (metric objects with ``avg``/``p50``; settings in ``input_config``)."""
    cfg = "input_config"
    concurrency = (
        r.count(f"{cfg}.concurrency")  # GenAI-Perf, argparse namespace
        or r.count(f"{cfg}.perf_analyzer.stimulus.concurrency")  # GenAI-Perf, nested config
        or r.count(f"{cfg}.loadgen.concurrency")  # AIPerf user config
    )
    rate = (
        r.number(f"{cfg}.request_rate", MAX_RATE)
        or r.number(f"{cfg}.perf_analyzer.stimulus.request_rate", MAX_RATE)
        or r.number(f"{cfg}.loadgen.request_rate", MAX_RATE)
    )
    model = r.text(f"{cfg}.model") or r.text(f"{cfg}.model_names") or r.text(f"{cfg}.endpoint.model_names")
    folder = r.text(f"{cfg}.artifact_dir") or r.text(f"{cfg}.output.artifact_directory") or r.text(f"{cfg}.cli_command")
    completed = r.count("request_count.avg")
    return BenchRun(
        client=client,
        source=r.source,
        model=model,
        completed=completed,
        failed=r.count("error_request_count.avg"),
        num_prompts=(
            r.count(f"{cfg}.request_count")
            or r.count(f"{cfg}.loadgen.request_count")
            or r.count(f"{cfg}.perf_analyzer.measurement.num")
        ),
        concurrency=concurrency,
        request_rate=rate,
        mean_input_tokens=_stat(r, "input_sequence_length", "avg", MAX_COUNT),
        mean_output_tokens=_stat(r, "output_sequence_length", "avg", MAX_COUNT),
        duration_s=_stat(r, "benchmark_duration", "avg", MAX_MS),
        output_tok_s=_stat(r, "output_token_throughput", "avg", MAX_RATE),
        requests_per_s=_stat(r, "request_throughput", "avg", MAX_RATE),
        median_ttft_ms=_stat(r, "time_to_first_token", "p50", MAX_MS, zero=True),
        mean_ttft_ms=_stat(r, "time_to_first_token", "avg", MAX_MS, zero=True),
        median_tpot_ms=_stat(r, "inter_token_latency", "p50", MAX_MS),
        mean_tpot_ms=_stat(r, "inter_token_latency", "avg", MAX_MS),
        recipe_id=_recipe_id(folder, r.text(f"{cfg}.cli_command")),
    )


_AIPERF_CSV_METRICS = {
    "Time to First Token (ms)": "time_to_first_token",
    "Inter Token Latency (ms)": "inter_token_latency",
    "Input Sequence Length (tokens)": "input_sequence_length",
    "Output Sequence Length (tokens)": "output_sequence_length",
    "Request Throughput (requests/sec)": "request_throughput",
    "Output Token Throughput (tokens/sec)": "output_token_throughput",
    "Request Count": "request_count",
    "Error Request Count": "error_request_count",
    "Benchmark Duration (sec)": "benchmark_duration",
}
"""AIPerf CSV row names -> metric tags: each metric's ``header`` and display unit (aiperf/metrics/types/*.py @
db4f6397: times shown in ms, the duration in sec, counts without a unit); a row in other units is not read."""


def _aiperf_csv(text: str, source: str) -> dict[str, Any]:
    """The two tables of ``profile_export_aiperf.csv`` as the JSON export's metric objects (no settings)."""
    metrics: dict[str, Any] = {}
    header: list[str] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            header = []
            continue
        if row[0] == "Metric":
            header = row
            continue
        tag = _AIPERF_CSV_METRICS.get(row[0])
        if tag is None or not header:
            continue
        names = ["avg"] if header[1:] == ["Value"] else header[1:]
        stats: dict[str, Any] = {}
        for name, cell in zip(names, row[1:], strict=False):
            if cell.strip():
                try:
                    stats[name] = float(cell.replace(",", ""))
                except ValueError:
                    raise InvalidInput(f"{source}: {row[0]} {name}", f"must be a number. Got {cell!r}") from None
        metrics[tag] = stats
    return metrics


# ----------------------------------------------------------------------------------------------- GuideLLM


def _guidellm_runs(report: Mapping[str, Any], source: str) -> Iterator[BenchRun]:
    benchmarks = report.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise InvalidInput(f"{source}: benchmarks", "must be a non-empty list of GuideLLM benchmarks")
    if len(benchmarks) > MAX_RUNS:
        raise InvalidInput(f"{source}: benchmarks", f"holds more than {MAX_RUNS:,} benchmarks")
    for index, bench in enumerate(benchmarks):
        where = f"{source} benchmark {index + 1}" if len(benchmarks) > 1 else source
        if not isinstance(bench, Mapping) or not isinstance(bench.get("metrics"), Mapping):
            raise InvalidInput(f"{where}: metrics", "must be the benchmark's metrics object")
        r = _Reader(bench, where)
        strategy = r._at("config.strategy") or r._at("args.strategy") or {}
        if not isinstance(strategy, Mapping):
            raise InvalidInput(f"{where}: config.strategy", "must be an object")
        s = _Reader(strategy, f"{where}: strategy")
        kind = s.text("type_")
        concurrency = s.count("streams") if kind == "concurrent" else 1 if kind == "synchronous" else None
        ok = "metrics.{}.successful.{}"
        yield BenchRun(
            client="guidellm",
            source=where,
            model=r.text("config.backend.model") or _Reader(report, source).text("config.model"),
            completed=r.count("metrics.request_totals.successful"),
            failed=r.count("metrics.request_totals.errored"),
            concurrency=concurrency,
            request_rate=s.number("rate", MAX_RATE) if kind in ("constant", "poisson", "async") else None,
            mean_input_tokens=r.number(ok.format("prompt_token_count", "mean"), MAX_COUNT),
            mean_output_tokens=r.number(ok.format("output_token_count", "mean"), MAX_COUNT),
            output_tok_s=r.number(ok.format("output_tokens_per_second", "mean"), MAX_RATE),
            requests_per_s=r.number(ok.format("requests_per_second", "mean"), MAX_RATE),
            median_ttft_ms=r.number(ok.format("time_to_first_token_ms", "median"), MAX_MS, zero=True),
            mean_ttft_ms=r.number(ok.format("time_to_first_token_ms", "mean"), MAX_MS, zero=True),
            median_tpot_ms=r.number(ok.format("inter_token_latency_ms", "median"), MAX_MS),
            mean_tpot_ms=r.number(ok.format("inter_token_latency_ms", "mean"), MAX_MS),
        )


# ----------------------------------------------------------------------------------------------- detection

_PROFILE_METRICS = ("time_to_first_token", "inter_token_latency", "output_token_throughput", "request_throughput")


def client_of(data: Any) -> str | None:
    """Which client wrote this parsed object (by its keys), or None."""
    if not isinstance(data, Mapping):
        return None
    if isinstance(data.get("benchmarks"), list):
        return "guidellm"
    if any(isinstance(data.get(k), Mapping) and "avg" in data[k] for k in _PROFILE_METRICS):
        cfg = data.get("input_config")
        is_aiperf = isinstance(cfg, Mapping) and ("loadgen" in cfg or "endpoint" in cfg and "cli_command" in cfg)
        return "aiperf" if is_aiperf or "benchmark_duration" in data else "genai-perf"
    if "completed" in data:
        return "sglang" if any(k in data for k in _SGLANG_KEYS) and "model_id" not in data else "vllm"
    return None


def _objects(text: str, source: str) -> list[Any]:
    """One JSON document, or JSON lines (vLLM ``--append-result``, SGLang ``--output-file``)."""
    from roofline_opt import files

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("{") and lines[0].endswith("}"):  # one object per line
        if len(lines) > MAX_RUNS:
            raise InvalidInput(source, f"holds more than {MAX_RUNS:,} runs")
        return [files.load_json(line, f"{source} line {n}") for n, line in enumerate(lines, start=1)]
    return [files.load_json(text, source)]


def parse_text(text: str, source: str) -> list[BenchRun]:
    """Every run in a result file's text (``source`` names it in errors)."""
    if text.lstrip().startswith("Metric,"):
        metrics = _aiperf_csv(text, source)
        if not any(k in metrics for k in _PROFILE_METRICS):
            raise InvalidInput(source, "is a CSV without AIPerf's metric rows (Time to First Token (ms), ...)")
        return [_profile_run(_Reader(metrics, source), "aiperf")]
    objects = _objects(text, source)
    runs: list[BenchRun] = []
    for n, data in enumerate(objects, start=1):
        where = f"{source} run {n}" if len(objects) > 1 else source
        client = client_of(data)
        if client is None:
            raise InvalidInput(
                where,
                "is not a benchmark result this reads: vllm bench serve --save-result, sglang.bench_serving "
                "--output-file, GenAI-Perf profile_export_genai_perf.json, AIPerf profile_export_aiperf.json/.csv "
                "or GuideLLM benchmarks.json",
            )
        if client == "guidellm":
            runs += _guidellm_runs(data, where)
        elif client in ("genai-perf", "aiperf"):
            runs.append(_profile_run(_Reader(data, where), client))
        else:
            runs.append(_serving_run(_Reader(data, where), client))
    return runs


def read(path: str | Path, field: str | None = None) -> list[BenchRun]:
    """Every run of a result file, read within MAX_RESULT_BYTES; bad files are one InvalidInput naming the file."""
    from roofline_opt import files

    source = field or str(path)
    return parse_text(files.read_text(path, source, MAX_RESULT_BYTES, "a benchmark result"), source)


def runs_of(paths: Sequence[str | Path]) -> list[BenchRun]:
    """The runs of several result files, in order."""
    return [run for path in paths for run in read(path)]
