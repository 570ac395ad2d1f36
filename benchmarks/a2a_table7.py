#!/usr/bin/env python3
"""megasolve's EP all-to-all against measured dispatch / combine latencies: NVIDIA's Megatron-Core MoE report,
arXiv:2603.07685 (v2), section 4.2.2, Table 7 ("EP Scaling Performance for HybridEP and all-to-all (in us)": hidden
7168, sequence 4096, 256 experts, EP 8-64, GB200 and H100).

    python benchmarks/a2a_table7.py

Each row is one all-to-all of DeepSeek-V3's routing (top-8 of 256 experts in 8 groups, 4 groups a token) for one
rank's 4,096 tokens, priced as a step prices it (``cost/step.py`` ``ep_traffic_s``: four all-to-alls a layer, so a
quarter of it), HybridEP as ``flex`` (token-based: one copy per distinct remote domain, then NVLink forwarding),
NCCL as ``alltoall``; GB200 with 64-GPU NVLink domains (one NVL72 rack), H100 with 8. The measurement is the mean of
the table's dispatch and combine. What the table measures and a step does not pay: a fixed ~110 us a call
(``calibration.yaml`` all_to_all), printed as the residual.
"""

from __future__ import annotations

import argparse
import sys

from megasolve.cost.memory import ActivationShape
from megasolve.cost.step import ep_traffic_s
from megasolve.models.layout import Workload
from megasolve.models.presets import load_preset
from megasolve.topology.cluster import Cluster

# (gpu, dispatcher): {ep: (dispatch us, combine us)}, arXiv:2603.07685 Table 7
TABLE7 = {
    ("gb200", "flex"): {8: (391, 353), 16: (578, 527), 32: (612, 646), 64: (675, 744)},
    ("gb200", "alltoall"): {8: (735, 741), 16: (743, 765), 32: (769, 758), 64: (930, 827)},
    ("h100", "flex"): {8: (661, 624), 16: (1485, 1688), 32: (3064, 3088), 64: (4626, 4398)},
    ("h100", "alltoall"): {8: (1265, 1277), 16: (5774, 5628), 32: (8059, 7815), 64: (9164, 8727)},
}


def rows() -> list[tuple[str, str, int, float, float]]:
    """(gpu, dispatcher, ep, measured us, predicted us) for every cell pair of the table."""
    spec = load_preset("deepseek-v3")
    shape = ActivationShape(tp=1, cp=1, mbs=1, sequence_parallel=False)
    out = []
    for (gpu, dispatcher), cells in TABLE7.items():
        for ep, (dispatch, combine) in cells.items():
            cluster = Cluster.from_flags(num_gpus=64, gpu=gpu, **({"nvlink_domain": 64} if gpu == "gb200" else {}))
            one = ep_traffic_s(spec, cluster, Workload(seq_length=4096, moe_dispatcher=dispatcher), shape, ep,
                               "none") / 4
            out.append((gpu, dispatcher, ep, (dispatch + combine) / 2, one * 1e6))
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args(argv)
    print(f"{'gpu':6s} {'dispatcher':10s} {'ep':>3s} {'measured us':>11s} {'predicted us':>12s} {'error':>7s} "
          f"{'residual us':>11s}")
    for gpu, dispatcher, ep, measured, predicted in rows():
        print(f"{gpu:6s} {dispatcher:10s} {ep:3d} {measured:11.0f} {predicted:12.0f} {predicted / measured - 1:+7.1%} "
              f"{measured - predicted:11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
