"""Measurements in the formats people have: our measured-points CSV and the benchmark clients' result files, as the
text cells ``read_measured`` returns (the rows ``validate`` and ``calibrate`` map with ``measured.map_row``).

A client's result file (``deploy.results``: vLLM, SGLang, GenAI-Perf, AIPerf, GuideLLM; told apart by content) says
what was sent and measured but not what served it. The deployment comes from, in this order of precedence:

1. flags (``Description`` given to ``read_any``: ``--model``, ``--gpu``, ``--n-gpus``, ``--tp``/``--pp``/``--ep``
   or ``--layout``, ``--framework``, ``--precision``, ``--kv-precision``, ``--concurrency``);
2. ``deployment.yaml`` in the result file's folder (the keys of ``DEPLOYMENT_KEYS``; ``layout`` written as the
   measured-points CSV writes it: ``TP8``, ``TP4 x 2 instances``, ``DEP8``, ``prefill 2 GPU TP2 + decode 4 GPU TP4``);
3. the recipe that produced the run (``roofline-opt launch`` / ``--emit``): its ``ENGINE.predicted.json`` names the
   deployment, matched by the recipe id the run carries (``deploy.measure``).

Each run becomes one row: ``batch_or_concurrency`` the client's cap on requests in flight (a rate-based run states
none, so it is checked against the frontier at its per-user speed), ``input_len``/``output_len`` the measured mean
tokens per request, ``tpot_ms`` the median time per output token after the first (tok/s per request = 1000 / it),
``tok_s_per_gpu`` the output tokens per second over every GPU of the deployment (prefill GPUs included); the median
TTFT is kept as ``ttft_ms``, and ``source`` names the file and run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt import checks
from roofline_opt.errors import InvalidInput

if TYPE_CHECKING:
    from roofline_opt.deploy.results import BenchRun

DEPLOYMENT_FILE = "deployment.yaml"
"""The file beside a result file that describes its deployment."""
DEPLOYMENT_KEYS = (
    "model",
    "gpu",
    "n_gpus",
    "layout",
    "framework",
    "framework_version",
    "precision",
    "kv_precision",
    "concurrency",
)
"""Keys of ``deployment.yaml`` (each optional; ``framework_version`` is appended to ``framework``)."""
MAX_DEPLOYMENT_BYTES = 64 << 10
BITS_WORD = {4: "int4", 8: "fp8", 16: "bf16"}
"""A recipe's weight and KV bits as the words a measured row's precision uses."""
MAX_GPUS = 1 << 20


@dataclass(frozen=True)
class Description:
    """A deployment as a measured row describes it (text as the CSV writes it); None: not stated here."""

    model: str | None = None
    gpu: str | None = None
    n_gpus: int | None = None
    layout: str | None = None
    framework: str | None = None
    precision: str | None = None
    kv_precision: str | None = None
    concurrency: int | None = None
    notes: str = ""
    origin: str = ""
    """Where it was read (``flags``, a deployment.yaml, a recipe id)."""

    def over(self, base: Description) -> Description:
        """This description's stated fields, the rest from ``base``."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) not in (None, "")}
        values["origin"] = " over ".join(o for o in (self.origin, base.origin) if o)
        return replace(base, **values)


def from_flags(
    model: str | None = None,
    gpu: str | None = None,
    n_gpus: str | None = None,
    tp: str | None = None,
    pp: str | None = None,
    ep: str | None = None,
    layout: str | None = None,
    framework: str | None = None,
    precision: str | None = None,
    kv_precision: str | None = None,
    concurrency: str | None = None,
) -> Description | None:
    """The deployment the command line states (None when it states nothing); ``--tp/--pp/--ep`` build a layout."""
    degrees = {
        k: checks.positive_int(f"--{k}", v, maximum=MAX_GPUS)
        for k, v in (("tp", tp), ("pp", pp), ("ep", ep))
        if v is not None
    }
    if degrees and layout:
        raise InvalidInput("--layout", "excludes --tp, --pp and --ep: give the layout one way")
    if degrees:
        layout = " ".join(f"{k.upper()}{degrees.get(k, 1)}" for k in ("tp", "pp", "ep") if k != "ep" or k in degrees)
    gpus = checks.positive_int("--n-gpus", n_gpus, maximum=MAX_GPUS) if n_gpus is not None else None
    cap = checks.positive_int("--concurrency", concurrency, maximum=MAX_GPUS) if concurrency is not None else None
    desc = Description(model, gpu, gpus, layout, framework, precision, kv_precision, cap, origin="flags")
    return desc if desc != Description(origin="flags") else None


