"""Fully specified setups (``api.evaluate_setups``, ``roofline-opt evaluate`` and ``simulate``): checked field by
field, then every figure of each from the evaluator.

The defaults are the queries' (``api.question``): the decode context of whole requests is ``isl + osl / 2``
(``Workload.decode_context``, not rounded), the weight precision the name's suffix, else the card's native precision
(not under the paper preset), else 16. Errors name a field through ``label`` (the API names its parameters; the CLI
maps them to flags or to a CSV file's line and column).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline_opt import checks
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.layout_record import LAYOUT_DEFAULTS, ServingChoice, layout_label, ordered_fields
from roofline_opt.optimize.offers import modern_defaults, weight_bits_offered
from roofline_opt.optimize.space import (
    DEFAULT_ACCEPTANCE,
    DEFAULT_CONTEXT,
    MAX_BATCH_LIMIT,
    MAX_CONTEXT,
    MAX_DEGREE,
    MAX_GAMMA,
    MAX_TOKENS_PER_STEP,
)
from roofline_opt.physics import evaluator
from roofline_opt.physics import requests as rq
from roofline_opt.physics.profiles import EngineProfile
from roofline_opt.physics.specs import PRESETS, WEIGHT_BITS, GpuSpec, ModelSpec, Preset

if TYPE_CHECKING:
    import numpy as np

REQUIRED = ("model", "gpu", "tp", "pp", "batch")
"""Fields every setup gives."""
DEFAULTS: dict[str, Any] = {
    "weight_bits": None,
    "tp_2d": LAYOUT_DEFAULTS["tp_2d"],
    "ep": LAYOUT_DEFAULTS["ep"],
    "dp_attention": LAYOUT_DEFAULTS["dp_attention"],
    "two_batch_overlap": False,
    "context": None,
    "tokens_per_step": 1,
    "draft": None,
    "acceptance": DEFAULT_ACCEPTANCE,
    "gamma_max": 0,
    "preset": "default",
    "kv_bits": LAYOUT_DEFAULTS["kv_bits"],
    "isl": None,
    "osl": None,
    "serving": LAYOUT_DEFAULTS["serving"],
    "chunk_tokens": LAYOUT_DEFAULTS["chunk_tokens"],
    "prefill_gpu": None,
    "prefill_tp": LAYOUT_DEFAULTS["prefill_tp"],
    "prefill_tp_2d": LAYOUT_DEFAULTS["prefill_tp_2d"],
    "prefill_pp": LAYOUT_DEFAULTS["prefill_pp"],
    "prefill_batch": LAYOUT_DEFAULTS["prefill_batch"],
    "prefill_instances": LAYOUT_DEFAULTS["prefill_instances"],
    "decode_instances": LAYOUT_DEFAULTS["decode_instances"],
}
"""Optional fields and their defaults (None: derived, see the module docstring)."""
PREFILL_FIELDS = (
    "prefill_gpu",
    "prefill_tp",
    "prefill_tp_2d",
    "prefill_pp",
    "prefill_batch",
    "prefill_instances",
    "decode_instances",
)
"""Fields of the prefill side of a disaggregated setup (absent from other setups' rows)."""
_TRUE_FALSE = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}


def decode_context(context: Any, workload: rq.Workload | None, field: str = "context") -> float:
    """The decode context of a question or setup: ``context`` if given (a whole number of tokens), else that of the
    whole requests (``I + O / 2``, need not be whole), else ``DEFAULT_CONTEXT``."""
    if context is not None:
        return checks.positive_int(field, context, minimum=0, maximum=MAX_CONTEXT)
    return DEFAULT_CONTEXT if workload is None else workload.decode_context


ROW_ORDER = (
    "model",
    "weight_bits",
    "gpu",
    "tp",
    "tp_2d",
    "pp",
    "ep",
    "dp_attention",
    "batch",
    "context",
    "tokens_per_step",
    "draft",
    "draft_weight_bits",
    "acceptance",
    "gamma_max",
    "preset",
    "kv_bits",
    "isl",
    "osl",
    "serving",
    "chunk_tokens",
    *PREFILL_FIELDS,
    "two_batch_overlap",
)
"""A checked setup's fields in the order evaluate prints them (its input columns)."""


