#!/bin/sh
# Regenerates the inputs of test/gguf/llama-cpp.test with the peer
# ../shared/peers/llama (llama.cpp v0.5.0, after its setup.sh):
#   sh test/gguf/Inputs/llama-cpp/regen.sh [PEER_DIR] [TFM_BUILD_DIR]
#
# Two LLaMA-shaped F32 files of random weights (make_llama.py: d_model 256,
# ffn 512, 2 layers, 4 heads / 2 KV heads of 64, vocab 300; tied-F32.gguf
# ties the LM head to token_embd, untied-F32.gguf has output.weight),
# quantized by llama.cpp's own quantizer (the peer's build/llama_quant:
# llama_model_quantize with llama.cpp's mix of types):
#   tied:   Q8_0, F16, BF16 (rebuilt by the test with convert.py, which
#           writes llama.cpp's files byte for byte: SHA256SUMS holds the
#           hashes of llama.cpp's files, of the F32 one and of the
#           committed ones), Q6_K
#   untied: Q4_0, Q4_K_M, Q5_K_M (token_embd in the type's blocks, output
#           Q6_K)
# and llama.cpp's logits for each at every position of a 128-token prompt
# and the first decoded token (build/llama_bench --all-logits --kv f32
# --fa off: [129, 300] float32, tokens (1 + 7919 i) % 300 in tokens.npy).
# The files the test cannot rebuild (Q6_K and the untied ones) are
# committed. Checks made here, which need llama.cpp:
#   - every file's tensor types (make_gguf.py --inspect): the K-quant files
#     hold Q4_K / Q5_K / Q6_K tensors, not fallbacks;
#   - convert.py gives llama.cpp's F16, BF16 and Q8_0 files (cmp);
#   - ref_llama.py dequantizes every tensor of every file exactly as
#     llama.cpp does (llama_quant --requant Q.gguf DEQ.gguf F32, bit for
#     bit), so its float64 forward pass is on llama.cpp's values;
#   - with TFM_BUILD_DIR: tfm on each quantized file equals tfm on
#     llama.cpp's F32 dequantization of it within 1e-5 of the largest logit
#     (not Q8_0 and Q4_0 where tfm multiplies them in integers, their
#     activations rounded to 8 bits as llama.cpp rounds them).
set -e
here=$(cd "$(dirname "$0")" && pwd)
peer=${1:-$here/../../../../../shared/peers/llama}
build=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$py "$here/make_llama.py" "$tmp/tied-F32.gguf"
$py "$here/make_llama.py" "$tmp/untied-F32.gguf" --untied
quant() { # MODEL TYPE
  "$peer/build/llama_quant" "$tmp/$1-F32.gguf" "$tmp/$1-$2.gguf" "$2" 2 | sed 's/.*tensors=/  tensors=/'
  "$peer/build/llama_quant" "$tmp/$1-$2.gguf" "$tmp/$1-$2-deq.gguf" F32 2 --requant > /dev/null
  $py "$peer/make_gguf.py" --inspect "$tmp/$1-$2.gguf" | grep 'tensor types'
  printf '  ref_llama.py: '
  $py "$here/ref_llama.py" --dequant "$tmp/$1-$2.gguf" "$tmp/$1-$2-deq.gguf"
}
for t in Q8_0 F16 BF16 Q6_K; do echo "tied $t"; quant tied $t; done
for t in Q4_0 Q4_K_M Q5_K_M; do echo "untied $t"; quant untied $t; done
for t in F16 BF16 Q8_0; do
  $py "$here/convert.py" "$tmp/tied-F32.gguf" "$tmp/convert.gguf" "$(echo $t | tr A-Z a-z)"
  cmp "$tmp/convert.gguf" "$tmp/tied-$t.gguf"
done
echo "convert.py: llama.cpp's F16, BF16 and Q8_0 files byte for byte"
(cd "$tmp" && sha256sum tied-F32.gguf tied-Q8_0.gguf tied-F16.gguf tied-BF16.gguf \
  tied-Q6_K.gguf untied-Q4_0.gguf untied-Q4_K_M.gguf untied-Q5_K_M.gguf) > "$here/SHA256SUMS"
for f in tied-Q6_K untied-Q4_0 untied-Q4_K_M untied-Q5_K_M; do cp "$tmp/$f.gguf" "$here/"; done
for f in tied-F32 tied-Q8_0 tied-F16 tied-BF16 tied-Q6_K untied-Q4_0 untied-Q4_K_M untied-Q5_K_M; do
  "$peer/build/llama_bench" -m "$tmp/$f.gguf" -t 2 -p 128 -n 1 -r 1 --kv f32 --fa off \
    --all-logits --dump-logits "$here/$f.logits.npy" > /dev/null
  mv "$here/$f.logits.tokens.npy" "$tmp/tokens.npy"
done
$py -c "
import numpy as np, sys
t = np.load(sys.argv[1]); np.save(sys.argv[2], t.reshape(1, -1).astype(np.int32))
" "$tmp/tokens.npy" "$here/tokens.npy"
if [ -n "$build" ]; then
  for m in tied untied; do
    "$build/bin/tfmc" import "$tmp/$m-F32.gguf" -o "$tmp/$m.tfm"
    "$build/bin/tfmc" "$tmp/$m.tfm" -o "$tmp/$m"
  done
  for f in tied-Q8_0 tied-F16 tied-BF16 tied-Q6_K untied-Q4_0 untied-Q4_K_M untied-Q5_K_M; do
    m=${f%%-*}
    "$tmp/$m" --weights "$tmp/$f.gguf" --input tokens="$here/tokens.npy" --output "$tmp/q.npy" > /dev/null
    "$tmp/$m" --weights "$tmp/$f-deq.gguf" --input tokens="$here/tokens.npy" --output "$tmp/deq.npy" > /dev/null
    $py -c "
import numpy as np, sys
q, d = np.load(sys.argv[2]), np.load(sys.argv[3])
rel = float(np.abs(q - d).max() / np.abs(d).max())
print('tfm', sys.argv[1], 'vs tfm on its F32 dequantization: %.2e' % rel)
sys.exit(0 if rel <= 1e-5 else 1)
" "$f" "$tmp/q.npy" "$tmp/deq.npy" ||
      case $f in
        *-Q8_0 | *-Q4_0) echo "  (where tfm multiplies $f in integers, its activations rounded to 8 bits)" ;;
        *) exit 1 ;;
      esac
  done
fi
