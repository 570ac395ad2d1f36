"""Rank arithmetic, written once: the size and stride of every parallel group under Megatron's rank
order, as Megatron-Core's ``RankGenerator`` owns it (``parallel_state.py``: order ``tp-cp-ep-dp-pp``,
TP fastest; the expert groups re-factor the same ranks as ``etp-ep-edp-pp``). A group
``{base + i*stride : i < size}`` is what ``Cluster.group_link(stride, size)`` prices.

>>> dense_dp_group(tp=4, cp=2, dp=8)  # the distributed optimizer's shard group: DP x CP, stride TP
Group(size=16, stride=4)
>>> expert_dp_group(world=1024, etp=1, ep=64, pp=16), pipeline_group(world=1024, pp=16)
(Group(size=1, stride=64), Group(size=16, stride=64))
"""

from __future__ import annotations

from typing import NamedTuple


class Group(NamedTuple):
    size: int
    stride: int


def data_parallel_size(world: int, tp: int, cp: int, pp: int) -> int | None:
    """``dp = world / (tp * cp * pp)``, or None when it does not divide (PS L822-823)."""
    model = tp * cp * pp
    return world // model if world % model == 0 else None


def expert_data_parallel_size(world: int, etp: int, ep: int, pp: int) -> int | None:
    """``edp = world / (etp * ep * pp)``, or None when it does not divide (PS L878-884)."""
    expert = etp * ep * pp
    return world // expert if world % expert == 0 else None


def fits_world(world: int, *, tp: int = 1, cp: int = 1, dp: int = 1, pp: int = 1, ep: int = 1,
               etp: int = 1) -> bool:
    """Necessary conditions on any subset of the axes: the dense and the expert groups they form
    divide the world (axes not given count as 1)."""
    return world % (tp * cp * dp * pp) == 0 and world % (etp * ep * pp) == 0


def tensor_group(tp: int) -> Group:
    return Group(tp, 1)


def context_group(tp: int, cp: int) -> Group:
    return Group(cp, tp)


def dense_dp_group(tp: int, cp: int, dp: int) -> Group:
    """Dense gradients / the distributed optimizer's shards / Megatron-FSDP: DP x CP ranks, stride TP
    (``intra_dp_cp_group``, ``distributed_data_parallel.py`` L148-151)."""
    return Group(dp * cp, tp)


def expert_group(etp: int, ep: int) -> Group:
    return Group(ep, etp)


def expert_dp_group(world: int, etp: int, ep: int, pp: int) -> Group:
    """Expert gradients and shards: expert-DP ranks, stride ``etp * ep`` (``intra_expt_dp_group``)."""
    return Group(world // (etp * ep * pp), etp * ep)


def pipeline_group(world: int, pp: int) -> Group:
    """PP is the outermost rank dimension: stride ``world / pp``."""
    return Group(pp, world // pp)
