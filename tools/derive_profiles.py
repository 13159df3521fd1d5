"""Derive the packaged engine profiles (instances/profiles/*.yaml) from measured rows, and check them on held-out rows.

    python tools/derive_profiles.py            # print the derivation and the held-out check
    python tools/derive_profiles.py --write    # also rewrite instances/profiles/{neutral,vllm,sglang,trtllm,atom}.yaml
    python tools/derive_profiles.py --print-yaml atom   # print one profile's YAML (what --write would write)

Method (nothing is tuned to a row; every number below is computed from the files named in MEASURED):

1. Every row is validated under the neutral profile (the default preset); a row with an estimate gives the residual
   r = ln(measured / estimate) of the figure its check compares (``ValidationRow.estimate_ratio``).
2. Rows are grouped by engine (the row's framework text: vLLM, SGLang, TensorRT-LLM, ATOM; others are left out)
   and accelerator family (``physics.profiles.ACCELERATOR_FAMILIES``). A group of n rows gets the regularised median
   log scale  s = n / (n + PRIOR_ROWS) * median(r): shrunk towards the neutral profile (s = 0), fully so without rows.
3. The entry's efficiencies are the neutral ones times exp(s), each capped to the physical range (0, 1]: FLOP/s and
   HBM time scale together, so a profile moves an estimate by ~exp(s) where the step is compute- or memory-bound
   (network and launch terms are held at the neutral values: the rows do not separate them).
4. ``log_error_quantiles``: the 10% and 90% quantiles of the residuals under the derived profile (re-validated) of
   the group's rows, or of the engine's rows when the group has fewer than MIN_QUANTILE_ROWS, or of every row under
   neutral (``*`` entries and the neutral profile per family).
5. Held-out check: rows are split by source (file and the source column's repository or site); for each source the
   profiles are derived from the other sources only and that source's rows are re-validated. Reported per engine
   and per file: median |estimate / measured - 1| under neutral and under the held-out profile.
   An engine whose rows all come from one source (ATOM: the InferenceX snapshot) has no rows left when its source is
   held out, so its held-out profile is neutral there; it is checked instead by release (SINGLE_SOURCE_SPLIT): for
   each release (the framework text up to its ", MTP on") the engine's entry is derived from its other releases'
   rows and that release's rows are re-validated.

Engine settings (memory, chunk, KV precision, deployable layouts) are not fitted: ENGINES states each with the
engine's own source.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline_opt import fidelity  # noqa: E402
from roofline_opt.catalog.profiles import ENGINE_KEYS, PROFILES_SUBDIR, engine_of_framework, profile_yaml  # noqa: E402
from roofline_opt.physics.profiles import (  # noqa: E402
    ANY_ACCELERATOR,
    AcceleratorEfficiency,
    EngineProfile,
    family_of,
)
from roofline_opt.physics.specs import (  # noqa: E402
    DEFAULT,
    SGLANG_KV_MEMORY_RULE,
    TRTLLM_KV_MEMORY_RULE,
    VLLM_KV_MEMORY_RULE,
)

MEASURED = (
    "../shared/reference/measured_points.csv",
    "tests/data/measured_public_extra.csv",
    "tests/data/measured_public_2026.csv",
)
"""The measured rows the profiles are derived from (paths relative to the checkout)."""

PRIOR_ROWS = 4
"""Pseudo-rows at the neutral value in the regularised median: a group of 4 rows moves half-way to its median."""

MIN_QUANTILE_ROWS = 8
"""Fewest rows whose residual quantiles an entry states as its own (else the engine's, else neutral's)."""

QUANTILES = (0.10, 0.90)

ENGINE_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "atom": "ATOM"}


@dataclass(frozen=True)
class EngineSettings:
    """What an engine profile states without fitting, with the engine's own source for each (YAML comments)."""

    settings: tuple[tuple[str, object], ...]
    default_chunk_tokens: int
    default_kv_bits: int
    deployable: tuple[str, ...]
    sources: tuple[str, ...]


