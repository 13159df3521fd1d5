"""``roofline-opt evaluate``: every figure of fully specified setups, given by flags or as rows of a CSV file."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline_opt import checks
from roofline_opt.cli.engine_flag import add_engine_flags
from roofline_opt.errors import InvalidInput
from roofline_opt.physics import evaluator
from roofline_opt.physics import requests as rq
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.specs import PRESETS, WEIGHT_BITS, GpuSpec, ModelSpec, Preset

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

REQUIRED_COLUMNS = ("model", "gpu", "tp", "pp", "batch")
OPTIONAL_DEFAULTS = {
    "weight_bits": None,
    "tp_2d": False,
    "ep": 1,
    "dp_attention": False,
    "two_batch_overlap": False,
    "context": None,
    "tokens_per_step": 1,
    "draft": None,
    "acceptance": 0.8,
    "gamma_max": 0,
    "preset": "default",
    "kv_bits": 16,
    "isl": None,
    "osl": None,
    "serving": "agg",
    "chunk_tokens": rq.DEFAULT_CHUNK_TOKENS,
    "prefill_gpu": None,
    "prefill_tp": 1,
    "prefill_tp_2d": False,
    "prefill_pp": 1,
    "prefill_batch": 1,
    "prefill_instances": 1,
    "decode_instances": 1,
}
"""Optional inputs and their defaults; a CSV without such a column takes the flag's value instead."""
TABLE_COLUMNS = (
    "model",
    "weight_bits",
    "gpu",
    "layout",
    "batch",
    "context",
    "draft",
    "n_gpus",
    "step_time_s",
    "time_per_token_s",
    "tok_s_per_request",
    "tok_s_per_gpu",
    "usd_per_mtok",
    "usd_per_hour",
    "mfu_fraction",
    "fits_in_memory",
    "bottleneck",
    "best_gamma",
)
"""Columns of the terminal table for several setups (one setup shows every field; --json and --csv carry all)."""
REQUEST_TABLE_COLUMNS = (
    "model",
    "gpu",
    "tp",
    "pp",
    "batch",
    "kv_bits",
    "isl",
    "osl",
    "serving",
    "prefill_gpu",
    "prefill_tp",
    "prefill_pp",
    "prefill_batch",
    "n_gpus",
    "ttft_s",
    "tpot_s",
    "requests_per_s",
    "usd_per_request",
    "usd_per_mtok",
    "usd_per_hour",
    "tok_s_per_gpu",
    "fits_in_memory",
)
"""Columns of the terminal table when some setups price whole requests."""
_TRUE_FALSE = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
DRAFT_DEFAULT_BITS = 16


@dataclass(frozen=True)
class Setup:
    """One checked setup; ``model``, ``gpu`` and ``draft`` are names or paths as given (draft "" = none)."""

    model: str
    weight_bits: int
    gpu: str
    tp: int
    tp_2d: bool
    pp: int
    ep: int
    dp_attention: bool
    batch: int
    context: int
    tokens_per_step: int
    draft: str
    draft_weight_bits: int
    acceptance: float
    gamma_max: int
    preset: str
    kv_bits: int = 16
    isl: int | None = None
    osl: int | None = None
    serving: str = rq.AGG
    chunk_tokens: int = rq.DEFAULT_CHUNK_TOKENS
    prefill_gpu: str = ""
    prefill_tp: int = 1
    prefill_tp_2d: bool = False
    prefill_pp: int = 1
    prefill_batch: int = 1
    prefill_instances: int = 1
    decode_instances: int = 1
    two_batch_overlap: bool = False

    @property
    def is_request(self) -> bool:
        """Priced as whole requests (prompt and output lengths given)."""
        return self.isl is not None

    @property
    def group_key(self) -> tuple[Any, ...]:
        """Setups sharing this key are evaluated in one vectorised call (whole requests: one by one)."""
        if self.is_request:
            return (id(self),)
        return (
            self.model,
            self.weight_bits,
            self.gpu,
            self.draft,
            self.draft_weight_bits,
            self.acceptance,
            self.gamma_max,
            self.preset,
        )


