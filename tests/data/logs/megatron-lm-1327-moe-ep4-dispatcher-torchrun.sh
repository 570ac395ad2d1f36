export CUDA_DEVICE_MAX_CONNECTIONS=1

MASTER_ADDR=localhost
MASTER_PORT=6648
WORLD_SIZE=1
RANK=0
NPROC_PER_NODE=4

export CUDA_DEVICE_MAX_CONNECTIONS=1

DATA_PATH=/mnt/gpt_data

DISTRIBUTED_ARGS="--nproc_per_node $NPROC_PER_NODE --nnodes $WORLD_SIZE --node_rank $RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"

torchrun $DISTRIBUTED_ARGS \
       pretrain_gpt.py \
       --num-experts 8 \
       --expert-model-parallel-size 4 \
       --optimizer adam \
       --distributed-backend nccl \
       --moe-token-dispatcher-type alltoall \
       --num-layers 12 \
       --hidden-size 256 \
       --num-attention-heads 32 \
       --swiglu \
       --ffn-hidden-size 512 \
       --disable-bias-linear \
       --attention-dropout 0 \
       --hidden-dropout 0 \
       --normalization RMSNorm \
       --untie-embeddings-and-output-weights \
       --use-rotary-position-embeddings \
       --no-position-embedding \
       --no-masked-softmax-fusion \
       --micro-batch-size 1 \
       --global-batch-size 4 \
       --seq-length 2048 \
       --m
