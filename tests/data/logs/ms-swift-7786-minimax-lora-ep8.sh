export PATH=$PATH:/home/aiscuser/.local/bin
export MODELSCOPE_CACHE=/tmp/modelscope_cache
export MEGATRON_LM_PATH=/tmp/Megatron-LM

export JOB_NAME=minimax_sft
export MODEL_NAME=MiniMaxAI/MiniMax-M2.1
export SAVE_PATH=/mnt/user/models/mg-exps/${JOB_NAME}
mkdir -p ${SAVE_PATH}

NPROC_PER_NODE=8 \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
megatron sft \
    --model ${MODEL_NAME} \
    --dataset 'liucong/Chinese-DeepSeek-R1-Distill-data-110k-SFT' \
    --load_safetensors true \
    --save_safetensors true \
    --merge_lora false \
    --load_from_cache_file true \
    --train_type lora \
    --lora_rank 8 \
    --lora_alpha 32 \
    --target_modules all-linear \
    --split_dataset_ratio 0.01 \
    --tensor_model_parallel_size 4 \
    --expert_tensor_parallel_size 1 \
    --expert_model_parallel_size 8 \
    --moe_permute_fusion true \
    --moe_grouped_gemm true \
    --moe_shared_expert_overlap true \
    --moe_aux_loss_coeff 1e-3 \
    --micro_batch_size 1 \
    --global_batch_size 128 \
    --recompute_granularity full \
    --recompute_method uniform \
    --recompute_num_layers 1 \
    --max_epochs 1 \
    --finetune true \
    --cross_entropy_loss_fusion true \
    --lr 1e-4 \
    --lr_warmup_fraction 0.05 \
