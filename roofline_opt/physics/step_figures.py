"""One step's time as its parts (``StepFigures``) and the serial kernels a step launches (``kernels_per_step``).

The evaluator fills ``StepFigures``; this module says how the parts combine into a step time: the notebook's one
max(memory, compute) over the whole step, or a max per kernel class (``Preset.per_kernel_class``). Plain numpy, no
other physics: docs/physics/step-structure.md describes the terms.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline_opt.physics.sizes import model_sizes
from roofline_opt.physics.specs import ModelSpec, Preset


@dataclass(frozen=True)
class StepFigures:
    """Seconds of one decoding step and its parts; ``overlapped_network_s`` runs alongside compute and memory
    (two-batch overlap of data-parallel attention's all-to-all), the rest of the network time in series.

    memory_s / compute_s cover the whole step. With ``per_kernel_class`` (``Preset.per_kernel_class``) the step runs
    its kernel classes one after another, each at its own max(memory, compute): the decode attention (KV cache read
    against attention FLOPs over the cached context), the prefill attention of prompt tokens in the step (KV written
    or re-read against their attention FLOPs) and the GEMMs (the rest: weights and activations against linear FLOPs).
    Without it the step is the notebook's one max over everything.
    """

    kernel_launch_s: np.ndarray
    network_s: np.ndarray
    memory_s: np.ndarray
    compute_s: np.ndarray
    overlapped_network_s: np.ndarray | float = 0.0
    decode_attention_memory_s: np.ndarray | float = 0.0
    decode_attention_compute_s: np.ndarray | float = 0.0
    prefill_attention_memory_s: np.ndarray | float = 0.0
    prefill_attention_compute_s: np.ndarray | float = 0.0
    per_kernel_class: bool = False

    @property
    def gemm_memory_s(self) -> np.ndarray:
        """Memory time of the GEMM class (the whole step's without per_kernel_class)."""
        if not self.per_kernel_class:
            return self.memory_s
        return self.memory_s - self.decode_attention_memory_s - self.prefill_attention_memory_s

    @property
    def gemm_compute_s(self) -> np.ndarray:
        """Compute time of the GEMM class (the whole step's without per_kernel_class)."""
        if not self.per_kernel_class:
            return self.compute_s
        return self.compute_s - self.decode_attention_compute_s - self.prefill_attention_compute_s

    @property
    def attention_s(self) -> np.ndarray | float:
        """Seconds of the attention classes, each at its own max(memory, compute) (0 without per_kernel_class)."""
        if not self.per_kernel_class:
            return 0.0
        decode = np.maximum(self.decode_attention_memory_s, self.decode_attention_compute_s)
        return decode + np.maximum(self.prefill_attention_memory_s, self.prefill_attention_compute_s)

    @property
    def serial_s(self) -> np.ndarray:
        """Seconds outside the GEMM class's max: kernel launches, serial network time and the attention classes."""
        if not self.per_kernel_class:
            return self.kernel_launch_s + self.network_s
        return self.kernel_launch_s + self.network_s + self.attention_s

    @property
    def step_time_s(self) -> np.ndarray:
        if not self.per_kernel_class:
            busy = np.maximum(np.maximum(self.memory_s, self.compute_s), self.overlapped_network_s)
            return self.kernel_launch_s + self.network_s + busy
        gemm = np.maximum(self.gemm_memory_s, self.gemm_compute_s)
        busy = np.maximum(gemm + self.attention_s, self.overlapped_network_s)
        return self.kernel_launch_s + self.network_s + busy


def kernels_per_step(model: ModelSpec, preset: Preset) -> float:
    """Serial kernels of one step: the notebook's 4 per layer, or ``Preset.kernel_counts`` by architecture family
    (attention block by attention kind, feed-forward block by dense or routed-MoE layer)."""
    counts = preset.kernel_counts
    if counts is None:
        return model.n_layers * 4.0
    sz = model_sizes(model)
    attention = counts.mla_attention if model.is_mla else counts.gqa_attention
    moe_layers = sz.n_moe_layers if model.is_moe else 0
    ffn = moe_layers * counts.moe_ffn + (model.n_layers - moe_layers) * counts.dense_ffn
    return float(model.n_layers * attention + ffn)
