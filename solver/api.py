"""The Python API behind the commands: ``estimate`` one layout (``solve`` and ``whatif`` live in
their own modules). Returns values; nothing here prints or exits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from megasolve.cost.calibration import Profile, SpeedBasis, load_profile, speed_basis, use_profile
from megasolve.cost.estimate import Estimate, estimate as cost_estimate
from megasolve.cost.step import layout_cp_comm_type
from megasolve.models.errors import MegasolveError
from megasolve.models.layout import Layout, Workload
from megasolve.models.params import model_params
from megasolve.models.spec import ModelSpec
from megasolve.solver.rules import RuleContext, Violation, rule_error, violations
from megasolve.topology.cluster import Cluster

SOFT_RULES = ("tp_inside_nvlink_domain",)  # planner policy: costed, reported, not a Megatron error


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutReport:
    """A costed layout: the estimate plus the rules it breaks (soft ones only; hard ones raise)."""

    spec: ModelSpec
    cluster: Cluster
    workload: Workload
    layout: Layout
    estimate: Estimate
    violations: list[Violation] = field(default_factory=list)
    speed_basis: SpeedBasis | None = None  # what the step time rests on (``calibration.speed_basis``)

    @property
    def feasible(self) -> bool:
        return self.estimate.fits and not self.violations

    def layout_dict(self) -> dict[str, Any]:
        return layout_dict(self.layout, self.workload)

    @property
    def cp_comm_type(self) -> str | None:
        """The ``--cp-comm-type`` the layout runs and was costed with (None without CP)."""
        return layout_cp_comm_type(self.spec, self.cluster, self.workload, self.layout)

    def as_dict(self) -> dict[str, Any]:
        """The JSON contract of ``estimate`` (DESIGN.md section 5)."""
        violations_out = [v.as_dict() for v in self.violations]
        if not self.estimate.fits:
            violations_out.append({
                "rule": "memory_fits", "source": "cost/memory.py",
                "message": f"peak {self.estimate.peak_bytes / 1e9:.1f} GB on stage {self.estimate.peak_stage} "
                           f"exceeds the usable {self.estimate.capacity_bytes / 1e9:.1f} GB of one {self.cluster.gpu.name}",
                "fix": "more recompute, more TP/PP/CP/EP, a smaller micro-batch, or GPUs with more memory"})
        return {
            "model": self.spec.name,
            # added by issue 15 next to "model" (kept a string for existing consumers): the size as model
            # cards count it and what the config reader could not model
            "model_params": model_params(self.spec),
            "ignored_features": list(self.spec.ignored_features),
            "model_notes": list(self.spec.notes),  # defaults filled, readings chosen (also printed as notes)
            "cluster": {"gpu": self.cluster.gpu.name, "num_gpus": self.cluster.num_gpus,
                        "gpus_per_node": self.cluster.gpus_per_node, "nvlink_domain": self.cluster.nvlink_domain},
            "workload": {"seq_length": self.workload.seq_length, "global_batch_size": self.workload.global_batch_size,
                         "precision": self.workload.precision, "fp8_param_gather": self.workload.fp8_param_gather,
                         "grad_reduce_in_bf16": self.workload.grad_reduce_in_bf16,
                         "fsdp_main_grads_dtype": self.workload.fsdp_main_grads_dtype,
                         "fsdp_grad_comm_dtype": self.workload.fsdp_grad_comm_dtype,
                         "cross_entropy": self.workload.cross_entropy,
                         "moe_dispatcher": self.workload.moe_dispatcher if self.spec.is_moe else None,
                         "cp_comm_type": self.cp_comm_type,
                         "fp8_recipe": self.workload.fp8_recipe if self.workload.precision == "fp8" else None,
                         "fp8_output_proj": self.workload.fp8_output_proj,
                         "optimizer": self.workload.optimizer,
                         "num_layers_at_start_in_bf16": self.workload.num_layers_at_start_in_bf16,
                         "num_layers_at_end_in_bf16": self.workload.num_layers_at_end_in_bf16,
                         "attention": self.workload.attention,
                         "tp_comm_overlap": self.workload.tp_comm_overlap,
                         "overlap_p2p_comm": self.workload.overlap_p2p_comm,
                         "moe_ep_overlap": self.workload.moe_ep_overlap if self.spec.is_moe else None,
                         "moe_shared_expert_overlap":
                             self.workload.moe_shared_expert_overlap if self.spec.is_moe else None,
                         "dp_comm_overlap": self.workload.dp_comm_overlap,
                         "param_gather_overlap": self.workload.param_gather_overlap,
                         "cuda_graph_impl": self.workload.cuda_graph_impl,
                         "activation_fusion": self.workload.activation_fusion,
                         "activation_func_fp8_input_store": self.workload.activation_func_fp8_input_store,
                         "deterministic_mode": self.workload.deterministic_mode,
                         "precision_aware_optimizer": self.workload.precision_aware_optimizer,
                         "exp_avg_dtype": self.workload.exp_avg_dtype,
                         "exp_avg_sq_dtype": self.workload.exp_avg_sq_dtype,
                         "main_params_dtype": self.workload.main_params_dtype,
                         "offload_modules": list(self.workload.offload_modules),
                         # the precision recipe's matchers in order, [pattern, format] ([]: none)
                         "module_precision": [list(m) for m in self.workload.module_precision],
                         **({"moe_expert_capacity_factor": self.workload.moe_expert_capacity_factor,
                             "moe_pad_expert_input_to_capacity": self.workload.moe_pad_expert_input_to_capacity,
                             "moe_token_drop_policy": self.workload.moe_token_drop_policy,
                             "moe_router_padding_for_fp8": self.workload.moe_router_padding_for_fp8}
                            if self.spec.is_moe else {})},
            "layout": self.layout_dict(),
            "feasible": self.feasible,
            "violations": violations_out,
            "memory": self.estimate.memory_dict(),
            "time": self.estimate.time_dict(),
            # added 2026-12-05: the published runs (and the user profile) behind the step time, and a note
            **({"speed_basis": self.speed_basis.as_dict()} if self.speed_basis else {}),
        }


def layout_dict(layout: Layout, workload: Workload) -> dict[str, Any]:
    return {
        "tp": layout.tp, "pp": layout.pp, "vpp": layout.vpp, "cp": layout.cp, "ep": layout.ep, "etp": layout.etp,
        "dp": layout.dp, "mbs": layout.mbs, "gbs": workload.global_batch_size,
        "num_microbatches": workload.num_microbatches(layout), "sequence_parallel": layout.sequence_parallel,
        "recompute": layout.recompute, "recompute_num_layers": layout.recompute_num_layers,
        "recompute_modules": list(layout.recompute_modules) if layout.recompute_modules else None,
        "distributed_optimizer": layout.distributed_optimizer, "fsdp": layout.fsdp,
        "optimizer_offload_fraction": layout.optimizer_offload_fraction,
        "cpu_offload_layers": layout.cpu_offload_layers, "account_for_embedding": layout.account_for_embedding,
        "account_for_loss": layout.account_for_loss,
        "first_stage_layers": layout.first_stage_layers, "last_stage_layers": layout.last_stage_layers,
        "pipeline_layout": layout.pipeline_layout,
    }


def check_layout(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout,
                 allow_cross_domain_tp: bool = False) -> list[Violation]:
    """Soft violations of ``layout``; raises ``MegasolveError`` on the first hard (Megatron) rule."""
    if layout.world_size != cluster.num_gpus:
        raise MegasolveError(field="--gpus", value=cluster.num_gpus,
                             rule=f"tp*pp*cp*dp = {layout.world_size} GPUs", fix="match the layout to the cluster")
    ctx = RuleContext(spec=spec, cluster=cluster, workload=workload, allow_cross_domain_tp=allow_cross_domain_tp)
    found = violations(ctx, layout)
    hard = [v for v in found if v.rule not in SOFT_RULES]
    if hard:
        raise rule_error(hard[0], layout, workload)
    return [v for v in found if v.rule in SOFT_RULES]


def estimate(spec: ModelSpec, cluster: Cluster, workload: Workload, layout: Layout,
             allow_cross_domain_tp: bool = False, profile: Profile | str | None = None) -> LayoutReport:
    """Cost one layout: per-stage memory, step time, and the rules it breaks.

    ``profile``: a calibration ``Profile`` (or the path of one written by ``megasolve calibrate``);
    None: the shipped one."""
    soft = check_layout(spec, cluster, workload, layout, allow_cross_domain_tp)
    with use_profile(load_profile(profile)):
        costed = cost_estimate(spec, cluster, workload, layout)
        basis = speed_basis(cluster.gpu, workload.precision, spec.is_moe)
    return LayoutReport(spec=spec, cluster=cluster, workload=workload, layout=layout,
                        estimate=costed, violations=soft, speed_basis=basis)
