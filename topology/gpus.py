"""GPU catalog: specs as data (``gpus.yaml``, with sources), SI units inside."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any


from megasolve.models.errors import ConfigError, UnknownNameError, closest_names
from megasolve.models.shipped_yaml import load_shipped_yaml

GIB = 2**30


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """One accelerator type. Bandwidths per GPU and per direction."""

    name: str
    memory_bytes: float  # marketed capacity (10^9-byte GB)
    usable_memory_bytes: float  # what the device reports (nvidia-smi / torch)
    bf16_flops: float  # dense peak
    fp8_flops: float | None
    hbm_bytes_per_s: float
    # dense NVFP4 peak (Blackwell tensor cores, ``fp4_tflops``); None: no FP4 training on this part
    fp4_flops: float | None = None
    nvlink_bytes_per_s: float | None  # None: no NVLink (PCIe only)
    pcie_bytes_per_s: float = 32e9  # PCIe Gen4 x16 per direction (Gen5: 64e9)
    host_bytes_per_s: float | None = None  # GPU <-> CPU memory per direction; None: over PCIe
    # host DRAM bandwidth per GPU (the CPU optimizer step of --optimizer-cpu-offload); None: the x86
    # default of cost/offload.py
    host_memory_bytes_per_s: float | None = None
    # host DRAM per GPU (``host_mem_gb``; what activation offloading can fill): DGX H100 / B200 carry 2 TB
    # for 8 GPUs (NVIDIA DGX H100 and DGX B200 datasheets: "System memory 2TB")
    host_memory_bytes: float = 256e9
    nvlink_domain: int = 8
    gpus_per_node: int = 8
    nic_bytes_per_s: float = 50e9
    aliases: tuple[str, ...] = ()
    # CUDA compute capability (e.g. 9.0 Hopper, 10.0 B200, 10.3 B300); None: not an NVIDIA part or not stated
    compute_capability: float | None = None

    def __post_init__(self) -> None:
        for field in ("memory_bytes", "usable_memory_bytes", "bf16_flops", "hbm_bytes_per_s", "nic_bytes_per_s"):
            value = getattr(self, field)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ConfigError(field=f"gpu.{field}", value=value, rule="must be a positive number",
                                  fix="check the GPU definition")
        for field in ("nvlink_domain", "gpus_per_node"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(field=f"gpu.{field}", value=value, rule="must be a positive integer",
                                  fix="check the GPU definition")

    @property
    def host_link_bytes_per_s(self) -> float:
        """Bandwidth to host memory per direction (activation offloading): NVLink-C2C on Grace
        superchips, else PCIe."""
        return self.host_bytes_per_s or self.pcie_bytes_per_s

    def peak_flops(self, precision: str) -> float:
        """Dense peak for ``bf16``, ``fp8`` or ``fp4`` (NVFP4); falls back to bf16 where the GPU has no
        such tensor cores (the rules refuse that run before any cost is asked for)."""
        if precision == "fp8" and self.fp8_flops:
            return self.fp8_flops
        if precision == "fp4" and self.fp4_flops:
            return self.fp4_flops
        return self.bf16_flops


def gpu_from_entry(name: str, entry: dict[str, Any]) -> GpuSpec:
    """Build a ``GpuSpec`` from a catalog / cluster-file entry (units of ``gpus.yaml``)."""
    if not isinstance(entry, dict):
        raise ConfigError(field="gpu", value=repr(entry), rule="must be a mapping", fix="see gpus.yaml")

    def number(key: str, default: Any = None, required: bool = True) -> Any:
        value = entry.get(key, default)
        if value is None:
            if required:
                raise ConfigError(field=f"gpu.{key}", value="missing", rule="required for a GPU definition",
                                  fix=f"add {key}")
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(field=f"gpu.{key}", value=repr(value), rule="must be a finite number", fix=f"fix {key}")
        return value

    def integer(key: str, default: int) -> int:
        value = number(key, default)
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(field=f"gpu.{key}", value=repr(value), rule="must be a whole number", fix=f"fix {key}")
        return int(value)

    aliases = entry.get("aliases") or ()
    if not isinstance(aliases, (list, tuple)) or not all(isinstance(a, str) for a in aliases):
        raise ConfigError(field="gpu.aliases", value=repr(aliases)[:80], rule="must be a list of names",
                          fix="e.g. aliases: [h100-sxm]")

    mem_gb = number("mem_gb")
    usable_gib = number("usable_mem_gib", mem_gb * 1e9 / GIB * 0.99)
    nvlink = number("nvlink_uni_gbps", required=False)
    fp8 = number("fp8_tflops", required=False)
    fp4 = number("fp4_tflops", required=False)
    host = number("host_uni_gbps", required=False)
    host_mem = number("host_mem_gbps", required=False)
    host_capacity = number("host_mem_gb", 256)
    return GpuSpec(
        name=name, memory_bytes=mem_gb * 1e9, usable_memory_bytes=usable_gib * GIB,
        bf16_flops=number("bf16_tflops") * 1e12, fp8_flops=fp8 * 1e12 if fp8 else None,
        fp4_flops=fp4 * 1e12 if fp4 else None,
        hbm_bytes_per_s=number("hbm_gbps", 2000) * 1e9,
        nvlink_bytes_per_s=nvlink * 1e9 if nvlink else None,
        pcie_bytes_per_s=number("pcie_uni_gbps", 32) * 1e9,
        host_bytes_per_s=host * 1e9 if host else None,
        host_memory_bytes_per_s=host_mem * 1e9 if host_mem else None, host_memory_bytes=host_capacity * 1e9,
        nvlink_domain=integer("nvlink_domain", 8), gpus_per_node=integer("gpus_per_node", 8),
        nic_bytes_per_s=number("nic_gbit_per_gpu", 400) * 1e9 / 8,
        aliases=tuple(aliases), compute_capability=number("compute_capability", required=False))


@functools.cache
def _catalog() -> dict[str, GpuSpec]:
    text = resources.files("megasolve.topology").joinpath("gpus.yaml").read_text(encoding="utf-8")
    return {name: gpu_from_entry(name, entry) for name, entry in load_shipped_yaml(text)["gpus"].items()}


def gpu_names() -> list[str]:
    return list(_catalog())


def all_gpus() -> list[GpuSpec]:
    return list(_catalog().values())


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU up by name or alias, case-insensitively.

    >>> get_gpu("A100-80G").name, get_gpu("h100-sxm").name
    ('a100-80g', 'h100')
    """
    key = str(name).strip().lower().replace("_", "-")
    catalog = _catalog()
    if key in catalog:
        return catalog[key]
    for gpu in catalog.values():
        if key in (a.lower().replace("_", "-") for a in gpu.aliases):
            return gpu
    names = list(catalog) + [a for g in catalog.values() for a in g.aliases]
    hint = closest_names(key, names)
    raise UnknownNameError(field="--gpu", value=name, rule="not in the GPU catalog",
                           fix=(f"did you mean {', '.join(hint)}? " if hint else "")
                           + "run `megasolve gpus` for the list, or describe it in a --cluster file")
