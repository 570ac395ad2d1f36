OPTIMIZER_OFFLOAD=1 A2A_OVERLAP=0 MODEL=DeepSeek-V3 PP=8 VPP=4 TP=1 EP=32 CP=1 NNODES=32 GBS=8192 PR=fp8 \
bash sbatch_benchmarking.sh \
  --recompute-granularity full \
  --recompute-method uniform \
  --recompute-num-layers 1 \
  --pipeline-model-parallel-layout "Et*2|(tt|)*22t|(tt|)*7mL"