class _Specs:
    """Specs loaded once per run, keyed by the name or path the user gave."""

    def __init__(self, prices: dict[str, float] | None = None, profile: EngineProfile | None = None) -> None:
        self._models: dict[str, tuple[ModelSpec, int | None]] = {}
        self._gpus: dict[str, GpuSpec] = {}
        self._prices = prices or {}
        self.profile = profile

    def preset(self, setup: Setup, gpu: GpuSpec) -> Preset:
        """The setup's physics on ``gpu``: the run's engine profile (--engine/--profile), else its preset."""
        if self.profile is None:
            return PRESETS[setup.preset]
        if setup.preset != "default":
            raise InvalidInput(
                "--preset", f"excludes --engine/--profile (a profile sets the physics). Got {setup.preset}."
            )
        return self.profile.preset_for(gpu)

    def interval_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """The profile's name and the ``*_low``/``*_high`` figures of one evaluated row (results.interval_fields)."""
        from roofline_opt.catalog.profiles import NEUTRAL, packaged_profile
        from roofline_opt.optimize.results import interval_fields

        profile = self.profile
        if profile is None and record.get("preset") == "default":
            profile = packaged_profile(NEUTRAL)
        entry = None if profile is None else profile.efficiency_named(str(record["gpu"]))
        quantiles = None if entry is None else entry.log_error_quantiles
        return {"profile": None if profile is None else profile.name, **interval_fields(record, quantiles)}

    def model(self, text: str, field: str) -> tuple[ModelSpec, int | None]:
        from roofline_opt import catalog

        if text not in self._models:
            self._models[text] = catalog.resolve_model(text, field)
        return self._models[text]

    def gpu(self, text: str, field: str) -> GpuSpec:
        from roofline_opt import catalog
        from roofline_opt.catalog.prices import with_prices

        if text not in self._gpus:
            gpu = catalog.load_gpu(text, field)
            self._gpus[text] = (
                with_prices((gpu,), {gpu.name: self._prices[gpu.name]}, field)[0] if (gpu.name in self._prices) else gpu
            )
        return self._gpus[text]


# ----------------------------------------------------------------------------------------------- parsing


def _flag(column: str) -> str:
    return "--" + column.replace("_", "-")


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, f"must be a name or a path. Got {value!r} instead.")
    return value.strip()


def _bool(field: str, value: Any) -> bool:
    return value if isinstance(value, bool) else _TRUE_FALSE[checks.choice(field, str(value).lower(), _TRUE_FALSE)]


def _weight_bits(field: str, value: Any, suffix_bits: int | None, model_text: str) -> int:
    """Explicit weight bits, else the model name's -int8/-int4 suffix, else 16; the two must agree."""
    if value is None:
        return suffix_bits or 16
    bits = checks.choice(field, value, WEIGHT_BITS)
    if suffix_bits is not None and bits != suffix_bits:
        msg = f"must match the precision suffix of {model_text!r} ({suffix_bits}). Got {bits} instead."
        raise InvalidInput(field, msg)
    return bits


def _check_runs(field: str, gpu: GpuSpec, bits: int) -> None:
    if not gpu.supports(bits):
        runs = ", ".join(str(b) for b in WEIGHT_BITS if gpu.supports(b))
        msg = f"must be a precision {gpu.name} has a FLOP rate for ({runs}). Got {bits} instead."
        raise InvalidInput(field, msg)


def _check_expert_parallel(field: str, model: ModelSpec, ep: int, tp: int) -> None:
    if ep == 1:
        return
    if not model.is_moe or model.n_experts % ep or tp % ep:
        experts = f"a MoE model's expert count ({model.n_experts})" if model.is_moe else "the experts of a MoE model"
        msg = f"must be 1 or divide both tp ({tp}) and {experts}. Got {ep} instead."
        raise InvalidInput(field, msg)


def _check_dp_attention(field: str, model: ModelSpec, tp: int, pp: int, ep: int) -> int:
    """Data-parallel attention: a MoE model, pp 1, experts over the whole group of tp GPUs (ep 1 or tp)."""
    if not model.is_moe:
        raise InvalidInput(field, f"needs a MoE model; {model.name} is dense. Got true instead.")
    if pp != 1 or ep not in (1, tp):
        msg = f"needs pp 1 and ep 1 or equal to tp (the group of {tp} GPUs). Got pp {pp}, ep {ep} instead."
        raise InvalidInput(field, msg)
    return tp