DEPLOYABLE = ("tp", "pp", "ep", "dp_attention", "mtp", "draft", "disagg")
"""Every engine runs these (roofline_opt/deploy/engines.py writes each); none ships 2-D TP or a 4-bit KV cache."""

ENGINES = {
    "vllm": EngineSettings(
        settings=(("kv_memory_rule", VLLM_KV_MEMORY_RULE),),
        default_chunk_tokens=8192,
        default_kv_bits=16,
        deployable=DEPLOYABLE,
        sources=(
            "kv_memory_rule fraction_of_total 0.9: weights, peak activations and the KV cache share",
            "  gpu_memory_utilization (default 0.9) of the device's total memory; the CUDA context, NCCL buffers",
            "  and CUDA graphs sit outside it (vllm-project/vllm vllm/v1/worker/gpu_worker.py @ 35d5cda1",
            "  init_device, determine_available_memory; physics/specs.py VLLM_KV_MEMORY_RULE).",
            "default_chunk_tokens 8192: max_num_batched_tokens of the OpenAI server on devices of >= 70 GiB other",
            "  than A100 (2048 on A100 and smaller): vllm/engine/arg_utils.py EngineArgs.get_batch_defaults.",
            "default_kv_bits 16: kv_cache_dtype 'auto' = the model's dtype (vllm/config/cache.py).",
            "deployable: --tensor-parallel-size, --pipeline-parallel-size, --enable-expert-parallel (EP over every",
            "  TP rank), --data-parallel-size with EP (DP attention), --speculative-config (MTP, draft model),",
            "  disaggregated prefill through KV connectors; no 2-D TP, no 4-bit KV cache (deploy/engines.py).",
        ),
    ),
    "sglang": EngineSettings(
        settings=(("kv_memory_rule", SGLANG_KV_MEMORY_RULE),),
        default_chunk_tokens=8192,
        default_kv_bits=16,
        deployable=DEPLOYABLE,
        sources=(
            "kv_memory_rule fraction_of_total 1.0 less SGLang's reserve: weights and the KV pool get",
            "  mem_fraction_static = (device memory - reserved_mem) / device memory, reserved_mem = 512 MiB +",
            "  1.5 MiB x chunked_prefill_size (8192: 12 GiB) + 2 MiB x cuda_graph_max_bs + tp x pp / 8 GiB",
            "  (sgl-project/sglang python/sglang/srt/server_args.py @ 5d2c83e6 _handle_gpu_memory_settings;",
            "  physics/specs.py SGLANG_KV_MEMORY_RULE), and on devices of at least 160 GiB (B200, MI300X: a",
            "  16384-token chunk) 12 GiB more (large_device_*; the same in sglang 0.5.6 and 0.5.9).",
            "default_chunk_tokens 8192: chunked_prefill_size on devices of 60-160 GiB (H100, H200); 16384 above",
            "  (B200, MI300X): server_args.py _handle_gpu_memory_settings (one value per profile: the H100/H200 tier).",
            "default_kv_bits 16: kv_cache_dtype 'auto' (docs/advanced_features/server_arguments.md).",
            "deployable: --tp, --pp-size, --ep-size, --enable-dp-attention, EAGLE/MTP and draft speculators,",
            "  --disaggregation-mode; no 2-D TP, no 4-bit KV cache (deploy/engines.py).",
        ),
    ),
    "trtllm": EngineSettings(
        settings=(("kv_memory_rule", TRTLLM_KV_MEMORY_RULE),),
        default_chunk_tokens=8192,
        default_kv_bits=16,
        deployable=DEPLOYABLE,
        sources=(
            "kv_memory_rule fraction_of_free_after_weights 0.9: the KV cache gets free_gpu_memory_fraction",
            "  (default 0.9) of the memory left after the profiled peak (weights, activations, NCCL and CUDA",
            "  graphs: the default preset's reserve) (NVIDIA/TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py",
            "  @ d8ae02ca KvCacheCreator._cal_max_tokens; physics/specs.py TRTLLM_KV_MEMORY_RULE).",
            "default_chunk_tokens 8192: --max_num_tokens default (tensorrt_llm/commands/serve.py, BuildConfig).",
            "default_kv_bits 16: KvCacheConfig.dtype 'auto' = the checkpoint's dtype.",
            "deployable: --tp_size, --pp_size, --ep_size, enable_attention_dp, MTP and draft-target speculators,",
            "  disaggregated context/generation servers; no 2-D TP, no 4-bit KV cache (deploy/engines.py).",
        ),
    ),
    "atom": EngineSettings(
        settings=(),
        default_chunk_tokens=16384,
        default_kv_bits=16,
        deployable=(),
        sources=(
            "profiled to price measured ATOM rows (validate, fidelity); not an --engine choice: deploy/ writes no",
            "  ATOM launch recipe.",
            "settings: none; the KV-cache budget is the default preset's (ATOM's gpu_memory_utilization default",
            "  0.9 is stated, how it budgets the KV cache was not checked here).",
            "default_chunk_tokens 16384: max_num_batched_tokens default (ROCm/ATOM atom/model_engine/arg_utils.py",
            "  @ 0027562b EngineArgs).",
            "default_kv_bits 16: kv_cache_dtype default 'bf16' (same file; the InferenceX recipes pass fp8).",
            "deployable: none (deploy/engines.py has no ATOM recipe): a question under --profile atom is offered",
            "  plain TP only, and refuses MTP, draft models and disaggregated serving.",
        ),
    ),
}


