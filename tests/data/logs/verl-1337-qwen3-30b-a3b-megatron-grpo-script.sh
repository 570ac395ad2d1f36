HF_MODEL_PATH='Your hf ckpt path'
DIST_CKPT_PATH='Your mcore dist ckpt path'

# convert ckpt from hf to mcore
python3 scripts/converter_hf_to_mcore.py --hf_model_path $HF_MODEL_PATH --output_path $DIST_CKPT_PATH

train_files=$HOME/data/gsm8k/train.parquet
test_files=$HOME/verl/data/gsm8k/test.parquet

NODES=2
N_PER_NODE=8
PP=4
TP=4
CP=1
VLLM_TP=4

python3 -m verl.trainer.main_ppo --config-path=./config --config-name='ppo_megatron_trainer'\
        algorithm.adv_estimator=grpo \
        data.train_files="$train_files" \
        data.val_files="$test_files" \
        data.train_batch_size=16 \
        data.max_prompt_length=1024 \
        data.max_response_length=2048 \
        data.filter_overlong_prompts=True \
        data.truncation='error' \
        data.shuffle=False \
        actor_rollout_ref.model.path=$HF_MODEL_PATH \
        actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.actor.ppo_mini_batch_size=8 \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
