f'++policy.megatron_cfg.tensor_model_parallel_size=1 '
f'++policy.megatron_cfg.context_parallel_size=2 '
f'++policy.train_global_batch_size=1024 '
f'++policy.max_total_sequence_length=32768'
f'++policy.train_micro_batch_size=1
