verl-project/verl · issue #4460 · open · Python
labels: bug
# why time cost of update_actor increasing with steps

QWE-CXZ · description · 2025-12-09
### System Info

**### response length and timing_s/update_actor**
<img width="964" height="814" alt="Image" src="https://github.com/user-attachments/assets/f7874c1a-ff69-4a4c-9b56-3d5675cd12c5" />

<img width="948" height="758" alt="Image" src="https://github.com/user-attachments/assets/42a9e8a4-f7a4-45f8-a501-f732466eda8a" />

### Information

- [ ] The official example scripts
- [ ] My own modified scripts

### Tasks

- [ ] An officially supported task in the `examples` folder (such as GLUE/SQuAD, ...)
- [ ] My own task or dataset (give details below)

### Reproduction

**### main setting**
NNODES=2

export RAY_ENABLE_REDIS=0
export RAY_DISABLE_LEGACY_REDIS=1
export NUMEXPR_MAX_THREADS=48

export CUDA_DEVICE_MAX_CONNECTIONS=1   # For megatron communication/computation overlapping
export HYDRA_FULL_ERROR=1
export NCCL_PROTO="simple"
export NCCL_DEBUG=TRACE
export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256

RUN_NAME=moe_gspo_20251128
exp_name=$RUN_NAME
project_name=MOE_RL

adv_estimator=grpo
policy_loss_mode="gspo"

kl_coef=0.0
use_kl_in_reward=False
use_kl_loss=True
kl_loss_coef=0.1

clip_ratio_low=0.2
clip_ratio_high=0.2
clip_ratio_c=3.0

train_prompt_bsz=128
n_resp_per_prompt=8 

RUNTIME_ENV=${RUNTIME_ENV:-"${WORKING_DIR}/verl/trainer/runtime_env.yaml"}

use_dist_checkpointing=True
pipeline_model_parallel_size=1
tensor_mo
