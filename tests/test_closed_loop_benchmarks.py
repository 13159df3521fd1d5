"""validate reads fixed-concurrency benchmarks as closed loops: C clients each wait for a request's last token before
sending the next, so the output rate is C O / (TTFT + (O - 1) TPOT), and a disaggregated deployment's prefill pool
and decode instances share the clients (docs/fidelity.md, "Closed-loop benchmarks")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roofline_opt import catalog, fidelity
from roofline_opt.fidelity import whole_requests
from roofline_opt.fidelity.measured import map_row
from roofline_opt.fidelity.validate import _evaluate
from roofline_opt.physics import evaluator, requests
from roofline_opt.physics.mtp import mtp_module
from roofline_opt.physics.specs import DEFAULT

PEAK = DEFAULT.at_peak()
COLUMNS = "model,precision,gpu,n_gpus,layout,batch_or_concurrency,input_len,output_len,tok_s_per_request,tok_s_per_gpu"


def _cells(layout: str, n_gpus: str, concurrency: str, input_len: str = "8192") -> dict[str, str]:
    return dict(
        model="DeepSeek-R1-0528",
        precision="FP8, FP8 KV",
        gpu="B200 180GB",
        n_gpus=n_gpus,
        layout=layout,
        batch_or_concurrency=f"concurrency {concurrency}",
        input_len=input_len,
        output_len="1024",
        tok_s_per_request="50",
        tok_s_per_gpu="100",
    )


def _validate(tmp_path: Path, cells: dict[str, str]) -> fidelity.ValidationRow:
    path = tmp_path / "m.csv"
    path.write_text(COLUMNS + "\n" + ",".join(f'"{cells[c]}"' for c in COLUMNS.split(",")) + "\n")
    (row,) = fidelity.validate(path)
    return row


def _figures(cells: dict[str, str], share: float) -> dict[str, np.ndarray]:
    setup = map_row(cells | {"line": "2"}).setup
    assert setup is not None
    return _evaluate(setup, DEFAULT, [share])


def test_an_aggregated_row_serves_its_clients_at_littles_law_over_the_whole_request(tmp_path: Path) -> None:
    cells = _cells("TP8", "8", "64", "1024")
    row = _validate(tmp_path, cells)
    model, gpu = catalog.load_model("deepseek-v3"), catalog.load_gpu("b200")
    layout = evaluator.Layout.of(8, False, 1, 1536, 1, 1, 8)
    out = requests.aggregated_figures(model, gpu, PEAK, 8, layout, 64.0, requests.Workload.single(1024, 1024), 2048)
    cycle_s = float(out["ttft_s"]) + 1023 * float(out["tpot_s"])
    assert row.predicted_tok_s_per_gpu == pytest.approx(64 * 1024 / cycle_s / 8)
    assert row.predicted_tok_s_per_gpu < 64 / float(out["tpot_s"]) / 8


def test_the_prefill_side_of_a_disaggregated_layout_is_parsed() -> None:
    cells = _cells("prefill 16 GPU (2 x TP8 EP8 with attention DP (DEP8)) + decode 8 GPU (1 x TP8)", "24", "64")
    prefill = map_row(cells | {"line": "2"}).setup.prefill
    assert (prefill.tp, prefill.ep, prefill.instances, prefill.dp_attention) == (8, 8, 2, True)


def test_a_disaggregated_row_without_a_prefill_side_keeps_the_decode_only_model() -> None:
    setup = map_row(_cells("decode 8 GPU TP8", "8", "64") | {"line": "2"}).setup
    assert setup.serving == "disaggregated" and setup.prefill is None
    assert not whole_requests.applies(setup)


def _prefill_pool(cells: dict[str, str]):
    """(requests/s as a function of the clients in the pool, KV-transfer seconds, saturated requests/s)."""
    setup = map_row(cells | {"line": "2"}).setup
    return whole_requests.prefill_rate(setup, catalog.load_model("deepseek-v3"), catalog.load_gpu("b200"), DEFAULT)


def test_the_closed_loop_balances_the_decode_rate_with_the_prefill_rate_of_the_clients_left() -> None:
    cells = _cells("prefill 4 GPU (1 x TP4) + decode 16 GPU (2 x TP8)", "20", "128")
    f = _figures(cells, 64.0)
    rate, kv_s, _ = _prefill_pool(cells)
    served = float(f["requests_per_s"][0])
    left = 128 - 2 * float(f["decoding_batch"][0]) - served * kv_s
    assert served == pytest.approx(float(rate(np.array([left]))[0]), rel=1e-6)
    assert float(f["throughput_tok_s"][0]) == pytest.approx(served * 1024 / 2)


def test_a_prefill_bound_row_serves_the_prefill_pools_saturated_rate() -> None:
    cells = _cells("prefill 4 GPU (1 x TP4) + decode 32 GPU (4 x TP8)", "36", "4096")
    f = _figures(cells, 1024.0)
    _, _, saturated = _prefill_pool(cells)
    assert float(f["requests_per_s"][0]) == pytest.approx(saturated, rel=1e-3)
    assert f["bottleneck"][0] == "prefill"
    assert float(f["decoding_batch"][0]) < 1024 / 4


def test_a_prefill_bound_rows_time_to_first_token_is_its_clients_queue() -> None:
    cells = _cells("prefill 4 GPU (1 x TP4) + decode 32 GPU (4 x TP8)", "36", "4096")
    f = _figures(cells, 1024.0)
    waiting = 4096 - 4 * float(f["decoding_batch"][0])
    assert float(f["ttft_s"][0]) == pytest.approx(waiting / float(f["requests_per_s"][0]))


def test_clients_shared_unevenly_are_predicted_at_their_mean_share(tmp_path: Path) -> None:
    cells = _cells("prefill 4 GPU (1 x TP4) + decode 40 GPU (5 x TP8)", "44", "8")
    row = _validate(tmp_path, cells)
    assert (row.row.setup.batch, row.row.setup.clients) == (2, 8)
    f = _evaluate(row.row.setup.for_bound(), PEAK, [8 / 5])
    assert row.predicted_tok_s_per_gpu == pytest.approx(float(f["throughput_tok_s"][0]) * 5 / 44)


def test_a_rows_median_time_to_first_token_is_read_from_its_notes() -> None:
    cells = _cells("TP8", "8", "4") | {"notes": "stated: median TPOT 3.60 ms, median TTFT 872 ms", "line": "2"}
    assert map_row(cells).measured_ttft_s == pytest.approx(0.872)


def test_a_records_estimated_time_to_first_token_is_the_closed_loops(tmp_path: Path) -> None:
    cells = _cells("prefill 4 GPU (1 x TP4) + decode 8 GPU (1 x TP8)", "12", "64")
    record = _validate(tmp_path, cells).to_record()
    assert record["estimated_ttft_s"] == pytest.approx(float(_figures(cells, 64.0)["ttft_s"][0]))


def test_an_aggregated_mtp_row_runs_its_draft_in_the_closed_loop() -> None:
    cells = _cells("TP8", "8", "32", "1024") | {"framework": "SGLang v0.5.6, MTP on", "line": "2"}
    setup = map_row(cells).setup
    assert setup is not None and setup.mtp_depth == 2
    model, gpu = catalog.load_model("deepseek-v3"), catalog.load_gpu("b200")
    spec = requests.Speculation(mtp_module(model), 2.0, setup.acceptance, setup.weight_bits)
    layout = evaluator.Layout.of(8, False, 1, 1536, 1, 1, 8)
    workload = requests.Workload.single(1024, 1024)
    chunk = max(2048.0, float(np.ceil(32 * 1.0 * spec.tokens_per_round)))
    out = requests.aggregated_figures(model, gpu, DEFAULT, 8, layout, 32.0, workload, chunk, spec=spec)
    f = _evaluate(setup, DEFAULT, [32.0])
    assert float(f["tok_s_per_request"][0]) == pytest.approx(1.0 / float(out["tpot_s"]))
    cycle_s = float(out["ttft_s"]) + 1023 * float(out["tpot_s"])
    assert float(f["throughput_tok_s"][0]) == pytest.approx(32 * 1024 / cycle_s)


def test_a_prefill_side_the_rows_gpu_count_contradicts_is_not_read() -> None:
    setup = map_row(_cells("prefill 8 GPU (1 x TP8) + decode 8 GPU (1 x TP8)", "12", "64") | {"line": "2"}).setup
    assert setup is not None and setup.prefill is None


def test_a_prefill_side_with_an_impossible_degree_is_dropped_not_the_row() -> None:
    setup = map_row(_cells("prefill 4 GPU (1 x TP0) + decode 8 GPU (1 x TP8)", "12", "64") | {"line": "2"}).setup
    assert setup is not None and setup.prefill is None and setup.tp == 8


def test_a_disaggregated_row_without_a_prompt_keeps_the_decode_only_model() -> None:
    setup = map_row(_cells("prefill 4 GPU (1 x TP4) + decode 8 GPU (1 x TP8)", "12", "64", "0") | {"line": "2"}).setup
    assert setup is not None and setup.prefill is not None
    assert not whole_requests.applies(setup)