def read_description(path: str | Path) -> Description:
    """A ``deployment.yaml``: the keys of DEPLOYMENT_KEYS, text or whole numbers; anything else is InvalidInput."""
    from roofline_opt import files

    source = str(path)
    data = files.load_yaml(files.read_text(path, source, MAX_DEPLOYMENT_BYTES, "a deployment file"), source)
    if not isinstance(data, Mapping):
        raise InvalidInput(source, f"must be a mapping of {', '.join(DEPLOYMENT_KEYS)}")
    unknown = [str(k) for k in data if k not in DEPLOYMENT_KEYS]
    if unknown:
        raise InvalidInput(f"{source}: {unknown[0]}", f"is not a deployment key: use {', '.join(DEPLOYMENT_KEYS)}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("n_gpus", "concurrency"):
            values[key] = checks.positive_int(f"{source}: {key}", value, maximum=MAX_GPUS)
        elif isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).isprintable():
            values[key] = str(value).strip()
        else:
            raise InvalidInput(f"{source}: {key}", f"must be text. Got {checks.shown(value)} instead.")
    version = values.pop("framework_version", None)
    if version:
        values["framework"] = f"{values.get('framework', '')} {version}".strip()
    return Description(**values, origin=source)


def _shape(inst: Mapping[str, Any]) -> str:
    if inst.get("dp_attention"):
        return f"DEP{inst['tp']}"
    shape = f"TP{inst['tp']} PP{inst['pp']}"
    return shape + (f" EP{inst['ep']}" if inst.get("ep", 1) > 1 else "")


def from_prediction(prediction: Mapping[str, Any], where: str) -> Description:
    """The deployment a recipe's predicted-figures file names (``deploy.bench.predicted``)."""
    dep = prediction.get("deployment")
    rid = prediction.get("recipe_id")
    if not isinstance(dep, Mapping) or not isinstance(dep.get("instances"), list) or not dep["instances"]:
        raise InvalidInput(where, f"recipe {rid!r}'s predicted.json names no deployment: emit the recipe again")
    instances = [i for i in dep["instances"] if isinstance(i, Mapping)]
    decode = [i for i in instances if i.get("role") != "prefill"]
    prefill = [i for i in instances if i.get("role") == "prefill"]
    if len(decode) != 1 or len(prefill) > 1:
        raise InvalidInput(where, f"recipe {rid!r} has several instance kinds: describe one with {DEPLOYMENT_FILE}")
    d = decode[0]
    count = {id(i): int(i["tp"]) * int(i["pp"]) * int(i["count"]) for i in instances}
    if prefill:
        p = prefill[0]
        layout = f"prefill {count[id(p)]} GPU {_shape(p)} + decode {count[id(d)]} GPU {_shape(d)}"
    else:
        copies = int(d["count"])
        layout = _shape(d) + (f" x {copies} instances" if copies > 1 and not d.get("dp_attention") else "")
    notes = ""
    draft = dep.get("draft")
    if dep.get("gamma") and isinstance(draft, str):
        notes = f"MTP{dep['gamma']} on" if draft.endswith("-mtp") else f"speculative decoding, draft {draft}"
    engine, version = prediction.get("engine"), prediction.get("version")
    return Description(
        model=str(dep.get("model") or prediction.get("model") or "") or None,
        gpu=str(d.get("gpu") or "") or None,
        n_gpus=sum(count.values()),
        layout=layout,
        framework=" ".join(str(x) for x in (engine, version) if x) or None,
        precision=BITS_WORD.get(int(dep.get("weight_bits") or 16)),
        kv_precision=BITS_WORD.get(int(dep.get("kv_bits") or 16)),
        concurrency=(prediction.get("workload") or {}).get("max_concurrency"),
        notes=notes,
        origin=f"recipe {rid}",
    )


def _gpus_of(layout: str, n_gpus: int | None) -> int | None:
    """GPUs a layout text uses (every instance), as ``validate`` reads it."""
    from roofline_opt.fidelity import layouts

    if n_gpus is not None:
        return n_gpus
    parsed = layouts.map_layout(layout, "", None, [], [], "layout")
    return parsed.total_gpus if parsed is not None else None


def _round(value: float | None) -> str:
    return "" if value is None else str(round(value))