@dataclass(frozen=True, kw_only=True)
class SetupRow(ServingChoice):
    """One checked setup (its layout a ``ServingChoice``); ``model``, ``gpu`` and ``draft`` are names or paths as
    given (draft "" = none)."""

    model: str
    batch: int
    context: float
    tokens_per_step: int
    draft: str
    draft_weight_bits: int
    acceptance: float
    gamma_max: int
    preset: str
    isl: int | None = None
    osl: int | None = None
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


class Specs:
    """Specs loaded once per run, keyed by the name or path the user gave, with the run's price overrides."""

    def __init__(self, prices: Mapping[str, float] | None = None, profile: EngineProfile | None = None) -> None:
        self._models: dict[str, tuple[ModelSpec, int | None]] = {}
        self._gpus: dict[str, GpuSpec] = {}
        self._prices = dict(prices or {})
        self.profile = profile

    def preset(self, setup: SetupRow, gpu: GpuSpec) -> Preset:
        """The setup's physics on ``gpu``: the run's engine profile (engine/profile), else its preset."""
        if self.profile is None:
            return PRESETS[setup.preset]
        if setup.preset != "default":
            raise InvalidInput(
                "preset", f"excludes `engine`/`profile` (a profile sets the physics). Got {setup.preset}."
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
        return {} if profile is None else {"profile": profile.name, **interval_fields(record, quantiles)}

    def name(self, field: str, value: Any) -> str:
        """The key of a model or accelerator given by name, path or spec (a spec is registered under its name)."""
        if isinstance(value, ModelSpec):
            self._models.setdefault(value.name, (value, None))
            return value.name
        if isinstance(value, GpuSpec):
            self._gpus.setdefault(value.name, self._priced(value, field))
            return value.name
        return _text(field, value)

    def draft(self, model_text: str, text: str, field: str) -> tuple[ModelSpec, int | None]:
        """The draft spec of a name or path for the setup's model (``mtp``: its own MTP module) and the weight bits
        its name's suffix sets (None without one)."""
        from roofline_opt import catalog

        key = f"{model_text}\x00{text}"
        if key not in self._models:
            self._models[key] = catalog.resolve_draft(self.model(model_text, "model")[0], text, field)
        return self._models[key]

    def model(self, text: str, field: str) -> tuple[ModelSpec, int | None]:
        """The model spec of a name or path and the weight bits its name's suffix sets (None without one)."""
        from roofline_opt import catalog

        if text not in self._models:
            self._models[text] = catalog.resolve_model(text, field)
        return self._models[text]

    def _priced(self, gpu: GpuSpec, field: str) -> GpuSpec:
        from roofline_opt.catalog.prices import with_prices

        return with_prices((gpu,), {gpu.name: self._prices[gpu.name]}, field)[0] if gpu.name in self._prices else gpu

    def gpu(self, text: str, field: str) -> GpuSpec:
        """The accelerator spec of a name or path, at the run's price for it."""
        from roofline_opt import catalog

        if text not in self._gpus:
            self._gpus[text] = self._priced(catalog.load_gpu(text, field), field)
        return self._gpus[text]


# ----------------------------------------------------------------------------------------------- checks


def _text(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, f"must be a name or a path. Got {value!r} instead.")
    return value.strip()


def _bool(field: str, value: Any) -> bool:
    return value if isinstance(value, bool) else _TRUE_FALSE[checks.choice(field, str(value).lower(), _TRUE_FALSE)]


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def check_runs(field: str, gpu: GpuSpec, bits: int) -> None:
    """Refuse a weight precision the accelerator has no FLOP rate for."""
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


def _weight_bits(label: Callable[[str], str], value: Any, model: ModelSpec, suffix_bits: int | None, preset: str):
    """One weight precision: as given, else the queries' default (``optimize.offers.weight_bits_offered``)."""
    from roofline_opt import catalog

    native = catalog.native_weight_bits(model.name) if modern_defaults(preset) else None
    value = None if _blank(value) else value
    bits = weight_bits_offered(value, suffix_bits, native, label("weight_bits"))
    if len(bits) != 1:
        raise InvalidInput(label("weight_bits"), f"must be one precision for a setup. Got {bits} instead.")
    return bits[0]


def check(values: Mapping[str, Any], label: Callable[[str], str], specs: Specs) -> SetupRow:
    """One setup's raw values (text or numbers; every field of ``REQUIRED`` and ``DEFAULTS``) checked; ``label``
    turns a field into the name errors give."""
    model_text = specs.name(label("model"), values["model"])
    gpu_text = specs.name(label("gpu"), values["gpu"])
    model, suffix_bits = specs.model(model_text, label("model"))
    gpu = specs.gpu(gpu_text, label("gpu"))
    preset = checks.choice(label("preset"), values["preset"], PRESETS)
    bits = _weight_bits(label, values["weight_bits"], model, suffix_bits, preset)
    check_runs(label("weight_bits"), gpu, bits)
    tp = checks.positive_int(label("tp"), values["tp"], maximum=MAX_DEGREE)
    ep = checks.positive_int(label("ep"), values["ep"], maximum=MAX_DEGREE)
    pp = checks.positive_int(label("pp"), values["pp"], maximum=MAX_DEGREE)
    dp_attention = _bool(label("dp_attention"), values["dp_attention"])
    if dp_attention:
        ep = _check_dp_attention(label("dp_attention"), model, tp, pp, ep)
    else:
        _check_expert_parallel(label("ep"), model, ep, tp)
        _check_heads(label("tp"), model, tp, PRESETS[preset])
    two_batch_overlap = _bool(label("two_batch_overlap"), values["two_batch_overlap"])
    if two_batch_overlap and not dp_attention:
        msg = "overlaps data-parallel attention's all-to-all: give `dp_attention` too. Got it without."
        raise InvalidInput(label("two_batch_overlap"), msg)
    draft_text = "" if _blank(values["draft"]) else specs.name(label("draft"), values["draft"])
    draft_bits = evaluator.DRAFT_WEIGHT_BITS
    if draft_text:
        draft_bits = specs.draft(model_text, draft_text, label("draft"))[1] or evaluator.DRAFT_WEIGHT_BITS
        check_runs(label("draft"), gpu, draft_bits)
    gamma_max = checks.positive_int(label("gamma_max"), values["gamma_max"], minimum=0, maximum=MAX_GAMMA)
    if bool(gamma_max) != bool(draft_text):
        wanted = "at least 1 with a draft model (0 leaves it unused)" if draft_text else "0 without a draft model"
        raise InvalidInput(label("gamma_max"), f"must be {wanted}. Got {gamma_max} instead.")
    request = _request_fields(values, label, specs, gpu_text, bits)
    workload = rq.Workload.single(request["isl"], request["osl"]) if "isl" in request else None
    return SetupRow(
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
        context=decode_context(None if _blank(values["context"]) else values["context"], workload, label("context")),
        tokens_per_step=checks.positive_int(
            label("tokens_per_step"), values["tokens_per_step"], maximum=MAX_TOKENS_PER_STEP
        ),
        draft=draft_text,
        draft_weight_bits=draft_bits,
        acceptance=checks.probability(label("acceptance"), values["acceptance"]),
        gamma_max=gamma_max,
        preset=preset,
        **request,
    )


def _check_heads(field: str, model: ModelSpec, tp: int, preset: Preset) -> None:
    """Refuse a TP degree the engines refuse: one that does not divide the query heads
    (``Preset.tp_divides_attention_heads``)."""
    if preset.tp_divides_attention_heads and not model.tp_splits_heads(tp):
        degrees = [d for d in range(1, model.n_q_heads + 1) if model.tp_splits_heads(d) and d <= MAX_DEGREE]
        msg = (
            f"must divide {model.name}'s {model.n_q_heads} attention heads (engines shard whole heads over the TP "
            f"ranks): one of {', '.join(map(str, degrees))}. Got {tp} instead."
        )
        raise InvalidInput(field, msg)


def _check_unused(values: Mapping[str, Any], label: Callable[[str], str], fields: Sequence[str], needs: str) -> None:
    """Refuse a field of ``fields`` given other than its default, which this setup would ignore (silently dropping
    it would hide a forgotten flag); ``needs`` names the setups it applies to and what they take."""
    for field in fields:
        value, default = values[field], DEFAULTS[field]
        if _blank(value):
            continue
        if isinstance(default, bool):
            given_differs = _bool(label(field), value) != default
        elif isinstance(default, int):
            given_differs = checks.positive_int(label(field), value) != default
        else:
            given_differs = True
        if given_differs:
            raise InvalidInput(label(field), f"applies to {needs} too, or drop it")


def _request_fields(values, label, specs: Specs, gpu_text: str, bits: int) -> dict[str, Any]:
    """KV bits, request lengths, serving mode, chunk and the prefill side of a setup, checked."""
    out: dict[str, Any] = {"kv_bits": checks.choice(label("kv_bits"), values["kv_bits"], evaluator.KV_BITS)}
    isl, osl = values["isl"], values["osl"]
    serving = checks.choice(label("serving"), values["serving"], rq.SERVING_MODES)
    if _blank(isl) and _blank(osl):
        if serving != rq.AGG:
            raise InvalidInput(label("serving"), "disagg needs whole requests: give `isl` and `osl`")
        _check_unused(values, label, ("chunk_tokens", *PREFILL_FIELDS), "whole requests: give `isl` and `osl`")
        return out
    if _blank(isl) or _blank(osl):
        missing = "isl" if _blank(isl) else "osl"
        raise InvalidInput(label(missing), "is required with the other request length (`isl` and `osl` go together)")
    out.update(
        isl=checks.positive_int(label("isl"), isl, minimum=0 if serving == rq.AGG else 1, maximum=MAX_CONTEXT),
        osl=checks.positive_int(label("osl"), osl, maximum=MAX_CONTEXT),
        serving=serving,
        chunk_tokens=checks.positive_int(label("chunk_tokens"), values["chunk_tokens"], maximum=MAX_CONTEXT),
    )
    if serving != rq.DISAGG:
        _check_unused(values, label, PREFILL_FIELDS, "disaggregated serving: give `serving` disagg")
    else:
        given = values["prefill_gpu"]
        prefill_text = gpu_text if _blank(given) else specs.name(label("prefill_gpu"), given)
        check_runs(label("prefill_gpu"), specs.gpu(prefill_text, label("prefill_gpu")), bits)
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


# ----------------------------------------------------------------------------------------------- evaluation


def request_layout(setup: SetupRow) -> evaluator.Layout:
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


def prefill_layout(setup: SetupRow) -> evaluator.Layout:
    """The prefill instance of a disaggregated setup (no expert parallelism: the dense layout)."""
    return evaluator.Layout.of(setup.prefill_tp, setup.prefill_tp_2d, setup.prefill_pp, 0, 1, 1, setup.kv_bits)


def request_speculation(setup: SetupRow, specs: Specs, field: str = "draft") -> rq.Speculation | None:
    """The draft of a setup of whole requests, proposing exactly ``gamma_max`` tokens per round (None without one)."""
    if not setup.draft or setup.gamma_max == 0:
        return None
    draft = specs.draft(setup.model, setup.draft, field)[0]
    return rq.Speculation(draft, float(setup.gamma_max), setup.acceptance, setup.draft_weight_bits)


def _evaluate_request(setup: SetupRow, specs: Specs) -> dict[str, np.ndarray]:
    """A setup priced as whole requests: the aggregated instance or the disaggregated unit (physics/requests.py)."""
    import numpy as np

    model = specs.model(setup.model, "model")[0]
    gpu = specs.gpu(setup.gpu, "gpu")
    preset = specs.preset(setup, gpu)
    assert setup.isl is not None and setup.osl is not None  # a setup of whole requests (check gives both)
    workload = rq.Workload.single(setup.isl, setup.osl)
    layout = request_layout(setup)
    batch = np.array([float(setup.batch)])
    spec = request_speculation(setup, specs)
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
            spec=spec,
        )
        # the xPyD unit is what is priced and served: its GPUs and $/hour, each side's kept beside them
        decode_gpus, prefill_gpus = setup.decode_instances * layout.n_gpus, setup.prefill_instances * p_layout.n_gpus
        out["decode_gpus"] = np.asarray(decode_gpus, dtype=float)
        out["prefill_gpus"] = np.asarray(prefill_gpus, dtype=float)
        out["prefill_usd_per_gpu_hour"] = np.asarray(p_gpu.usd_per_hour)
        out["n_gpus"] = np.asarray(decode_gpus + prefill_gpus, dtype=float)
        out["usd_per_hour"] = np.asarray(decode_gpus * gpu.usd_per_hour + prefill_gpus * p_gpu.usd_per_hour)
    else:
        out = rq.aggregated_figures(
            model, gpu, preset, setup.weight_bits, layout, batch, workload, setup.chunk_tokens, 1.0, spec
        )
        out["n_gpus"] = np.asarray(layout.n_gpus, dtype=float)
        out["usd_per_hour"] = np.asarray(layout.n_gpus * gpu.usd_per_hour)
    out["time_per_token_s"] = out["tpot_s"]
    out["tok_s_per_request"] = 1.0 / out["tpot_s"]
    return {k: np.broadcast_to(np.asarray(v), batch.shape) for k, v in out.items()}


