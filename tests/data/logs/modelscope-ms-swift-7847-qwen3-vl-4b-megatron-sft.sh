PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
NPROC_PER_NODE=8 \
MAX_PIXELS=1638400 \
MIN_PIXELS=784 \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
megatron sft \
    --model  ./Qwen3-VL-4B-Instruct/ \
    --load_safetensors true \
    --save_safetensors true \
    --dataset './5w.json' \
    --load_from_cache_file false \
    --pipeline_model_parallel_size 1 \
    --tensor_model_parallel_size 1 \
    --sequence_parallel false \
    --context_parallel_size 1 \
    --packing false \
    --bf16 True \
    --freeze_vit true \
    --freeze_llm false \
    --freeze_aligner false \
    --micro_batch_size 1 \
    --global_batch_size 8 \
    --finetune false \
    --cross_entropy_loss_fusion false \
    --lr 1e-5 \
    --lr_decay_style "cosine" \
    --lr_warmup_fraction 0.05 \
    --weight_decay 0 \
    --max_epochs 1 \
    --save megatron_output/Qwen3-VL-4B-finetune_align \
    --save_interval 1000 \
    --vit_gradient_checkpointing false \
    --max_length 8192 \
    --num_workers 4 \
