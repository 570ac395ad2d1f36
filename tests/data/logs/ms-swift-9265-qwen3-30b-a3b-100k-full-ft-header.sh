# #!/usr/bin/env bash
# set -euo pipefail

# # ============================================================
# # Qwen3-30B-A3B 全量微调 — 100K序列长度 极致显存优化版
# # ============================================================
# # 硬件: 8x A100-SXM4-80GB
# # 模型: /root/PLM/Qwen3-30B-A3B-Instruct-2507 (MoE, 128 experts, 48 layers, ~30.5B params)
# # 数据: /root/sft_data (4987条, 平均~54K tokens, 最大~120K tokens)
# #
# # 核心策略 (全部从设置层面降低显存, 不用LoRA、不改数据):
# #   1. Context Parallel (CP=2/4): 序列在多个GPU间切分
# #   2. Expert Parallel (EP=4): 128专家/4=32专家每GPU, EDP=2优化器2路分片
# #   3. Optimizer CPU Offload: 全部优化器状态offload到CPU (~88GB CPU/GPU)
# #   4. Precision-aware Optimizer: 主权重BF16存储
# #   5. BF16 Optimizer States: exp_avg/exp_avg_sq用BF16
# #   6. Distributed Optimizer: 优化器梯度分片
# #   7. main_grads_dtype=bf16: 梯度缓冲区BF16
# #   8. Full Activation Recomputation: 最小化激活显存
# #   9. Flash Attention + padding_free
# #  10. MoE优化: grouped_gemm + permute_fusion
# #
# # 可选 Profile:
# #   A (默认): TP=1, EP=4, CP=2, DP=4 → 显存~75.7GB/GPU
# #   B:       TP=1, EP=4, CP=4, DP=2 → 显存~62.1GB/GPU (更安全)
# #
# # 用法:
# #   bash sft_shell/train_full_100k.sh                # Profile A
# #   PROFILE=B bash sft_shell/train_full_100k.sh      # Profile B
# # ============================================================

# cd /ossfs/workspace/qwen3_sft_ms_swift

# # ============ 路径 ============
# expo
