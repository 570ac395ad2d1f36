例如此处指定了张量并行组数量为2，流水线并行组数量为2，gpu数量为8

运行指令参考:
deepspeed pretrain.py --deepspeed --deepspeed_config models/deepspeed_mp_config.json 
--dataset_path dataset_path.pt
--spm_model_path sentencepiece.model 
--config_path models/llama/7b_config.json 
--output_model_path models/llama --scheduler cosine --warmup 0.03 
--world_size 8 --learning_rate 5e-5 --deepspeed_checkpoint_activations 
--data_processor lm --total_steps 100000 
--save_checkpoint_steps 10000 --batch_size 4 
--report_steps 50 --tensor_model_parallel_size 2  --pipeline_model_parallel_size 2
--pretrained_model_path models/input_model
