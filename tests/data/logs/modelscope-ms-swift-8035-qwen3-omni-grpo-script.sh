运行脚本
```
#!/bin/bash
export MEGATRON_LM_PATH='./Megatron-LM'
export HF_ENDPOINT=https://hf-mirror.com
export NPROC_PER_NODE=8
export IMAGE_MAX_TOKEN_NUM=49
export IMAGE_MIN_TOKEN_NUM=49
export LOG_LEVEL="ERROR"
# export NCCL_P2P_DISABLE=1
# export NCCL_SHM_DISABLE=1
# export VLLM_ATTENTION_BACKEND=TORCH_SDPA


# ===== 多个 JSON 路径列表 =====
DATASETS=(
)

# SAMPLING_RATE: 默认为16000。

LOGDIR
LOGFILE

# USE_FLASH_ATTENTION=0 \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
NPROC_PER_NODE=8 \
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
megatron rlhf \
  --rlhf_type grpo \
  --model Qwen/Qwen3-Omni-30B-A3B-Instruct \
  --model_type qwen3_omni \
  --save ./grpo \
  --add_version false \
  --load_safetensors true \
  --save_safetensors true \
  --context_parallel_size 1 \
  --tensor_model_parallel_size 1 \
  --expert_model_parallel_size 1 \
  --pipeline_model_parallel_size 1 \
  --dataset xxx.json \
  --max_epochs 1 \
  --global_batch_size 64 \
  --micro_batch_size 1 \
  --steps_per_generation 1 \
  --num_generations 8 \