def parse_setup(values: Mapping[str, Any], label: Callable[[str], str], specs: _Specs) -> Setup:
    """Check one setup's raw values (text or numbers); ``label`` turns a column into the field errors name."""
    from roofline_opt.optimize.space import (
        DEFAULT_CONTEXT,
        MAX_BATCH_LIMIT,
        MAX_CONTEXT,
        MAX_DEGREE,
        MAX_GAMMA,
        MAX_TOKENS_PER_STEP,
    )

    model_text = _text(label("model"), values["model"])
    gpu_text = _text(label("gpu"), values["gpu"])
    model, suffix_bits = specs.model(model_text, label("model"))
    gpu = specs.gpu(gpu_text, label("gpu"))
    bits = _weight_bits(label("weight_bits"), values["weight_bits"], suffix_bits, model_text)
    _check_runs(label("weight_bits"), gpu, bits)
    tp = checks.positive_int(label("tp"), values["tp"], maximum=MAX_DEGREE)
    ep = checks.positive_int(label("ep"), values["ep"], maximum=MAX_DEGREE)
    pp = checks.positive_int(label("pp"), values["pp"], maximum=MAX_DEGREE)
    dp_attention = _bool(label("dp_attention"), values["dp_attention"])
    if dp_attention:
        ep = _check_dp_attention(label("dp_attention"), model, tp, pp, ep)
    else:
        _check_expert_parallel(label("ep"), model, ep, tp)
    two_batch_overlap = _bool(label("two_batch_overlap"), values["two_batch_overlap"])
    if two_batch_overlap and not dp_attention:
        msg = "overlaps data-parallel attention's all-to-all: give --dp-attention too. Got it without."
        raise InvalidInput(label("two_batch_overlap"), msg)
    draft_text = "" if values["draft"] is None else _text(label("draft"), values["draft"])
    draft_bits = DRAFT_DEFAULT_BITS
    if draft_text:
        draft_bits = specs.model(draft_text, label("draft"))[1] or DRAFT_DEFAULT_BITS
        _check_runs(label("draft"), gpu, draft_bits)
    gamma_max = checks.positive_int(label("gamma_max"), values["gamma_max"], minimum=0, maximum=MAX_GAMMA)
    if bool(gamma_max) != bool(draft_text):
        wanted = "at least 1 with a draft model (0 leaves it unused)" if draft_text else "0 without a draft model"
        raise InvalidInput(label("gamma_max"), f"must be {wanted}. Got {gamma_max} instead.")
    request = _request_fields(values, label, specs, gpu_text, bits, bool(draft_text))
    context = values["context"]
    if context is None:
        context = DEFAULT_CONTEXT if "isl" not in request else int(request["isl"] + request["osl"] / 2)
    return Setup(
        model=model_text,
        weight_bits=bits,
        gpu=gpu_text,
        tp=tp,
        tp_2d=_bool(label("tp_2d"), values["tp_2d"]),
        pp=pp,
        ep=ep,
        dp_attention=dp_attention,
        two_batch_overlap=two_batch_overlap,
        batch=checks.positive_int(label("batch"), values["batch"], maximum=MAX_BATCH_LIMIT),
        context=checks.positive_int(label("context"), context, minimum=0, maximum=MAX_CONTEXT),
        tokens_per_step=checks.positive_int(
            label("tokens_per_step"), values["tokens_per_step"], maximum=MAX_TOKENS_PER_STEP
        ),
        draft=draft_text,
        draft_weight_bits=draft_bits,
        acceptance=checks.probability(label("acceptance"), values["acceptance"]),
        gamma_max=gamma_max,
        preset=checks.choice(label("preset"), values["preset"], PRESETS),
        **request,
    )


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _request_fields(values, label, specs: _Specs, gpu_text: str, bits: int, has_draft: bool) -> dict[str, Any]:
    """KV bits, request lengths, serving mode, chunk and the prefill side of a setup, checked."""
    from roofline_opt.optimize.space import MAX_BATCH_LIMIT, MAX_CONTEXT, MAX_DEGREE
    from roofline_opt.physics.evaluator import KV_BITS

    out: dict[str, Any] = {"kv_bits": checks.choice(label("kv_bits"), values["kv_bits"], KV_BITS)}
    isl, osl = values["isl"], values["osl"]
    serving = checks.choice(label("serving"), values["serving"], rq.SERVING_MODES)
    if _blank(isl) and _blank(osl):
        if serving != rq.AGG:
            raise InvalidInput(label("serving"), "disagg needs whole requests: give --isl and --osl")
        return out
    if _blank(isl) or _blank(osl):
        missing = "isl" if _blank(isl) else "osl"
        raise InvalidInput(label(missing), "is required with the other request length (--isl and --osl go together)")
    if has_draft:
        raise InvalidInput(label("draft"), "cannot be combined with whole requests (--isl/--osl) yet. Drop one.")
    out.update(
        isl=checks.positive_int(label("isl"), isl, minimum=0 if serving == rq.AGG else 1, maximum=MAX_CONTEXT),
        osl=checks.positive_int(label("osl"), osl, maximum=MAX_CONTEXT),
        serving=serving,
        chunk_tokens=checks.positive_int(label("chunk_tokens"), values["chunk_tokens"], maximum=MAX_CONTEXT),
    )
    if serving == rq.DISAGG:
        prefill_text = gpu_text if _blank(values["prefill_gpu"]) else _text(label("prefill_gpu"), values["prefill_gpu"])
        _check_runs(label("prefill_gpu"), specs.gpu(prefill_text, label("prefill_gpu")), bits)
        out.update(
            prefill_gpu=prefill_text,
            prefill_tp=checks.positive_int(label("prefill_tp"), values["prefill_tp"], maximum=MAX_DEGREE),
            prefill_tp_2d=_bool(label("prefill_tp_2d"), values["prefill_tp_2d"]),
            prefill_pp=checks.positive_int(label("prefill_pp"), values["prefill_pp"], maximum=MAX_DEGREE),
            prefill_batch=checks.positive_int(label("prefill_batch"), values["prefill_batch"], maximum=MAX_BATCH_LIMIT),
            prefill_instances=checks.positive_int(
                label("prefill_instances"), values["prefill_instances"], maximum=MAX_DEGREE
            ),
            decode_instances=checks.positive_int(
                label("decode_instances"), values["decode_instances"], maximum=MAX_DEGREE
            ),
        )
    return out


