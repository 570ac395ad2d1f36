modelscope/ms-swift · issue #7119 · open · Python
# megatron 微调 qwen3vl-235b-a22b OOM

gengenkai · description · 2025-12-19
以下是我用megatron lora sft qwen3vl-235b-a22b 模型的配置（8x8H800-80G)，但是如果seq_len调整到 32k以上会OOM，可以怎么优化么：

#!/bin/bash
set -euo pipefail
set -x

########################
# 自动分布式环境设置
# NNODES=$WORLD_SIZE RANK=$RANK MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT
########################
# 单机模式检测，如果没有 MASTER_ADDR，则默认为单机
if [ -z "${MASTER_ADDR:-}" ]; then
    export MASTER_ADDR=127.0.0.1
    export MASTER_PORT=$(shuf -n 1 -i 20000-65000)
    export NNODES=1
    export NODE_RANK=0
    export NPROC_PER_NODE=8
    export WORLD_SIZE=8
else
    # 多机模式，平台需要提供 MASTER_ADDR, RANK, WORLD_SIZE
    export MASTER_ADDR=$MASTER_ADDR \
    export MASTER_PORT=$MASTER_PORT \
    export NNODES=${WORLD_SIZE:-1}       # 平台的WORLD_SIZE是节点数
    export NODE_RANK=${RANK:-0}          # 节点排名
    export RANK=${RANK:-0}
    export NPROC_PER_NODE=8  # 默认每个节点8张卡

fi

# 动态调整批处理大小（可选，根据节点数量调整）
MICRO_BATCH_SIZE=${MICRO_BATCH_SIZE:-1}
# 全局批处理大小应该根据节点数量进行调整
GLOBAL_BATCH_SIZE=${GLOBAL_BATCH_SIZE:-$((4 * NNODES))}

# 其他配置
export TF_CPP_MIN_LOG_LEVEL=3

echo "=== 分布式配置信息 ==="
echo "MASTER_ADDR: ${MASTER_ADDR}"
echo "MASTER_PORT: ${MASTER_PORT}"
echo "NNODES: ${NNODES}"
echo "NODE_RANK: ${NODE_RANK}"
echo "NPROC_PER_NODE: ${NPROC_PER_NODE}"
echo "TOTAL_PROCESSES: $((NNODES * NPROC_PER_NODE))"
echo "MICRO_BATCH_SIZE: ${MICRO_BATCH_SIZE}"
echo "GLOBAL_BATCH_SIZE: ${GLOBAL_BATCH_SIZE}"
echo "==================
