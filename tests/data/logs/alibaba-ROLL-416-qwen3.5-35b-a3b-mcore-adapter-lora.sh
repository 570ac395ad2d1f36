training_scripts:

WORLD_SIZE=4
TENSOR_MODEL_PARALLEL_SIZE=1
EXPERT_MODEL_PARALLEL_SIZE=4
PIPELINE_MODEL_PARALLEL_SIZE=1

MODEL_NAME="/workspace/mount/b100_zaip_data/10305/Models/Qwen/Qwen3.5-35B-A3B"

export DISABLE_VERSION_CHECK=1

USE_MCA=true

mca_options=" \
       --tensor_model_parallel_size ${TENSOR_MODEL_PARALLEL_SIZE} \
       --sequence_parallel \
       --pipeline_model_parallel_size ${PIPELINE_MODEL_PARALLEL_SIZE} \
       --expert_model_parallel_size ${EXPERT_MODEL_PARALLEL_SIZE} \
       --use_distributed_optimizer \
       --bias_activation_fusion \
       --apply_rope_fusion \
       --overlap_param_gather \
       --overlap_grad_reduce \
       --moe_grouped_gemm true\
       --moe_token_dispatcher_type alltoall"

       # --moe_shared_expert_overlap \
       # --transformer_impl transformer_engine \
llama_factory_options=" \
       --deepspeed=./config/ds_zero2.json"

options=" \
       --do_train \
       --stage=sft \
       --finetuning_type=lora \
       --lora_rank 64 \
       --dataset_dir=./mcore_adapter/examples/data \
       --dataset=tulu-if-3w-alc \
       --preprocessing_num_workers=8 \
       --cutoff_len=2048 \
       --template=qwen3 \
       --model_name_or_path=$MODEL_NAME \
       --output_dir=/workspace/mount/b100_zaip_data/10305001/output4 \
