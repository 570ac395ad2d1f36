# ms-swift==4.1.3
# Have tried mcore-bridge (or not) and packing (or not)
pretrain_model_path={Your_Qwen3-4B-Instruct-2507_mcore}
data_path={https://huggingface.co/datasets/FireGoWay/ToolMind_no_think}
global_batch_size=64 # n_gpu(8) * bs_per_device(4) * nnodes(1)
megatron sft \
    --wandb_exp_name megatron_run \
    --load_from_cache_file false \
    --mcore_model $pretrain_model_path \
    --save_safetensors false \
    --finetune true --enable_dft_loss false \
    --tensor_model_parallel_size 2 \
    --sequence_parallel true \
    --use_distributed_optimizer true \
    --cross_entropy_loss_fusion true \
    --packing false \
    --dataset $data_path \
    --split_dataset_ratio 0.0 \
    --agent_template hermes \
    --torch_dtype bfloat16 \
    --num_train_epochs 1 \
    --micro_batch_size 1 \
    --global_batch_size ${global_bs} \
    --lr 5e-6 \
    --min_lr 1e-6 \
    --save_strategy epoch \
    --save_total_limit 2 \
    --logging_steps 10 \
    --max_length 20480 \
    --output_dir ./output/megatron_run --add_version false \
    --lr_warmup_fraction 0.03 \
    --no_save_optim true \
    --no_save_rng true \
    --attn_impl flash_attn \
    --dataloader_num_workers 4 \
    --dataset_num_proc 16 \
    --report_to wandb
