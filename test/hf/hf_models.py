#!/usr/bin/env python3
"""Small Hugging Face model folders, written as Hugging Face publishes them.

make(model_type, folder, seed, variant=None) writes `config.json` (the field
names of that type's configuration class, small sizes) and the weights as
safetensors under the tensor names and layouts of the published checkpoints
of that type: fused and transposed projections, the base-model prefix as
published, buffers that are not parameters, tied heads that are still
stored, and for some types a sharded checkpoint with
`model.safetensors.index.json`. The weights are random (seeded).

Only numpy is needed; the safetensors format is written here directly
(8-byte little-endian header length, JSON header, raw data).

    python3 hf_models.py TYPE[:VARIANT] FOLDER [--seed N]
    python3 hf_models.py --list [--moe | --deepseek]
"""
import json
import math
import os
import struct
import sys

import numpy as np

# Every model folder the tests use, as "type" or "type:variant".
CASES = [
    "gpt2", "gpt_neox", "gptj", "llama:llama3", "llama:linear", "mistral",
    "qwen2", "qwen3", "gemma", "gemma2", "phi", "phi3", "falcon:7b",
    "falcon:40b", "bloom", "bert", "roberta", "vit", "t5:v1.0", "t5:v1.1",
    "bart", "whisper",
]

# The mixture-of-experts cases, kept apart from CASES (which models.test runs
# with run_hf.py --all); models-moe.test gives them to run_hf.py by name.
# selfcheck.py runs both lists.
MOE_CASES = [
    "mixtral", "qwen2_moe", "qwen2_moe:sparse2", "qwen3_moe",
    "qwen3_moe:mlp_only", "olmoe", "olmoe:clip", "granitemoe",
    "granitemoe:plain", "gpt_oss", "gpt_oss:mxfp4",
]

# DeepSeek-V2 and V3 (multi-head latent attention, their routers, FP8
# weights), kept apart as well; models-deepseek.test runs them.
DEEPSEEK_CASES = ["deepseek_v2", "deepseek_v2:grouped", "deepseek_v3", "deepseek_v3:fp8"]

# Variants that exist (the first is the default).
VARIANTS = {
    "llama": ["llama3", "linear", "plain"],
    "falcon": ["7b", "40b"],
    "t5": ["v1.0", "v1.1"],
    "qwen2_moe": ["a2.7b", "sparse2"],
    "qwen3_moe": ["a3b", "mlp_only"],
    "olmoe": ["0924", "clip"],
    "granitemoe": ["1b", "plain"],
    "gpt_oss": ["bf16", "mxfp4"],
    "deepseek_v2": ["lite", "grouped"],
    "deepseek_v3": ["bf16", "fp8"],
}

# ---------------------------------------------------------------------------
# safetensors


def _bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


class BF16:
    """Marks a float32 array to be stored as bfloat16."""

    def __init__(self, a):
        self.a = np.asarray(a, dtype=np.float32)


class F8E4M3:
    """Marks uint8 codes to be stored as F8_E4M3 (OCP e4m3fn)."""

    def __init__(self, codes):
        self.a = np.asarray(codes, dtype=np.uint8)


_DT = {
    np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
    np.dtype(np.float64): "F64", np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}


def write_safetensors(path, tensors, metadata=None):
    header = {"__metadata__": metadata or {"format": "pt"}}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        if isinstance(arr, BF16):
            data, dt, shape = _bf16_bits(arr.a).tobytes(), "BF16", arr.a.shape
        elif isinstance(arr, F8E4M3):
            data, dt, shape = arr.a.tobytes(), "F8_E4M3", arr.a.shape
        else:
            arr = np.ascontiguousarray(arr)
            data, dt, shape = arr.astype(arr.dtype.newbyteorder("<")).tobytes(), _DT[arr.dtype], arr.shape
        header[name] = {"dtype": dt, "shape": [int(s) for s in shape],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return offset


def write_checkpoint(folder, tensors, shards=1):
    """model.safetensors, or model-0000K-of-0000N.safetensors + index."""
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors)
        return
    names = list(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map, total = {}, 0
    for s in range(shards):
        fname = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        total += write_safetensors(os.path.join(folder, fname), part)
        for n in part:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total},
             "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------
# random tensors


class Weights:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.t = {}

    def randn(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def w(self, name, shape, std=0.1):
        self.t[name] = self.randn(shape, std)
        return self.t[name]

    def linear(self, prefix, out, inp, bias=True, std=0.1):
        self.w(prefix + ".weight", (out, inp), std)
        if bias:
            self.w(prefix + ".bias", (out,), 0.05)

    def conv1d(self, prefix, inp, out, std=0.1):
        """GPT-2's Conv1D: weight [in, out]."""
        self.w(prefix + ".weight", (inp, out), std)
        self.w(prefix + ".bias", (out,), 0.05)

    def layernorm(self, prefix, d, bias=True):
        self.t[prefix + ".weight"] = (1.0 + self.randn((d,), 0.1)).astype(np.float32)
        if bias:
            self.w(prefix + ".bias", (d,), 0.05)

    def offset_norm(self, prefix, d):
        """Gemma's RMSNorm stores w and scales by (1 + w)."""
        self.w(prefix + ".weight", (d,), 0.1)

    def copy(self, name, src):
        self.t[name] = self.t[src].copy()

    def buffer(self, name, value):
        self.t[name] = value


def causal_buffer(n, dtype):
    return np.tril(np.ones((n, n), dtype=dtype)).reshape(1, 1, n, n)


def inv_freq(dim, theta):
    return (1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / dim))).astype(np.float32)


def whisper_sinusoids(length, channels):
    inc = math.log(10000) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2, dtype=np.float32))
    t = np.arange(length, dtype=np.float32)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


# ---------------------------------------------------------------------------
# the model types


def _gpt2(W, v):
    V, d, n, H, L = 128, 48, 64, 4, 2
    cfg = {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.1, "bos_token_id": V - 1, "embd_pdrop": 0.1,
        "eos_token_id": V - 1, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": n,
        "n_embd": d, "n_head": H, "n_layer": L, "n_positions": n,
        "resid_pdrop": 0.1, "summary_activation": None,
        "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
        "vocab_size": V,
    }
    # Published GPT-2 checkpoints hold GPT2Model's names (no `transformer.`)
    # and no lm_head (tied).
    W.w("wte.weight", (V, d), 0.2)
    W.w("wpe.weight", (n, d), 0.1)
    for i in range(L):
        p = "h.%d." % i
        W.layernorm(p + "ln_1", d)
        W.buffer(p + "attn.bias", causal_buffer(n, np.float32))
        W.buffer(p + "attn.masked_bias", np.array(-1e4, dtype=np.float32))
        W.conv1d(p + "attn.c_attn", d, 3 * d)
        W.conv1d(p + "attn.c_proj", d, d)
        W.layernorm(p + "ln_2", d)
        # larger, so that gelu_new vs gelu shows in the output
        W.conv1d(p + "mlp.c_fc", d, 4 * d, std=0.4)
        W.conv1d(p + "mlp.c_proj", 4 * d, d, std=0.2)
    W.layernorm("ln_f", d)
    return cfg, 1


def _gpt_neox(W, v):
    V, d, n, H, L, ff = 200, 64, 64, 4, 2, 256
    hd = d // H
    cfg = {
        "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0,
        "eos_token_id": 0, "hidden_act": "gelu", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "layer_norm_eps": 1e-05, "max_position_embeddings": n,
        "model_type": "gpt_neox", "num_attention_heads": H,
        "num_hidden_layers": L, "rotary_emb_base": 20000, "rotary_pct": 0.25,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "transformers_version": "4.24.0", "use_cache": True,
        "use_parallel_residual": True, "vocab_size": V,
    }
    rot = int(hd * 0.25)
    W.w("gpt_neox.embed_in.weight", (V, d), 0.2)
    for i in range(L):
        p = "gpt_neox.layers.%d." % i
        W.layernorm(p + "input_layernorm", d)
        W.layernorm(p + "post_attention_layernorm", d)
        W.buffer(p + "attention.bias", causal_buffer(n, np.bool_))
        W.buffer(p + "attention.masked_bias", np.array(-1e9, dtype=np.float32))
        W.buffer(p + "attention.rotary_emb.inv_freq", inv_freq(rot, 20000.0))
        # [H * 3 * hd, d]: per head, its q, k and v rows.
        W.linear(p + "attention.query_key_value", 3 * d, d)
        W.linear(p + "attention.dense", d, d)
        W.linear(p + "mlp.dense_h_to_4h", ff, d)
        W.linear(p + "mlp.dense_4h_to_h", d, ff)
    W.layernorm("gpt_neox.final_layer_norm", d)
    W.w("embed_out.weight", (V, d), 0.1)
    return cfg, 1


