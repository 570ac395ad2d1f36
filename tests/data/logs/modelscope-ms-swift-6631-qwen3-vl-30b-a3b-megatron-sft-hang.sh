export MODELSCOPE_CACHE='/model/shared'
export MEGATRON_LM_PATH='./swift/Megatron-LM'
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
NPROC_PER_NODE=8 \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
IMAGE_MAX_TOKEN_NUM=1280 \
VIDEO_MAX_TOKEN_NUM=128 \
FPS_MAX_FRAMES=16 \
megatron sft \
    --load ./Qwen3-VL-30B-A3B-Instruct-mcore \
    --dataset test_5w.jsonl \
    --train_type full \
    --load_from_cache_file true \
    --split_dataset_ratio 0.01 \
    --moe_permute_fusion true \
    --tensor_model_parallel_size 2 \
    --expert_model_parallel_size 8 \
    --sequence_parallel true \
    --freeze_vit false \
    --freeze_aligner false  \
    --moe_grouped_gemm true \
    --moe_shared_expert_overlap true \
    --moe_aux_loss_coeff 1e-6 \
    --micro_batch_size 4 \
    --global_batch_size  96 \
    --recompute_granularity full \
    --recompute_method uniform \
    --recompute_num_layers 1 \
    --max_epochs 6 \
    --finetune true \
    --cross_entropy_loss_fusion true \
    --lr 1e-5 \
    --lr_warmup_fraction 0.05 \
    --min_lr 1e-6 \
    --save ./megatron_output/Qwen3-VL-30B-A3B-Instruct \
    --eval_interval 800 \
    --save_interval 1621 \
    --max_length 4096 \
    --packing true \
    --num_workers 48 \
    --dataset_num_proc 48 \
    --no_save_optim true \
    --no_save_rng true \
    --moe_expert_capacity_factor 1 \
    --optimizer_cpu_offload true \
    --
