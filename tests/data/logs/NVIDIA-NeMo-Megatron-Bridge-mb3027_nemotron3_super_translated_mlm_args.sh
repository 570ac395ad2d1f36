# [misc] fix: preserve multi-value cuda-graph-scope in Bridge→MLM translation  (Megatron-Bridge PR, eagle705)
# Source: https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3027
```bash
# ═══════════════════════════════════════════════════════════
# Megatron-LM pretrain_gpt.py args (translated from Bridge)
# ═══════════════════════════════════════════════════════════
#
# NOTE: squared_relu: model.activation_func=squared_relu → --squared-relu
# NOTE: mixed_precision=nemotron_3_super_bf16_with_nvfp4_mixed: unknown precision mode
# NOTE: max-position-embeddings not set; defaulting to seq-length for MLM assert
#

  --use-mcore-models \
  --transformer-impl transformer_engine \
  --group-query-attention \
  --squared-relu \
  --split 9999,8,2 \
  --cuda-graph-scope attn mamba moe_router moe_preprocess \
  --cuda-graph-impl transformer_engine \
  --seq-length 8192 \
  --max-position-embeddings 8192 \
  --seed 1234 \
  --micro-batch-size 1 \
  --global-batch-size 3072 \
  --train-iters 39735 \
  --manual-gc-interval 0 \
  --tensor-model-parallel-size 4 \
  --pipeline-model-parallel-size 1 \
  --sequence-parallel \
  --context-parallel-size 1 \
  --expert-model-parallel-size 8 \
  --expert-tensor-parallel-size 1 \
  --te-rng-tracker \
  --cross-entropy-loss-fusion \
  --cross-entropy-fusion-impl native \
  --no-overlap-p2p-communication \
  --num-layers 88 \
  --mtp-num-layers 2 \
  --mtp-loss-scaling-factor 0.3 \
  --hidden-size 4096 \
  --num-attention-heads 32 \
  --attention-back
[... excerpt truncated ...]
