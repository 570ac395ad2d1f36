Hi slime maintainers. I am running slime v0.1.0 for a stable version and encountering the same error multiple times.

Launch script:

```
#!/bin/bash

set -e

# will prevent ray from buffering stdout/stderr
export PYTHONBUFFERED=16

NVLINK_COUNT=$(nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9][0-9]*' | wc -l)
if [ "$NVLINK_COUNT" -gt 0 ]; then
    HAS_NVLINK=1
else
    HAS_NVLINK=0
fi
echo "HAS_NVLINK: $HAS_NVLINK (detected $NVLINK_COUNT NVLink references)"
source "scripts/slime_models/Qwen3-235B-A22B-Thinking-2507_model_args.sh"

CKPT_ARGS=(
   --hf-checkpoint $SHARED_STORAGE_DATA/hf_models/Qwen3-235B-A22B-Thinking-2507
   --ref-load $SHARED_STORAGE_DATA/megatron_models/Qwen3-235B-A22B-Thinking-2507
   --load $SHARED_STORAGE_DATA/slime-ckpt/Qwen3-235B-A22B-Thinking-2507_slime_v1.5/
   --save $SHARED_STORAGE_DATA/slime-ckpt/Qwen3-235B-A22B-Thinking-2507_slime_v1.5/
   --save-interval 20
)

NODES=$TOTAL_NODES
PROMPT_LEN=4096
RESPONSE_LEN=$((65536 - PROMPT_LEN))
CONTEXT_LEN=$((PROMPT_LEN + RESPONSE_LEN))
GLOBAL_BATCH_SIZE=$((NODES * 64))
ROLLOUT_BATCH_SIZE=$((NODES * 8))
