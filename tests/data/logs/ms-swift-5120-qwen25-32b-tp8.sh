NNODES=$NNODES \
NPROC_PER_NODE=8 \
NODE_RANK=$NODE_RANK \
megatron sft \
    --load Qwen2.5-32B-Base-mcore \
    --dataset '/hpc_stor01/home/lei/workspace/swift/data/Thinker4.3.7.jsonl' \
    --loss_scale ignore_empty_think \
    --tensor_model_parallel_size 8 \
    --sequence_parallel true \
    --micro_batch_size 1 \
    --global_batch_size 128 \
    --packing true \
    --recompute_granularity full \
    --recompute_method uniform \
    --recompute_num_layers 1 \
    --max_epochs 3 \
