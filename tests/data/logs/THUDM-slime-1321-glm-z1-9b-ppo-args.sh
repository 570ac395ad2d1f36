CKPT_ARGS=(
   --hf-checkpoint GLM/GLM-Z1-9B-0414/
   --ref-load GLM/GLM-Z1-9B-0414_torch_dist/
   --load ckpt/GLM-Z1-9B-0414_slime/
   --save ckpt/GLM-Z1-9B-0414_slime/
   --save-interval 20
)

ROLLOUT_ARGS=(
   --prompt-data data/dapo-math-17k/dapo-math-17k.jsonl
   --input-key prompt
   --label-key label
   --apply-chat-template

   --rollout-shuffle

   --rm-type deepscaler

   --num-rollout 3000

   --rollout-batch-size 16 
   --n-samples-per-prompt 8

   --global-batch-size 128        
   --num-steps-per-rollout 1

   --rollout-max-response-len 8192
   --rollout-temperature 0.8

   --balance-data
)

PERF_ARGS=(
   --tensor-model-parallel-size 2
   --sequence-parallel
   --pipeline-model-parallel-size 1
   --context-parallel-size 1
   --expert-model-parallel-size 1
   --expert-tensor-parallel-size 1

   --recompute-granularity full
   --recompute-method uniform
   --recompute-num-layers 1

   # --micro-batch-size 1
   --use-dynamic-batch-size
   --max-tokens-per-gpu 4608
)

PPO_ARGS=(
   --advantage-estimator ppo
   --use-kl-loss
   --kl-loss-coef 0.00
   --kl-loss-type low_var_kl
   --entropy-coef 0.00
   --eps-clip 0.2
   --eps-clip-high 0.28
   --use-tis
)

OPTIMIZER_ARGS=(
   --optimizer adam
   --lr 1e-6
   --lr-decay-style constant
   --weight-decay 0.1
   --adam-beta1 0.9
   --adam-beta2 0.98
)
