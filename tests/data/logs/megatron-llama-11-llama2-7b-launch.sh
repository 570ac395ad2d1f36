#!/bin/bash

DATASET_1="/xxx/Megatron-LLaMA/corpus_indexed/corpus_indexed_text_document"
DATASET_2="/xxx/Megatron-LLaMA/corpus_indexed/corpus_indexed_text_document"
DATASET_3="/xxx/Megatron-LLaMA/corpus_indexed/corpus_indexed_text_document"
DATASET="1.0 ${DATASET_1}"

TP_SIZE=2
PP_SIZE=1
WORLD_SIZE=8
MICRO_BATCH_SIZE=4
# The int is the number of micro steps of gradient accumulation
GLOBAL_BATCH_SIZE=$((($WORLD_SIZE * $MICRO_BATCH_SIZE) / ($TP_SIZE * $PP_SIZE) * 8))
# GLOBAL_BATCH_SIZE=128

JOB_NAME="LLaMA_tp${TP_SIZE}_pp${PP_SIZE}_mbs${MICRO_BATCH_SIZE}_gpus${WORLD_SIZE}"

LOAD_CHECKPOINT_PATH="/xxx/megatron-llama-2-7b-checkpoint"
SAVE_CHECKPOINT_PATH="/xxx/megatron-llama-2-7b-checkpoint"
TOKENIZER_PATH="/xxx/megatron-llama-2-7b-checkpoint"
TENSORBOARD_DIR="/xxx/Megatron-LLaMA/tensorboard_dir"

TRAIN_ITERS=4000
EVAL_ITERS=10
EVAL_INTERVAL=4000
SAVE_INTERVAL=4000
LOG_INTERVAL=1

# Setting --tensorboard-queue-size to 1 significantly slows down the training
options=" \
    --finetune \
    --sequence
