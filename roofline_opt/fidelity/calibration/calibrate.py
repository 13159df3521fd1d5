"""``calibrate``: an engine profile fitted to measured rows, per accelerator (and the engine and version the rows
name), regularised towards a prior profile, inside physical bounds, with leave-one-out errors (``fit``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import date
from pathlib import Path

import numpy as np
import yaml

from roofline_opt.errors import InvalidInput
from roofline_opt.fidelity import kv_precision, summary, whole_requests
from roofline_opt.fidelity.calibration import components, fit
from roofline_opt.fidelity.measured import MeasuredRow, MeasuredSetup, gpu_card, map_row, read_measured
from roofline_opt.physics.profiles import AcceleratorEfficiency, EngineProfile
from roofline_opt.physics.specs import GpuSpec, Preset

PARAMETERS = components.PARAMETERS
LOG_ERROR_QUANTILES = (0.1, 0.9)
"""Quantiles of the leave-one-out ln(measured / estimate) a calibrated entry states (its interval)."""

ENGINE_KEYS = {"vLLM": "vllm", "SGLang": "sglang", "TensorRT-LLM": "trtllm", "LMDeploy": "lmdeploy"}
_VERSION_RE = re.compile(r"v?(\d+(?:\.\d+)+)")


def engine_key(framework: str) -> str:
    """The engine a row's framework text names, as profiles key it (``"TensorRT-LLM v0.6.1"`` -> ``"trtllm"``)."""
    listed = kv_precision.engine_of(framework)
    return ENGINE_KEYS[listed] if listed else summary.framework_family(framework).lower()


def engine_version(framework: str) -> str:
    """The version a row's framework text states (``"TensorRT-LLM v0.6.1"`` -> ``"0.6.1"``), else ``""``."""
    found = _VERSION_RE.search(framework)
    return found.group(1) if found else ""


def checked_version(version: str | None) -> str | None:
    """``version`` as ``engine_version`` reads it from a framework (``"v0.6.1"`` -> ``"0.6.1"``), None if not given;
    text that is no version (``""``, ``"latest"``) is an error rather than a filter that keeps every row."""
    if version is None:
        return None
    found = _VERSION_RE.fullmatch(version.strip())
    if found is None:
        msg = f"must be a version number like 0.6.1 (as the rows' framework states it). Got {version!r} instead."
        raise InvalidInput("--engine-version", msg)
    return found.group(1)


def fitted_rows(rows: Sequence[MeasuredRow]) -> list[tuple[MeasuredRow, MeasuredSetup]]:
    """Rows a fit can use: mapped, checked at a stated batch, with a measured tok/s per request, without speculation
    or an assumption of the row's reading (a ceiling is not a point, and an assumed context or layout is not a
    measured one; a recipe's reading, ``MeasuredSetup.recipe_reading``, is a fact of the run), and not a
    disaggregated closed loop (``whole_requests.disaggregated``: its decode batch moves with the efficiencies, so its
    speed is no fixed sum of steps)."""
    out = []
    for r in rows:
        s = r.setup
        if s is None or r.reasons or s.check != "point" or s.batch is None or s.mtp_depth or s.assumptions:
            continue
        if s.serving == "disaggregated" and whole_requests.applies(s):
            continue
        if r.measured_tok_s_per_request is not None:
            out.append((r, s))
    return out


@dataclass(frozen=True)
class AcceleratorFit:
    """One accelerator's fit: prior and fitted values, the coordinates fitted (``fit.COORDINATES``) and why the others
    were held, errors (median |estimate / measured - 1| and rms of ln(estimate / measured))."""

    gpu: str
    rows: int
    prior: dict[str, float]
    values: dict[str, float]
    fitted: tuple[str, ...]
    held_because: dict[str, str]
    information: dict[str, float]
    prior_median_abs_error: float
    fitted_median_abs_error: float
    leave_one_out_median_abs_error: float
    prior_rms_log_error: float
    fitted_rms_log_error: float
    leave_one_out_rms_log_error: float
    log_error_quantiles: tuple[float, float]

    def entry(self, source_file: str) -> AcceleratorEfficiency:
        held = "; ".join(f"{p} held ({why})" for p, why in self.held_because.items())
        source = f"calibrated on {source_file}, {self.rows} rows: fitted {', '.join(self.fitted) or 'nothing'}"
        return AcceleratorEfficiency(
            accelerators=(self.gpu,),
            source=source + (f"; {held}" if held else ""),
            fitted=moved(self.fitted),
            rows=self.rows,
            log_error_quantiles=self.log_error_quantiles,
            **{p: float(self.values[p]) for p in PARAMETERS},
        )


def _median_abs(log_errors: np.ndarray) -> float:
    """Median |estimate / measured - 1| of rows given as ln(estimate / measured)."""
    return float(np.median(np.abs(np.expm1(log_errors))))


def _rms(log_errors: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(log_errors))))


def predictor(setups: Sequence[MeasuredSetup], preset: Preset) -> fit.Predict:
    """tok/s per request of ``setups`` (points x setups) at parameter points, ``preset`` setting everything else."""
    comps, index = components.build(setups, preset, fit.BOUNDS["network_latency_factor"])

    def predict(points: np.ndarray) -> np.ndarray:
        return comps.tok_s_per_request(points)[:, index]

    return predict


def prior_values(preset: Preset) -> np.ndarray:
    return np.array([float(getattr(preset, p)) for p in PARAMETERS])