def _flag_defaults(args: argparse.Namespace) -> dict[str, Any]:
    return {column: getattr(args, column) for column in OPTIONAL_DEFAULTS}


def setups_from_flags(args: argparse.Namespace, specs: _Specs) -> list[Setup]:
    """The single setup the flags describe."""
    for column in REQUIRED_COLUMNS:
        if getattr(args, column) is None:
            raise InvalidInput(_flag(column), "is required (or give --from-csv FILE)")
    values = {column: getattr(args, column) for column in REQUIRED_COLUMNS} | _flag_defaults(args)
    return [parse_setup(values, _flag, specs)]


def setups_from_csv(args: argparse.Namespace, specs: _Specs) -> list[Setup]:
    """One setup per CSV row; blank or absent optional cells take the flags' values."""
    from roofline_opt import catalog, files

    given = [_flag(c) for c in REQUIRED_COLUMNS if getattr(args, c) is not None]
    if given:
        raise InvalidInput("--from-csv", f"takes {', '.join(REQUIRED_COLUMNS)} from the file: drop {', '.join(given)}")
    path = Path(catalog.data_file(args.from_csv))
    frame = files.read_csv_cells(path, "--from-csv", REQUIRED_COLUMNS, "setup")
    defaults = _flag_defaults(args)
    setups = []
    for line, row in enumerate(frame.to_dict("records"), start=2):
        cells = {k: v.strip() for k, v in row.items() if k in defaults or k in REQUIRED_COLUMNS}
        values = defaults | {k: v for k, v in cells.items() if v or k in REQUIRED_COLUMNS}
        setups.append(parse_setup(values, _row_label(path, line), specs))
    return setups


def _row_label(path: Path, line: int) -> Callable[[str], str]:
    """The field name of a column on one line of a --from-csv file."""
    return lambda column: f"{path} line {line}: {column}"


# ----------------------------------------------------------------------------------------------- evaluation


def request_layout(setup: Setup) -> evaluator.Layout:
    """The (decode or aggregated) instance of a whole-request setup: one token per sequence per step."""
    return evaluator.Layout.of(
        setup.tp,
        setup.tp_2d,
        setup.pp,
        setup.context,
        1,
        setup.ep,
        setup.kv_bits,
        dp_attention=setup.dp_attention,
        a2a_overlap=setup.two_batch_overlap,
    )


