python -m torch.distributed.run $DISTRIBUTED_ARGS \
  training.py \
  --calculate-per-token-loss --micro-batch-size 1 --global-batch-size 8 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \
  --context-parallel-size 2 --position-embedding-type rope --rotary-base 500000 \
  --encoder-seq-length 8192 --max-position-embeddings 8192 --num-layers 8 \
  --hidden-size 1280 --ffn-hidden-size 5120 --num-attention-heads 40 --num-query-groups 8 \
  --sequence-parallel --qk-layernorm --num-experts 2 --moe-layer-freq 2 \
  --expert-model-parallel-size 2 --moe-grouped-gemm --moe-router-load-balancing-type aux_loss \
  --moe-aux-loss-coeff 1e-2 --moe-z-loss-coeff 1e-3 --moe-router-topk 1 \
  --moe-router-pre-softmax --moe-token-dispatcher-type alltoall \
  --moe-expert-capacity-factor 1.25 --moe-pad-expert-input-to-capacity \
  --moe-per-layer-logging --bf16 --mock-data \
  --tokenizer-type Simple --tokenizer-model t5-small \
  --lr 3e-4 --disable-bias-linear --weight-decay 0.1 \
  --train-iters 100 --no-bias-swiglu-fusion --no-bias-dropout-fusion \
  --disable-deallocate-input-tensors \
  --enable-cuda-graph