def fit_values(predict: fit.Predict, measured: np.ndarray, prior: np.ndarray) -> tuple[np.ndarray, fit.Identification]:
    """The calibrated values of rows predicted by ``predict`` and what the rows identify."""
    found = fit.identify(predict, measured, prior)
    return fit.fit(predict, measured, prior, found.fitted)[0], found


def moved(coordinates: tuple[str, ...]) -> tuple[str, ...]:
    """The parameters fitted coordinates move (all four with the common speed scale)."""
    if "speed_scale" in coordinates:
        return PARAMETERS
    return tuple(p for p in PARAMETERS if p in coordinates)


def fit_accelerator(gpu: str, setups: Sequence[MeasuredSetup], measured: np.ndarray, preset: Preset) -> AcceleratorFit:
    """The fit of one accelerator's rows (``setups`` and their measured tok/s per request) under ``preset``."""
    predict = predictor(setups, preset)
    prior = prior_values(preset)
    coordinates, found = fit_values(predict, measured, prior)
    values = fit.values_at(prior, coordinates[None, :])[0]
    own = np.log(predict(values[None, :])[0] / measured)
    before = np.log(predict(prior[None, :])[0] / measured)
    held_out = fit.leave_one_out(predict, measured, prior, found.fitted, coordinates) if len(measured) > 1 else own
    low, high = (float(np.quantile(-held_out, q)) for q in LOG_ERROR_QUANTILES)
    return AcceleratorFit(
        gpu=gpu,
        rows=len(measured),
        prior=dict(zip(PARAMETERS, map(float, prior), strict=True)),
        values=dict(zip(PARAMETERS, map(float, values), strict=True)),
        fitted=found.fitted,
        held_because=found.held_because,
        information=found.information,
        prior_median_abs_error=_median_abs(before),
        fitted_median_abs_error=_median_abs(own),
        leave_one_out_median_abs_error=_median_abs(held_out),
        prior_rms_log_error=_rms(before),
        fitted_rms_log_error=_rms(own),
        leave_one_out_rms_log_error=_rms(held_out),
        log_error_quantiles=(low, high),
    )


@dataclass(frozen=True)
class Calibration:
    """Every accelerator's fit and the profile carrying them (the prior's entries after the fitted ones)."""

    fits: tuple[AcceleratorFit, ...]
    profile: EngineProfile

    def to_record(self) -> dict:
        return {"profile": self.profile.name, "fits": [asdict(f) for f in self.fits]}


def calibrate(
    path: str | Path,
    prior: EngineProfile,
    gpu: GpuSpec | None = None,
    engine: str | None = None,
    version: str | None = None,
    name: str | None = None,
) -> Calibration:
    """Fit ``prior``'s efficiencies to the rows of a measured-points CSV: per accelerator (only ``gpu`` when given),
    the rows of ``engine`` (default: the prior's engine; every row for the neutral profile) and ``version``."""
    version = checked_version(version)
    rows = fitted_rows([map_row(cells) for cells in read_measured(path)])
    engine = engine if engine is not None else prior.engine
    chosen = [(r, s) for r, s in rows if not engine or engine_key(r.framework) == engine]
    if version:
        chosen = [(r, s) for r, s in chosen if engine_version(r.framework) == version]
    by_gpu: dict[str, list[tuple[MeasuredRow, MeasuredSetup]]] = {}
    for r, s in chosen:
        by_gpu.setdefault(s.gpu_card, []).append((r, s))
    if gpu is not None:
        if gpu.name not in by_gpu:
            found = ", ".join(sorted(by_gpu)) or "none"
            what = f" of engine {engine}" if engine else ""
            msg = f"must be an accelerator the file has fitted rows{what} of ({found}). Got {gpu.name!r} instead."
            raise InvalidInput("--gpu", msg)
        by_gpu = {gpu.name: by_gpu[gpu.name]}
    if not by_gpu:
        named = f"{f'engine {engine!r} ' if engine else ''}{f'version {version}' if version else ''}".strip()
        what = f" of {named}" if named else ""
        msg = f"has no rows{what} a fit can use (mapped, checked at a stated batch, no MTP, no assumption)"
        raise InvalidInput("--measured", msg)
    fits = []
    for name_of_gpu, pairs in sorted(by_gpu.items()):
        card = gpu if gpu is not None else gpu_card(name_of_gpu)
        measured = np.array([r.measured_tok_s_per_request for r, _ in pairs], dtype=float)
        fits.append(fit_accelerator(name_of_gpu, [s for _, s in pairs], measured, prior.preset_for(card)))
    file_name = Path(path).name
    versions = sorted({engine_version(r.framework) for r, _ in chosen} - {""})
    described = f"{engine or 'any engine'} {', '.join(versions) or '(versions not stated)'}"
    profile = replace(
        prior,
        name=name or f"{prior.name}-calibrated",
        engine_versions=described,
        source=f"calibrated by roofline-opt calibrate on {file_name} ({len(chosen)} rows), {date.today()}, prior "
        f"profile {prior.name}; {prior.source}",
        accelerators=tuple(f.entry(file_name) for f in fits) + prior.accelerators,
    )
    return Calibration(tuple(fits), profile)


def card_yaml(gpu: GpuSpec) -> str:
    """An accelerator card (every GpuSpec field) as the YAML ``--gpu path/to/card.yaml`` reads."""
    return yaml.safe_dump(asdict(gpu), sort_keys=False, allow_unicode=True, width=120)
