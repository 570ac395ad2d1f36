#!/bin/bash

export CUDA_DEVICE_MAX_CONNECTIONS=1

DISTRIBUTED_ARGS=(
    --nproc_per_node 4 
    --nnodes 1 
    --master_addr localhost 
    --master_port 6000
)

GPT_MODEL_ARGS=(
    --transformer-impl transformer_engine
    --normalization RMSNorm
    --num-layers 24 
    --hidden-size 128 
    --num-attention-heads 16 
    --seq-length 131072 
    --max-position-embeddings 131072 
    --position-embedding-type rope
    --rotary-percent 1.0
    --rotary-base 1000000
    --swiglu
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --train-iters 128 
    --weight-decay 0.1 
    --adam-beta1 0.9 
    --adam-beta2 0.95 
    --init-method-std 0.006 
    --clip-grad 1.0 
    --bf16
    --lr 0.00015 
    --lr-decay-style cosine 
    --min-lr 6.0e-6
    --lr-warmup-fraction .001 
    --lr-decay-iters 128
    --use-flash-attn
    --attention-dropout 0.1
    --use-distributed-optimize
