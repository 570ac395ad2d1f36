基于swift:3.11.1对Qwen3-Next-80B-A3B进行全参数量训练。
4台A800 80G，共32卡训练。训练脚本如下：
megatron sft \
    --model  Qwen/Qwen3-Next-80B-A3B-Thinking \
    --load_safetensors true \
    --save_safetensors true \
    --dataset 'XXXXX' \
    --loss_scale ignore_empty_think \
    --tensor_model_parallel_size 1 \
    --pipeline_model_parallel_size 8 \
    --expert_model_parallel_size 4 \
    --sequence_parallel true \
    --micro_batch_size 1 \
    --global_batch_size 64 \
    --moe_aux_loss_coeff 0.01 \
    --moe_grouped_gemm true \
    --moe_shared_expert_overlap true \
    --recompute_granularity full \
    --recompute_method uniform \
    --recompute_num_layers 1 \
    --max_epochs 3 \
    --finetune true \
    --cross_entropy_loss_fusion true \
    --lr 1e-4 \
    --min_lr 1e-10 \
    --save megatron_output/XXXXX \
    --save_interval 1500 \
    --max_length 10240 \
    --num_workers 128 \
    --dataset_num_proc 128 \
    --no_save_optim true \
    --no_save_rng true \
    --sequence_parallel true \
    --use_flash_attn true \
    --packing true \
    --log_interval 1 \
    --moe_expert_capacity_factor 1
训练了2次，都会在相同的1817个step卡住，表现为logging.json已经不更新了，但显卡占用和进程依旧存在，且观察tmux端没有异常。
