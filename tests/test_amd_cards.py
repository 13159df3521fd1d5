"""AMD Instinct cards' measured figures (docs/physics/accelerators.md): the Infinity Fabric mesh, the all-reduce's
achieved share of the links, and the achievable shares of HBM bandwidth and FLOP/s, each behind a Preset setting
that the ``paper`` preset leaves off and NVIDIA cards do not feel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from roofline_opt import catalog
from roofline_opt.catalog import cards
from roofline_opt.errors import InvalidInput
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.profiles import ACCELERATOR_FAMILIES
from roofline_opt.physics.specs import DEFAULT, PAPER, GpuSpec
from roofline_opt.study.execute import card_overrides

MI300X = catalog.load_gpu("mi300x")
LLAMA = catalog.load_model("llama-3-70b")
DEEPSEEK = catalog.load_model("deepseek-v3")
CARD_SETTINGS = ("card_scaleup_topology", "card_scaleup_link_efficiency", "card_achievable_fractions")
NOTHING_MEASURED = replace(DEFAULT, **dict.fromkeys(CARD_SETTINGS, False))
TOPOLOGY_ONLY = replace(NOTHING_MEASURED, card_scaleup_topology=True)
NVIDIA = [name for family, names in ACCELERATOR_FAMILIES.items() if family.startswith("nvidia") for name in names]


def _as_switch(gpu: GpuSpec) -> GpuSpec:
    """The same card with nothing measured beyond its sheet: a switch, nominal figures."""
    return replace(
        gpu,
        scaleup_topology="switch",
        scaleup_link_efficiency=1.0,
        achievable_hbm_fraction=1.0,
        achievable_flop_fraction=1.0,
    )


def _bandwidth_s_per_seq(gpu: GpuSpec, preset, layout: ev.Layout) -> list[float]:
    """Bandwidth seconds per sequence of each collective the step runs, fastest protocol."""
    calls = [c for c in ev.collectives(DEEPSEEK, gpu, preset, 8, layout) if float(np.max(c.count)) > 0]
    return [float(np.min(c.s_per_seq)) for c in calls]


@pytest.mark.parametrize(("ranks", "share"), [(2, 1 / 7), (4, 3 / 7), (7, 6 / 7), (8, 1.0)])
def test_a_collective_among_r_gpus_of_an_eight_gpu_mesh_drives_r_minus_1_of_its_7_links(
    ranks: int, share: float
) -> None:
    assert float(ev.scaleup_link_share(MI300X, DEFAULT, ranks)) == pytest.approx(share, rel=1e-12)


def test_behind_a_switch_every_collective_drives_the_whole_link_bandwidth() -> None:
    h200 = catalog.load_gpu("h200")
    np.testing.assert_array_equal(ev.scaleup_link_share(h200, DEFAULT, np.array([2.0, 4.0, 8.0])), 1.0)


def test_the_mesh_slows_a_tp4_all_reduce_by_7_over_3_against_a_switch() -> None:
    layout = ev.Layout.of(4, False, 1, 4000.0)
    mesh = _bandwidth_s_per_seq(MI300X, TOPOLOGY_ONLY, layout)
    switch = _bandwidth_s_per_seq(_as_switch(MI300X), TOPOLOGY_ONLY, layout)
    np.testing.assert_allclose(mesh, np.array(switch) * 7.0 / 3.0, rtol=1e-12)


def test_the_mesh_slows_a_data_parallel_attention_exchange_among_4_gpus_by_7_over_3() -> None:
    layout = ev.Layout.of(4, False, 1, 4000.0, ep=4, dp_attention=True)
    mesh = _bandwidth_s_per_seq(MI300X, TOPOLOGY_ONLY, layout)
    switch = _bandwidth_s_per_seq(_as_switch(MI300X), TOPOLOGY_ONLY, layout)
    assert len(mesh) == 1
    assert mesh[0] == pytest.approx(switch[0] * 7.0 / 3.0, rel=1e-12)


def test_the_mesh_changes_nothing_for_a_collective_over_all_eight_gpus() -> None:
    layout = ev.Layout.of(8, False, 1, 4000.0, ep=8)
    mesh = _bandwidth_s_per_seq(MI300X, TOPOLOGY_ONLY, layout)
    switch = _bandwidth_s_per_seq(_as_switch(MI300X), TOPOLOGY_ONLY, layout)
    np.testing.assert_allclose(mesh, switch, rtol=1e-12)


def test_the_link_efficiency_slows_the_all_reduces_and_not_the_expert_exchange() -> None:
    layout = ev.Layout.of(8, False, 1, 4000.0, ep=8)
    # the notebook's TP+EP terms keep a point-to-point exchange (the default preset's tp_ep_moe_all_reduce has none)
    exchanging = replace(TOPOLOGY_ONLY, tp_ep_moe_all_reduce=False)
    measured = replace(exchanging, card_scaleup_link_efficiency=True)
    with_efficiency = _bandwidth_s_per_seq(MI300X, measured, layout)
    without = _bandwidth_s_per_seq(MI300X, exchanging, layout)
    slowdown = sorted(np.array(with_efficiency) / np.array(without))
    # the MoE dispatch/combine exchange, then the three all-reduces (attention output of MoE and dense layers,
    # dense feed-forward output)
    np.testing.assert_allclose(slowdown, [1.0, *[1.0 / 0.7072] * 3], rtol=1e-12)


def test_achievable_fractions_divide_the_memory_and_compute_times() -> None:
    layout = ev.Layout.of(8, False, 1, 4000.0)
    measured = replace(NOTHING_MEASURED, card_achievable_fractions=True)
    on = ev.step(LLAMA, MI300X, measured, 8, layout, 64.0)
    off = ev.step(LLAMA, MI300X, NOTHING_MEASURED, 8, layout, 64.0)
    assert float(on.memory_s) == pytest.approx(float(off.memory_s) / MI300X.achievable_hbm_fraction, rel=1e-12)
    assert float(on.compute_s) == pytest.approx(float(off.compute_s) / MI300X.achievable_flop_fraction, rel=1e-12)


def test_the_mfu_stays_a_share_of_the_nominal_peak() -> None:
    layout = ev.Layout.of(8, False, 1, 4000.0)
    figures = ev.evaluate(LLAMA, MI300X, DEFAULT, 8, layout, 64.0)
    useful = 2.0 * ev.model_sizes(LLAMA).active_params * 64.0
    nominal = figures["time_per_token_s"] * 8 * MI300X.flop_per_s_by_bits[8]
    assert float(figures["mfu_fraction"]) == pytest.approx(float(useful / nominal), rel=1e-12)


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi355x"])
def test_the_paper_preset_sees_an_amd_card_as_the_vendor_sheet_states_it(name: str) -> None:
    gpu = catalog.load_gpu(name)
    layout = ev.Layout.of(np.array([2, 4, 8]), False, 1, 4000.0)
    card = ev.evaluate(DEEPSEEK, gpu, PAPER, 8, layout, 64.0)
    sheet = ev.evaluate(DEEPSEEK, _as_switch(gpu), PAPER, 8, layout, 64.0)
    np.testing.assert_array_equal(card["time_per_token_s"], sheet["time_per_token_s"])


def test_the_paper_preset_uses_none_of_the_card_settings() -> None:
    assert not any(getattr(PAPER, name) for name in CARD_SETTINGS)


@pytest.mark.parametrize("name", NVIDIA)
def test_nvidia_cards_are_switches_at_their_nominal_figures(name: str) -> None:
    gpu = catalog.load_gpu(name)
    assert gpu == _as_switch(gpu)


@pytest.mark.parametrize("name", ["h100-sxm", "b200"])
def test_the_card_settings_leave_an_nvidia_estimate_unchanged(name: str) -> None:
    gpu = catalog.load_gpu(name)
    layout = ev.Layout.of(np.array([2, 4, 8]), False, 1, 4000.0, ep=np.array([1, 4, 8]))
    on = ev.evaluate(DEEPSEEK, gpu, DEFAULT, 8, layout, 64.0)
    off = ev.evaluate(DEEPSEEK, gpu, NOTHING_MEASURED, 8, layout, 64.0)
    np.testing.assert_allclose(on["time_per_token_s"], off["time_per_token_s"], rtol=1e-12)


def test_the_bound_drops_the_measured_shares_and_keeps_the_topology() -> None:
    bound = DEFAULT.at_peak()
    assert (bound.card_achievable_fractions, bound.card_scaleup_link_efficiency) == (False, False)
    assert bound.card_scaleup_topology


@pytest.mark.parametrize("name", ["mi300x", "mi325x", "mi355x"])
def test_the_amd_cards_are_meshes(name: str) -> None:
    assert catalog.load_gpu(name).scaleup_topology == "mesh"


def test_mi355x_keeps_the_nominal_hbm_bandwidth_and_link_without_a_sourced_measurement() -> None:
    mi355x = catalog.load_gpu("mi355x")
    assert (mi355x.achievable_hbm_fraction, mi355x.scaleup_link_efficiency) == (1.0, 1.0)


def _mi300x_card_with(tmp_path: Path, old: str, new: str) -> str:
    """A user copy of the MI300X card with one line changed."""
    text = (cards.packaged_root() / cards.GPUS_SUBDIR / "mi300x.yaml").read_text()
    assert old in text
    card = tmp_path / "my-mi300x.yaml"
    card.write_text(text.replace('name: "mi300x"', 'name: "my-mi300x"').replace(old, new))
    return str(card)


def test_a_card_naming_an_unknown_topology_is_refused(tmp_path: Path) -> None:
    card = _mi300x_card_with(tmp_path, 'scaleup_topology: "mesh"', 'scaleup_topology: "torus"')
    with pytest.raises(InvalidInput, match="scaleup_topology"):
        catalog.load_gpu(card)


def test_a_card_claiming_more_than_its_nominal_bandwidth_is_refused(tmp_path: Path) -> None:
    card = _mi300x_card_with(tmp_path, "achievable_hbm_fraction: 0.8038", "achievable_hbm_fraction: 1.2")
    with pytest.raises(InvalidInput, match="achievable_hbm_fraction"):
        catalog.load_gpu(card)


def test_a_study_may_not_set_an_achievable_fraction_above_one() -> None:
    with pytest.raises(InvalidInput, match="achievable_flop_fraction"):
        card_overrides({"achievable_flop_fraction": 1.5})