@dataclass(frozen=True)
class Residual:
    """One measured row with an estimate: where it comes from, its engine and family, ln(measured / estimate)."""

    file: str
    line: int
    source: str
    engine: str | None
    family: str | None
    gpu: str
    framework: str
    r: float


def _source_key(file: str, source: str) -> str:
    token = source.split()[0] if source.split() else "-"
    token = re.sub(r"^https?://([^/]+).*$", r"\1", token)
    return f"{Path(file).name}:{token}"


def residuals(path: str, profile_of: Callable[[str], EngineProfile | None] | None = None) -> list[Residual]:
    """Every row of ``path`` with an estimate, under neutral or the profile of its framework."""
    sources = {n: row["source_url_or_repo_path"] for n, row in enumerate(csv.DictReader(open(path)), start=2)}
    out = []
    for v in fidelity.validate(path, DEFAULT, profile_of):
        ratio = v.estimate_ratio
        if ratio is None or not ratio > 0 or v.row.setup is None:
            continue
        gpu = v.row.setup.gpu_card
        out.append(
            Residual(
                path,
                v.row.line,
                _source_key(path, sources.get(v.row.line, "")),
                engine_of_framework(v.row.framework),
                family_of(gpu),
                gpu,
                v.row.framework,
                -math.log(ratio),
            )
        )
    return out


def _shrunk(values: list[float]) -> float:
    return len(values) / (len(values) + PRIOR_ROWS) * float(np.median(values)) if values else 0.0


def _quantiles(values: list[float]) -> tuple[float, float]:
    low, high = np.quantile(values, QUANTILES)
    return round(float(low), 3), round(float(high), 3)


def _versions(frameworks: list[str]) -> str:
    pattern = re.compile(r"(?:(?:tensorrt-llm|sglang|vllm)\s+v?|atom)(\d+\.\d+[\w.]*)", re.IGNORECASE)
    stated = [m.group(1) for f in frameworks if (m := pattern.search(f))]
    found = sorted(set(stated), key=lambda v: [int(x) if x.isdigit() else 0 for x in re.findall(r"\d+", v)])
    unstated = len(frameworks) - len(stated)
    text = ", ".join(found) if found else "not stated"
    return text + (f" (+{unstated} rows without a version)" if unstated and found else "")


