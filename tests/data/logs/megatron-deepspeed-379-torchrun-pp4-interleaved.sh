export MAX_JOBS=8
export NCCL_DEBUG=error 
export NCCL_SOCKET_IFNAME=ens8 
export NCCL_IB_DISABLE=1
export CUDA_DEVICE_MAX_CONNECTIONS=1

torchrun --nproc_per_node 4 --nnodes 1 --node_rank 0 --master_addr localhost --master_port 6000 pretrain_gpt.py \
	--tensor-model-parallel-size 1 \
	--pipeline-model-parallel-size 4 \
	--num-layers-per-virtual-pipeline-stage 2 --overlap-p2p-communication \
	--distributed-backend nccl \
	--layernorm-epsilon 1e-6 \
	--num-layers 8 \
	--hidden-size 2048 \
	--ffn-hidden-size 4096 \
	--num-attention-heads 8 \
	--seq-length 512 \
	--max-position-embeddings 512 \
	--micro-batch-size 4 \
	--global-batch-size 16 \
	--train-iters 32 \
	--log-interval 2 \
	--optimizer adam \
	--adam-beta1 0.9 \
	--adam-beta2 0.95 \
	--adam-eps 1e-8 \
	--lr 1e-4 \
	--lr-warmup-samples 0 \
	--min-lr 1e-6 \
	--lr-warmup-fraction 0 \
	--lr-decay-iters 1 \
	--lr-decay-style cosine \
	--lr-warmup-iters 0 \
	--clip-grad 1.0 \
	--weight-decay 1e-1 \
	--fp16 \
	--seed 42 \
	--vocab-file /home/microsoft-Megatron-DeepSpeed/gpt2-data/gpt2-vocab.json \
	--merge-file /home/microsoft-Megatron-DeepSpeed/gpt2-data/gpt2-merg