def prefill_layout(setup: Setup) -> evaluator.Layout:
    """The prefill instance of a disaggregated setup (no expert parallelism: the dense layout)."""
    return evaluator.Layout.of(setup.prefill_tp, setup.prefill_tp_2d, setup.prefill_pp, 0, 1, 1, setup.kv_bits)


def _evaluate_request(setup: Setup, specs: _Specs) -> dict[str, np.ndarray]:
    """A setup priced as whole requests: the aggregated instance or the disaggregated unit (physics/requests.py)."""
    import numpy as np

    model = specs.model(setup.model, "model")[0]
    gpu = specs.gpu(setup.gpu, "gpu")
    preset = specs.preset(setup, gpu)
    assert setup.isl is not None and setup.osl is not None  # a setup of whole requests (parse_setup gives both)
    workload = rq.Workload.single(setup.isl, setup.osl)
    layout = request_layout(setup)
    batch = np.array([float(setup.batch)])
    if setup.serving == rq.DISAGG:
        p_gpu = specs.gpu(setup.prefill_gpu, "prefill_gpu")
        p_layout = prefill_layout(setup)
        out = rq.disaggregated_figures(
            model,
            preset,
            setup.weight_bits,
            workload,
            (p_gpu, p_layout, float(setup.prefill_batch), setup.prefill_instances),
            (gpu, layout, batch, setup.decode_instances),
            prefill_preset=specs.preset(setup, p_gpu),
        )
        # the xPyD unit is what is priced and served: its GPUs and $/hour, each side's kept beside them
        decode_gpus, prefill_gpus = setup.decode_instances * layout.n_gpus, setup.prefill_instances * p_layout.n_gpus
        out["decode_gpus"] = np.asarray(decode_gpus, dtype=float)
        out["prefill_gpus"] = np.asarray(prefill_gpus, dtype=float)
        out["prefill_usd_per_gpu_hour"] = np.asarray(p_gpu.usd_per_hour)
        out["n_gpus"] = np.asarray(decode_gpus + prefill_gpus, dtype=float)
        out["usd_per_hour"] = np.asarray(decode_gpus * gpu.usd_per_hour + prefill_gpus * p_gpu.usd_per_hour)
    else:
        out = rq.aggregated_figures(model, gpu, preset, setup.weight_bits, layout, batch, workload, setup.chunk_tokens)
        out["n_gpus"] = np.asarray(layout.n_gpus, dtype=float)
        out["usd_per_hour"] = np.asarray(layout.n_gpus * gpu.usd_per_hour)
    out["time_per_token_s"] = out["tpot_s"]
    out["tok_s_per_request"] = 1.0 / out["tpot_s"]
    return {k: np.broadcast_to(np.asarray(v), batch.shape) for k, v in out.items()}


def _evaluate_group(setups: list[Setup], specs: _Specs) -> dict[str, np.ndarray]:
    """evaluator.evaluate over arrays of setups that share model, accelerator, precision, draft and preset."""
    import numpy as np

    first = setups[0]
    if first.is_request:
        return _evaluate_request(first, specs)
    model = specs.model(first.model, "model")[0]
    draft = specs.model(first.draft, "draft")[0] if first.draft else None

    def column(name: str) -> np.ndarray:
        return np.array([getattr(s, name) for s in setups])

    layout = evaluator.Layout.of(
        column("tp"),
        column("tp_2d"),
        column("pp"),
        column("context"),
        column("tokens_per_step"),
        column("ep"),
        column("kv_bits"),
        dp_attention=column("dp_attention"),
        a2a_overlap=column("two_batch_overlap"),
    )
    gpu = specs.gpu(first.gpu, "gpu")
    return evaluator.evaluate(
        model,
        gpu,
        specs.preset(first, gpu),
        first.weight_bits,
        layout,
        column("batch"),
        draft=draft,
        acceptance=first.acceptance,
        gamma_max=first.gamma_max,
        draft_weight_bits=first.draft_weight_bits,
    )


def evaluate_setups(setups: list[Setup], specs: _Specs) -> pd.DataFrame:
    """One row per setup, in input order: its inputs (spec names) and every output of evaluator.evaluate."""
    import pandas as pd

    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, setup in enumerate(setups):
        groups.setdefault(setup.group_key, []).append(i)
    rows: list[dict[str, Any]] = [{} for _ in setups]
    for indices in groups.values():
        figures = _evaluate_group([setups[i] for i in indices], specs)
        for position, i in enumerate(indices):
            rows[i] = _inputs(setups[i], specs) | {k: v[position].item() for k, v in figures.items()}
            rows[i] |= specs.interval_fields(rows[i])
    return pd.DataFrame(rows)


