NVIDIA-NeMo/Megatron-Bridge · issue #1865 · open · Python
labels: bug, performance, performance/release
# NaN loss with Llama3.1 405B NVFP4 pre-training

malay-nagda · description · 2026-01-06
**Describe the bug**

Getting NaN grad norm for Llama3.1 405B pre-training on GB300, GB200 and B200 systems.

**Steps/Code to reproduce bug**

```
python3 scripts/performance/setup_experiment.py \
-a <slurm_account> \
-p <slurm_partition> \
-g gb200 \
-i nvcr.io/nvidia/nemo:25.11 \
-l <results_dir> \
-m llama31 \
-s 405b \
-gn 4 \
-ng 128 \
-hf <hf_token> \
-c nvfp4
```

**Expected behavior**

A valid > 0 `grad norm` for every train step

**Additional context**

Related issues-
- https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1255
- https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1771

pruprakash · comment · 2026-04-23
## QA RCCA Analysis

**Classification**: PERF/RECIPE

**Reason**: NaN grad norm with Llama3.1 405B NVFP4. Related to CP configuration. Closed and tracked in separate issue. Performance/recipe issue.

**RCCA Required**: NO - This is not a code bug requiring root cause corrective action.
