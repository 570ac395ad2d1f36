#!/bin/bash

# Runs the "345M" parameter model

export CUDA_DEVICE_MAX_CONNECTIONS=1


GPUS_PER_NODE=1
# Change for multinode config
MASTER_ADDR=10.0.0.7
MASTER_PORT=6000
NNODES=4
NODE_RANK=0

CHECKPOINT_PATH=checkpoints/gpt2
VOCAB_FILE=../data/gpt2-vocab.json
MERGE_FILE=../data/gpt2-merges.txt
DATA_PATH=../data/meg-gpt2_text_document

GPT_ARGS="
    --use-mcore-models
    --disable-bias-linear
    --num-layers 12 \
    --hidden-size 1024 \
    --num-attention-heads 8 \
    --seq-length 1024 \
    --max-position-embeddings 1024 \
    --micro-batch-size 1  \
    --global-batch-size 8 \
    --lr 0.00015 \
    --train-iters 500000 \
    --lr-decay-iters 320000 \
    --lr-decay-style cosine \
    --min-lr 1.0e-5 \
    --weight-decay 1e-2 \
    --lr-warmup-fraction .01 \
    --clip-grad 1.0 \
    --bf16
"

MOE_ARGS="
    --num-experts 8  \
    --moe-router-topk 2  \
    --moe-router-load-balancing-type aux_loss  \
