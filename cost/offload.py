"""Host-memory offloading: activations of the first N layers (``--cpu-offloading-num-layers N``) and the
optimizer state (``--optimizer-cpu-offload --optimizer-offload-fraction f``). Time and memory terms,
shared by ``estimate`` (``step.py`` / ``memory.py``) and the solver's tables.

Activation offloading (Megatron-Core ``transformer_block.py`` L300-312 wraps each layer in Transformer
Engine's CPU-offload context; TE ``pytorch/cpu_offload.py`` ``AsyncDoubleBufferGroupOffloadHandler``):
in forward, layer ``i``'s saved tensors are copied to pinned host memory on a side stream while layer
``i+1`` computes, and the copy must finish before the next layer's tensors take its double buffer; in
backward, layer ``i``'s tensors are reloaded while layer ``i+1``'s backward runs. So each offloaded layer
hides its ``bytes / link`` copy out behind one layer forward (1/3 of the layer's fwd+bwd compute) and its
copy back behind one layer backward (2/3): exposed ``max(0, b/B - c/3) + max(0, b/B - 2c/3)``.

Optimizer offload (Megatron-Core ``optimizer/cpu_offloading/hybrid_optimizer.py``
``HybridDeviceOptimizer``; ``docs/user-guide/features/optimizer_cpu_offload.md``): the fraction ``f`` of
the rank's optimizer shard (fp32 master weights and Adam m, v: 12 B per parameter) lives in host
memory and is stepped by the CPU; the main grads of that fraction go device -> host and the updated
parameters host -> device every step (with ``--overlap-cpu-optimizer-d2h-h2d``, which the exports set,
the copies of one parameter group overlap the CPU step of another). Megatron-LM ``arguments.py``
("Optimizer CPU offload check"): it needs ``--use-precision-aware-optimizer`` and, with
``--fp8-param-gather``, the ``delayed`` FP8 recipe.
"""

from __future__ import annotations

from megasolve.cost.calibration import calibration
from megasolve.topology.gpus import GpuSpec

# Fractions of the optimizer shard offloaded that ``solve`` searches (0 = off). Memory falls and time
# grows linearly in f, so for one layout the best f is the smallest that fits; off and all bracket it
# (--fix optimizer_offload_fraction=F pins any other). A third value (0.5) cost 0.25 s of the 2 s
# budget on DeepSeek-V3 @ 1,024 H100 (benchmarks/solver_benchmark.py) for plans within a CPU-Adam
# half-step of these.
OPTIMIZER_OFFLOAD_FRACTIONS = (0.0, 1.0)
# Host DRAM bandwidth per GPU where the catalog has none (x86 hosts): DGX H100 / B200 carry two Xeon
# Platinum 8480C / 8570 sockets, 8 channels of DDR5-4800 each = 307 GB/s per socket (Intel ARK), shared
# by 8 GPUs: 2 * 307 / 8 = 77 GB/s per GPU.
DEFAULT_HOST_MEMORY_BYTES_PER_S = 77e9


def activation_offload_exposed_s(layer_bytes: float, layer_compute_s: float, host_link_bytes_per_s: float,
                                 hbm_bytes_per_s: float) -> float:
    """Time one offloaded layer adds per micro-batch (module docstring): the copies not hidden behind the
    next layer's forward / backward, plus the HBM traffic of the copies themselves -- the copy engines
    read the tensors out of HBM and write them back (``2 * bytes``), bandwidth the kernels running
    beside them lose (charged in full: the bound for memory-bound kernels). That last term is why
    offloading fewer layers is faster even where the link hides every copy (NVLink-C2C).

    >>> round(activation_offload_exposed_s(3e9, 0.3, 64e9, 3.35e12) * 1e3, 2)  # hidden: HBM traffic only
    1.79
    >>> round(activation_offload_exposed_s(3e9, 0.03, 64e9, 3.35e12) * 1e3, 2)  # PCIe: (46.9 - 10) + (46.9 - 20) + 1.8
    65.54
    """
    one_way = layer_bytes / host_link_bytes_per_s
    exposed = max(0.0, one_way - layer_compute_s / 3) + max(0.0, one_way - 2 * layer_compute_s / 3)
    return exposed + 2 * layer_bytes / hbm_bytes_per_s


def host_memory_bytes_per_s(gpu: GpuSpec) -> float:
    """Host DRAM bandwidth available to one GPU's CPU optimizer step (``gpus.yaml`` ``host_mem_gbps``)."""
    return getattr(gpu, "host_memory_bytes_per_s", None) or DEFAULT_HOST_MEMORY_BYTES_PER_S


def optimizer_offload_s(gpu: GpuSpec, shard_params: float, fraction: float, *, grad_bytes: int,
                        param_bytes: int) -> float:
    """Host side of the optimizer step for ``fraction`` of a shard of ``shard_params`` parameters.

    CPU Adam is memory bound: it streams the same ``optimizer_bytes_per_param`` (read g, p, m, v; write
    p, m, v and the low-precision copy; ``calibration.yaml``) through host DRAM
    (``host_memory_bytes_per_s``) -- ZeRO-Offload (Ren et al., USENIX ATC 2021, section 4.2) reaches
    that bound with its vectorised CPU-Adam, and Megatron's HybridDeviceOptimizer runs
    ``torch.optim.AdamW`` with ``foreach``/``fused`` CPU kernels. The transfers: main grads down
    (``grad_bytes``) and parameters up (``param_bytes``) over the host link; overlapped with the CPU
    step (``--overlap-cpu-optimizer-d2h-h2d``): the slower of the two.

    >>> from megasolve.topology.gpus import get_gpu
    >>> round(optimizer_offload_s(get_gpu("h100"), 1e9, 1.0, grad_bytes=4, param_bytes=2), 3)  # 32 GB / 77 GB/s
    0.416
    """
    if fraction <= 0.0:
        return 0.0
    moved = fraction * shard_params
    cpu_s = calibration()["time"]["optimizer_bytes_per_param"] * moved / host_memory_bytes_per_s(gpu)
    copy_s = (grad_bytes + param_bytes) * moved / gpu.host_link_bytes_per_s
    return max(cpu_s, copy_s)
