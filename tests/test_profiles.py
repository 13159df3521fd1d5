"""Engine profiles: the packaged ones, the YAML form and its bounds, and the presets they resolve per accelerator."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from roofline_opt import catalog
from roofline_opt.catalog.profiles import (
    ENGINE_KEYS,
    MEASURED_ENGINE_KEYS,
    engine_of_framework,
    list_profiles,
    load_profile,
    profile_from_mapping,
    profile_yaml,
)
from roofline_opt.errors import InvalidInput
from roofline_opt.physics.profiles import ACCELERATOR_FAMILIES, AcceleratorEfficiency, EngineProfile, family_of
from roofline_opt.physics.specs import DEFAULT, PRESETS


def test_the_neutral_profile_is_the_default_preset_on_every_catalog_accelerator() -> None:
    neutral = load_profile("neutral")
    for gpu in catalog.list_gpus():
        assert neutral.preset_for(gpu) == DEFAULT, gpu.name


def test_packaged_profiles_are_the_three_recipe_engines_atom_and_neutral() -> None:
    assert {p.name for p in list_profiles()} == {"neutral", "vllm", "sglang", "trtllm", "atom"}
    assert {p.engine for p in list_profiles()} == {"", "vllm", "sglang", "trtllm", "atom"}


@pytest.mark.parametrize("name", ["neutral", "vllm", "sglang", "trtllm", "atom"])
def test_a_profile_reads_back_equal_from_its_yaml(name: str) -> None:
    profile = load_profile(name)
    assert profile_from_mapping(yaml.safe_load(profile_yaml(profile)), "again") == profile


def test_every_catalog_accelerator_has_a_family() -> None:
    assert all(family_of(g.name) for g in catalog.list_gpus())
    assert family_of("h200") == "nvidia-hopper" and family_of("mi355x") == "amd-cdna4"
    assert sum(len(v) for v in ACCELERATOR_FAMILIES.values()) == len(catalog.list_gpus())


def _profile(*entries: AcceleratorEfficiency, **fields) -> EngineProfile:
    return EngineProfile(name="t", engine="vllm", engine_versions="vllm 0.11", accelerators=entries, **fields)


def test_a_card_entry_wins_over_its_family_and_the_family_over_the_wildcard() -> None:
    h100, h200, mi300x = (catalog.load_gpu(n) for n in ("h100-sxm", "h200", "mi300x"))
    p = _profile(
        AcceleratorEfficiency(("*",), 0.5, 0.5),
        AcceleratorEfficiency(("nvidia-hopper",), 0.6, 0.6),
        AcceleratorEfficiency(("h200",), 0.65, 0.8, kernel_launch_factor=2.0),
    )
    assert p.preset_for(h100).hbm_efficiency == 0.6
    assert (p.preset_for(h200).hbm_efficiency, p.preset_for(h200).kernel_launch_factor) == (0.8, 2.0)
    assert p.preset_for(mi300x).flop_efficiency == 0.5


def test_settings_apply_to_every_accelerator_and_the_rest_stays_the_base_preset() -> None:
    p = _profile(settings=(("usable_hbm_fraction", 0.9),))
    preset = p.preset_for(catalog.load_gpu("b200"))
    assert preset == dataclasses.replace(DEFAULT, usable_hbm_fraction=0.9)
    assert _profile(base_preset="paper").preset_for(catalog.load_gpu("h100-sxm")) == PRESETS["paper"]


def test_an_accelerator_without_an_entry_keeps_the_base_efficiencies() -> None:
    p = _profile(AcceleratorEfficiency(("amd-cdna3",), 0.4, 0.5))
    assert p.efficiency_for(catalog.load_gpu("h100-sxm")) is None
    assert p.preset_for(catalog.load_gpu("h100-sxm")) == DEFAULT


def _write(tmp_path, text: str):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return str(path)


GOOD = """
name: mine
engine: vllm
engine_versions: "vllm 0.11"
settings: {memory_reserve_bytes: 1610612736}
default_chunk_tokens: 4096
accelerators:
  - accelerators: [h100]
    flop_efficiency: 0.62
    hbm_efficiency: 0.78
    fitted: [hbm_efficiency]
    rows: 42
    log_error_quantiles: [-0.12, 0.09]
"""


def test_a_user_profile_file_loads_with_aliases_resolved(tmp_path) -> None:
    p = load_profile(_write(tmp_path, GOOD))
    assert p.accelerators[0].accelerators == ("h100-sxm",)
    assert p.preset_for(catalog.load_gpu("h100-sxm")).memory_reserve_bytes == 1610612736
    assert p.accelerators[0].log_error_quantiles == (-0.12, 0.09)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("flop_efficiency: 0.62", "flop_efficiency: 1.5"), "flop_efficiency"),
        (("hbm_efficiency: 0.78", "hbm_efficiency: -1"), "hbm_efficiency"),
        (("memory_reserve_bytes", "warp_speed"), "settings"),
        (("accelerators: [h100]", "accelerators: [tpu-v9]"), "accelerators"),
        (("engine: vllm", "engine: ollama"), "engine"),
        (("[-0.12, 0.09]", "[0.3, 0.1]"), "log_error_quantiles"),
        (("fitted: [hbm_efficiency]", "fitted: [luck]"), "fitted"),
        (("name: mine", "nom: mine"), "key"),
        (("{memory_reserve_bytes: 1610612736}", "{mixed_precisions: 0}"), "settings"),
    ],
)
def test_a_bad_field_is_one_error_naming_it(tmp_path, change, field) -> None:
    with pytest.raises(InvalidInput) as err:
        load_profile(_write(tmp_path, GOOD.replace(*change)))
    assert field in err.value.field


def test_a_profile_name_that_is_neither_packaged_nor_a_file_suggests_the_names() -> None:
    with pytest.raises(InvalidInput, match="neutral"):
        load_profile("vlm")
    with pytest.raises(InvalidInput, match="no such file"):
        load_profile("missing/profile.yaml")


def test_an_oversized_profile_file_is_refused(tmp_path) -> None:
    with pytest.raises(InvalidInput):
        load_profile(_write(tmp_path, GOOD + "#" * (2 * 1024 * 1024)))


@pytest.mark.parametrize(
    ("framework", "engine"),
    [
        ("ATOM (AMD) (image rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3), MTP on", "atom"),
        ("ATOM v0.1.3", "atom"),
        ("atomic-serve 1.0", None),
        ("NVIDIA Dynamo + TensorRT-LLM (Dynamo runtime 0.8.1.post2)", "trtllm"),
    ],
)
def test_a_framework_text_names_its_engine_as_a_whole_word(framework: str, engine: str | None) -> None:
    assert engine_of_framework(framework) == engine


def test_the_atom_profile_is_fitted_on_mi355x_and_deploys_nothing() -> None:
    atom = load_profile("atom")
    entry = atom.efficiency_for(catalog.load_gpu("mi355x"))
    assert entry is not None and entry.accelerators == ("amd-cdna4",) and entry.rows == 29
    assert atom.deployable == ()
    assert "atom" not in ENGINE_KEYS and "atom" in MEASURED_ENGINE_KEYS