def run_cells(run: BenchRun, desc: Description, line: int) -> dict[str, str]:
    """The measured-row cells of one ``deploy.results.BenchRun`` served by ``desc``."""
    model, layout, weights = desc.model or run.model or "", desc.layout or "", desc.precision or ""
    stated = (("model", model), ("gpu", desc.gpu), ("layout", layout), ("precision", weights))
    missing = [name for name, value in stated if not value]
    if missing:
        raise InvalidInput(
            run.source,
            f"does not say its deployment's {', '.join(missing)}: give them as flags (--model, --gpu, --tp or "
            f"--layout, --precision), in a {DEPLOYMENT_FILE} beside the file, or run the recipe's bench script",
        )
    n_gpus = _gpus_of(layout, desc.n_gpus)
    concurrency = run.concurrency or desc.concurrency
    precision = weights + (f" weights, {desc.kv_precision} kv" if desc.kv_precision else "")
    per_gpu = run.output_tok_s / n_gpus if run.output_tok_s is not None and n_gpus else None
    origin = f" ({desc.origin})" if desc.origin else ""
    return {
        "model": model,
        "precision": precision,
        "gpu": desc.gpu or "",
        "n_gpus": str(n_gpus or ""),
        "layout": layout,
        "batch_or_concurrency": f"concurrency {concurrency}" if concurrency else "",
        "input_len": _round(run.mean_input_tokens),
        "output_len": _round(run.mean_output_tokens),
        "tpot_ms": "" if run.median_tpot_ms is None else f"{run.median_tpot_ms:.6g}",
        "tok_s_per_request": "",
        "tok_s_per_gpu": "" if per_gpu is None else f"{per_gpu:.6g}",
        "framework": desc.framework or "",
        "notes": desc.notes,
        "ttft_ms": "" if run.median_ttft_ms is None else f"{run.median_ttft_ms:.6g}",
        "client": run.client,
        "source": f"{run.source}{origin}",
        "line": str(line),
    }


def _prediction_of(run: BenchRun, path: Path) -> Description | None:
    """The deployment of the recipe the run carries the id of, when its predicted.json is found."""
    from roofline_opt.deploy import measure

    if measure.recipe_id(run, path) is None:
        return None
    try:
        prediction = measure.find_prediction(run, path, None, str(path))
    except InvalidInput:
        return None
    return from_prediction(prediction, str(path))


def _is_result(text: str) -> bool:
    """A benchmark client's result (JSON, JSON lines, AIPerf's CSV) rather than a measured-points CSV."""
    head = text.lstrip()[:16]
    return head.startswith(("{", "[", "Metric,"))


def _bench_cells(path: Path, text: str, deployment: Description | None) -> list[dict[str, str]]:
    from roofline_opt.deploy import results

    beside = path.parent / DEPLOYMENT_FILE
    described = read_description(beside) if beside.is_file() else None
    out: list[dict[str, str]] = []
    for run in results.parse_text(text, str(path)):
        desc = _prediction_of(run, path) or Description()
        for layer in (described, deployment):
            if layer is not None:
                desc = layer.over(desc)
        out.append(run_cells(run, desc, len(out) + 1))
    return out


class MeasuredRows(list):
    """Measured rows read by ``read_any``, named by their files: a list of text cells that is also path-like
    (``Path(rows).name`` lists the files' names), so a function that takes a measured-points CSV's path, reads it with
    ``measured.read_measured`` and names its input by the path takes these rows as they are."""

    def __init__(self, rows: Sequence[dict[str, str]], names: Sequence[str]) -> None:
        super().__init__(rows)
        self.names = tuple(names)

    def __fspath__(self) -> str:
        return ", ".join(self.names)


def read_any(
    paths: Sequence[str | Path], deployment: Description | None = None, fields: Sequence[str] | None = None
) -> MeasuredRows:
    """The measured rows of every file, each a measured-points CSV or a benchmark client's result file (told apart
    by content), as ``measured.read_measured`` returns them; ``fields`` name each file in errors (default: its path).
    One CSV keeps its line numbers; otherwise rows are numbered 1.. over all files in order, and ``source`` names
    each one's file and line or run."""
    from roofline_opt import files
    from roofline_opt.deploy import results
    from roofline_opt.fidelity.measured import read_measured

    if not paths:
        raise InvalidInput("FILE", "give at least one measured-points CSV or benchmark result file")
    rows: list[dict[str, str]] = []
    for name, field in zip(paths, fields or [str(p) for p in paths], strict=True):
        path = Path(name)
        if not path.exists() or path.is_dir():  # FIFOs and devices are read (and bounded) by files.read_text
            why = "a folder" if path.is_dir() else f"no such file {path.absolute()}"
            raise InvalidInput(
                field, f"must be an existing measured-points CSV or benchmark result file. Got {str(name)!r} ({why})."
            )
        text = files.read_text(path, field, results.MAX_RESULT_BYTES, "a measurement")
        if text and _is_result(text):
            rows += _bench_cells(path, text, deployment)
        else:
            rows += [row | {"source": f"{path} line {row['line']}"} for row in read_measured(path, field)]
    if len(paths) > 1 or any("client" in row for row in rows):
        rows = [row | {"line": str(n)} for n, row in enumerate(rows, start=1)]
    return MeasuredRows(rows, [Path(p).name for p in paths])
