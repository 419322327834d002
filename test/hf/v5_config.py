#!/usr/bin/env python3
"""A transformers 4 config.json in the form transformers 5 saves it.

to_v5(cfg) follows what transformers 5's configuration classes do when they
load a config and save it again (read from their source: PreTrainedConfig's
__post_init__ and to_dict, RotaryEmbeddingConfigMixin's
convert_rope_params_to_dict and standardize_rope_params in
modeling_rope_utils.py, and the overrides of GPTNeoXConfig, Phi3Config,
PhiConfig, T5Config, Qwen2/Qwen3Config and Gemma2Config):

- rope_theta (GPT-NeoX: rotary_emb_base) and rope_scaling move into one
  rope_parameters dict with a rope_type; partial_rotary_factor (GPT-NeoX:
  rotary_pct) goes in as well (Phi, Phi-3 and GPT-NeoX always, with their
  defaults 0.5, 1.0 and 0.25); Phi and Phi-3 also keep it at the top level;
  llama3 scaling gets original_max_position_embeddings (Phi-3's top-level
  value wins);
- torch_dtype is written as dtype;
- Qwen2, Qwen3, Gemma 2 and gpt-oss write layer_types (Qwen: sliding_window
  is null without use_sliding_window); gpt-oss writes swiglu_alpha;
- T5 writes scale_decoder_outputs (the old tie_word_embeddings) and
  tie_word_embeddings = true;
- DeepSeek-V2 and V3 write head_dim (= qk_rope_head_dim), V3 qk_head_dim
  and rope_interleave, V2 mlp_bias;
- Gemma and Gemma 2 write use_bidirectional_attention = false; the encoder
  and encoder-decoder types write is_decoder / add_cross_attention = false.

    v5_config.py IN OUT     (IN: a config.json or a folder holding one)
"""
import copy
import json
import os
import sys

ROPE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi",
              "phi3", "falcon", "gpt_neox", "gpt_oss", "deepseek_v2",
              "deepseek_v3"}

# The configuration classes' default_theta where it is not 10000.
DEFAULT_THETA = {"gpt_oss": 150000.0}


def _rope_parameters(cfg, mt):
    scaling = cfg.pop("rope_scaling", None)
    params = dict(scaling) if scaling else {}
    if mt == "gpt_neox":
        theta = cfg.pop("rotary_emb_base", cfg.pop("rope_theta", 10000.0))
        pct = cfg.pop("rotary_pct", cfg.pop("partial_rotary_factor", 0.25))
        params.setdefault("rope_theta", theta)
        params.setdefault("partial_rotary_factor", pct)
    else:
        params.setdefault("rope_theta", cfg.pop("rope_theta", DEFAULT_THETA.get(mt, 10000.0)))
        if mt == "phi":
            cfg.setdefault("partial_rotary_factor", 0.5)
        if mt == "phi3":
            params.setdefault("partial_rotary_factor",
                              cfg.get("partial_rotary_factor", 1.0))
        elif "partial_rotary_factor" in cfg:
            params["partial_rotary_factor"] = cfg["partial_rotary_factor"]
    params.setdefault("rope_type", params.get("type", "default"))
    if params["rope_type"] in ("llama3", "yarn", "longrope"):
        if "original_max_position_embeddings" in cfg:
            params["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
        else:
            params.setdefault("original_max_position_embeddings",
                              cfg.get("max_position_embeddings"))
    for key in ("beta_fast", "beta_slow", "factor"):
        if key in params:
            params[key] = float(params[key])
    cfg["rope_parameters"] = params


def to_v5(v4):
    cfg = copy.deepcopy(v4)
    mt = cfg["model_type"]
    if "torch_dtype" in cfg:
        cfg["dtype"] = cfg.pop("torch_dtype")
    if mt in ROPE_TYPES:
        _rope_parameters(cfg, mt)
    layers = cfg.get("num_hidden_layers")
    if mt in ("qwen2", "qwen3"):
        if not cfg.get("use_sliding_window", False):
            cfg["sliding_window"] = None
        window = cfg.get("sliding_window")
        mwl = cfg.get("max_window_layers", 28)
        cfg.setdefault("layer_types", [
            "sliding_attention" if window is not None and i >= mwl else "full_attention"
            for i in range(layers)])
    if mt == "gemma2":
        cfg.setdefault("layer_types", [
            "sliding_attention" if (i + 1) % 2 else "full_attention"
            for i in range(layers)])
        cfg.pop("cache_implementation", None)
    if mt == "gpt_oss":
        # GptOssConfig.__post_init__ fills layer_types; the class has
        # swiglu_alpha beside swiglu_limit.
        cfg.setdefault("layer_types", [
            "sliding_attention" if (i + 1) % 2 else "full_attention"
            for i in range(layers)])
        cfg.setdefault("swiglu_alpha", 1.702)
    if mt in ("deepseek_v2", "deepseek_v3"):
        # Both classes set head_dim = qk_rope_head_dim; DeepseekV3Config
        # also qk_head_dim and rope_interleave, DeepseekV2Config (a
        # LlamaConfig) mlp_bias.
        cfg["head_dim"] = cfg.get("qk_rope_head_dim", 64)
        if mt == "deepseek_v3":
            cfg["qk_head_dim"] = cfg.get("qk_nope_head_dim", 128) + cfg["head_dim"]
            cfg.setdefault("rope_interleave", True)
        else:
            cfg.setdefault("mlp_bias", False)
    if mt in ("gemma", "gemma2"):
        cfg.setdefault("use_bidirectional_attention", False)
    if mt == "t5":
        cfg["scale_decoder_outputs"] = cfg.pop("tie_word_embeddings", None) is not False
        cfg["tie_word_embeddings"] = True
    if mt in ("t5", "bart", "whisper", "bert", "roberta", "vit", "gpt2", "bloom"):
        cfg.setdefault("is_decoder", False)
    if mt in ("bert", "roberta", "vit", "gpt2", "bloom"):
        cfg.setdefault("add_cross_attention", False)
    cfg["transformers_version"] = "5.0.0"
    return cfg


def main():
    src, out = sys.argv[1], sys.argv[2]
    if os.path.isdir(src):
        src = os.path.join(src, "config.json")
    with open(src) as f:
        cfg = json.load(f)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(to_v5(cfg), f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
