adv_estimator=gae

use_kl_in_reward=False
kl_coef=0.0
use_kl_loss=False
kl_loss_coef=0.0

clip_ratio_low=0.2
clip_ratio_high=0.28

max_prompt_length=$((1024 * 2))
max_response_length=$((1024 * 20))
enable_overlong_buffer=True
overlong_buffer_len=$((1024 * 4))
overlong_penalty_factor=1.0

loss_agg_mode="token-mean"

train_prompt_bsz=512
n_resp_per_prompt=16
train_prompt_mini_bsz=512

# Ray
RAY_ADDRESS=${RAY_ADDRESS:-"http://10.79.130.205:8265"}
WORKING_DIR=${WORKING_DIR:-"${PWD}"}
RUNTIME_ENV=${RUNTIME_ENV:-"${WORKING_DIR}/verl/trainer/runtime_env.yaml"}
NNODES=${NNODES:-2}
# Paths
# RAY_DATA_HOME=${RAY_DATA_HOME:-"${HOME}/verl"}
MODEL_PATH=${MODEL_PATH:-"/wh-test/lishuliang/models/Qwen/Qwen2.5-32B"}
CKPTS_DIR=${CKPTS_DIR:-"/wh-test/zzy/checkpoints/${project_name}/${exp_name}"}
TRAIN_FILE=${TRAIN_FILE:-"/wh-test/workspace/lishuailong/dataset/dapo-math-17k.parquet"}
TEST_FILE=${TEST_FILE:-"/wh-test/workspace/lishuailong/dataset/aime-2024.parquet"}
CRITIC_MODEL_PATH=${CRITIC_MODEL_PATH:-"/wh-test/lishuliang/models/Qwen/Qwen2.5-32B"}
ROLLOUT_DATA_PATH=${ROLLOUT_DATA_PATH:-"/wh-test/zzy/rollout_data/${exp_name}"}
# Algorithm
temperature=1.0
top_p=1.0
top_k=-1 # 0 for HF rollout, -1 for vLLM rollout
val_top_p=0.7

# Performance Related Parameter
actor_tp=8
actor_pp=2
use_dynamic_bsz=True
actor_ppo_max_token_len=$((max_prompt_length + max_response_length))
infer_ppo_max
