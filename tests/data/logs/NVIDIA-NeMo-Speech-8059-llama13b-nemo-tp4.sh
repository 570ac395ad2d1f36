**Describe the bug**
Refer to this blog, training LLaMA 13B with NeMo 23.08 could achieve 2357 Tokens/s/GPU
![image](https://github.com/NVIDIA/NeMo/assets/73142299/da55a7eb-0992-440c-9c32-4aba21150d99)

Yet, I can only achieve under 1900 Tokens/s/GPU
![image](https://github.com/NVIDIA/NeMo/assets/73142299/4f5a5626-2e8b-42aa-a4f3-f14ba4973d20)

**Steps/Code to reproduce bug**
I'm running on nvcr.io/nvidia/nemo:23.08 with 8xA100
Here is my launching script
```
INDEX_MAPPING_DIR=""
DATA_PREFIX=""
TOKENIZER_DIR=""
TP_SIZE=4
PP_SIZE=1

torchrun --nproc_per_node=8 \
/workspace/nemo/examples/nlp/language_modeling/megatron_llama_pretraining.py \
   trainer.precision=bf16 \
   trainer.devices=8 \
   trainer.num_nodes=1 \
   model.num_layers=40 \
   model.hidden_size=5120 \
   model.ffn_hidden_size=13824 \
   model.num_attention_heads=40 \
   model.num_query_groups=40 \
   model.micro_batch_size=1 \
   model.global_batch_size=32 \
   model.tensor_model_parallel_size=${TP_SIZE} \
   model.pipeline_model_parallel_size=${PP_SIZE} \
   model.megatron_amp_O2=False \
   model.sequence_parallel=True \
   model.activations_checkpoint_granularity=selective \
   model.activations_checkpoint_method=uniform \
   model.optim.name=distributed_fused_adam \
   model.optim.lr=2e-4 \
   model.tokenizer.model=${TOKENIZER_DIR} \
