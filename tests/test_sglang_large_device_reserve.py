"""SGLang's default reserve by device memory (physics/specs.py ``SGLANG_KV_MEMORY_RULE``'s large-device tier): devices
of at least 160 GiB default to a 16384-token prefill chunk, whose activations SGLang reserves 12 GiB more for
(server_args.py ``_handle_gpu_memory_settings``, sglang 0.5.6 and 0.5.9)."""

from __future__ import annotations

import pytest
import yaml

from roofline_opt.catalog.profiles import load_profile, profile_from_mapping, profile_yaml
from roofline_opt.physics.specs import SGLANG_KV_MEMORY_RULE, TRTLLM_KV_MEMORY_RULE

MIB = 2.0**20
B200_HBM_BYTES = 183359 * MIB  # the memory.total a B200 reports: SGLang's "B200, MI300" tier
H200_HBM_BYTES = 143771 * MIB  # an H200's: the "H20, H200" tier


def _reserved_mib(chunked_prefill_size: int, tp: int = 8) -> float:
    """SGLang's reserved_mem at TP ``tp``, cuda_graph_max_bs 512: 512 + 1.5 x chunk + 2 x 512 + tp / 8 x 1024 MiB."""
    return 512 + 1.5 * chunked_prefill_size + 2 * 512 + tp / 8 * 1024


def test_sglang_reserves_for_a_16384_token_chunk_on_a_b200():
    capacity = SGLANG_KV_MEMORY_RULE.capacity_bytes(B200_HBM_BYTES, 84e9, 8)
    assert capacity == pytest.approx(B200_HBM_BYTES - _reserved_mib(16384) * MIB, rel=1e-12)  # 27136 MiB


def test_sglang_reserves_for_an_8192_token_chunk_on_an_h200():
    capacity = SGLANG_KV_MEMORY_RULE.capacity_bytes(H200_HBM_BYTES, 84e9, 8)
    assert capacity == pytest.approx(H200_HBM_BYTES - _reserved_mib(8192) * MIB, rel=1e-12)  # 14848 MiB


def test_the_large_tier_starts_at_160_gib():
    at, below = 160 * 1024 * MIB, 160 * 1024 * MIB - 1.0
    extra = (
        SGLANG_KV_MEMORY_RULE.capacity_bytes(below, 0.0, 8)
        - below
        - (SGLANG_KV_MEMORY_RULE.capacity_bytes(at, 0.0, 8) - at)
    )
    assert extra == pytest.approx(12 * 1024 * MIB)


def test_a_rule_without_a_tier_reserves_the_same_on_every_device():
    free_b200 = TRTLLM_KV_MEMORY_RULE.capacity_bytes(B200_HBM_BYTES, 0.0, 8) / 0.9 - B200_HBM_BYTES
    free_h200 = TRTLLM_KV_MEMORY_RULE.capacity_bytes(H200_HBM_BYTES, 0.0, 8) / 0.9 - H200_HBM_BYTES
    assert free_b200 == pytest.approx(free_h200)


def test_a_profile_rule_with_a_tier_reads_back_from_its_yaml_equal():
    data = yaml.safe_load(profile_yaml(load_profile("sglang")))
    data["settings"]["kv_memory_rule"] |= {"large_device_hbm_bytes": 1.5e11, "large_device_reserve_bytes": 1e9}
    profile = profile_from_mapping(data, "mine.yaml")
    assert profile_from_mapping(yaml.safe_load(profile_yaml(profile)), "mine.yaml") == profile
    rule = dict(profile.settings)["kv_memory_rule"]
    assert (rule.large_device_hbm_bytes, rule.large_device_reserve_bytes) == (1.5e11, 1e9)
