"""Engines' KV-memory rules (physics/specs.py ``KvMemoryRule``): the bytes each engine gives weights, KV cache and
activations on a device, worked by hand; the rule bounds the per-device check, keeps memory affine in the batch for
the MIP, and leaves every figure unchanged where it is None (the neutral profile, ``default``, ``paper``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from roofline_opt import api, catalog
from roofline_opt.catalog.profiles import load_profile, profile_from_mapping, profile_yaml
from roofline_opt.errors import InvalidInput
from roofline_opt.optimize.enumerate import enumerate_best, feasible_points
from roofline_opt.optimize.queries import cheapest
from roofline_opt.optimize.testing import assert_same_optimum
from roofline_opt.physics import evaluator as ev
from roofline_opt.physics.specs import (
    DEFAULT,
    PAPER,
    SGLANG_KV_MEMORY_RULE,
    TRTLLM_KV_MEMORY_RULE,
    VLLM_KV_MEMORY_RULE,
    KvMemoryRule,
)

GIB = 2.0**30
MIB = 2.0**20
LLAMA_70B = catalog.load_model("llama-3-70b")
H200 = catalog.load_gpu("h200")
LAYOUT = ev.Layout.of(4, False, 1, 8000.0)


# ------------------------------------------------------------------------------- worked examples, by hand


def test_vllm_gives_the_kv_cache_its_fraction_of_total_memory_less_weights_and_activations() -> None:
    """80 GB device, 35 GB of weights, 1 GB of peak activations: 0.9 x 80 - 35 - 1 = 36 GB of KV cache."""
    capacity = VLLM_KV_MEMORY_RULE.capacity_bytes(80e9, 35e9, 4)
    assert capacity - 35e9 - 1e9 == pytest.approx(36e9, rel=1e-12)


def test_sglang_gives_weights_and_kv_pool_its_default_mem_fraction_static_of_the_device() -> None:
    """150 GB device, TP8: reserved_mem = 512 MiB + 1.5 MiB x 8192 + 2 MiB x 512 + 8 / 8 x 1024 MiB = 14848 MiB, so
    mem_fraction_static = (150e9 - 14848 MiB) / 150e9 and with 17.6 GB of weights the pool holds the rest."""
    reserved = (512 + 1.5 * 8192 + 2 * 512 + 8 / 8 * 1024) * MIB
    pool = SGLANG_KV_MEMORY_RULE.capacity_bytes(150e9, 17.6e9, 8) - 17.6e9
    assert pool == pytest.approx(150e9 * (150e9 - reserved) / 150e9 - 17.6e9, rel=1e-12)
    assert pool == pytest.approx(150e9 - 14848 * MIB - 17.6e9, rel=1e-12)


def test_trtllm_gives_the_kv_cache_its_fraction_of_the_memory_free_after_weights() -> None:
    """150 GB device, TP8, 84 GB of weights: the reserve (NCCL, CUDA graphs, context) is 1.5 GiB + 8 x 128 MiB =
    2.5 GiB, so 0.9 x (150e9 - 2.5 GiB - 84e9) of KV cache (activations left out: they are counted whole)."""
    capacity = TRTLLM_KV_MEMORY_RULE.capacity_bytes(150e9, 84e9, 8)
    assert capacity - 84e9 == pytest.approx(0.9 * (150e9 - 2.5 * GIB - 84e9), rel=1e-12)


def test_trtllm_counts_activations_whole_so_its_kv_budget_errs_low_by_a_tenth_of_them() -> None:
    """The engine's KV = 0.9 x (free - activations); the check's = capacity - weights - activations, 0.1 x
    activations less: conservative, and affine in the batch."""
    weights, activations = 84e9, 0.5e9
    engine = 0.9 * (150e9 - 2.5 * GIB - weights - activations)
    check = TRTLLM_KV_MEMORY_RULE.capacity_bytes(150e9, weights, 8) - weights - activations
    assert check == pytest.approx(engine - 0.1 * activations, rel=1e-12)


def test_a_rule_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="fraction_of_total"):
        KvMemoryRule("fraction_of_free", 0.9)


# ------------------------------------------------------------------------------- in the memory check


@pytest.mark.parametrize(
    "rule", (VLLM_KV_MEMORY_RULE, SGLANG_KV_MEMORY_RULE, TRTLLM_KV_MEMORY_RULE), ids=("vllm", "sglang", "trtllm")
)
def test_the_rule_sets_the_per_device_capacity_below_what_the_device_holds(rule: KvMemoryRule) -> None:
    preset = dataclasses.replace(DEFAULT, kv_memory_rule=rule)
    mem = ev.memory(LLAMA_70B, H200, preset, 16, LAYOUT, 64.0)
    device = H200.hbm_bytes - ev.memory_reserve_bytes(DEFAULT, LAYOUT)
    by_hand = rule.capacity_bytes(H200.hbm_bytes, float(mem.weights_bytes), 4)
    assert float(mem.capacity_bytes) == pytest.approx(min(device, by_hand), rel=1e-12)
    assert float(mem.capacity_bytes) < device


def test_the_largest_fitting_batch_under_trtllm_is_the_hand_computed_one() -> None:
    """Memory is affine in the batch: the last batch that fits is (capacity - fixed bytes) // bytes per sequence."""
    preset = dataclasses.replace(DEFAULT, kv_memory_rule=TRTLLM_KV_MEMORY_RULE)
    zero, one = (ev.memory(LLAMA_70B, H200, preset, 16, LAYOUT, b) for b in (0.0, 1.0))
    used0 = float(zero.weights_bytes + zero.kv_cache_bytes + zero.activations_bytes)
    per_seq = float(one.weights_bytes + one.kv_cache_bytes + one.activations_bytes) - used0
    top = int((float(zero.capacity_bytes) - used0) // per_seq)
    fits = ev.memory(LLAMA_70B, H200, preset, 16, LAYOUT, np.array([top, top + 1.0])).fits
    assert fits.tolist() == [True, False]


def test_the_rule_keeps_memory_affine_in_the_batch_and_its_capacity_constant() -> None:
    preset = dataclasses.replace(DEFAULT, kv_memory_rule=TRTLLM_KV_MEMORY_RULE)
    batches = np.array([0.0, 1.0, 37.0, 500.0])
    mem = ev.memory(LLAMA_70B, H200, preset, 16, LAYOUT, batches)
    used = mem.weights_bytes + mem.kv_cache_bytes + mem.activations_bytes
    assert np.allclose(used, used[0] + (used[1] - used[0]) * batches, rtol=1e-12)
    assert np.ptp(mem.capacity_bytes) == 0.0


def test_without_a_rule_the_capacity_is_the_device_less_the_fixed_reserve() -> None:
    """None (the default) keeps the rule before engine rules: HBM x usable fraction less the preset's reserve."""
    assert DEFAULT.kv_memory_rule is None
    mem = ev.memory(LLAMA_70B, H200, DEFAULT, 16, LAYOUT, np.array([1.0, 64.0, 2000.0]))
    expected = H200.hbm_bytes * DEFAULT.usable_hbm_fraction - (1536 * MIB + 4 * 128 * MIB)
    assert np.all(mem.capacity_bytes == expected)


def test_paper_has_no_rule_and_its_aggregate_check_ignores_one() -> None:
    assert PAPER.kv_memory_rule is None
    ruled = dataclasses.replace(PAPER, kv_memory_rule=TRTLLM_KV_MEMORY_RULE)
    plain, other = (ev.memory(LLAMA_70B, H200, p, 16, LAYOUT, 300.0) for p in (PAPER, ruled))
    assert float(plain.capacity_bytes) == float(other.capacity_bytes) == 4 * H200.in_notebook().hbm_bytes


# ------------------------------------------------------------------------------- engine profiles


@pytest.mark.parametrize(
    ("engine", "rule"),
    (("vllm", VLLM_KV_MEMORY_RULE), ("sglang", SGLANG_KV_MEMORY_RULE), ("trtllm", TRTLLM_KV_MEMORY_RULE)),
)
def test_each_engine_profile_carries_its_sourced_rule(engine: str, rule: KvMemoryRule) -> None:
    profile = load_profile(engine)
    assert dict(profile.settings)["kv_memory_rule"] == rule
    assert profile.preset_for(H200).kv_memory_rule == rule


def test_the_neutral_profile_has_no_rule() -> None:
    assert load_profile("neutral").preset_for(H200) == DEFAULT


def test_a_profile_with_a_rule_reads_back_from_its_yaml_equal() -> None:
    import yaml

    profile = load_profile("trtllm")
    assert profile_from_mapping(yaml.safe_load(profile_yaml(profile)), "test") == profile


def test_a_rule_setting_with_a_bad_fraction_names_the_field() -> None:
    data = {
        "name": "mine",
        "engine_versions": "test",
        "settings": {"kv_memory_rule": {"kind": "fraction_of_total", "fraction": 1.5}},
        "accelerators": [{"accelerators": ["*"], "flop_efficiency": 0.7, "hbm_efficiency": 0.75}],
    }
    with pytest.raises(InvalidInput, match="kv_memory_rule: fraction"):
        profile_from_mapping(data, "mine.yaml")


def test_the_mip_memory_limit_under_an_engine_rule_equals_enumeration_and_the_largest_fitting_batch() -> None:
    """The cheapest setup of a long-context question fills memory: the MIP and the oracle agree, at the largest
    batch the engine's rule lets fit."""
    spec = dict(tp_degrees=(4,), pp_degrees=(1,), max_batch=4096, max_instances=1, weight_bits=[16])
    q = api.question("llama-3-70b", "h200", isl=7000, osl=1000, serving=["agg"], engine="trtllm", **spec)
    pts = feasible_points(q)
    oracle, answer = enumerate_best(q, "cheapest", None, pts), cheapest(q, None)
    assert_same_optimum("cheapest", answer, oracle, None)
    f = answer.figures
    room = f["memory_capacity_bytes"] - f["weights_bytes_per_device"] - f["kv_cache_bytes_per_device"]
    room -= f["activations_bytes_per_device"]
    assert 0.0 <= room < f["kv_cache_bytes_per_device"] / answer.setup.batch  # no further sequence fits
    assert f["memory_capacity_bytes"] < H200.hbm_bytes - ev.memory_reserve_bytes(DEFAULT, LAYOUT)
