"""benchmarks/prefill_rates.py: the prefill pool's rate a closed-loop disaggregated row implies (Little's law), and
which rows count as prefill-bound."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from roofline_opt import catalog
from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import map_row
from roofline_opt.physics.specs import DEFAULT

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "prefill_rates.py"
_spec = importlib.util.spec_from_file_location("prefill_rates", SCRIPT)
assert _spec is not None and _spec.loader is not None
prefill_rates = importlib.util.module_from_spec(_spec)
sys.modules["prefill_rates"] = prefill_rates  # its dataclass looks its module up
_spec.loader.exec_module(prefill_rates)

LAYOUT = "prefill 8 GPU (1 x TP8 EP8) + decode 48 GPU (6 x TP8 EP8)"


def _row(concurrency: str, ttft_ms: str, tpot_ms: str = "6.47", layout: str = LAYOUT):
    cells = dict(
        model="DeepSeek-R1-0528",
        precision="FP8, FP8 KV",
        gpu="B200 180GB",
        n_gpus="56",
        layout=layout,
        batch_or_concurrency=f"concurrency {concurrency}",
        input_len="8192",
        output_len="1024",
        tok_s_per_request=f"{1000 / float(tpot_ms)}",
        tok_s_per_gpu="49.13",
        notes=f"stated: median TPOT {tpot_ms} ms, median TTFT {ttft_ms} ms",
        line="13",
    )
    return map_row(cells)


def test_littles_law_gives_the_requests_served_and_the_clients_on_each_side() -> None:
    r = prefill_rates.read(_row("256", "79328"), DEFAULT)
    served = 256 / (79.328 + 1023 * 6.47e-3)
    assert r.requests_per_s == pytest.approx(served)
    assert r.decoding_clients == pytest.approx(served * 1023 * 6.47e-3)
    assert r.prefill_clients == pytest.approx(served * 79.328)


def test_the_measured_rate_is_input_tokens_per_second_per_prefill_gpu() -> None:
    r = prefill_rates.read(_row("256", "79328"), DEFAULT)
    assert r.prefill_gpus == 8
    assert r.measured_tok_s_per_gpu == pytest.approx(r.requests_per_s * 8192 / 8)


def test_the_estimate_is_the_pools_saturated_rate_per_prefill_gpu() -> None:
    row = _row("256", "79328")
    _, _, saturated = whole_requests.prefill_rate(
        row.setup, catalog.load_model("deepseek-v3"), catalog.load_gpu("b200"), DEFAULT
    )
    r = prefill_rates.read(row, DEFAULT)
    assert r.estimated_tok_s_per_gpu == pytest.approx(saturated * 8192 / 8)
    assert r.ratio == pytest.approx(r.measured_tok_s_per_gpu / r.estimated_tok_s_per_gpu)


def test_a_deep_queue_is_prefill_bound_and_a_short_one_is_not() -> None:
    assert prefill_rates.read(_row("256", "79328"), DEFAULT).prefill_bound(4.0)
    assert not prefill_rates.read(_row("8", "400"), DEFAULT).prefill_bound(4.0)


def test_the_layout_kind_names_the_prefill_sides_parallelism() -> None:
    dep = "prefill 8 GPU (1 x TP8 EP8 with attention DP (DEP8)) + decode 48 GPU (6 x TP8 EP8)"
    tp = "prefill 8 GPU (1 x TP8) + decode 48 GPU (6 x TP8)"
    assert [prefill_rates.layout_kind(_row("256", "79328", layout=x)) for x in (LAYOUT, dep, tp)] == [
        "TP+EP",
        "DP-attention",
        "TP",
    ]


def test_a_row_without_a_stated_ttft_is_not_read() -> None:
    row = _row("256", "79328")
    assert prefill_rates.read(type(row)(**{**row.__dict__, "measured_ttft_s": None}), DEFAULT) is None
