PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
IMAGE_MAX_TOKEN_NUM=640 \
NPROC_PER_NODE=8 \
NNODES=$NNODES \
MASTER_ADDR=$MASTER_ADDR \
MASTER_PORT=$MASTER_PORT \
NODE_RANK=$NODE_RANK \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
megatron sft \
    --model_type qwen3_5 \
    --model ${AgentModels}/Qwen/Qwen3.5-27B \
    --pipeline_model_parallel_size 2 \
    --add_non_thinking_prefix true \
    --loss_scale ignore_empty_think \
    --dataset $proc_train_jsonl \
    --load_from_cache_file true \
    --template qwen3_5_vl_agent_sft \
    --tensor_model_parallel_size 4 \
    --sequence_parallel true \
    --packing true \
    --freeze_llm false \
    --freeze_vit false \
    --freeze_aligner false \
    --split_dataset_ratio 0.0 \
    --micro_batch_size 1 \
    --global_batch_size 128 \
    --finetune true \
    --cross_entropy_loss_fusion true \
    --lr 1e-5 \
    --lr_warmup_fraction 0.05 \
    --min_lr 1e-6 \
    --num_train_epochs ${num_train_epochs} \
    --output_dir ${OUTPUT_DIR} \
    --save_steps 50 \
    --max_length 30000 \
    --dataloader_num_workers 8 \
    --no_save_optim true \
    --no_save_rng true \
    --dataset_num_pr
