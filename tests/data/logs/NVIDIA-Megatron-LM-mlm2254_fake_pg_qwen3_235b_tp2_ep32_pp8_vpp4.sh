export MEGATRON_PATH=.
export PYTHONPATH=$MEGATRON_PATH
export CUDA_DEVICE_MAX_CONNECTIONS=1

TP=${TP:-2}
EP=${EP:-32}
PP=${PP:-8}
VPP=${VPP:-4}
MBS=${MBS:-1}
GBS=${GBS:-2048}

export WORLD_SIZE=256
export RANK=0

python $MEGATRON_PATH/pretrain_gpt.py \
    --distributed-timeout-minutes 60 \
    --tensor-model-parallel-size $TP \
    --pipeline-model-parallel-size $PP \
    --expert-model-parallel-size $EP \
    --num-virtual-stages-per-pipeline-rank $VPP \
    --context-parallel-size 1 \
    --expert-tensor-parallel-size 1 \
    --use-distributed-optimizer \
    --no-create-attention-mask-in-dataloader \
    --use-mcore-models \
    --sequence-parallel \
    --use-flash-attn \
    --disable-bias-linear \
    --micro-batch-size $MBS \
    --global-batch-size $GBS \
    --train-samples 32768 \
    --transformer-impl transformer_engine \
    --data-cache-path /tmp/data-cache \
    --mock-data \
    --tokenizer-type NullTokenizer \
    --vocab-size 32000 \
    --split 99,1,0 \
    --no-mmap-bin-files \
    --num-workers 6 \
    --untie-embeddings-and-output-weights \
    --position-embedding-type rope \
    --rotary-percent 1.0 \
    --rotary-base 1000000 \
    --rotary-seq-len-interpolation-factor 1 \
    --normalization RMSNorm \
    --swiglu \
    --norm-epsilon 1e-06 \
    --num-layers 94 \
    --hidden-size 4096 \
    --ffn-h
