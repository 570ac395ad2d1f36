TP=1
PP=1
 
GPUS_PER_NODE=8
NODE_RANK=$RANK
export LOCAL_RANK=$RANK
NNODES=${WORLD_SIZE}
 
#export NCCL_SOCKET_IFNAME=eth,en,em,bond
export NCCL_SOCKET_IFNAME=bond1
export TORCH_DISTRIBUTED_DEBUG=OFF #INFO
export NCCL_DEBUG=
export CUDA_LAUNCH_BLOCKING=1
export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:32
export OMP_NUM_THREADS=20
export NCCL_IB_GID_INDEX=3
export NCCL_ASYNC_ERROR_HANDLING=1
export CUDA_DEVICE_MAX_CONNECTIONS=1
 
# 7 B
HIDDEN_SIZE=4096 # e.g. llama-13b: 5120
FFN_HIDDEN_SIZE=11008 # e.g. llama-13b: 13824
NUM_LAYERS=32 # e.g. llama-13b: 40
NUM_HEADS=32 # e.g. llama-13b: 40
SEQ_LENGTH=64
NUM_KV_HEADS=32 # llama2 70B uses GQA
 
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=8 
TRAIN_STEPS=2 
LR=3e-4
MIN_LR=3e-5
LR_WARMUP_STEPS=1
WEIGHT_DECAY=0.1
GRAD_CLIP=1

torchrun $DISTRIBUTED_ARGS \
       ${CODE_PATH}/pretrain_gpt.py \
       --tensor-model-parallel-size $TP \
       --pipeline-model-parallel-size $PP \
       --num-layers $NUM_LAYERS \