def _gptj(W, v):
    V, d, n, H, L = 160, 64, 64, 4, 2
    cfg = {
        "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"],
        "attn_pdrop": 0.0, "bos_token_id": V - 1, "embd_pdrop": 0.0,
        "eos_token_id": V - 1, "gradient_checkpointing": False,
        "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
        "model_type": "gptj", "n_embd": d, "n_head": H, "n_inner": None,
        "n_layer": L, "n_positions": n, "resid_pdrop": 0.0, "rotary": True,
        "rotary_dim": 8, "scale_attn_weights": True,
        "tie_word_embeddings": False, "tokenizer_class": "GPT2Tokenizer",
        "use_cache": True, "vocab_size": V,
    }
    W.w("transformer.wte.weight", (V, d), 0.2)
    for i in range(L):
        p = "transformer.h.%d." % i
        W.layernorm(p + "ln_1", d)
        W.buffer(p + "attn.bias", causal_buffer(n, np.uint8))
        W.buffer(p + "attn.masked_bias", np.array(-1e9, dtype=np.float32))
        for m in ("k_proj", "v_proj", "q_proj", "out_proj"):
            W.linear(p + "attn." + m, d, d, bias=False)
        W.linear(p + "mlp.fc_in", 4 * d, d)
        W.linear(p + "mlp.fc_out", d, 4 * d)
    W.layernorm("transformer.ln_f", d)
    W.linear("lm_head", V, d)
    return cfg, 1


def _llama_layers(W, L, d, H, KV, hd, ff, qkv_bias=False, o_bias=False, qk_norm=False, offset=False,
                  gate_std=0.1):
    norm = W.offset_norm if offset else (lambda p, n: W.layernorm(p, n, bias=False))
    for i in range(L):
        p = "model.layers.%d." % i
        W.linear(p + "self_attn.q_proj", H * hd, d, bias=qkv_bias)
        W.linear(p + "self_attn.k_proj", KV * hd, d, bias=qkv_bias)
        W.linear(p + "self_attn.v_proj", KV * hd, d, bias=qkv_bias)
        W.linear(p + "self_attn.o_proj", d, H * hd, bias=o_bias)
        if qk_norm:
            W.layernorm(p + "self_attn.q_norm", hd, bias=False)
            W.layernorm(p + "self_attn.k_norm", hd, bias=False)
        W.linear(p + "mlp.gate_proj", ff, d, bias=False, std=gate_std)
        W.linear(p + "mlp.up_proj", ff, d, bias=False, std=gate_std)
        W.linear(p + "mlp.down_proj", d, ff, bias=False, std=max(0.1, gate_std / 2))
        norm(p + "input_layernorm", d)
        norm(p + "post_attention_layernorm", d)


def _llama(W, v):
    v = v or "llama3"
    if v == "llama3":
        # LLaMA 3.1 style: GQA, rope_type llama3, sharded, no inv_freq buffers.
        V, d, H, KV, hd, ff, L, n = 256, 64, 4, 2, 16, 128, 2, 64
        scaling = {"factor": 4.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 32, "rope_type": "llama3"}
        theta, eps = 10000.0, 1e-05
    else:
        # LLaMA 2 style (older transformers): MHA, inv_freq buffers stored.
        V, d, H, KV, hd, ff, L, n = 200, 48, 4, 4, 12, 128, 2, 64
        scaling = {"type": "linear", "factor": 2.0} if v == "linear" else None
        theta, eps = 10000.0, 1e-06
    cfg = {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": ff, "max_position_embeddings": n,
        "model_type": "llama", "num_attention_heads": H,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "pretraining_tp": 1, "rms_norm_eps": eps, "rope_scaling": scaling,
        "rope_theta": theta, "tie_word_embeddings": False,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": V,
    }
    if v == "llama3":
        cfg.update({"head_dim": hd, "mlp_bias": False, "bos_token_id": V - 2,
                    "eos_token_id": [V - 1, V - 3]})
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    _llama_layers(W, L, d, H, KV, hd, ff)
    if v != "llama3":
        for i in range(L):
            W.buffer("model.layers.%d.self_attn.rotary_emb.inv_freq" % i, inv_freq(hd, theta))
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 2 if v == "llama3" else 1


