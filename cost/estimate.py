"""One layout, fully costed: per-stage memory and step time, in the JSON contract's shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from megasolve.cost.memory import StageMemory, memory_uncertainty_bytes, stage_memory
from megasolve.cost.step import StepTime, step_time
from megasolve.models.layout import Layout, Workload
from megasolve.models.spec import ModelSpec
from megasolve.topology.cluster import Cluster

GB = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    memory: list[StageMemory]
    time: StepTime
    capacity_bytes: float
    workload: Workload | None = None  # for the uncertainty band (attention kind)
    spec: ModelSpec | None = None  # for the uncertainty band (DSA)

    @property
    def peak_bytes(self) -> float:
        return max(s.total_bytes for s in self.memory)

    @property
    def peak_stage(self) -> int:
        return max(self.memory, key=lambda s: (s.total_bytes, -s.stage)).stage

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.peak_bytes

    @property
    def band_headroom_bytes(self) -> float:
        """The least a stage leaves free once its uncertainty band is added (``solve``'s default check:
        ``>= 0``; every stage, not just the peak one, since the band differs per stage)."""
        return min(self.capacity_bytes - s.total_bytes - self.uncertainty_bytes(s) for s in self.memory)

    def memory_dict(self) -> dict[str, Any]:
        return {
            "peak_gb": round(self.peak_bytes / GB, 3),
            "capacity_gb": round(self.capacity_bytes / GB, 3),
            "peak_stage": self.peak_stage,
            "stages": [{
                "stage": s.stage, "layers": s.num_layers, "params": s.params,
                "weights_gb": round(s.weights_bytes / GB, 3), "grads_gb": round(s.grads_bytes / GB, 3),
                "optimizer_gb": round(s.optimizer_bytes / GB, 3),
                "activations_gb": round(s.activations_bytes / GB, 3), "other_gb": round(s.other_bytes / GB, 3),
                "total_gb": round(s.total_bytes / GB, 3), "fixed_gb": round(s.fixed_bytes / GB, 3),
                "uncertainty_gb": round(self.uncertainty_bytes(s) / GB, 3)} for s in self.memory],
            "peak_uncertainty_gb": round(self.uncertainty_bytes(
                max(self.memory, key=lambda s: (s.total_bytes, -s.stage))) / GB, 3),
        }

    def uncertainty_bytes(self, stage: StageMemory) -> float:
        """+/- band of one stage (``cost.memory.memory_uncertainty_bytes``)."""
        return memory_uncertainty_bytes(stage, self.workload or Workload(), self.spec)

    def time_dict(self) -> dict[str, Any]:
        t = self.time
        return {
            "step_s": round(t.step_s, 4),
            "tokens_per_s_per_gpu": round(t.tokens_per_s_per_gpu, 1),
            "model_tflops_per_gpu": round(t.model_tflops_per_gpu, 1),
            "mfu": round(t.mfu, 4),
            "bubble_fraction": round(t.bubble_fraction, 4),
            "breakdown_s": {k: round(v, 4) for k, v in t.breakdown_s.items()},
        }


def estimate(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout) -> Estimate:
    """Memory of every stage and the step time of ``layout`` (rules are checked by the caller)."""
    spec.require_plannable()
    return Estimate(memory=stage_memory(spec, cluster, workload, layout),
                    time=step_time(spec, cluster, workload, layout),
                    capacity_bytes=cluster.gpu.usable_memory_bytes, workload=workload, spec=spec)
