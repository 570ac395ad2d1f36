# thinking -> non-thinking
# 4 * 95GiB
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
NPROC_PER_NODE=4 \
CUDA_VISIBLE_DEVICES=0,1,2,3 \
megatron sft \
    --load GLM-4.5-Air-mcore \
    --dataset 'swift/Chinese-Qwen3-235B-2507-Distill-data-110k-SFT' \
    --train_type lora \
    --lora_rank 32 \
    --lora_alpha 64 \
