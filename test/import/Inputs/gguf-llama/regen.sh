#!/bin/sh
# Regenerates the inputs of test/import/gguf-llama.test: for each
# architecture a GGUF file of random F32 weights (make_gguf.py --random 1
# --vocab 300) and llama.cpp's logits for it at every position of a
# 16-token prompt and the first decoded token ([17, 300] float32), computed
# by the peer ../shared/peers/llama (llama.cpp v0.5.0, its llama_bench:
# --kv f32 --fa off, tokens (1 + 7919 i) % 300), and tokens.npy [1, 17].
#   sh test/import/Inputs/gguf-llama/regen.sh [PEER_DIR]
set -e
here=$(cd "$(dirname "$0")" && pwd)
peer=${1:-$here/../../../../../shared/peers/llama}
for a in llama mixtral qwen2 qwen3 qwen3moe gemma2 gemma3 phi3 gpt2 deepseek2; do
  /usr/bin/python3 "$here/../make_gguf.py" "$here/$a.gguf" $a --random 1 --vocab 300
  "$peer/build/llama_bench" -m "$here/$a.gguf" -t 2 -p 16 -n 1 -r 1 --kv f32 \
    --fa off --all-logits --dump-logits "$here/$a.logits.npy" > /dev/null
  mv "$here/$a.logits.tokens.npy" "$here/tokens.npy"
done
# LLaMA 3's RoPE scaling, stored as the converter does (rope_freqs.weight).
/usr/bin/python3 "$here/../make_gguf.py" "$here/llama3.gguf" llama --random 1 \
  --vocab 300 --llama3 8,1,4,8192
"$peer/build/llama_bench" -m "$here/llama3.gguf" -t 2 -p 16 -n 1 -r 1 --kv f32 \
  --fa off --all-logits --dump-logits "$here/llama3.logits.npy" > /dev/null
rm "$here/llama3.logits.tokens.npy"
# deepseek2 with YaRN as convert_hf_to_gguf.py writes DeepSeek-V2's (factor,
# original context, 0.1 * mscale_all_dim).
/usr/bin/python3 "$here/../make_gguf.py" "$here/deepseek2-yarn.gguf" deepseek2 \
  --random 1 --vocab 300 --set rope.scaling.type=str:yarn \
  --set rope.scaling.factor=f32:40 --set rope.scaling.original_context_length=u32:64 \
  --set rope.scaling.yarn_log_multiplier=f32:0.0707
"$peer/build/llama_bench" -m "$here/deepseek2-yarn.gguf" -t 2 -p 16 -n 1 -r 1 \
  --kv f32 --fa off --all-logits --dump-logits "$here/deepseek2-yarn.logits.npy" > /dev/null
rm "$here/deepseek2-yarn.logits.tokens.npy"
# gemma3 with Gemma 3's RoPE: global layers base 1e6 scaled by 8, sliding
# layers base 10000 (rope.freq_base_swa's default) unscaled.
/usr/bin/python3 "$here/../make_gguf.py" "$here/gemma3-local.gguf" gemma3 \
  --random 1 --vocab 300 --set rope.freq_base=f32:1000000 \
  --set rope.scaling.type=str:linear --set rope.scaling.factor=f32:8
"$peer/build/llama_bench" -m "$here/gemma3-local.gguf" -t 2 -p 16 -n 1 -r 1 \
  --kv f32 --fa off --all-logits --dump-logits "$here/gemma3-local.logits.npy" > /dev/null
rm "$here/gemma3-local.logits.tokens.npy"
/usr/bin/python3 -c "
import numpy as np, sys
t = np.load(sys.argv[1]); np.save(sys.argv[1], t.reshape(1, -1).astype(np.int32))
" "$here/tokens.npy"
