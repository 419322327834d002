#!/usr/bin/env python3
"""PyTorch's GPT-2 small forward on the GPU, the peer of
`tfmc models/gpt2-small.tfm --target=cuda --dtype=D` run with
`--random-weights 1 --random-input 1,128 --bench 10`: Hugging Face
transformers' GPT2LMHeadModel (random weights, eval, no KV cache returned),
the same [1, 128] input, median of 10 after 3 warm-ups, timed like tfm's
--bench: the logits are copied back to the host as f32.

usage: python3 bench/gpu_gpt2_torch.py [f16|bf16|f32]...
"""
import statistics
import sys
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main(dtypes):
    names = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}
    print("PyTorch %s, transformers GPT2LMHeadModel, attn_implementation=sdpa, "
          "[1, 128] tokens" % torch.__version__)
    for d in dtypes or ["f16", "bf16", "f32"]:
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(attn_implementation="sdpa"))
        model = model.to("cuda", names[d]).eval()
        ids = torch.randint(0, 50257, (1, 128), device="cuda")
        ts, tk = [], []
        with torch.no_grad():
            for i in range(13):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                logits = model(ids, use_cache=False).logits
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                logits.float().cpu()
                t2 = time.perf_counter()
                if i >= 3:
                    ts.append((t2 - t0) * 1e3)
                    tk.append((t1 - t0) * 1e3)
        print("%s: median %.3f ms with the logits copied to the host as f32 "
              "(forward alone %.3f ms)" % (d, statistics.median(ts),
                                           statistics.median(tk)))


if __name__ == "__main__":
    main(sys.argv[1:])