def fit(engine: str, rows: list[Residual]) -> EngineProfile:
    """The engine's profile from neutral residuals: one entry per family with rows, and a ``*`` entry at neutral."""
    mine = [r for r in rows if r.engine == engine]
    entries = []
    by_family: dict[str, list[Residual]] = defaultdict(list)
    for r in mine:
        if r.family is not None:
            by_family[r.family].append(r)
    for family, group in sorted(by_family.items()):
        values = [r.r for r in group]
        s = _shrunk(values)
        flop, hbm = min(1.0, DEFAULT.flop_efficiency * math.exp(s)), min(1.0, DEFAULT.hbm_efficiency * math.exp(s))
        source = (
            f"{len(group)} {ENGINE_NAMES[engine]} rows on {', '.join(sorted({r.gpu for r in group}))} "
            f"({_versions([r.framework for r in group])}): median ln(measured/neutral estimate) "
            f"{float(np.median(values)):+.3f}, shrunk by n/(n+{PRIOR_ROWS}) to {s:+.3f}; neutral efficiencies "
            f"times exp({s:+.3f}), capped at 1 (tools/derive_profiles.py)"
        )
        entries.append(AcceleratorEfficiency((family,), round(flop, 4), round(hbm, 4), source=source, rows=len(group)))
    entries.append(
        AcceleratorEfficiency(
            (ANY_ACCELERATOR,),
            DEFAULT.flop_efficiency,
            DEFAULT.hbm_efficiency,
            source=f"no {ENGINE_NAMES[engine]} rows on these accelerators: the neutral efficiencies",
        )
    )
    e = ENGINES[engine]
    return EngineProfile(
        name=engine,
        engine=engine,
        engine_versions=f"{ENGINE_NAMES[engine]} {_versions([r.framework for r in mine])}",
        settings=e.settings,
        accelerators=tuple(entries),
        default_chunk_tokens=e.default_chunk_tokens,
        default_kv_bits=e.default_kv_bits,
        deployable=e.deployable,
        source=(
            f"settings: {ENGINE_NAMES[engine]}'s own defaults (sources in the comments above); efficiencies: "
            f"tools/derive_profiles.py on {len(mine)} rows of {', '.join(MEASURED)}"
        ),
    )


def with_quantiles(profile: EngineProfile, under_profile: list[Residual], neutral: list[Residual]) -> EngineProfile:
    """The profile's entries with residual quantiles (their own rows', else the engine's, else every row's)."""
    mine = [r.r for r in under_profile if r.engine == profile.engine]
    pooled = _quantiles([r.r for r in neutral])
    entries = []
    for e in profile.accelerators:
        own = [r.r for r in under_profile if r.engine == profile.engine and r.family in e.accelerators]
        if len(own) >= MIN_QUANTILE_ROWS:
            q, how = _quantiles(own), f"its {len(own)} rows"
        elif len(mine) >= MIN_QUANTILE_ROWS and own:
            q, how = _quantiles(mine), f"the engine's {len(mine)} rows (only {len(own)} of its own)"
        else:
            q, how = pooled, f"every engine's {len(neutral)} rows under neutral"
        entries.append(replace(e, log_error_quantiles=q, source=f"{e.source}; residual quantiles from {how}"))
    return replace(profile, accelerators=tuple(entries))


