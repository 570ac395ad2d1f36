`CUDA_VISIBLE_DEVICES=0,1,2,3 \
NPROC_PER_NODE=$MLP_WORKER_GPU \
NNODES=1 \
NODE_RANK=$MLP_ROLE_INDEX \
MASTER_ADDR=$MLP_WORKER_0_HOST \
MASTER_PORT=$MLP_WORKER_0_PORT \
megatron rlhf \
    --rlhf_type grpo \
    --model /xx \
    --dataset '/xx' \
    --model_type qwen3 \
    --load_safetensors true \
    --save_safetensors true \
    --agent_template hermes \
    --loss_scale ignore_empty_think \
    --context_parallel_size 1 \
    --tensor_model_parallel_size 4 \
    --pipeline_model_parallel_size 1 \
    --max_epochs 2 \
    --global_batch_size 256 \
    --micro_batch_size 1 \
    --steps_per_generation 1 \
    --num_generations 8 \
    --external_plugins /plugin.py \
    --reward_funcs Toolcall_reward ToolScope_reward CoT_length_reward \
    --reward_we
