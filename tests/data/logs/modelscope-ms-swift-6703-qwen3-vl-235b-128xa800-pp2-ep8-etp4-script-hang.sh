3.10.1megatron-swift官方镜像 
16*8 块80G A800 进行Qwen3-VL-235B-A22B SFT全参数微调开始训练两个step后卡住不动
脚本参数:
PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True' \
OMP_NUM_THREADS=14 \
NPROC_PER_NODE=8 \
NNODES=$NNODES \
MASTER_ADDR=$MASTER_ADDR \
MASTER_PORT=$MASTER_PORT \
NODE_RANK=$NODE_RANK \
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \
megatron_sft \
--load_safetensors true \
--model /xxx/Qwen3-VL-235B-A22B-Instruct \
--dataset /xxxx/dataset/sft_80w.jsonl \
--train_type full \
--split_dataset_ratio 0 \
--moe_permute_fusion true \
--tensor_model_parallel_size 1 \
--expert_tensor_parallel_size 4 \
--expert_model_parallel_size 8 \
--pipeline_model_parallel_size 2 \
--moe_grouped_gemm true \
--moe_shared_expert_overlap true \
--moe_aux_loss_coeff 1e-6 \
--micro_batch_size 1 \
--global_batch_size 64 \
--recompute_granularity full \
--recompute_method uniform \
--recompute_num_layers 1 \
--max_epochs 1 \
--finetune true \
--cross_entropy_loss_fusion true \
--lr 1e-5 \
--save /xxxx/Qwen3VL_235B_pt300w_mcore \
--log_interval 1 \
--save_interval 500 \
--num_workers 2 \
--dataset_num_proc 2 \
--no_save_optim true \
--no_save_rng true \
--sequence_parallel true \
--moe_expert_capacity_factor 2 \
--use_precision_aware_optimizer true \
--attention_backend flash \
--optimizer_cpu_offload false \
--dataset_shuffle false \
--max_new_tokens 4096 \