def _inputs(setup: Setup, specs: _Specs) -> dict[str, Any]:
    from roofline_opt.optimize.results import layout_label

    inputs = asdict(setup)
    inputs["model"] = specs.model(setup.model, "model")[0].name
    inputs["gpu"] = specs.gpu(setup.gpu, "gpu").name
    inputs["draft"] = specs.model(setup.draft, "draft")[0].name if setup.draft else None
    inputs["layout"] = layout_label(setup.tp, setup.tp_2d, setup.pp, setup.ep, dp_attention=setup.dp_attention)
    inputs["usd_per_gpu_hour"] = specs.gpu(setup.gpu, "gpu").usd_per_hour
    if not setup.is_request:
        for name in ("isl", "osl", "serving", "chunk_tokens", *PREFILL_INPUTS):
            inputs.pop(name)
    elif setup.serving != rq.DISAGG:
        for name in PREFILL_INPUTS:
            inputs.pop(name)
    else:
        inputs["prefill_gpu"] = specs.gpu(setup.prefill_gpu, "prefill_gpu").name
        inputs.pop("chunk_tokens")
    return inputs


PREFILL_INPUTS = (
    "prefill_gpu",
    "prefill_tp",
    "prefill_tp_2d",
    "prefill_pp",
    "prefill_batch",
    "prefill_instances",
    "decode_instances",
)


# ----------------------------------------------------------------------------------------------- command


def _table(frame: pd.DataFrame) -> str:
    """Every field of a single setup as a two-column table; the headline columns of several setups."""
    import pandas as pd

    from roofline_opt import report

    if len(frame) == 1:
        record = frame.iloc[0]
        fields = pd.DataFrame({"field": frame.columns, "value": [report.format_number(v) for v in record]})
        return report.frame_to_table(fields)
    columns = REQUEST_TABLE_COLUMNS if "ttft_s" in frame.columns else TABLE_COLUMNS
    return report.frame_to_table(frame[[c for c in columns if c in frame.columns]])


