"""Catalog cards and HuggingFace configs become the specs the notes' sanity values and appendix describe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from roofline_opt import catalog
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.evaluator import kv_bytes_per_token, model_sizes

HF_CONFIGS = Path(__file__).resolve().parent / "data" / "hf_configs"

APPENDIX_TOTAL_PARAMS = {
    "llama-3-8b": 8.0300e9,
    "llama-3-70b": 7.0552e10,
    "llama-3.1-405b": 4.1008e11,
    "mixtral-8x7b": 4.6701e10,
    "mixtral-8x22b": 1.4062e11,
    "mistral-large-2": 1.2261e11,
    "gpt-3": 1.7518e11,
    "gpt-4-paper": 1.7969e12,
    "palm-540b": 5.4507e11,
}


def four_digits(x: float) -> str:
    return f"{x:.3e}"


def test_llama_3_70b_has_the_notes_parameter_count_and_kv_width() -> None:
    model = catalog.load_model("llama-3-70b")
    assert four_digits(model_sizes(model).total_params) == "7.055e+10"
    assert kv_bytes_per_token(model) == 327_680


def test_llama_3_8b_has_the_notes_parameter_count_and_kv_width() -> None:
    model = catalog.load_model("llama-3-8b")
    assert four_digits(model_sizes(model).total_params) == "8.030e+09"
    assert kv_bytes_per_token(model) == 131_072


def test_mixtral_8x22b_has_the_notes_total_and_active_parameters() -> None:
    sizes = model_sizes(catalog.load_model("mixtral-8x22b"))
    assert (four_digits(sizes.total_params), four_digits(sizes.active_params)) == ("1.406e+11", "3.915e+10")


@pytest.mark.parametrize(("name", "total"), APPENDIX_TOTAL_PARAMS.items())
def test_appendix_model_total_parameters_match_to_four_digits(name: str, total: float) -> None:
    assert four_digits(model_sizes(catalog.load_model(name)).total_params) == four_digits(total)


def test_deepseek_v3_has_671b_total_and_37b_active_parameters() -> None:
    sizes = model_sizes(catalog.load_model("deepseek-v3"))
    assert sizes.total_params == pytest.approx(671e9, rel=0.005)
    assert sizes.active_params == pytest.approx(37e9, rel=0.02)


def test_deepseek_v3_kv_cache_holds_the_latent_and_rotary_key() -> None:
    assert kv_bytes_per_token(catalog.load_model("deepseek-v3")) == (512 + 64) * 61 * 2


def test_precision_suffix_splits_off_the_weight_bits() -> None:
    assert catalog.split_precision_suffix("llama-3-70b-int8") == ("llama-3-70b", 8)
    assert catalog.split_precision_suffix("llama-3-70b-int4") == ("llama-3-70b", 4)
    assert catalog.split_precision_suffix("llama-3-70b") == ("llama-3-70b", None)


def test_resolve_model_maps_a_suffixed_name_to_the_card_and_its_bits() -> None:
    model, bits = catalog.resolve_model("llama-3.1-405b-int8")
    assert (model, bits) == (catalog.load_model("llama-3.1-405b"), 8)


def test_every_card_is_named_after_its_file_and_cites_a_source() -> None:
    for folder, specs in (("models", catalog.list_models()), ("instances/gpus", catalog.list_gpus())):
        files = sorted(p.stem for p in (catalog.REPO_ROOT / folder).glob("*.yaml"))
        assert [s.name for s in specs] == files
        assert all(s.source for s in specs)


def test_paper_h100_card_holds_the_notebook_constants() -> None:
    gpu = catalog.load_gpu("h100-sxm").in_notebook()
    assert gpu.flop_per_s_by_bits == {16: 1e15, 8: 2e15, 4: 2e15}
    assert (gpu.hbm_bytes, gpu.hbm_bytes_per_s, gpu.scaleup_gpus) == (8e10, 3.3e12, 8)
    assert (gpu.intra_bytes_per_s, gpu.inter_bytes_per_s) == (9e11 / 4, 5e10 / 2)


def test_h100_card_holds_the_vendor_figures_and_the_memory_the_device_exposes() -> None:
    gpu = catalog.load_gpu("h100-sxm")
    assert gpu.flop_per_s_by_bits == {16: 9.894e14, 8: 1.9789e15, 4: 1.9789e15}
    assert (gpu.hbm_bytes, gpu.hbm_bytes_per_s) == (pytest.approx(81559 * 2**20, rel=1e-4), 3.35e12)


def test_a100_card_has_no_4_bit_rate() -> None:
    assert catalog.load_gpu("a100-80gb").flop_per_s_by_bits == {16: 3.12e14, 8: 6.24e14}


def test_gb200_card_is_per_gpu_with_a_72_gpu_domain_and_quarter_nvlink() -> None:
    gpu = catalog.load_gpu("gb200")
    assert (gpu.scaleup_gpus, gpu.intra_bytes_per_s) == (72, 1.8e12 / 4)
    assert gpu.hbm_bytes == pytest.approx(189471 * 2**20, rel=1e-4)  # the 186 GB part as the device exposes it
    assert gpu.flop_per_s_by_bits == {16: 2.5e15, 8: 5e15, 4: 1e16}


def test_a_gpu_card_given_by_path_is_loaded(tmp_path: Path) -> None:
    card = tmp_path / "my-gpu.yaml"
    card.write_text(
        "name: my-gpu\nflop_per_s_by_bits: {16: 5e14}\nhbm_bytes: 4.8e10\nhbm_bytes_per_s: 1e12\n"
        "scaleup_gpus: 4\nintra_bytes_per_s: 1e11\ninter_bytes_per_s: 1e10\nusd_per_hour: 0.9\n"
    )
    gpu = catalog.load_gpu(str(card))
    assert (gpu.name, gpu.flop_per_s_by_bits, gpu.hbm_bytes) == ("my-gpu", {16: 5e14}, 4.8e10)
    assert gpu.kernel_launch_s == 4e-6


def test_a_user_card_reusing_a_packaged_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "models").mkdir()
    card = (catalog.REPO_ROOT / "models" / "llama-3-8b.yaml").read_text().replace("n_layers: 32", "n_layers: 16")
    (tmp_path / "models" / "llama-3-8b.yaml").write_text(card)
    monkeypatch.setenv(catalog.DATA_ENV, str(tmp_path))
    with pytest.raises(InvalidInput, match="already taken by .*llama-3-8b.yaml.*never replace"):
        catalog.load_model("llama-3-8b")


@pytest.mark.parametrize(
    ("folder", "card"),
    [
        ("Meta-Llama-3-8B", "llama-3-8b"),
        ("Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("DeepSeek-V3", "deepseek-v3"),
        ("Qwen2.5-72B", "qwen2.5-72b"),
        ("gpt-j-6b", "gpt-j-6b"),
    ],
)
def test_hf_config_gives_the_same_architecture_as_the_card(folder: str, card: str) -> None:
    expected = catalog.load_model(card)
    loaded = catalog.load_model(str(HF_CONFIGS / folder / "config.json"))
    assert dataclasses.replace(loaded, name=expected.name, source=expected.source) == expected


def test_hf_config_folder_is_read_and_names_the_model() -> None:
    model = catalog.load_model(str(HF_CONFIGS / "Qwen2.5-72B"))
    assert (model.name, model.source) == ("Qwen2.5-72B", f"HuggingFace config {HF_CONFIGS / 'Qwen2.5-72B/config.json'}")


def test_hf_config_with_gelu_has_one_input_matrix() -> None:
    model = catalog.load_model(str(HF_CONFIGS / "gpt-j-6b"))
    assert (model.m_in, model.m_out, model.parallel_attention) == (1, 1, True)


def test_unknown_model_name_suggests_close_names() -> None:
    with pytest.raises(InvalidInput, match="Did you mean 'llama-3-70b'") as info:
        catalog.load_model("llama3-70b", field="--model")
    assert info.value.field == "--model"


def test_card_with_an_unknown_field_suggests_the_right_one(tmp_path: Path) -> None:
    card = tmp_path / "typo.yaml"
    card.write_text((catalog.REPO_ROOT / "models" / "gpt-3.yaml").read_text().replace("d_model:", "dmodel:"))
    with pytest.raises(InvalidInput, match="Did you mean 'd_model'") as info:
        catalog.load_model(str(card))
    assert info.value.field == f"{card}: dmodel"


def test_card_with_more_active_than_total_experts_is_rejected(tmp_path: Path) -> None:
    card = tmp_path / "moe.yaml"
    text = (catalog.REPO_ROOT / "models" / "mixtral-8x7b.yaml").read_text()
    card.write_text(text.replace("n_active_experts: 2", "n_active_experts: 9"))
    with pytest.raises(InvalidInput, match=r"must be <= n_experts \(8\). Got 9 instead") as info:
        catalog.load_model(str(card))
    assert info.value.field == f"{card}: n_active_experts"