def _mistral(W, v):
    V, d, H, KV, hd, ff, L, n = 256, 64, 4, 2, 16, 160, 2, 64
    cfg = {
        "architectures": ["MistralForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "head_dim": hd,
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": ff, "max_position_embeddings": n,
        "model_type": "mistral", "num_attention_heads": H,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    _llama_layers(W, L, d, H, KV, hd, ff)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _qwen2(W, v):
    V, d, H, KV, ff, L, n = 300, 64, 4, 2, 128, 2, 64
    cfg = {
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": V - 3, "eos_token_id": V - 3, "hidden_act": "silu",
        "hidden_size": d, "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "max_window_layers": L,
        "model_type": "qwen2", "num_attention_heads": H,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": n, "tie_word_embeddings": True,
        "torch_dtype": "float32", "use_cache": True,
        "use_sliding_window": False, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    _llama_layers(W, L, d, H, KV, d // H, ff, qkv_bias=True)
    W.layernorm("model.norm", d, bias=False)
    # Tied, and the checkpoint still carries the head (a copy).
    W.copy("lm_head.weight", "model.embed_tokens.weight")
    return cfg, 1


def _qwen3(W, v):
    V, d, H, KV, hd, ff, L, n = 256, 48, 4, 2, 16, 96, 2, 64
    cfg = {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": V - 3, "eos_token_id": V - 2,
        "head_dim": hd, "hidden_act": "silu", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "max_window_layers": L,
        "model_type": "qwen3", "num_attention_heads": H,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": None, "tie_word_embeddings": True,
        "torch_dtype": "float32", "use_cache": True,
        "use_sliding_window": False, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    _llama_layers(W, L, d, H, KV, hd, ff, qk_norm=True)
    W.layernorm("model.norm", d, bias=False)
    return cfg, 1


def _gemma(W, v):
    V, d, H, KV, hd, ff, L, n = 256, 32, 4, 1, 16, 96, 2, 64
    cfg = {
        "architectures": ["GemmaForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 2, "eos_token_id": 1,
        "head_dim": hd, "hidden_act": "gelu",
        "hidden_activation": "gelu_pytorch_tanh", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "model_type": "gemma",
        "num_attention_heads": H, "num_hidden_layers": L,
        "num_key_value_heads": KV, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 10000.0, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    # gate_std: so that gelu_pytorch_tanh vs gelu shows in the output
    _llama_layers(W, L, d, H, KV, hd, ff, offset=True, gate_std=0.5)
    W.offset_norm("model.norm", d)
    return cfg, 1


def _gemma2(W, v):
    V, d, H, KV, hd, ff, L, n = 256, 32, 4, 2, 16, 96, 2, 64
    cfg = {
        "architectures": ["Gemma2ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "attn_logit_softcapping": 1.0,
        "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
        "final_logit_softcapping": 2.0, "head_dim": hd,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": d, "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "model_type": "gemma2",
        "num_attention_heads": H, "num_hidden_layers": L,
        "num_key_value_heads": KV, "pad_token_id": 0,
        "query_pre_attn_scalar": 24, "rms_norm_eps": 1e-06,
        "rope_theta": 50000.0, "sliding_window": 4, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    _llama_layers(W, L, d, H, KV, hd, ff, offset=True)
    for i in range(L):
        W.offset_norm("model.layers.%d.pre_feedforward_layernorm" % i, d)
        W.offset_norm("model.layers.%d.post_feedforward_layernorm" % i, d)
    W.offset_norm("model.norm", d)
    return cfg, 1


def _phi(W, v):
    V, d, H, ff, L, n = 200, 64, 4, 128, 2, 64
    cfg = {
        "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": V - 1, "embd_pdrop": 0.0, "eos_token_id": V - 1,
        "hidden_act": "gelu_new", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": ff, "layer_norm_eps": 1e-05,
        "max_position_embeddings": n, "model_type": "phi",
        "num_attention_heads": H, "num_hidden_layers": L,
        "num_key_value_heads": H, "partial_rotary_factor": 0.4,
        "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None,
        "rope_theta": 25000.0, "tie_word_embeddings": False,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        for m in ("q_proj", "k_proj", "v_proj", "dense"):
            W.linear(p + "self_attn." + m, d, d)
        W.linear(p + "mlp.fc1", ff, d)
        W.linear(p + "mlp.fc2", d, ff)
        W.layernorm(p + "input_layernorm", d)
    W.layernorm("model.final_layernorm", d)
    W.linear("lm_head", V, d)
    return cfg, 1


def _phi3(W, v):
    V, d, H, KV, ff, L, n = 256, 64, 4, 2, 128, 2, 64
    hd = d // H
    cfg = {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 1, "embd_pdrop": 0.0,
        "eos_token_id": V - 1, "hidden_act": "silu", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "model_type": "phi3",
        "num_attention_heads": H, "num_hidden_layers": L,
        "num_key_value_heads": KV, "original_max_position_embeddings": n,
        "pad_token_id": V - 2, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 1000000.0, "sliding_window": 2047,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        # [q (H*hd); k (KV*hd); v (KV*hd)] rows
        W.linear(p + "self_attn.qkv_proj", (H + 2 * KV) * hd, d, bias=False)
        W.linear(p + "self_attn.o_proj", d, H * hd, bias=False)
        # [gate (ff); up (ff)] rows
        W.linear(p + "mlp.gate_up_proj", 2 * ff, d, bias=False)
        W.linear(p + "mlp.down_proj", d, ff, bias=False)
        W.layernorm(p + "input_layernorm", d, bias=False)
        W.layernorm(p + "post_attention_layernorm", d, bias=False)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _falcon(W, v):
    v = v or "7b"
    V, d, L, n = 200, 64, 2, 64
    cfg = {
        "alibi": False, "apply_residual_connection_post_layernorm": False,
        "architectures": ["FalconForCausalLM"], "attention_dropout": 0.0,
        "bias": False, "bos_token_id": 11, "eos_token_id": 11,
        "hidden_dropout": 0.0, "hidden_size": d, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "max_position_embeddings": n,
        "model_type": "falcon", "num_hidden_layers": L, "parallel_attn": True,
        "rope_theta": 500000.0, "torch_dtype": "float32", "use_cache": True,
        "vocab_size": V,
    }
    if v == "7b":
        # Falcon-7B: multi-query, one norm for attention and MLP.
        H, KV = 4, 1
        cfg.update({"multi_query": True, "new_decoder_architecture": False,
                    "num_attention_heads": H})
        qkv_rows = (H + 2) * (d // H)  # [q heads..., k, v]
    else:
        # Falcon-40B: grouped (per kv head: its queries, then k, then v),
        # two norms (ln_attn, ln_mlp).
        H, KV = 8, 2
        cfg.update({"new_decoder_architecture": True, "num_attention_heads": H,
                    "num_kv_heads": KV})
        qkv_rows = (H + 2 * KV) * (d // H)
    W.w("transformer.word_embeddings.weight", (V, d), 0.2)
    for i in range(L):
        p = "transformer.h.%d." % i
        if v == "7b":
            W.layernorm(p + "input_layernorm", d)
        else:
            W.layernorm(p + "ln_attn", d)
            W.layernorm(p + "ln_mlp", d)
        W.linear(p + "self_attention.query_key_value", qkv_rows, d, bias=False)
        W.linear(p + "self_attention.dense", d, d, bias=False)
        W.linear(p + "mlp.dense_h_to_4h", 4 * d, d, bias=False)
        W.linear(p + "mlp.dense_4h_to_h", d, 4 * d, bias=False)
    W.layernorm("transformer.ln_f", d)
    # Tied (the default); the published shards still carry the head.
    W.copy("lm_head.weight", "transformer.word_embeddings.weight")
    return cfg, 1 if v == "7b" else 3


def _bloom(W, v):
    V, d, H, L = 250, 48, 6, 2
    cfg = {
        "apply_residual_connection_post_layernorm": False,
        "architectures": ["BloomForCausalLM"], "attention_dropout": 0.0,
        "attention_softmax_in_fp32": True, "bias_dropout_fusion": True,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_dropout": 0.0,
        "hidden_size": d, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": True,
        "model_type": "bloom", "n_head": H, "n_inner": None, "n_layer": L,
        "offset_alibi": 100, "pad_token_id": 3, "pretraining_tp": 1,
        "skip_bias_add": True, "skip_bias_add_qkv": False,
        "slow_but_exact": False, "unk_token_id": 0, "use_cache": True,
        "vocab_size": V,
    }
    # Published BLOOM checkpoints hold BloomModel's names (no `transformer.`).
    W.w("word_embeddings.weight", (V, d), 0.2)
    W.layernorm("word_embeddings_layernorm", d)
    for i in range(L):
        p = "h.%d." % i
        W.layernorm(p + "input_layernorm", d)
        # [H * 3 * hd, d]: per head, its q, k and v rows.
        W.linear(p + "self_attention.query_key_value", 3 * d, d)
        W.linear(p + "self_attention.dense", d, d)
        W.layernorm(p + "post_attention_layernorm", d)
        W.linear(p + "mlp.dense_h_to_4h", 4 * d, d)
        W.linear(p + "mlp.dense_4h_to_h", d, 4 * d)
    W.layernorm("ln_f", d)
    return cfg, 1


def _bert_layers(W, prefix, L, d, ff):
    for i in range(L):
        p = prefix + "encoder.layer.%d." % i
        for m in ("query", "key", "value"):
            W.linear(p + "attention.self." + m, d, d)
        W.linear(p + "attention.output.dense", d, d)
        W.layernorm(p + "attention.output.LayerNorm", d)
        W.linear(p + "intermediate.dense", ff, d)
        W.linear(p + "output.dense", d, ff)
        W.layernorm(p + "output.LayerNorm", d)


def _bert(W, v):
    V, d, H, ff, L, n = 200, 64, 4, 128, 2, 64
    cfg = {
        "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None, "gradient_checkpointing": False,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "layer_norm_eps": 1e-12, "max_position_embeddings": n,
        "model_type": "bert", "num_attention_heads": H,
        "num_hidden_layers": L, "pad_token_id": 0,
        "position_embedding_type": "absolute", "transformers_version": "4.6.0.dev0",
        "type_vocab_size": 2, "use_cache": True, "vocab_size": V,
    }
    e = "bert.embeddings."
    W.w(e + "word_embeddings.weight", (V, d), 0.2)
    W.w(e + "position_embeddings.weight", (n, d), 0.1)
    W.w(e + "token_type_embeddings.weight", (2, d), 0.2)
    W.layernorm(e + "LayerNorm", d)
    W.buffer(e + "position_ids", np.arange(n, dtype=np.int64).reshape(1, n))
    _bert_layers(W, "bert.", L, d, ff)
    # The pretraining heads a published BERT carries.
    W.linear("bert.pooler.dense", d, d)
    W.w("cls.predictions.bias", (V,), 0.05)
    W.linear("cls.predictions.transform.dense", d, d)
    W.layernorm("cls.predictions.transform.LayerNorm", d)
    W.copy("cls.predictions.decoder.weight", e + "word_embeddings.weight")
    W.linear("cls.seq_relationship", 2, d)
    return cfg, 1


def _roberta(W, v):
    V, d, H, ff, L, n = 220, 48, 4, 96, 2, 64
    cfg = {
        "architectures": ["RobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0, "eos_token_id": 2, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "layer_norm_eps": 1e-05, "max_position_embeddings": n + 2,
        "model_type": "roberta", "num_attention_heads": H,
        "num_hidden_layers": L, "pad_token_id": 1, "type_vocab_size": 1,
        "vocab_size": V,
    }
    e = "roberta.embeddings."
    W.w(e + "word_embeddings.weight", (V, d), 0.2)
    W.w(e + "position_embeddings.weight", (n + 2, d), 0.1)
    W.w(e + "token_type_embeddings.weight", (1, d), 0.2)
    W.layernorm(e + "LayerNorm", d)
    _bert_layers(W, "roberta.", L, d, ff)
    W.linear("roberta.pooler.dense", d, d)
    W.linear("lm_head.dense", d, d)
    W.layernorm("lm_head.layer_norm", d)
    W.copy("lm_head.decoder.weight", e + "word_embeddings.weight")
    W.w("lm_head.bias", (V,), 0.05)
    return cfg, 1


def _vit(W, v):
    d, H, ff, L, S, P, C, labels = 48, 4, 96, 2, 16, 4, 3, 5
    cfg = {
        "architectures": ["ViTForImageClassification"],
        "attention_probs_dropout_prob": 0.0, "encoder_stride": 16,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": d,
        "id2label": {str(i): "LABEL_%d" % i for i in range(labels)},
        "image_size": S, "initializer_range": 0.02, "intermediate_size": ff,
        "label2id": {"LABEL_%d" % i: i for i in range(labels)},
        "layer_norm_eps": 1e-12, "model_type": "vit", "num_attention_heads": H,
        "num_channels": C, "num_hidden_layers": L, "patch_size": P,
        "qkv_bias": True, "torch_dtype": "float32",
    }
    N = (S // P) ** 2
    e = "vit.embeddings."
    W.w(e + "cls_token", (1, 1, d), 0.2)
    W.w(e + "position_embeddings", (1, N + 1, d), 0.1)
    W.w(e + "patch_embeddings.projection.weight", (d, C, P, P), 0.1)
    W.w(e + "patch_embeddings.projection.bias", (d,), 0.05)
    for i in range(L):
        p = "vit.encoder.layer.%d." % i
        for m in ("query", "key", "value"):
            W.linear(p + "attention.attention." + m, d, d)
        W.linear(p + "attention.output.dense", d, d)
        W.layernorm(p + "layernorm_before", d)
        W.layernorm(p + "layernorm_after", d)
        W.linear(p + "intermediate.dense", ff, d)
        W.linear(p + "output.dense", d, ff)
    W.layernorm("vit.layernorm", d)
    W.linear("classifier", labels, d)
    return cfg, 1


def _t5(W, v):
    v = v or "v1.0"
    V, d, H, L = 128, 32, 4, 2
    if v == "v1.0":
        # t5-small style: ReLU, tied head (rescaled by d_model**-0.5), the
        # config leaves feed_forward_proj and the decoder depth at defaults.
        dkv, ff, LD = 8, 64, L
        cfg = {
            "architectures": ["T5ForConditionalGeneration"], "d_ff": ff,
            "d_kv": dkv, "d_model": d, "decoder_start_token_id": 0,
            "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
            "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06,
            "model_type": "t5", "n_positions": 64, "num_heads": H,
            "num_layers": L, "output_past": True, "pad_token_id": 0,
            "relative_attention_num_buckets": 8, "vocab_size": V,
        }
    else:
        # t5-v1_1 style: gated-gelu, untied head, bottleneck d_kv, a deeper
        # decoder, short max_distance so logarithmic buckets are used.
        dkv, ff, LD = 16, 48, 3
        cfg = {
            "architectures": ["T5ForConditionalGeneration"], "d_ff": ff,
            "d_kv": dkv, "d_model": d, "decoder_start_token_id": 0,
            "dropout_rate": 0.1, "eos_token_id": 1,
            "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0,
            "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06,
            "model_type": "t5", "num_decoder_layers": LD, "num_heads": H,
            "num_layers": L, "output_past": True, "pad_token_id": 0,
            "relative_attention_max_distance": 16,
            "relative_attention_num_buckets": 8, "tie_word_embeddings": False,
            "vocab_size": V,
        }
    W.w("shared.weight", (V, d), 0.5)
    if v == "v1.0":
        W.copy("encoder.embed_tokens.weight", "shared.weight")
        W.copy("decoder.embed_tokens.weight", "shared.weight")

    def ff_block(p):
        if v == "v1.0":
            W.linear(p + "DenseReluDense.wi", ff, d, bias=False)
        else:
            W.linear(p + "DenseReluDense.wi_0", ff, d, bias=False)
            W.linear(p + "DenseReluDense.wi_1", ff, d, bias=False)
        W.linear(p + "DenseReluDense.wo", d, ff, bias=False)
        W.layernorm(p + "layer_norm", d, bias=False)

    def attn(p, name):
        for m in ("q", "k", "v"):
            W.linear(p + name + "." + m, H * dkv, d, bias=False)
        W.linear(p + name + ".o", d, H * dkv, bias=False)

    for stack, n in (("encoder", L), ("decoder", LD)):
        for i in range(n):
            p = "%s.block.%d.layer." % (stack, i)
            attn(p + "0.", "SelfAttention")
            if i == 0:
                W.w(p + "0.SelfAttention.relative_attention_bias.weight", (8, H), 0.5)
            W.layernorm(p + "0.layer_norm", d, bias=False)
            if stack == "decoder":
                attn(p + "1.", "EncDecAttention")
                W.layernorm(p + "1.layer_norm", d, bias=False)
                ff_block(p + "2.")
            else:
                ff_block(p + "1.")
        W.layernorm(stack + ".final_layer_norm", d, bias=False)
    if v == "v1.0":
        W.copy("lm_head.weight", "shared.weight")
    else:
        W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _bart(W, v):
    V, d, H, ff, L, n = 150, 32, 4, 64, 2, 64
    cfg = {
        "activation_dropout": 0.1, "activation_function": "gelu",
        "add_bias_logits": False, "add_final_layer_norm": False,
        "architectures": ["BartForConditionalGeneration"],
        "attention_dropout": 0.1, "bos_token_id": 0, "classifier_dropout": 0.0,
        "d_model": d, "decoder_attention_heads": H, "decoder_ffn_dim": ff,
        "decoder_layerdrop": 0.0, "decoder_layers": L,
        "decoder_start_token_id": 2, "dropout": 0.1,
        "encoder_attention_heads": H, "encoder_ffn_dim": ff,
        "encoder_layerdrop": 0.0, "encoder_layers": L, "eos_token_id": 2,
        "forced_eos_token_id": 2, "init_std": 0.02, "is_encoder_decoder": True,
        "max_position_embeddings": n, "model_type": "bart",
        "normalize_before": False, "num_hidden_layers": L, "pad_token_id": 1,
        "scale_embedding": True, "use_cache": True, "vocab_size": V,
    }
    W.w("model.shared.weight", (V, d), 0.2)
    W.copy("model.encoder.embed_tokens.weight", "model.shared.weight")
    W.copy("model.decoder.embed_tokens.weight", "model.shared.weight")

    def attn(p):
        for m in ("k_proj", "v_proj", "q_proj", "out_proj"):
            W.linear(p + "." + m, d, d)

    for stack in ("encoder", "decoder"):
        s = "model.%s." % stack
        W.w(s + "embed_positions.weight", (n + 2, d), 0.1)
        for i in range(L):
            p = s + "layers.%d." % i
            attn(p + "self_attn")
            W.layernorm(p + "self_attn_layer_norm", d)
            if stack == "decoder":
                attn(p + "encoder_attn")
                W.layernorm(p + "encoder_attn_layer_norm", d)
            W.linear(p + "fc1", ff, d)
            W.linear(p + "fc2", d, ff)
            W.layernorm(p + "final_layer_norm", d)
        W.layernorm(s + "layernorm_embedding", d)
    # A buffer BART adds to the logits (zeros in most published checkpoints;
    # random here so that leaving it out shows).
    W.w("final_logits_bias", (1, V), 0.1)
    W.copy("lm_head.weight", "model.shared.weight")
    return cfg, 1


def _whisper(W, v):
    V, d, H, ff, L, n, mel, nt = 120, 32, 4, 64, 2, 64, 8, 32
    cfg = {
        "activation_dropout": 0.0, "activation_function": "gelu",
        "architectures": ["WhisperForConditionalGeneration"],
        "attention_dropout": 0.0, "begin_suppress_tokens": [V - 4, V - 1],
        "bos_token_id": V - 1, "d_model": d, "decoder_attention_heads": H,
        "decoder_ffn_dim": ff, "decoder_layerdrop": 0.0, "decoder_layers": L,
        "decoder_start_token_id": V - 2, "dropout": 0.0,
        "encoder_attention_heads": H, "encoder_ffn_dim": ff,
        "encoder_layerdrop": 0.0, "encoder_layers": L, "eos_token_id": V - 1,
        "init_std": 0.02, "is_encoder_decoder": True,
        "max_source_positions": n, "max_target_positions": nt,
        "model_type": "whisper", "num_hidden_layers": L, "num_mel_bins": mel,
        "pad_token_id": V - 1, "scale_embedding": False,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": V,
    }

    def attn(p):
        W.linear(p + ".k_proj", d, d, bias=False)
        W.linear(p + ".v_proj", d, d)
        W.linear(p + ".q_proj", d, d)
        W.linear(p + ".out_proj", d, d)

    e = "model.encoder."
    W.w(e + "conv1.weight", (d, mel, 3), 0.1)
    W.w(e + "conv1.bias", (d,), 0.05)
    W.w(e + "conv2.weight", (d, d, 3), 0.1)
    W.w(e + "conv2.bias", (d,), 0.05)
    W.buffer(e + "embed_positions.weight", whisper_sinusoids(n, d))
    for i in range(L):
        p = e + "layers.%d." % i
        attn(p + "self_attn")
        W.layernorm(p + "self_attn_layer_norm", d)
        W.linear(p + "fc1", ff, d)
        W.linear(p + "fc2", d, ff)
        W.layernorm(p + "final_layer_norm", d)
    W.layernorm(e + "layer_norm", d)
    # The decoder a published Whisper carries (not used by the encoder model).
    dd = "model.decoder."
    W.w(dd + "embed_tokens.weight", (V, d), 0.2)
    W.w(dd + "embed_positions.weight", (nt, d), 0.1)
    for i in range(L):
        p = dd + "layers.%d." % i
        attn(p + "self_attn")
        W.layernorm(p + "self_attn_layer_norm", d)
        attn(p + "encoder_attn")
        W.layernorm(p + "encoder_attn_layer_norm", d)
        W.linear(p + "fc1", ff, d)
        W.linear(p + "fc2", d, ff)
        W.layernorm(p + "final_layer_norm", d)
    W.layernorm(dd + "layer_norm", d)
    return cfg, 1



# ---------------------------------------------------------------------------
# mixture-of-experts types: mixtral, qwen2_moe, qwen3_moe, olmoe, granitemoe
#
# Sizes: d_model 64, 4 heads over 2 kv heads, 8 experts, top 2, expert width
# 32, vocab 1000, 2 layers (qwen2_moe:sparse2: 3). Router weights have std
# 0.5: the router's input is RMS-normed (64 wide), so its logits have std
# about 4, the top-2 choice is far from a tie (hf_reference.py records the
# smallest gap between the k-th and (k+1)-th router probability; selfcheck.py
# requires it to exceed 1e-6), and the second expert still carries weight.

MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N = 1000, 64, 4, 2, 8, 2, 32, 64
ROUTER_STD = 0.5


def _moe_attention(W, p, d, H, KV, hd, qkv_bias=False, qk_norm=None):
    """q/k/v/o_proj (bias on q, k and v when qkv_bias), the two norms of the
    layer, and q_norm/k_norm: per head ("head", Qwen3-MoE: [head_dim]) or
    over the whole projection ("full", OLMoE: q [H*hd], k [KV*hd])."""
    W.linear(p + "self_attn.q_proj", H * hd, d, bias=qkv_bias)
    W.linear(p + "self_attn.k_proj", KV * hd, d, bias=qkv_bias)
    W.linear(p + "self_attn.v_proj", KV * hd, d, bias=qkv_bias)
    W.linear(p + "self_attn.o_proj", d, H * hd, bias=False)
    if qk_norm == "head":
        W.layernorm(p + "self_attn.q_norm", hd, bias=False)
        W.layernorm(p + "self_attn.k_norm", hd, bias=False)
    elif qk_norm == "full":
        W.layernorm(p + "self_attn.q_norm", H * hd, bias=False)
        W.layernorm(p + "self_attn.k_norm", KV * hd, bias=False)
    W.layernorm(p + "input_layernorm", d, bias=False)
    W.layernorm(p + "post_attention_layernorm", d, bias=False)


def _swiglu(W, p, d, ff, names=("gate_proj", "up_proj", "down_proj")):
    gate, up, down = names
    W.linear(p + gate, ff, d, bias=False)
    W.linear(p + up, ff, d, bias=False)
    W.linear(p + down, d, ff, bias=False)


def qwen_moe_sparse(i, cfg):
    """Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer: layer i has the sparse
    block when (i not in mlp_only_layers) and num_experts > 0 and
    (i + 1) % decoder_sparse_step == 0, else a dense MLP of intermediate_size."""
    return (i not in (cfg.get("mlp_only_layers") or []) and cfg.get("num_experts", 0) > 0
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def _mixtral(W, v):
    # Mixtral-8x7B-v0.1 style: all layers sparse, 8 experts top 2 (weights
    # always renormalized), GQA, no sliding window (null, as published),
    # experts w1 (gate) / w3 (up) / w2 (down) under block_sparse_moe; sharded.
    V, d, H, KV, E, K, F, n = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N
    L, hd = 2, MOE_D // MOE_H
    cfg = {
        "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
        "hidden_size": d, "initializer_range": 0.02, "intermediate_size": F,
        "max_position_embeddings": n, "model_type": "mixtral",
        "num_attention_heads": H, "num_experts_per_tok": K,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "num_local_experts": E, "output_router_logits": False,
        "rms_norm_eps": 1e-05, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "transformers_version": "4.36.0.dev0", "use_cache": True,
        "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        _moe_attention(W, p, d, H, KV, hd)
        m = p + "block_sparse_moe."
        W.w(m + "gate.weight", (E, d), ROUTER_STD)
        for e in range(E):
            _swiglu(W, m + "experts.%d." % e, d, F, ("w1", "w3", "w2"))
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 2


def _qwen2_moe(W, v):
    # a2.7b: Qwen1.5-MoE-A2.7B style: every layer sparse (decoder_sparse_step
    # 1), norm_topk_prob false, a shared expert (width 48) behind a sigmoid
    # gate, q/k/v bias. sparse2: decoder_sparse_step 2 over 3 layers (layer 1
    # sparse, layers 0 and 2 a dense MLP of intermediate_size 96) and
    # norm_topk_prob true.
    v = v or "a2.7b"
    V, d, H, KV, E, K, F, n = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N
    hd, ff, shared = MOE_D // MOE_H, 96, 48
    L, step, norm = (2, 1, False) if v == "a2.7b" else (3, 2, True)
    cfg = {
        "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0,
        "bos_token_id": V - 3, "decoder_sparse_step": step,
        "eos_token_id": V - 3, "hidden_act": "silu", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": ff,
        "max_position_embeddings": n, "max_window_layers": L,
        "model_type": "qwen2_moe", "moe_intermediate_size": F,
        "norm_topk_prob": norm, "num_attention_heads": H, "num_experts": E,
        "num_experts_per_tok": K, "num_hidden_layers": L,
        "num_key_value_heads": KV, "output_router_logits": False,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": shared, "sliding_window": n,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "transformers_version": "4.40.0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        _moe_attention(W, p, d, H, KV, hd, qkv_bias=True)
        if qwen_moe_sparse(i, cfg):
            m = p + "mlp."
            W.w(m + "gate.weight", (E, d), ROUTER_STD)
            for e in range(E):
                _swiglu(W, m + "experts.%d." % e, d, F)
            _swiglu(W, m + "shared_expert.", d, shared)
            W.w(m + "shared_expert_gate.weight", (1, d), 0.2)
        else:
            _swiglu(W, p + "mlp.", d, ff)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _qwen3_moe(W, v):
    # a3b: Qwen3-30B-A3B style: head_dim 32 with d_model 64 and 4 heads (q is
    # 128 wide), per-head q_norm/k_norm, no bias, norm_topk_prob true, every
    # layer sparse, no shared expert. mlp_only: mlp_only_layers [0] (layer 0
    # a dense MLP of intermediate_size 96) and norm_topk_prob false.
    v = v or "a3b"
    V, d, H, KV, E, K, F, n = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N
    L, hd, ff = 2, 32, 96
    mlp_only, norm = ([], True) if v == "a3b" else ([0], False)
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": V - 3,
        "decoder_sparse_step": 1, "eos_token_id": V - 2, "head_dim": hd,
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": ff, "max_position_embeddings": n,
        "max_window_layers": L, "mlp_only_layers": mlp_only,
        "model_type": "qwen3_moe", "moe_intermediate_size": F,
        "norm_topk_prob": norm, "num_attention_heads": H, "num_experts": E,
        "num_experts_per_tok": K, "num_hidden_layers": L,
        "num_key_value_heads": KV, "output_router_logits": False,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "float32",
        "transformers_version": "4.51.0", "use_cache": True,
        "use_sliding_window": False, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        _moe_attention(W, p, d, H, KV, hd, qk_norm="head")
        if qwen_moe_sparse(i, cfg):
            m = p + "mlp."
            W.w(m + "gate.weight", (E, d), ROUTER_STD)
            for e in range(E):
                _swiglu(W, m + "experts.%d." % e, d, F)
        else:
            _swiglu(W, p + "mlp.", d, ff)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _olmoe(W, v):
    # 0924: OLMoE-1B-7B-0924 style: q_norm/k_norm RMSNorm over the whole q
    # and k projections (q_norm [64], k_norm [KV * head_dim = 32] with GQA
    # 4/2), norm_topk_prob false, clip_qkv null, every layer sparse, expert
    # width = intermediate_size. clip: clip_qkv 1.0 (q and k after their
    # norms, and v, clamped to [-1, 1]: a good part of the values).
    v = v or "0924"
    V, d, H, KV, E, K, F, n = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N
    L, hd = 2, MOE_D // MOE_H
    cfg = {
        "architectures": ["OlmoeForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": None,
        "clip_qkv": 1.0 if v == "clip" else None, "eos_token_id": V - 1,
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": F, "max_position_embeddings": n,
        "model_type": "olmoe", "norm_topk_prob": False,
        "num_attention_heads": H, "num_experts": E, "num_experts_per_tok": K,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "output_router_logits": False, "pad_token_id": 1,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
        "router_aux_loss_coef": 0.01, "tie_word_embeddings": False,
        "torch_dtype": "float32", "transformers_version": "4.45.0",
        "use_cache": True, "vocab_size": V,
    }
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        _moe_attention(W, p, d, H, KV, hd, qk_norm="full")
        m = p + "mlp."
        W.w(m + "gate.weight", (E, d), ROUTER_STD)
        for e in range(E):
            _swiglu(W, m + "experts.%d." % e, d, F)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 1


def _granitemoe(W, v):
    # granite-3.0-1b-a400m style: top-k of the router logits, then softmax
    # over those k (GraniteMoeTopKGating); experts fused: input_linear
    # [E, 2F, d] (first F rows the gate, then the up projection),
    # output_linear [E, d, F], router.layer [E, d]; embedding_multiplier,
    # attention_multiplier (the attention scale, here 0.125, not head_dim^-0.5
    # = 0.25), residual_multiplier (on both branches), logits_scaling (a
    # divisor); tied head, not stored. plain: embedding_multiplier and
    # residual_multiplier 1 (the attention scale and the logits divisor
    # stay).
    V, d, H, KV, E, K, F, n = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F, MOE_N
    L, hd = 2, MOE_D // MOE_H
    cfg = {
        "architectures": ["GraniteMoeForCausalLM"], "attention_bias": False,
        "attention_dropout": 0.0, "attention_multiplier": 0.125,
        "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
        "hidden_act": "silu", "hidden_size": d, "initializer_range": 0.02,
        "intermediate_size": F, "logits_scaling": 6.0,
        "max_position_embeddings": n, "model_type": "granitemoe",
        "num_attention_heads": H, "num_experts_per_tok": K,
        "num_hidden_layers": L, "num_key_value_heads": KV,
        "num_local_experts": E, "output_router_logits": False,
        "pad_token_id": 0, "residual_multiplier": 0.22,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000.0,
        "router_aux_loss_coef": 0.01, "tie_word_embeddings": True,
        "torch_dtype": "float32", "transformers_version": "4.45.0",
        "use_cache": True, "vocab_size": V,
    }
    if v == "plain":
        cfg["embedding_multiplier"] = cfg["residual_multiplier"] = 1.0
    # std 0.1: times embedding_multiplier 12, 1.2, so that the branches,
    # scaled by residual_multiplier 0.22, still move the residual stream
    W.w("model.embed_tokens.weight", (V, d), 0.1)
    for i in range(L):
        p = "model.layers.%d." % i
        _moe_attention(W, p, d, H, KV, hd)
        m = p + "block_sparse_moe."
        W.w(m + "router.layer.weight", (E, d), ROUTER_STD)
        W.w(m + "input_linear.weight", (E, 2 * F, d), 0.1)
        W.w(m + "output_linear.weight", (E, d, F), 0.1)
    W.layernorm("model.norm", d, bias=False)
    return cfg, 1


# gpt-oss: MXFP4 as transformers' Mxfp4 quantizer stores GptOssExperts'
# gate_up_proj and down_proj.
def mxfp4_random(rng, rows_shape, k, scales):
    """Random MXFP4 blocks [*rows_shape, k / 32, 16] (two e2m1 codes a byte)
    and scales [*rows_shape, k / 32] drawn from `scales` (e8m0 exponents:
    the block's values are times 2^(scale - 127))."""
    g = k // 32
    blocks = rng.integers(0, 256, tuple(rows_shape) + (g, 16), dtype=np.uint8)
    sc = rng.choice(np.array(scales, dtype=np.uint8), tuple(rows_shape) + (g,))
    return blocks, sc


def _gpt_oss(W, v):
    # gpt-oss-20b style (config fields as published, OpenAI's
    # experts_per_token and initial_context_length included): 4 layers, the
    # even ones sliding (layer_types) within a window of 8; 4 heads over 2
    # kv heads of head_dim 16; q, k, v and o biases; attention sinks
    # (std 1, so that they matter); YaRN over original_max_position_embeddings
    # 256 (factor 4 = max_position_embeddings / 256), truncate false: with
    # head_dim 16 and theta 150000 the ramp runs over dimensions 0.16 ..
    # 2.49, so dimensions 1 and 2 are blended (and truncate matters); 8
    # experts, top 2 of the router's logits (with its bias), then their
    # softmax; experts with biases, gate and up interleaved in gate_up_proj
    # [E, d, 2F] (x @ W: input-major), down_proj [E, F, d]. The expert
    # weights (std 0.5 over unit-RMS inputs) give gate and up values of std
    # about 4: some pass the clamp at 7 (hf_reference.py counts them).
    # bf16: the experts unquantized (the layout of the "dequantized" and
    # BF16 checkpoints, stored F32 here); mxfp4: gate_up_proj and down_proj
    # as MXFP4 _blocks / _scales, as openai/gpt-oss-20b publishes them
    # (quantization_config mxfp4).
    v = v or "bf16"
    V, d, H, KV, E, K, F = MOE_V, MOE_D, MOE_H, MOE_KV, MOE_E, MOE_K, MOE_F
    L, hd, original, factor = 4, 16, 256, 4.0
    cfg = {
        "architectures": ["GptOssForCausalLM"], "attention_bias": True,
        "attention_dropout": 0.0, "eos_token_id": V - 2,
        "experts_per_token": K, "head_dim": hd, "hidden_act": "silu",
        "hidden_size": d, "initial_context_length": original,
        "initializer_range": 0.02, "intermediate_size": F,
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(L)],
        "max_position_embeddings": int(original * factor),
        "model_type": "gpt_oss", "num_attention_heads": H,
        "num_experts_per_tok": K, "num_hidden_layers": L,
        "num_key_value_heads": KV, "num_local_experts": E,
        "output_router_logits": False, "pad_token_id": V - 1,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": factor,
                         "original_max_position_embeddings": original,
                         "rope_type": "yarn", "truncate": False},
        "rope_theta": 150000, "router_aux_loss_coef": 0.9,
        "sliding_window": 8, "swiglu_limit": 7.0,
        "tie_word_embeddings": False, "transformers_version": "4.55.0.dev0",
        "use_cache": True, "vocab_size": V,
    }
    if v == "mxfp4":
        cfg["quantization_config"] = {
            "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                       "model.embed_tokens", "lm_head"],
            "quant_method": "mxfp4"}
    W.w("model.embed_tokens.weight", (V, d), 0.2)
    for i in range(L):
        p = "model.layers.%d." % i
        W.linear(p + "self_attn.q_proj", H * hd, d)
        W.linear(p + "self_attn.k_proj", KV * hd, d)
        W.linear(p + "self_attn.v_proj", KV * hd, d)
        W.linear(p + "self_attn.o_proj", d, H * hd)
        W.w(p + "self_attn.sinks", (H,), 1.0)
        W.layernorm(p + "input_layernorm", d, bias=False)
        W.layernorm(p + "post_attention_layernorm", d, bias=False)
        m = p + "mlp."
        W.linear(m + "router", E, d, std=ROUTER_STD)
        W.w(m + "router.bias", (E,), ROUTER_STD)
        if v == "mxfp4":
            # Mxfp4GptOssExperts: gate_up_proj_blocks [E, 2F, d / 32, 16],
            # down_proj_blocks [E, d, F / 32, 16] and their scales.
            for name, rows, k, scales in (("gate_up_proj", (E, 2 * F), d, (124, 125)),
                                          ("down_proj", (E, d), F, (122, 123))):
                blocks, sc = mxfp4_random(W.rng, rows, k, scales)
                W.buffer(m + "experts.%s_blocks" % name, blocks)
                W.buffer(m + "experts.%s_scales" % name, sc)
        else:
            W.w(m + "experts.gate_up_proj", (E, d, 2 * F), 0.5)
            W.w(m + "experts.down_proj", (E, F, d), 0.2)
        W.w(m + "experts.gate_up_proj_bias", (E, 2 * F), 0.5)
        W.w(m + "experts.down_proj_bias", (E, d), 0.1)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 2


# DeepSeek-V2 and V3 (modeling_deepseek_v2.py, modeling_deepseek_v3.py):
# multi-head latent attention, dense MLPs in the first
# first_k_dense_replace layers and routed plus shared experts after them,
# FP8 linear weights with block scales (quantization_config fp8).


def e4m3_values():
    """The value of each of the 256 OCP e4m3fn codes (NaN for 0x7F, 0xFF):
    sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
    subnormal (m / 8 * 2^-6), and there are no infinities."""
    out = np.empty(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        out[c] = -v if s else v
    return out


def fp8_block_quantize(w, block):
    """w [N, K] (float) as DeepSeek's FP8 checkpoints store it: e4m3 codes
    [N, K] and weight_scale_inv [ceil(N / rows), ceil(K / cols)] (float32),
    each block scaled so that its largest |value| is 448 (the largest e4m3
    value), the codes the nearest e4m3 value of w / scale. The weight the
    checkpoint holds is codes * scale, not w."""
    rows, cols = block
    n, k = w.shape
    table = e4m3_values()
    finite = np.array([c for c in range(256) if not np.isnan(table[c])])
    order = finite[np.argsort(table[finite], kind="stable")]
    sorted_vals = table[order]
    scale = np.zeros(((n + rows - 1) // rows, (k + cols - 1) // cols), dtype=np.float32)
    codes = np.zeros((n, k), dtype=np.uint8)
    for bi in range(scale.shape[0]):
        for bj in range(scale.shape[1]):
            blk = w[bi * rows:(bi + 1) * rows, bj * cols:(bj + 1) * cols].astype(np.float64)
            s = np.float32(max(np.abs(blk).max(), 1e-12) / 448.0)
            q = blk / np.float64(s)
            i = np.clip(np.searchsorted(sorted_vals, q), 1, len(sorted_vals) - 1)
            lo, hi = sorted_vals[i - 1], sorted_vals[i]
            pick = np.where(np.abs(q - lo) <= np.abs(hi - q), i - 1, i)
            codes[bi * rows:(bi + 1) * rows, bj * cols:(bj + 1) * cols] = order[pick]
            scale[bi, bj] = s
    return codes, scale


def _deepseek(W, v, v3):
    # Written as deepseek-ai publishes them: config fields of DeepSeek's own
    # configuration_deepseek.py included (topk_method, scoring_func,
    # moe_layer_freq, aux_loss_alpha, seq_aux, ...), YaRN in rope_scaling
    # with the older "type" spelling; 3 layers, the first a dense MLP
    # (first_k_dense_replace 1), then 8 routed experts (width 16) of which
    # 2 run for each token, and the shared experts. head_dim 24 = 16
    # unrotated + 8 rotated (qk_rope_head_dim), values of 12 (V3) or 16;
    # YaRN over original_max_position_embeddings 16 (factor 4 = 64 / 16) with
    # mscale = mscale_all_dim, so that the rotation's attention factor is 1
    # and the softmax scale is times mscale^2.
    #   deepseek_v2 (lite): DeepSeek-V2-Lite: q_proj (q_lora_rank null),
    #     topk_method greedy, routed_scaling_factor 1, 2 shared experts.
    #   deepseek_v2:grouped: DeepSeek-V2: q_a_proj / q_b_proj (q_lora_rank
    #     24), group_limited_greedy over 4 groups, the best 2, routed_scaling_
    #     factor 4; 3 experts a token (with a group scoring its best
    #     probability, more experts than groups chosen make the groups
    #     matter).
    #   deepseek_v3 (bf16): DeepSeek-V3: noaux_tc (sigmoid scores, chosen
    #     with e_score_correction_bias among the 2 best of 4 groups, a group
    #     scoring its two best), norm_topk_prob, routed_scaling_factor 2.5,
    #     1 shared expert, rope_interleave (absent: true); an FP8 checkpoint's
    #     weights as F32 (its BF16 re-uploads' layout).
    #   deepseek_v3:fp8: as deepseek_v3 with every linear weight of attention
    #     and of the MLPs and experts stored F8_E4M3 with weight_scale_inv in
    #     blocks of [16, 32] (quantization_config fp8), so that the blocks of
    #     one matrix have different scales and the last ones are partial.
    V, d, H, L, E, K, F, n = MOE_V, MOE_D, MOE_H, 3, MOE_E, MOE_K, 16, MOE_N
    nope, rope, original = 16, 8, 16
    grouped = v == "grouped"
    q_rank = 24 if v3 or grouped else None
    kv_rank = 16 if v3 else 32
    vdim = 12 if v3 else 16
    shared = 1 if v3 else 2
    mscale = 1.0 if v3 else 0.707
    cfg = {
        "architectures": ["DeepseekV3ForCausalLM" if v3 else "DeepseekV2ForCausalLM"],
        "attention_bias": False, "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration_deepseek.%sConfig" % ("DeepseekV3" if v3 else "DeepseekV2"),
                     "AutoModelForCausalLM": "modeling_deepseek.%sForCausalLM" % (
                         "DeepseekV3" if v3 else "DeepseekV2")},
        "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1,
        "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": d,
        "initializer_range": 0.02, "intermediate_size": 48,
        "kv_lora_rank": kv_rank, "max_position_embeddings": n,
        "model_type": "deepseek_v3" if v3 else "deepseek_v2",
        "moe_intermediate_size": F, "moe_layer_freq": 1,
        "n_group": 4 if v3 or grouped else 1, "n_routed_experts": E,
        "n_shared_experts": shared, "norm_topk_prob": v3,
        "num_attention_heads": H, "num_experts_per_tok": 3 if grouped else K,
        "num_hidden_layers": L, "num_key_value_heads": H,
        "pretraining_tp": 1, "q_lora_rank": q_rank,
        "qk_nope_head_dim": nope, "qk_rope_head_dim": rope,
        "rms_norm_eps": 1e-06,
        "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": n // original,
                         "mscale": mscale, "mscale_all_dim": mscale,
                         "original_max_position_embeddings": original, "type": "yarn"},
        "rope_theta": 10000,
        "routed_scaling_factor": 2.5 if v3 else 4.0 if grouped else 1.0,
        "scoring_func": "sigmoid" if v3 else "softmax", "seq_aux": True,
        "tie_word_embeddings": False,
        "topk_group": 2 if v3 or grouped else 1,
        "topk_method": "noaux_tc" if v3 else "group_limited_greedy" if grouped else "greedy",
        "torch_dtype": "float32", "transformers_version": "4.33.1",
        "use_cache": True, "v_head_dim": vdim, "vocab_size": V,
    }
    if v3:
        cfg["ep_size"] = 1
        cfg["num_nextn_predict_layers"] = 1
    block = (16, 32)
    if v == "fp8":
        cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3",
                                      "quant_method": "fp8", "weight_block_size": list(block)}

    def lin(name, out, inp, std=0.1):
        if v != "fp8":
            W.w(name + ".weight", (out, inp), std)
            return
        codes, scale = fp8_block_quantize(W.randn((out, inp), std), block)
        W.buffer(name + ".weight", F8E4M3(codes))
        W.buffer(name + ".weight_scale_inv", scale)

    def mlp(p, width):
        lin(p + "gate_proj", width, d)
        lin(p + "up_proj", width, d)
        lin(p + "down_proj", d, width)

    W.w("model.embed_tokens.weight", (V, d), 0.2)
    hd = nope + rope
    for i in range(L):
        p = "model.layers.%d." % i
        a = p + "self_attn."
        if q_rank:
            lin(a + "q_a_proj", q_rank, d)
            W.layernorm(a + "q_a_layernorm", q_rank, bias=False)
            lin(a + "q_b_proj", H * hd, q_rank, 0.2)
        else:
            lin(a + "q_proj", H * hd, d)
        lin(a + "kv_a_proj_with_mqa", kv_rank + rope, d)
        W.layernorm(a + "kv_a_layernorm", kv_rank, bias=False)
        lin(a + "kv_b_proj", H * (nope + vdim), kv_rank, 0.2)
        lin(a + "o_proj", d, H * vdim)
        W.layernorm(p + "input_layernorm", d, bias=False)
        W.layernorm(p + "post_attention_layernorm", d, bias=False)
        if i < cfg["first_k_dense_replace"]:
            mlp(p + "mlp.", cfg["intermediate_size"])
            continue
        m = p + "mlp."
        W.w(m + "gate.weight", (E, d), ROUTER_STD)
        if v3:
            # A float32 buffer in DeepSeek-V3's checkpoints, of the size of
            # the sigmoid scores' differences: it changes which experts run.
            W.w(m + "gate.e_score_correction_bias", (E,), 0.1)
        for e in range(E):
            mlp(m + "experts.%d." % e, F)
        mlp(m + "shared_experts.", F * shared)
    W.layernorm("model.norm", d, bias=False)
    W.w("lm_head.weight", (V, d), 0.1)
    return cfg, 2 if v3 else 1


def _deepseek_v2(W, v):
    return _deepseek(W, v or "lite", False)


def _deepseek_v3(W, v):
    return _deepseek(W, v or "bf16", True)


BUILDERS = {
    "gpt2": _gpt2, "gpt_neox": _gpt_neox, "gptj": _gptj, "llama": _llama,
    "mistral": _mistral, "qwen2": _qwen2, "qwen3": _qwen3, "gemma": _gemma,
    "gemma2": _gemma2, "phi": _phi, "phi3": _phi3, "falcon": _falcon,
    "bloom": _bloom, "bert": _bert, "roberta": _roberta, "vit": _vit,
    "t5": _t5, "bart": _bart, "whisper": _whisper, "mixtral": _mixtral,
    "qwen2_moe": _qwen2_moe, "qwen3_moe": _qwen3_moe, "olmoe": _olmoe,
    "granitemoe": _granitemoe, "gpt_oss": _gpt_oss,
    "deepseek_v2": _deepseek_v2, "deepseek_v3": _deepseek_v3,
}


def split_case(case):
    t, _, v = case.partition(":")
    return t, (v or None)


def make(model_type, folder, seed=0, variant=None, dtype="F32"):
    """Writes a model folder; returns its config (a dict).

    dtype F16 or BF16 stores the floating-point parameters in that type
    (buffers keep theirs) and sets torch_dtype.
    """
    if model_type not in BUILDERS:
        raise ValueError("unknown model type %r (known: %s)" % (model_type, ", ".join(sorted(BUILDERS))))
    if variant is not None and variant not in VARIANTS.get(model_type, []):
        raise ValueError("unknown variant %r of %s (known: %s)" % (
            variant, model_type, ", ".join(VARIANTS.get(model_type, [])) or "none"))
    os.makedirs(folder, exist_ok=True)
    W = Weights(seed)
    cfg, shards = BUILDERS[model_type](W, variant)
    tensors = W.t
    if dtype != "F32":
        out = {}
        for name, a in tensors.items():
            if (isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim > 0
                    and not name.endswith(("inv_freq", "masked_bias", "weight_scale_inv"))):
                out[name] = a.astype(np.float16) if dtype == "F16" else BF16(a)
            else:
                out[name] = a
        tensors = out
        cfg["torch_dtype"] = "float16" if dtype == "F16" else "bfloat16"
    cfg = dict(sorted(cfg.items()))
    cfg["transformers_version"] = cfg.get("transformers_version", "4.44.0")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    write_checkpoint(folder, tensors, shards)
    return cfg


# Sequences at least this long, so that what the type's case tests shows:
# gpt_oss's sliding window of 8.
MIN_SEQ = {"gpt_oss": 16}


def make_inputs(model_type, folder, batch=2, seq=7, seed=0, tgt_seq=None):
    """Random inputs under the names of the compiled tfm model."""
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    seq = max(seq, MIN_SEQ.get(model_type, 0))
    rng = np.random.default_rng(seed + 1000)
    V = cfg.get("vocab_size")
    if model_type == "vit":
        C, S = cfg["num_channels"], cfg["image_size"]
        return {"pixels": rng.standard_normal((batch, C, S, S)).astype(np.float32)}
    if model_type == "whisper":
        return {"features": rng.standard_normal((batch, seq, cfg["d_model"])).astype(np.float32)}
    if model_type in ("t5", "bart"):
        t = tgt_seq or max(2, seq - 2)
        return {"src": rng.integers(0, V, (batch, seq), dtype=np.int32),
                "tgt": rng.integers(0, V, (batch, t), dtype=np.int32)}
    if model_type == "roberta":
        # RoBERTa numbers positions from pad_token_id + 1 past non-pad
        # tokens: keep the padding id out of the input.
        pad = cfg["pad_token_id"]
        ids = rng.integers(0, V - 1, (batch, seq), dtype=np.int32)
        return {"tokens": np.where(ids >= pad, ids + 1, ids).astype(np.int32)}
    inputs = {"tokens": rng.integers(0, V, (batch, seq), dtype=np.int32)}
    if model_type == "bert":
        inputs["types"] = rng.integers(0, cfg["type_vocab_size"], (batch, seq), dtype=np.int32)
    return inputs


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", nargs="?", help="TYPE or TYPE:VARIANT")
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"])
    ap.add_argument("--list", action="store_true", help="print the cases the tests use")
    ap.add_argument("--moe", action="store_true", help="with --list: the mixture-of-experts cases")
    ap.add_argument("--deepseek", action="store_true", help="with --list: the DeepSeek cases")
    args = ap.parse_args(argv)
    if args.list:
        print("\n".join(DEEPSEEK_CASES if args.deepseek else MOE_CASES if args.moe else CASES))
        return 0
    if not args.case or not args.folder:
        ap.error("give TYPE[:VARIANT] and FOLDER")
    t, v = split_case(args.case)
    try:
        make(t, args.folder, args.seed, v, args.dtype)
    except ValueError as e:
        print("hf_models.py: %s" % e, file=sys.stderr)
        return 1
    print("wrote %s model to %s" % (args.case, args.folder))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
