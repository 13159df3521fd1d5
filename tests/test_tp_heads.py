"""TP degrees that do not divide a model's query heads: engines refuse them, so the default preset neither offers nor
accepts them; the paper preset keeps the notebook's any-degree sharding (``Preset.tp_divides_attention_heads``)."""

from __future__ import annotations

import pytest

from roofline_opt import catalog
from roofline_opt.cli import main
from roofline_opt.optimize.space import Question, layouts
from roofline_opt.physics.specs import DEFAULT, PAPER

LLAMA_2_13B = catalog.load_model("llama-2-13b")  # 40 query heads
H100 = catalog.load_gpu("h100-sxm")


def _offered_tp(preset) -> set[int]:
    question = Question(model=LLAMA_2_13B, gpus=(H100,), preset=preset, tp_degrees=(1, 2, 4, 8, 16), pp_degrees=(1,))
    return set(layouts(question).tp.tolist())


def test_a_model_with_40_heads_is_not_offered_tp_16_by_default() -> None:
    assert _offered_tp(DEFAULT) == {1, 2, 4, 8}


def test_the_paper_preset_offers_every_degree_as_the_notebook_does() -> None:
    assert _offered_tp(PAPER) == {1, 2, 4, 8, 16}


def test_a_query_whose_tp_degrees_divide_no_heads_says_which_would(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cheapest", "--model", "llama-3-8b", "--gpu", "h100-sxm", "--tp-degrees", "3", "--pp-degrees", "1"]
    code = main([*argv, "--min-tok-s", "20"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err == (
        "roofline-opt: infeasible: no TP degree offered (3) divides llama-3-8b's 32 attention heads, as engines "
        "require; offer --tp-degrees among 1, 2, 4, 8, 16, 32"
    )