def neutral_profile(neutral: list[Residual]) -> EngineProfile:
    """The default preset, with each family's residual quantiles under it (``*``: every row's)."""
    entries = []
    by_family: dict[str, list[float]] = defaultdict(list)
    for r in neutral:
        if r.family is not None:
            by_family[r.family].append(r.r)
    for family, values in sorted(by_family.items()):
        if len(values) >= MIN_QUANTILE_ROWS:
            entries.append(
                AcceleratorEfficiency(
                    (family,),
                    DEFAULT.flop_efficiency,
                    DEFAULT.hbm_efficiency,
                    source=f"the default preset; residual quantiles of its {len(values)} rows on this family",
                    log_error_quantiles=_quantiles(values),
                )
            )
    entries.append(
        AcceleratorEfficiency(
            (ANY_ACCELERATOR,),
            DEFAULT.flop_efficiency,
            DEFAULT.hbm_efficiency,
            source=f"the default preset; residual quantiles of all {len(neutral)} rows",
            log_error_quantiles=_quantiles([r.r for r in neutral]),
        )
    )
    return EngineProfile(
        name="neutral",
        engine="",
        engine_versions="any: one set of efficiencies for every engine and accelerator",
        accelerators=tuple(entries),
        source=(
            "the default preset (roofline_opt/physics/specs.py DEFAULT) unchanged: what every command uses without "
            f"--engine or --profile; residual quantiles from tools/derive_profiles.py on {', '.join(MEASURED)}"
        ),
    )


def _profile_of(profiles: dict[str, EngineProfile]) -> Callable[[str], EngineProfile | None]:
    return lambda framework: profiles.get(engine_of_framework(framework) or "")


def _mae(values: list[float]) -> float:
    """Median |estimate / measured - 1| of residuals r = ln(measured / estimate)."""
    return float(np.median([abs(math.exp(-r) - 1.0) for r in values])) if values else float("nan")


def held_out(neutral: list[Residual]) -> list[dict]:
    """By source: profiles from the other sources, re-validated on this source's rows (engine rows only)."""
    out = []
    for source in sorted({r.source for r in neutral if r.engine}):
        train = [r for r in neutral if r.source != source]
        test = [r for r in neutral if r.source == source and r.engine]
        profiles = {e: fit(e, train) for e in ENGINES}
        again = {(r.file, r.line): r for r in residuals(test[0].file, _profile_of(profiles))}
        for r in test:
            if (r.file, r.line) in again:
                out.append(
                    {
                        "source": source,
                        "engine": r.engine,
                        "file": r.file,
                        "neutral": r.r,
                        "profile": again[(r.file, r.line)].r,
                    }
                )
    return out


def _release(framework: str) -> str:
    """A row's engine release: its framework text without the speculator note (an image with and without MTP is one
    release)."""
    return framework.split(", MTP on")[0]


def single_source_engines(neutral: list[Residual]) -> list[str]:
    """Engines whose rows all come from one source (held out by release instead: ``held_out_by_release``)."""
    return [e for e in ENGINES if len({r.source for r in neutral if r.engine == e}) == 1]


def held_out_by_release(neutral: list[Residual], engine: str) -> list[dict]:
    """By release of ``engine``: its profile from its other releases' rows, re-validated on this release's rows."""
    mine = [r for r in neutral if r.engine == engine]
    out = []
    for release in sorted({_release(r.framework) for r in mine}):
        test = [r for r in mine if _release(r.framework) == release]
        profiles = {engine: fit(engine, [r for r in neutral if r not in test])}
        again = {
            (x.file, x.line): x for f in sorted({r.file for r in test}) for x in residuals(f, _profile_of(profiles))
        }
        out += [
            {"source": release, "engine": engine, "file": r.file, "neutral": r.r, "profile": again[(r.file, r.line)].r}
            for r in test
            if (r.file, r.line) in again
        ]
    return out


def held_out_table(rows: list[dict], engine: str | None = None, by_release: bool = False) -> str:
    lines = [
        "| rows held out | n | neutral median abs error | held-out profile median abs error | better |",
        "|---|---:|---:|---:|---|",
    ]
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if engine is not None and r["engine"] != engine:
            continue
        groups[f"engine {r['engine']}"].append(r)
        if by_release:
            groups[f"release {r['source']}"].append(r)
        else:
            groups[f"file {Path(r['file']).name}"].append(r)
            groups["all"].append(r)
    for name, members in groups.items():
        n, p = _mae([m["neutral"] for m in members]), _mae([m["profile"] for m in members])
        lines.append(f"| {name} | {len(members)} | {n:.1%} | {p:.1%} | {'yes' if p < n else 'no'} |")
    return "\n".join(lines)


