#!/bin/bash
set -e
set -p
set -x
unset http_proxy
unset https_proxy
# will prevent ray from buffering stdout/stderr
export PYTHONBUFFERED=16

NVLINK_COUNT=$(nvidia-smi | grep -o "NVLink" | wc -l)
if [ "$NVLINK_COUNT" -gt 0 ]; then
    HAS_NVLINK=1
else
    HAS_NVLINK=0
fi
echo "HAS_NVLINK: $HAS_NVLINK (detected $NVLINK_COUNT NVLink references)"

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"

echo "SCRIPT_DIR: $SCRIPT_DIR"

# unset proxy to avoid issues
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY

source "/root/slime/scripts/models/qwen3.5-35B-A3B.sh"

hf_model_path="Qwen/Qwen3.5-35B-A3B"
CKPT_ARGS=(
   --hf-checkpoint $hf_model_path
   --ref-load Qwen3.5-35B-A3B-dist 
   --load checkpoint_slime/Qwen_35_2026
   --save checkpoint_slime/Qwen_35_2026
   --save-interval 100
)

ROLLOUT_ARGS=(
   --prompt-data ${SCRIPT_DIR}/dapo-math-17k/dapo-math-17k.jsonl
   --input-key prompt
   --label-key reward_model
   --apply-chat-template
   --rollout-shuffle
   --num-rollout 5000
   --rollout-batch-size 128
   #--over-sampling-batch-size 192
   --n-samples-per-prompt 8
   --rollout-max-response-len 5200
   --rollout-max-prompt-len 10000
   --rollout-temperature 1

   --global-batch-size 256
   --balance-data
)

EVAL_ARGS=(
   --eval-interval 20
   --eval-prompt-data \
