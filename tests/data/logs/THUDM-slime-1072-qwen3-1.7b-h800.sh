THUDM/slime · issue #1072 · open · Python
# Slime RL Training is 4× Slower Than VERL on the Same Model

chenyuxin1999 · description · 2025-12-09
Hi, thank you for releasing this great framework!

I am running Slime GRPO training on Qwen3-1.7B-Base, and I observe that Slime is consistently ~4× slower than VERL, even when using the same dataset, same rollout size (128×32), and same number of GPUs (8×H800).

Even in the early stage of training, when the average response length is only ~1000 tokens, a single training step still takes more than 10 minutes, which is significantly slower than VERL under the same setup.

The slowdown seems to come mainly from two metrics:

1. High Wait Time (~50% of step time)

WandB shows perf/wait_time_ratio ≈ 0.5, meaning half of the time is spent waiting rather than computing.

2. Rollout Throughput Much Lower Than VERL

perf/rollout_time is significantly higher than verl.

This makes total training throughput roughly one quarter of VERL on the same machine.

Below is the launch script I modified based on the official example.
It is possible that I misconfigured certain parts, causing the framework to not reach its expected performance.
I would really appreciate it if you could take a look and let me know whether this setup is reasonable, and what configuration you would recommend for Qwen3-1.7B-Base under this setting.

Thank you very much for your help!

```bash
ROLLOUT_ARGS=(
   --prompt-data ./datasets/dapo-math-17k.jsonl
   --input-key promp
