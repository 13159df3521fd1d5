"""Model and accelerator names as measurements write them, resolved to catalog cards.

Models: HuggingFace ids (``deepseek-ai/DeepSeek-R1-0528``), ``Meta-`` prefixes and release or tuning suffixes of the
same architecture (``-Instruct``, ``-chat``, ``-hf``, ``-0528``, MLPerf's ``-99``/``-99.9``) are dropped until a card
matches; a few names of the same architecture under another name are listed in ``MODEL_ALIASES``. Accelerators: the
first pattern of ``GPU_PATTERNS`` the lower-cased name contains (``H100-SXM-80GB``, ``B200-180GB``, ``GH200``
before ``H200``).
"""

from __future__ import annotations

import re

MODEL_ALIASES = {
    "deepseek-r1": "deepseek-v3",
    "deepseek-v3/r1": "deepseek-v3",
    "deepseek-v3-base": "deepseek-v3",
    "gpt-j": "gpt-j-6b",
    "llama-3.1-70b": "llama-3-70b",
    "mistral-large": "mistral-large-2",
}
"""Normalised names of the same architecture under another name -> catalog card."""

_SUFFIXES = re.compile(
    r"-(instruct|chat|hf|base|it|fp8|bf16|fp16|awq|gptq|int4|int8|w8a8|w4a16|nvfp4|fp4|dynamic|turbo|preview|\d{4}"
    r"|v\d+(\.\d+)*)$"
)
_PREFIXES = re.compile(r"^(meta-)")
_ACCURACY_TARGET = re.compile(r"-99(\.9)?$")
"""MLPerf's benchmark names carry the accuracy target: ``llama2-70b-99.9``."""
_FAMILY_DASH = re.compile(r"^(llama|gpt)-?(\d|j)")
"""MLPerf's ``llama2-70b`` / ``llama3.1-405b`` / ``gptj`` -> ``llama-2-70b`` / ``llama-3.1-405b`` / ``gpt-j``."""

GPU_PATTERNS = (
    ("gb200", "gb200"),
    ("gh200", "gh200"),
    ("b200", "b200"),
    ("h100", "h100-sxm"),
    ("h200", "h200"),
    ("h800", "h800"),
    ("a100", "a100-80gb"),
    ("mi355x", "mi355x"),
    ("mi325x", "mi325x"),
    ("mi300x", "mi300x"),
    ("v100", "v100"),
    ("l40s", "l40s"),
)
"""Substring of a lower-cased measured accelerator name -> catalog card, first match wins (GB200 before B200,
GH200 before H200)."""

_OTHER_VARIANTS = {
    "h100-sxm": re.compile(r"pcie|\bnvl\b(?!\d)|\bnvl$"),
    "a100-80gb": re.compile(r"\b40\s*gb|-40gb"),
}
"""Variants with other figures than the card their family maps to (H100 PCIe and NVL, A100 40GB): not mapped."""


UNMODELLED_ARCHITECTURES = (
    ("llama-4", "uses chunked local attention (8,192 tokens) in three of every four layers"),
    ("gpt-oss", "alternates 128-token sliding-window attention layers with full-context ones"),
)
"""Families the roofline cannot describe yet (its KV cache is read over the whole context in every layer), with why."""


def unmodelled_reason(name: str) -> str | None:
    """Why a model family has no card (its attention is not the roofline's), or None."""
    low = normalise(name)
    return next((why for family, why in UNMODELLED_ARCHITECTURES if family in low), None)


def normalise(name: str) -> str:
    """``"DeepSeek-R1 (671B MoE)"`` -> ``"deepseek-r1"``: lower case, remarks dropped, blanks as dashes."""
    return re.sub(r"[\s_]+", "-", re.sub(r"\(.*?\)", "", name).strip().lower())


def model_candidates(text: str) -> list[str]:
    """Catalog names to try for a measured model name, most specific first."""
    name = normalise(text)
    if not name:
        return []
    tried = [name]
    if "/" in name and name not in MODEL_ALIASES:
        name = name.rsplit("/", 1)[1]
        tried.append(name)
    name = _FAMILY_DASH.sub(r"\1-\2", _ACCURACY_TARGET.sub("", _PREFIXES.sub("", name)))
    tried.append(name)
    while (stripped := _SUFFIXES.sub("", name)) != name:
        name = stripped
        tried.append(name)
    out: list[str] = []
    for candidate in tried:
        card = MODEL_ALIASES.get(candidate, candidate)
        if card not in out:
            out.append(card)
    return out


def gpu_card_name(text: str) -> str | None:
    """The catalog card of a measured accelerator name, or None."""
    low = text.lower()
    card = next((card for pattern, card in GPU_PATTERNS if pattern in low), None)
    other = _OTHER_VARIANTS.get(card or "")
    if other is not None and other.search(low):
        return None
    return card
