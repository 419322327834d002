#!/bin/sh
# Regenerates the inputs of test/import/gguf-split-kv-b.test: the deepseek2
# file of gguf-llama.test with each attn_kv_b split into attn_k_b and
# attn_v_b as newer convert_hf_to_gguf.py writes DeepSeek's (make_gguf.py
# --split-kv-b: the same values, the _mla head-size keys), and llama.cpp's
# logits for it ([17, 300] float32, its MLA path: wk_b / wv_b), computed as
# regen.sh computes the others, by the peer ../shared/peers/llama (llama.cpp
# v0.5.0, llama_bench --kv f32 --fa off) on the prompt of tokens.npy.
#   sh test/import/Inputs/gguf-llama/regen-split.sh [PEER_DIR]
set -e
here=$(cd "$(dirname "$0")" && pwd)
peer=${1:-$here/../../../../../shared/peers/llama}
/usr/bin/python3 "$here/../make_gguf.py" "$here/deepseek2-split.gguf" deepseek2 \
  --random 1 --vocab 300 --split-kv-b
"$peer/build/llama_bench" -m "$here/deepseek2-split.gguf" -t 2 -p 16 -n 1 -r 1 \
  --kv f32 --fa off --all-logits --dump-logits "$here/deepseek2-split.logits.npy" > /dev/null
rm "$here/deepseek2-split.logits.tokens.npy"
