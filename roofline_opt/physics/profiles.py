"""Engine profiles: a serving engine's efficiencies per accelerator family, its fixed settings and what it deploys.

A profile turns into one ``Preset`` per accelerator (``EngineProfile.preset_for``): the base preset (a ``PRESETS``
key), the profile's ``settings`` (Preset fields every accelerator shares: memory reserve, usable fraction...) and the
efficiencies of the accelerator entry matching the device (by card name or family key, ``ACCELERATOR_FAMILIES``).
The ``neutral`` profile has no settings and the base preset's efficiencies on every entry, so it reproduces the
``default`` preset exactly. The YAML form and the packaged profiles are ``roofline_opt.catalog.profiles``; the shared
interface is docs/profiles/index.md.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from roofline_opt.physics.specs import PRESETS, GpuSpec, Preset

ACCELERATOR_FAMILIES: dict[str, tuple[str, ...]] = {
    "nvidia-volta": ("v100",),
    "nvidia-ampere": ("a100-80gb",),
    "nvidia-ada": ("l40s",),
    "nvidia-hopper": ("h100-sxm", "h200", "h800", "gh200"),
    "nvidia-blackwell": ("b200", "gb200"),
    "amd-cdna3": ("mi300x", "mi325x"),
    "amd-cdna4": ("mi355x",),
}
"""Vendor and generation of each catalog accelerator (the card names of instances/gpus/); an entry of a profile may
name a family key instead of cards. ``*`` in an entry's ``accelerators`` matches every device no other entry names."""

ANY_ACCELERATOR = "*"

EFFICIENCY_FIELDS = ("flop_efficiency", "hbm_efficiency", "network_latency_factor", "kernel_launch_factor")
"""The Preset fields an accelerator entry sets."""

SETTING_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(Preset)
    if f.name not in ("name", "protocols", "kernel_counts", "mixed_precisions", *EFFICIENCY_FIELDS)
)
"""Preset fields a profile's ``settings`` may override for every accelerator (not ``mixed_precisions``: how a
checkpoint is quantized is the checkpoint's, not the engine's)."""

LAYOUT_FEATURES = ("tp", "tp_2d", "pp", "ep", "dp_attention", "mtp", "draft", "disagg", "kv4")
"""Layout features an engine may deploy (``EngineProfile.deployable``): tensor parallelism (1-D, 2-D), pipeline and
expert parallelism, data-parallel attention, MTP modules and draft models as speculators, disaggregated serving, a
4-bit KV cache.
2-D TP is offered only when a question asks for it, whatever the profile."""


def family_of(gpu_name: str) -> str | None:
    """The family key of a catalog accelerator (``nvidia-hopper`` for ``h100-sxm``), or None."""
    return next((key for key, names in ACCELERATOR_FAMILIES.items() if gpu_name in names), None)


@dataclass(frozen=True)
class AcceleratorEfficiency:
    """One accelerator family's efficiencies under an engine, with where they come from.

    ``log_error_quantiles``: the (10%, 90%) quantiles of ln(measured / estimate) over the rows the profile was
    checked on (its validation residuals); answers turn them into ``*_low``/``*_high`` figures. ``fitted``: the
    parameters fitted from ``rows`` measured rows (calibrated profiles); the others are held at their prior.
    """

    accelerators: tuple[str, ...]
    flop_efficiency: float
    hbm_efficiency: float
    network_latency_factor: float = 1.0
    kernel_launch_factor: float = 1.0
    source: str = ""
    fitted: tuple[str, ...] = ()
    rows: int = 0
    log_error_quantiles: tuple[float, float] = (0.0, 0.0)

    def matches(self, gpu_name: str) -> bool:
        """Whether this entry names the accelerator or its family (a wildcard entry matches nothing here)."""
        return gpu_name in self.accelerators or family_of(gpu_name) in self.accelerators


@dataclass(frozen=True)
class EngineProfile:
    """A serving engine's physics: efficiencies per accelerator family, shared settings and deployable layouts.

    ``settings``: (Preset field, value) pairs applied on ``base_preset`` for every accelerator. ``default_chunk_tokens``
    and ``default_kv_bits``: the engine's default prefill chunk (tokens per step) and KV-cache precision, used where a
    question does not choose. ``deployable``: ``LAYOUT_FEATURES`` the engine runs; a question under this profile is
    offered only these. ``engine``: the key deploy/ uses (``vllm``, ``sglang``, ``trtllm``; empty for neutral).
    """

    name: str
    engine: str
    engine_versions: str
    base_preset: str = "default"
    settings: tuple[tuple[str, object], ...] = ()
    accelerators: tuple[AcceleratorEfficiency, ...] = ()
    default_chunk_tokens: int | None = None
    default_kv_bits: int | None = None
    deployable: tuple[str, ...] = LAYOUT_FEATURES
    source: str = ""

    def efficiency_for(self, gpu: GpuSpec) -> AcceleratorEfficiency | None:
        """The entry for this accelerator: one naming its card, else its family, else a ``*`` entry, else None."""
        return self.efficiency_named(gpu.name)

    def efficiency_named(self, gpu_name: str) -> AcceleratorEfficiency | None:
        """``efficiency_for`` by accelerator name."""
        named = [e for e in self.accelerators if gpu_name in e.accelerators]
        family = [e for e in self.accelerators if e.matches(gpu_name)]
        wildcard = [e for e in self.accelerators if ANY_ACCELERATOR in e.accelerators]
        found = named or family or wildcard
        return found[0] if found else None

    def preset_for(self, gpu: GpuSpec) -> Preset:
        """The base preset with this profile's settings and the accelerator's efficiencies (named as the base preset:
        answers name the profile beside it)."""
        return _preset_for(self, gpu.name)

    def preset_named(self, gpu_name: str) -> Preset:
        """``preset_for`` by accelerator name."""
        return _preset_for(self, gpu_name)

    def shared_preset(self) -> Preset:
        """The base preset with this profile's settings only: the physics every accelerator shares (the serving
        cycle, memory check...), named as the base preset."""
        base = PRESETS[self.base_preset]
        changed: dict[str, Any] = {k: v for k, v in self.settings if getattr(base, k) != v}
        return dataclasses.replace(base, **changed) if changed else base

    def deploys(self, feature: str) -> bool:
        return feature in self.deployable


@functools.lru_cache(maxsize=256)
def _preset_for(profile: EngineProfile, gpu_name: str) -> Preset:
    base = PRESETS[profile.base_preset]
    fields: dict[str, object] = dict(profile.settings)
    entry = profile.efficiency_named(gpu_name)
    if entry is not None:
        fields.update({name: getattr(entry, name) for name in EFFICIENCY_FIELDS})
    changed: dict[str, Any] = {k: v for k, v in fields.items() if getattr(base, k) != v}
    return dataclasses.replace(base, **changed) if changed else base
