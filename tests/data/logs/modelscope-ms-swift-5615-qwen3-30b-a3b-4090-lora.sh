modelscope/ms-swift · issue #5615 · open · Python
# 请问megatron swift可以在4090上做 Qwen3-30B-A3B-Instruct-2507 的lora sft微调么

zouweidong91 · description · 2025-09-01
在4卡4090使用deepspeed zero3 可以在llamafactiry上正常微调Qwen3-30B-A3B-Instruct-2507，就是速度非常慢，要20个小时。 刚开始使用你们的megatron-swift，但是一直报OOM，没法拉起来。请问是否支持megatron训练时deepseppd的内存优化功能？
以下是我的训练配置：
```sh
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
NPROC_PER_NODE=4 \
CUDA_VISIBLE_DEVICES=4,5,6,7 \
megatron sft \
    --load /app/Qwen3-30B-A3B-Instruct-2507-mcore \
    --dataset 'src/model/train_data/data/train_data_ms.jsonl' \
    --loss_scale ignore_empty_think \
    --train_type lora \
    --lora_rank 8 \
    --lora_alpha 32 \
    --target_modules all-linear \
    --split_dataset_ratio 0.01 \
    --expert_model_parallel_size 2 \
    --moe_permute_fusion true \
    --moe_grouped_gemm true \
    --moe_shared_expert_overlap true \
    --moe_aux_loss_coeff 1e-3 \
    --micro_batch_size 1 \
    --global_batch_size 16 \
    --recompute_granularity full \
    --recompute_method uniform \
    --recompute_num_layers 1 \
    --max_epochs 3 \
    --finetune true \
    --cross_entropy_loss_fusion true \
    --lr 1e-4 \
    --lr_warmup_fraction 0.05 \
    --min_lr 1e-5 \
    --save src/model/saves_megatron/Qwen3-30B \
    --eval_interval 200 \
    --save_interval 200 \
    --max_length 3000 \
    --num_workers 8 \
    --dataset_num_proc 8 \
    --no_save_optim true \
    --no_save_rng true \
    --sequence_parallel true \
    --attention_backend f
