deepspeedai/Megatron-DeepSpeed · issue #456 · closed · Python
# [BUG] AttributeError: 'list' object has no attribute 'to'

[turn 3 by 9LLPPLL6, continued]
```
#!/bin/bash
# This example script is contributed by external user https://github.com/LydiaXiaohongLi
set -ex

######################################
# Change the below configurations here
BASE_PATH=/mnt/Megatron-DeepSpeed/Models/llama
DS_CONFIG=${BASE_PATH}/deepspeed.json
DATASET_1="/mnt/Megatron-DeepSpeed/Models/gpt-2/data/meg-gpt2_text_document"
DATASET="1 ${DATASET_1}"
CHECKPOINT_PATH=${BASE_PATH}/checkpoint
TOKENIZER_PATH=${BASE_PATH}/tokenizer1.model # offical llama tokenizer.model
# TOKENIZER_PATH=bofenghuang/Meta-Llama-3-8B # offical llama tokenizer.model
  
TP=1
PP=2
ZERO_STAGE=0

GPUS_PER_NODE=4
MASTER_ADDR=localhost
MASTER_PORT=6000
NNODES=1
NODE_RANK=0

HIDDEN_SIZE=2048 # e.g. llama-13b: 5120
FFN_HIDDEN_SIZE=5504 # e.g. llama-13b: 13824
NUM_LAYERS=24 # e.g. llama-13b: 40
NUM_HEADS=16 # e.g. llama-13b: 40
SEQ_LENGTH=2048

MICRO_BATCH_SIZE=4
GLOBAL_BATCH_SIZE=32 # e.g. llama: 4M tokens
TRAIN_STEPS=500 # e.g. llama: 1T tokens / 4M tokens_per_batch = 250000 steps
LR=3e-4
MIN_LR=3e-5
LR_WARMUP_STEPS=2000
WEIGHT_DECAY=0.1
GRAD_CLIP=1

## Activation checkpointing saves GPU memory, but reduces training speed
# activation_checkpoint="true"
activation_checkpoint="false"

# Below configuration required for llama model as per llama paper
# --no-query-key-layer-scaling \
# --attention-dropout 0 \
# --hidden-dropout 0 \
#