def _evaluate_group(setups: list[SetupRow], specs: Specs) -> dict[str, np.ndarray]:
    """evaluator.evaluate over arrays of setups that share model, accelerator, precision, draft and preset."""
    import numpy as np

    first = setups[0]
    if first.is_request:
        return _evaluate_request(first, specs)
    model = specs.model(first.model, "model")[0]
    draft = specs.draft(first.model, first.draft, "draft")[0] if first.draft else None

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


def evaluate_rows(setups: Sequence[SetupRow], specs: Specs) -> list[dict[str, Any]]:
    """One record per setup, in input order: its inputs (spec names) and every output of the evaluator."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, setup in enumerate(setups):
        groups.setdefault(setup.group_key, []).append(i)
    rows: list[dict[str, Any]] = [{} for _ in setups]
    for indices in groups.values():
        with np.errstate(over="ignore", invalid="ignore"):  # costs beyond the float range are refused below
            figures = _evaluate_group([setups[i] for i in indices], specs)
        for position, i in enumerate(indices):
            rows[i] = _inputs(setups[i], specs) | {k: v[position].item() for k, v in figures.items()}
            _check_cost_range(rows[i])
            rows[i] = _before_verdicts(rows[i], specs.interval_fields(rows[i]))
    return rows


def _check_cost_range(row: dict[str, Any]) -> None:
    """Refuse a setup whose cost exceeds ``cost_range.MAX_USD_PER_MTOK``, as the queries refuse such questions."""
    from roofline_opt.optimize.cost_range import MAX_USD_PER_MTOK

    cost, price = row.get("usd_per_mtok"), float(row["usd_per_gpu_hour"])
    if cost is None or cost <= MAX_USD_PER_MTOK:
        return
    factor = (
        cost / price if math.isfinite(cost) else 1e6 * row["n_gpus"] * row["time_per_token_s"] / row["batch"] / 3600
    )
    raise InvalidInput(
        "usd_per_gpu_hour",
        f"{row['gpu']} at ${price:g} per GPU-hour prices this setup's output above ${MAX_USD_PER_MTOK:g} per million "
        f"tokens, beyond the range roofline-opt computes in; a price of at most ${MAX_USD_PER_MTOK / factor:.3g} per "
        "GPU-hour can be answered",
    )


def _before_verdicts(row: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``row`` with ``extra`` inserted before its verdict fields (bottleneck, fits_in_memory), which end a table."""
    verdicts = {k: row[k] for k in ("bottleneck", "fits_in_memory") if k in row}
    return {k: v for k, v in row.items() if k not in verdicts} | extra | verdicts


def _inputs(setup: SetupRow, specs: Specs) -> dict[str, Any]:
    inputs = ordered_fields(setup, ROW_ORDER)
    inputs["model"] = specs.model(setup.model, "model")[0].name
    inputs["gpu"] = specs.gpu(setup.gpu, "gpu").name
    inputs["draft"] = specs.draft(setup.model, setup.draft, "draft")[0].name if setup.draft else None
    inputs["layout"] = layout_label(setup.tp, setup.tp_2d, setup.pp, setup.ep, dp_attention=setup.dp_attention)
    inputs["usd_per_gpu_hour"] = specs.gpu(setup.gpu, "gpu").usd_per_hour
    if not setup.is_request:
        for name in ("isl", "osl", "serving", "chunk_tokens", *PREFILL_FIELDS):
            inputs.pop(name)
    elif setup.serving != rq.DISAGG:
        for name in PREFILL_FIELDS:
            inputs.pop(name)
    else:
        inputs["prefill_gpu"] = specs.gpu(setup.prefill_gpu, "prefill_gpu").name
        inputs.pop("chunk_tokens")
    return inputs
