NVIDIA/Megatron-LM · issue #2772 · closed · Python
labels: bug, community-request, module: megatron-fsdp
# Using Megatron-FSDP + EP consumes more GPU memory than using EP alone

[turn 0 by cailun01, continued]
**EP8 args**:
```shell
#!/bin/bash
set -ex

unset CUDA_DEVICE_MAX_CONNECTIONS

GPUS_PER_NODE=8
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
MASTER_PORT=${MASTER_PORT:-"29345"}
NUM_NODES=${NUM_NODES:-"1"}
NODE_RANK=${NODE_RANK:-"0"}
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))
export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7

LOG_DIR="/mnt/"
mkdir -p ${LOG_DIR}
if [ "${NODE_RANK}" -eq "0" ]; then
    cp ${0} ${LOG_DIR}
fi

CHECKPOINT_PATH="${LOG_DIR}/checkpoint"
DATA_PATH="/mnt/alpaca_text_document"
TOKENIZER_MODEL="/mnt/tokenziers/Qwen3"

export NCCL_DEBUG=WARN
export NCCL_DEBUG_SUBSYS=INIT
export NCCL_NVLS_ENABLE="0"
export NCCL_CUMEM_ENABLE="0"
export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"
export NVTE_DEBUG=1
export NVTE_DEBUG_LEVEL=2


DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node-rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

MODEL_ARGS=(
    --use-mcore-models
    --seq-length 4096
    --num-layers 48
    --hidden-size 2048
    --ffn-hidden-size 6144
    --num-attention-heads 32
    --kv-channels 128
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --normalization RMSNorm
    --qk-layernorm
    --position-embedding-type rope
    --swiglu
    --untie-embeddings-and-output-weights