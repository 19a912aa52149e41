"""Where a device's memory goes in a serving replica: capacity, weights, a pass's activations,
the stack's runtime reserve and the KV-cache budget, per device, with the engine's own rule.

The engine sizes its KV cache with :func:`.engine.kv_capacity_tokens` from
:func:`.engine.kv_budget_bytes`; :func:`kv_memory` reports that budget part by part
(tests/test_serve_expose.py checks it against the engine's token count), so a page or the
CLI can say why a model does or does not fit:

    TensorRT-LLM, generic:  budget = f x (capacity - weights - activations - reserve)
    vLLM (fraction of the total):  budget = f x capacity - weights - activations - reserve

(``EngineConfig.kv_fraction_of_total``), on the device whose stage leaves the least memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..hardware import Efficiency, Hardware
from ..model import Model
from ..parallel import ParallelPlan
from ..precision import Precision
from .config import EngineConfig
from .cost import IterationCost
from .engine import kv_budget_bytes, kv_capacity_tokens


@dataclass(frozen=True)
class KvMemory:
    """Memory of the fullest device of a replica [B] and what the KV cache gets of it.

    ``kv_budget_bytes`` is the KV cache's share before rounding down to whole blocks (negative
    when the weights, activations and reserve leave nothing: by that much the model does not
    fit); ``kv_capacity_tokens`` is the engine's capacity (0 if nothing is left);
    ``capacity_override`` when the configuration fixes the capacity in tokens instead."""
    capacity_bytes: float
    weight_bytes: float
    activation_bytes: float
    runtime_reserve_bytes: float
    kv_memory_fraction: float
    kv_fraction_of_total: bool
    kv_budget_bytes: float
    kv_bytes_per_token: float
    kv_capacity_tokens: int
    stage: int
    capacity_override: bool

    @property
    def fits(self) -> bool:
        return self.kv_capacity_tokens > 0

    def to_dict(self) -> dict:
        return {**asdict(self), "fits": self.fits}


def kv_memory(cost: IterationCost, cfg: EngineConfig) -> KvMemory:
    """The memory accounting of ``cost``'s replica under ``cfg`` (see the module docstring);
    the stage kept is the one :meth:`IterationCost.memory_parts` picks (least
    memory left after its weights and the activations of a ``max_num_tokens`` pass)."""
    free, stage, w, act = cost.memory_parts(cfg.max_num_tokens)
    cap = cost.hardware.memory_capacity_bytes
    budget = kv_budget_bytes(cost, cfg, free)
    return KvMemory(float(cap), float(w), float(act), float(cfg.runtime_reserve_bytes),
                    float(cfg.kv_memory_fraction), cfg.kv_fraction_of_total, float(budget),
                    float(cost.kv_bytes_per_token()), kv_capacity_tokens(cost, cfg), stage,
                    cfg.kv_capacity_tokens is not None)


def kv_memory_for(model: Model, hardware: Hardware, precision: Precision,
                  plan: ParallelPlan | None, cfg: EngineConfig,
                  efficiency: Efficiency | None = None, flash_attention: bool = True,
                  time_scale: float = 1.0) -> KvMemory:
    """:func:`kv_memory` of one replica of ``plan`` (built as :func:`.api.serve` builds it)."""
    cost = IterationCost(model, hardware, precision, plan or ParallelPlan(), efficiency,
                         flash_attention, time_scale=time_scale)
    return kv_memory(cost, cfg)
