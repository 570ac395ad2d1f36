NUM_LAYERS=28
    HIDDEN_SIZE=1536
    NUM_ATTENTION_HEADS=12
    INTERMEDIATE_SIZE=8960
    NUM_KEY_VALUE_HEADS=12
    MAX_POSITION_EMBEDDINGS=131072
    EXTRA_VOCAB_SIZE=293
    RMS_NORM_EPS=1e-6

    mla_options=" \
       --kv-lora-rank 128 \
       --qk-head-dim 128 \
       --qk-pos-emb-head-dim 64 \
       --qk-nope-head-dim 128 \
       --qk-rope-head-dim 64 \
       --v-head-dim 128 \
       --multi-latent-attention \
       --no-rope-fusion \
       --kv-channels 128 \
       "