def in_sample_table(neutral: list[Residual], under: list[Residual], engine: str | None = None) -> str:
    lines = [
        "| engine | family | rows | median ratio measured/neutral | neutral median abs error | "
        "profile median abs error |",
        "|---|---|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    by_key = {(r.file, r.line): r for r in under}
    for r in neutral:
        if r.engine and (engine is None or r.engine == engine) and (r.file, r.line) in by_key:
            groups[(r.engine, r.family or "-")].append((r.r, by_key[(r.file, r.line)].r))
    for (engine, family), pairs in sorted(groups.items()):
        ratio = math.exp(float(np.median([a for a, _ in pairs])))
        lines.append(
            f"| {engine} | {family} | {len(pairs)} | {ratio:.3f} | {_mae([a for a, _ in pairs]):.1%} | "
            f"{_mae([b for _, b in pairs]):.1%} |"
        )
    return "\n".join(lines)


PAGE_TITLES = {"neutral": "Neutral", "vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "atom": "ATOM"}


def entries_table(profile: EngineProfile) -> str:
    lines = [
        "| accelerators | flop_efficiency | hbm_efficiency | rows | log_error_quantiles (10%, 90%) | interval factor |",
        "|---|---:|---:|---:|---|---|",
    ]
    for e in profile.accelerators:
        low, high = e.log_error_quantiles
        lines.append(
            f"| {', '.join(e.accelerators)} | {e.flop_efficiency:g} | {e.hbm_efficiency:g} | {e.rows} | "
            f"{low:+.3f}, {high:+.3f} | {math.exp(low):.2f}x-{math.exp(high):.2f}x |"
        )
    return "\n".join(lines)


def engine_page(
    profile: EngineProfile, neutral: list[Residual], under: list[Residual], held: list[dict], by_release: list[dict]
) -> str:
    """docs/profiles/NAME.md: what the profile sets, with sources, and how it fares on measured rows."""
    name = profile.name
    title = PAGE_TITLES[name]
    out = [
        f"# {title} profile",
        "",
        "<!-- Written by tools/derive_profiles.py --write: rerun it rather than editing this page. -->",
        "",
        _usage(profile),
        f"({profile.engine_versions}). File: `instances/profiles/{name}.yaml`.",
        "",
    ]
    if profile.engine:
        out += ["## Settings and their sources", ""]
        out += [
            f"- {line.strip()}" if not line.startswith("  ") else f"  {line.strip()}" for line in ENGINES[name].sources
        ]
        out += [
            "",
            f"Default prefill chunk: {profile.default_chunk_tokens} tokens per step; default KV precision: "
            f"{profile.default_kv_bits} bits; deployable layouts: {', '.join(profile.deployable) or 'none'} "
            "(2-D TP only on request with `--tp-modes`, whatever the profile).",
            "",
        ]
    else:
        out += [
            "The default preset's physics on every accelerator (FLOP efficiency 0.70, HBM efficiency 0.75, its "
            "memory reserve and serving model): every figure without `--engine` is unchanged by profiles. Its entries "
            "only carry the residual quantiles that give default answers their interval.",
            "",
        ]
    out += [
        "## Efficiencies per accelerator family",
        "",
        "Derived by `python tools/derive_profiles.py` (its docstring states the method): per engine and family, the "
        f"median of ln(measured / neutral estimate) over the measured rows, shrunk by n / (n + {PRIOR_ROWS}) towards "
        "the neutral profile, applied to both efficiencies (capped at 1). The interval factor is the range answers "
        "show as `*_low`/`*_high`: the 10-90% range of measured/estimate on the rows behind the entry (its own "
        f"rows when it has at least {MIN_QUANTILE_ROWS}, else the engine's, else every row's). It is an empirical "
        "residual range, not a confidence interval of the physics.",
        "",
        entries_table(profile),
        "",
    ]
    if profile.engine:
        out += [
            "## Validation",
            "",
            "Median absolute error = median of |estimate / measured - 1| over the rows "
            f"({', '.join(MEASURED)}), under the neutral profile and under this one (rows it was derived from):",
            "",
            in_sample_table(neutral, under, name),
            "",
            "Held out: for each source of rows (file and repository or site), the profiles are derived from the other "
            "sources only and that source's rows are re-validated:",
            "",
            held_out_table(held, name),
            "",
        ]
    if any(r["engine"] == name for r in by_release):
        out += [
            "Every row of this engine comes from one source, so holding the source out leaves none to derive from "
            "(the held-out profile is neutral above). Held out by release instead: for each release (the framework "
            "text without its MTP note) the entry is derived from the other releases' rows and that release's rows "
            "are re-validated:",
            "",
            held_out_table(by_release, name, by_release=True),
            "",
        ]
    out += [
        "## Calibrating your own",
        "",
        "Fit a profile on your own measurements and pass it to any command with `--profile FILE.yaml` "
        "(`roofline-opt calibrate --measured FILE.csv --gpu GPU --engine ENGINE --out mine.yaml`; see "
        "[Validation and calibration](../how-to/validation.md)). The file's format is [Engine profiles](index.md).",
        "",
    ]
    return "\n".join(out)


def _usage(profile: EngineProfile) -> str:
    if not profile.engine:
        return "The default: no `--engine`, or `--profile neutral`."
    if profile.engine in ENGINE_KEYS:
        return f"`--engine {profile.engine}`"
    return (
        f"`validate` prices this engine's rows with it; `--profile {profile.name}` elsewhere (no `--engine`: no recipe)"
    )


def _yaml_with_sources(profile: EngineProfile) -> str:
    header = ["# Written by tools/derive_profiles.py --write: do not edit by hand (rerun the tool)."]
    if profile.engine:
        header += ["# Settings and their sources:", *(f"#   {line}" for line in ENGINES[profile.engine].sources)]
    return "\n".join(header) + "\n" + profile_yaml(profile)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite instances/profiles/*.yaml")
    parser.add_argument(
        "--print-yaml",
        metavar="NAME",
        choices=(*ENGINES, "neutral"),
        help="print only this profile's YAML (what --write writes; no held-out check, no files written)",
    )
    args = parser.parse_args(argv)
    files = [str(ROOT / f) if not Path(f).is_absolute() else f for f in MEASURED]
    neutral = [r for f in files for r in residuals(f)]
    profiles = {e: fit(e, neutral) for e in ENGINES}
    under = [r for f in files for r in residuals(f, _profile_of(profiles))]
    final = {e: with_quantiles(p, under, neutral) for e, p in profiles.items()}
    final["neutral"] = neutral_profile(neutral)
    if args.print_yaml:
        print(_yaml_with_sources(final[args.print_yaml]), end="")
        return 0
    print("In sample (rows the profiles are derived from):\n")
    print(in_sample_table(neutral, under))
    print("\nHeld out by source (profiles derived without the source's rows):\n")
    held = held_out(neutral)
    print(held_out_table(held))
    by_release = [r for e in single_source_engines(neutral) for r in held_out_by_release(neutral, e)]
    print("\nHeld out by release (engines whose rows all come from one source):\n")
    print(held_out_table(by_release, by_release=True))
    if args.write:
        for name, profile in final.items():
            (ROOT / PROFILES_SUBDIR / f"{name}.yaml").write_text(_yaml_with_sources(profile))
            page = engine_page(profile, neutral, under, held, by_release)
            (ROOT / "docs" / "profiles" / f"{name}.md").write_text(page)
        print(f"\nwrote {', '.join(sorted(final))} to {PROFILES_SUBDIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
