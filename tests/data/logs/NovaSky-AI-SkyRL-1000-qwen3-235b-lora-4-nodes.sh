Adds example script for Qwen3-235-A3B-Instruct-2507 DAPO training with the Megatron backend + LoRA. Mean @ 32 increases from ~60% -> 67.5%.

skyrl-train/examples/megatron/run_megatron_dapo_qwen3_235b_a22b_lora.sh
```diff
+NUM_NODES=4
+NUM_GPUS=8
+
+### Megatron configuration
+# the max TP that can be used is 4, since Qwen3-235B-A22B uses Grouped Query Attention with 4 groups
+MEGATRON_TP=4
+MEGATRON_PP=4
+MEGATRON_CP=1
+MEGATRON_EP=8
+MEGATRON_ETP=1
+# Qwen3-235B-A22B has 94 blocks, so we need to set the last pipeline stage layer to use 4 blocks
+MEGATRON_LAST_PIPELINE_STAGE_LAYER=16
```