def run(args: argparse.Namespace) -> int:
    from roofline_opt import files, report
    from roofline_opt.catalog.prices import parse_price_overrides
    from roofline_opt.optimize.profile_offers import resolve_profile

    profile = resolve_profile(args.engine, args.profile)
    specs = _Specs(parse_price_overrides("--usd-per-gpu-hour", args.usd_per_gpu_hour), profile)
    if args.csv:
        files.check_destination(args.csv, "--csv", inputs=(args.from_csv, args.model, args.gpu, args.draft))
    setups = setups_from_csv(args, specs) if args.from_csv else setups_from_flags(args, specs)
    frame = evaluate_setups(setups, specs)
    if args.csv:
        files.write_csv(args.csv, frame, field="--csv")
    print(report.to_json(frame.to_dict("records")) if args.json else _table(frame))
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """Register ``evaluate``."""
    from roofline_opt.cli import command_help, helpfmt
    from roofline_opt.optimize.space import DEFAULT_CONTEXT

    p = subparsers.add_parser(
        "evaluate",
        help=command_help("evaluate"),
        description="Every figure of one setup given by flags, or of each row of --from-csv FILE (columns "
        "model, gpu, tp, pp, batch required; weight_bits, tp_2d, ep, dp_attention, two_batch_overlap, context, "
        "tokens_per_step, draft, acceptance, gamma_max, preset optional: a blank or absent cell takes the flag's "
        "value).",
        epilog=helpfmt.examples("evaluate"),
    )
    need = "(required unless --from-csv)"
    p.add_argument(
        "--model",
        help=f"catalog name or alias (a -int8/-int4 suffix sets the weight bits), YAML card or config.json {need}",
    )
    p.add_argument("--weight-bits", dest="weight_bits", help="16, 8 or 4 (default: the name's suffix, else 16)")
    p.add_argument("--gpu", help=f"catalog name or YAML card of the accelerator {need}")
    p.add_argument("--tp", help=f"tensor-parallel degree T {need}")
    p.add_argument("--tp-2d", dest="tp_2d", action="store_true", help="2-D tensor parallelism (default: 1-D)")
    p.add_argument(
        "--dp-attention",
        dest="dp_attention",
        action="store_true",
        help="data-parallel attention with wide expert parallelism (MoE): --tp GPUs each hold the attention and "
        "batch/tp sequences, experts spread over all of them (pp 1)",
    )
    p.add_argument(
        "--two-batch-overlap",
        dest="two_batch_overlap",
        action="store_true",
        help="with --dp-attention: two half-batches overlap the expert all-to-all with compute (SGLang TBO), the "
        "ideal case: step = launch + other network + max(memory, compute, all-to-all)",
    )
    p.add_argument("--pp", help=f"pipeline degree P {need}")
    p.add_argument("--ep", default=OPTIONAL_DEFAULTS["ep"], help="expert-parallel degree inside TP")
    p.add_argument("--batch", help=f"sequences decoded together by one instance, B {need}")
    p.add_argument(
        "--context",
        help=f"tokens already in the KV cache (default {DEFAULT_CONTEXT}, as every query "
        "command; with --isl/--osl: isl + osl / 2)",
    )
    p.add_argument(
        "--tokens-per-step",
        dest="tokens_per_step",
        default=OPTIONAL_DEFAULTS["tokens_per_step"],
        help="tokens per sequence per step, S (default 1)",
    )
    p.add_argument("--draft", help="draft model for speculative decoding (runs at 16-bit unless its name says)")
    p.add_argument("--acceptance", default=OPTIONAL_DEFAULTS["acceptance"], help="draft acceptance in (0, 1) (0.8)")
    p.add_argument(
        "--gamma-max",
        dest="gamma_max",
        default=OPTIONAL_DEFAULTS["gamma_max"],
        help="longest draft tried; the best of 0..gamma-max is reported (default 0)",
    )
    p.add_argument("--preset", default=OPTIONAL_DEFAULTS["preset"], help="physics: paper or default")
    p.add_argument(
        "--usd-per-gpu-hour",
        dest="usd_per_gpu_hour",
        metavar="NAME=PRICE,...",
        help="price overrides, e.g. h100-sxm=2.5 (default: the catalog's rental prices)",
    )
    p.add_argument("--question", metavar="FILE.yaml", help="YAML file holding any of these flags (flag: value)")
    p.add_argument("--kv-bits", dest="kv_bits", default=16, help="KV-cache precision: 16, 8 or 4 (default 16)")
    p.add_argument("--isl", help="input tokens per request: price whole requests (with --osl)")
    p.add_argument("--osl", help="output tokens per request (with --isl)")
    p.add_argument(
        "--serving", default=rq.AGG, help="agg (chunked prefill in the decode steps) or disagg (default agg)"
    )
    p.add_argument(
        "--chunk-tokens",
        dest="chunk_tokens",
        default=rq.DEFAULT_CHUNK_TOKENS,
        help="prefill tokens per step of aggregated serving (default 2048)",
    )
    p.add_argument("--prefill-gpu", dest="prefill_gpu", help="disagg: accelerator of the prefill instances (--gpu)")
    p.add_argument("--prefill-tp", dest="prefill_tp", default=1, help="disagg: prefill tensor-parallel degree (1)")
    p.add_argument("--prefill-tp-2d", dest="prefill_tp_2d", action="store_true", help="disagg: 2-D prefill TP")
    p.add_argument("--prefill-pp", dest="prefill_pp", default=1, help="disagg: prefill pipeline degree (1)")
    p.add_argument("--prefill-batch", dest="prefill_batch", default=1, help="disagg: prompts per prefill step (1)")
    p.add_argument(
        "--prefill-instances",
        dest="prefill_instances",
        default=1,
        help="disagg: prefill instances x of the xPyD unit (1)",
    )
    p.add_argument(
        "--decode-instances", dest="decode_instances", default=1, help="disagg: decode instances y of the xPyD unit (1)"
    )
    p.add_argument("--from-csv", dest="from_csv", metavar="FILE", help="evaluate every row of this CSV")
    add_engine_flags(p)
    p.add_argument("--json", action="store_true", help="print a JSON list of row objects instead of a table")
    p.add_argument("--csv", metavar="OUT", help="also write every field of every row to this CSV file")
    p.set_defaults(func=run, parser=p)
