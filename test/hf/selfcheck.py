#!/usr/bin/env python3
"""Self-checks of hf_models.py and hf_reference.py that need no compiler.

  - every case: the folder is written, the forward pass runs, is finite and
    has the shape its config implies;
  - checkpoint forms: a sharded checkpoint rewritten as one file, and a
    checkpoint with the base-model prefix added or removed, give the same
    output (the reference reads what Hugging Face reads);
  - sensitivity: each config field a test relies on changes the output when
    changed (so a compiled model that ignored the field would fail
    models.test), and so does each kind of tensor a loader must not confuse;
  - the ALiBi slopes and T5 buckets of the reference agree with DSL.md's
    description of them, written here a second time from that text;
  - mixture of experts (hf_models.MOE_CASES): the published tensor names and
    shapes (gpt-oss's stacked, interleaved and MXFP4 experts), which layers
    are sparse, no top-k choice near a tie (gap between
    the k-th and (k+1)-th router probability over 1e-6), the reference's
    sparse block against a literal transcription of each Hugging Face loop,
    1 expert with top-1 equal to the dense SwiGLU MLP, renormalized weights
    summing to 1, GraniteMoE's top-k-then-softmax equal to softmax, top-k,
    renormalize; gpt-oss: its sinks, biases, interleaved gate and up, MXFP4
    nibble order and scales matter, the clamp at 7 is reached and matters,
    and the MXFP4 experts equal their dequantized form;
  - DeepSeek (hf_models.DEEPSEEK_CASES): no group or expert choice near a
    tie, the config fields (YaRN's mscale in the softmax scale,
    rope_interleave, the routers' fields) and tensors (the selection bias,
    the latents' norms, the RoPE key's rows, the FP8 scales) matter, and
    the FP8 checkpoint equals its dequantized weights.

    selfcheck.py --work DIR [--moe]     (--moe: the mixture-of-experts and DeepSeek cases only)
"""
import argparse
import json
import math
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_models  # noqa: E402
import hf_reference  # noqa: E402

FAILED = []


def report(ok, what):
    print("%s %s" % ("PASS" if ok else "FAIL", what))
    if not ok:
        FAILED.append(what)


def rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(b).max(), 1e-30))


def expected_shape(mt, cfg, inputs):
    if mt == "vit":
        n = (cfg["image_size"] // cfg["patch_size"]) ** 2 + 1
        return [inputs["pixels"].shape[0], n, cfg["hidden_size"]]
    if mt in ("bert", "roberta"):
        return list(inputs["tokens"].shape) + [cfg["hidden_size"]]
    if mt == "whisper":
        return list(inputs["features"].shape)
    if mt in ("t5", "bart"):
        return list(inputs["tgt"].shape) + [cfg["vocab_size"]]
    return list(inputs["tokens"].shape) + [cfg["vocab_size"]]


def with_config(src, dst, **changes):
    """A copy of the folder with config fields changed (None deletes)."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    with open(os.path.join(dst, "config.json")) as f:
        cfg = json.load(f)
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f)
    return dst


def with_tensors(src, dst, fn):
    """A copy of the folder with its tensors rewritten as one file by fn."""
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    shutil.copy(os.path.join(src, "config.json"), dst)
    _, t = hf_reference.load(src)
    t = fn({k: v.numpy() for k, v in t.items()})
    hf_models.write_safetensors(os.path.join(dst, "model.safetensors"), t)
    return dst


# (case, config changes, why) -- each must change the output by more than
# 1e-3 relative (gelu against its tanh approximation: more than the 1e-4 of
# models.test; the two differ by at most ~5e-4 anywhere, so that is as much
# as a small model shows).
SENSITIVE = [
    ("gpt_neox", {"use_parallel_residual": False}, "NeoX parallel residual"),
    ("gpt_neox", {"rotary_pct": 0.5}, "NeoX partial rotary"),
    ("gptj", {"rotary_dim": 16}, "GPT-J partial rotary"),
    ("llama:llama3", {"rope_scaling": None}, "llama3 rope scaling"),
    ("llama:llama3", {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}, "llama3 vs linear scaling"),
    ("llama:linear", {"rope_scaling": None}, "linear rope scaling"),
    ("mistral", {"sliding_window": None}, "Mistral sliding window"),
    ("gemma", {"hidden_activation": "gelu"}, "Gemma gelu_pytorch_tanh (not hidden_act)", 1e-4),
    ("gemma2", {"attn_logit_softcapping": None}, "Gemma 2 attention softcap"),
    ("gemma2", {"final_logit_softcapping": None}, "Gemma 2 final softcap"),
    ("gemma2", {"query_pre_attn_scalar": 16}, "Gemma 2 query_pre_attn_scalar"),
    ("gemma2", {"sliding_window": 64}, "Gemma 2 sliding window"),
    ("phi", {"partial_rotary_factor": 1.0}, "Phi partial rotary"),
    ("t5:v1.1", {"relative_attention_max_distance": 128}, "T5 max_distance (log buckets)"),
    ("t5:v1.0", {"relative_attention_max_distance": 8}, "T5 max_distance (v1.0)"),
    ("gpt2", {"activation_function": "gelu"}, "GPT-2 gelu_new", 1e-4),
    ("t5:v1.1", {"feed_forward_proj": "gated-silu"}, "T5 v1.1 gated-gelu"),
    ("bart", {"scale_embedding": False}, "BART scale_embedding"),
]

SENSITIVE_MOE = [
    ("mixtral", {"num_experts_per_tok": 1}, "Mixtral num_experts_per_tok"),
    ("qwen2_moe", {"norm_topk_prob": True}, "Qwen2-MoE norm_topk_prob"),
    ("qwen2_moe:sparse2", {"norm_topk_prob": False}, "Qwen2-MoE norm_topk_prob (sparse2)"),
    ("qwen3_moe", {"norm_topk_prob": False}, "Qwen3-MoE norm_topk_prob"),
    ("qwen3_moe:mlp_only", {"norm_topk_prob": True}, "Qwen3-MoE norm_topk_prob (mlp_only)"),
    ("olmoe", {"norm_topk_prob": True}, "OLMoE norm_topk_prob"),
    ("olmoe", {"clip_qkv": 1.0}, "OLMoE clip_qkv (set)"),
    ("olmoe:clip", {"clip_qkv": None}, "OLMoE clip_qkv (removed)"),
    ("granitemoe", {"attention_multiplier": 0.25}, "GraniteMoE attention_multiplier"),
    ("granitemoe", {"embedding_multiplier": 1.0}, "GraniteMoE embedding_multiplier"),
    ("granitemoe", {"residual_multiplier": 1.0}, "GraniteMoE residual_multiplier"),
    ("granitemoe", {"logits_scaling": 1.0}, "GraniteMoE logits_scaling"),
    ("granitemoe", {"num_experts_per_tok": 3}, "GraniteMoE num_experts_per_tok"),
    ("gpt_oss", {"num_experts_per_tok": 1}, "gpt-oss num_experts_per_tok"),
    ("gpt_oss", {"sliding_window": 64}, "gpt-oss sliding_window"),
    ("gpt_oss", {"layer_types": ["full_attention"] * 4}, "gpt-oss layer_types"),
    ("gpt_oss", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "original_max_position_embeddings": 256, "truncate": True}},
     "gpt-oss YaRN truncate"),
    ("gpt_oss", {"rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "original_max_position_embeddings": 128, "truncate": False}},
     "gpt-oss YaRN factor and original context"),
    ("gpt_oss", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 8.0, "beta_slow": 1.0,
                                  "original_max_position_embeddings": 256, "truncate": False}},
     "gpt-oss YaRN beta_fast"),
    ("gpt_oss:mxfp4", {"num_experts_per_tok": 1}, "gpt-oss num_experts_per_tok (mxfp4)"),
]


def moe_layout(case, cfg):
    """The published names and shapes a folder of the case must hold (layer
    by layer), and the names it must not."""
    mt, v = hf_models.split_case(case)
    d, E, H = cfg["hidden_size"], hf_models.MOE_E, cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // H
    F = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    want, absent = {}, []
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        want[p + "self_attn.q_proj.weight"] = [H * hd, d]
        want[p + "self_attn.k_proj.weight"] = [KV * hd, d]
        if mt == "mixtral":
            m = p + "block_sparse_moe."
            want[m + "gate.weight"] = [E, d]
            for e in range(E):
                want[m + "experts.%d.w1.weight" % e] = [F, d]
                want[m + "experts.%d.w3.weight" % e] = [F, d]
                want[m + "experts.%d.w2.weight" % e] = [d, F]
        elif mt == "granitemoe":
            m = p + "block_sparse_moe."
            want[m + "router.layer.weight"] = [E, d]
            want[m + "input_linear.weight"] = [E, 2 * F, d]
            want[m + "output_linear.weight"] = [E, d, F]
        elif mt == "gpt_oss":
            # GptOssExperts (input-major), or Mxfp4GptOssExperts' blocks
            # [E, 2F, d / 32, 16] and [E, d, F / 32, 16] and their scales.
            m = p + "mlp."
            want[m + "router.weight"] = [E, d]
            want[m + "router.bias"] = [E]
            want[p + "self_attn.sinks"] = [H]
            want[p + "self_attn.o_proj.bias"] = [d]
            want[m + "experts.gate_up_proj_bias"] = [E, 2 * F]
            want[m + "experts.down_proj_bias"] = [E, d]
            if v == "mxfp4":
                want[m + "experts.gate_up_proj_blocks"] = [E, 2 * F, d // 32, 16]
                want[m + "experts.gate_up_proj_scales"] = [E, 2 * F, d // 32]
                want[m + "experts.down_proj_blocks"] = [E, d, F // 32, 16]
                want[m + "experts.down_proj_scales"] = [E, d, F // 32]
                absent.append(m + "experts.gate_up_proj")
            else:
                want[m + "experts.gate_up_proj"] = [E, d, 2 * F]
                want[m + "experts.down_proj"] = [E, F, d]
                absent.append(m + "experts.gate_up_proj_blocks")
        elif mt in ("qwen2_moe", "qwen3_moe") and not hf_reference.qwen_moe_sparse(i, cfg):
            want[p + "mlp.gate_proj.weight"] = [cfg["intermediate_size"], d]
            want[p + "mlp.down_proj.weight"] = [d, cfg["intermediate_size"]]
            absent.append(p + "mlp.gate.weight")
        else:
            m = p + "mlp."
            want[m + "gate.weight"] = [E, d]
            for e in range(E):
                want[m + "experts.%d.gate_proj.weight" % e] = [F, d]
                want[m + "experts.%d.up_proj.weight" % e] = [F, d]
                want[m + "experts.%d.down_proj.weight" % e] = [d, F]
            if mt == "qwen2_moe":
                S = cfg["shared_expert_intermediate_size"]
                want[m + "shared_expert.gate_proj.weight"] = [S, d]
                want[m + "shared_expert.down_proj.weight"] = [d, S]
                want[m + "shared_expert_gate.weight"] = [1, d]
        if mt in ("qwen2_moe", "gpt_oss"):
            want[p + "self_attn.q_proj.bias"] = [H * hd]
        if mt == "qwen3_moe":
            want[p + "self_attn.q_norm.weight"] = [hd]
            want[p + "self_attn.k_norm.weight"] = [hd]
        if mt == "olmoe":
            want[p + "self_attn.q_norm.weight"] = [H * hd]
            want[p + "self_attn.k_norm.weight"] = [KV * hd]
    if mt == "granitemoe":
        absent.append("lm_head.weight")
    return want, absent


def hf_loop_block(mt, cfg, W, m, h, act):
    """The sparse block as the Hugging Face code loops, transcribed line by
    line (MixtralSparseMoeBlock.forward / Qwen2MoeSparseMoeBlock.forward /
    OlmoeSparseMoeBlock.forward; GraniteMoeTopKGating + GraniteMoeMoE.forward
    + GraniteMoeParallelExperts.forward), to check the reference's gathered
    form against."""
    import torch
    import torch.nn.functional as F
    batch_size, sequence_length, hidden_dim = h.shape
    hidden_states = h.reshape(-1, hidden_dim)
    top_k = cfg["num_experts_per_tok"]
    if mt == "gpt_oss":
        # GptOssTopKRouter.forward, then the loop of GptOssExperts.forward
        # (its training / CPU branch).
        router_logits = F.linear(hidden_states, W[m + "router.weight"], W[m + "router.bias"])
        router_top_value, router_indices = torch.topk(router_logits, top_k, dim=-1)
        router_top_value = torch.nn.functional.softmax(router_top_value, dim=1, dtype=router_top_value.dtype)
        routing_weights = torch.zeros_like(router_logits).scatter_(1, router_indices, router_top_value)
        gate_up_proj, down_proj = hf_reference.gpt_oss_expert_weights(W, m)
        gate_up_proj_bias, down_proj_bias = W[m + "experts.gate_up_proj_bias"], W[m + "experts.down_proj_bias"]
        limit, alpha = 7.0, 1.702
        num_experts = routing_weights.shape[1]
        next_states = torch.zeros_like(hidden_states)
        expert_mask = torch.nn.functional.one_hot(router_indices, num_classes=num_experts + 1)
        expert_mask = expert_mask.permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit[:]:
            expert_idx = expert_idx[0]
            if expert_idx == num_experts:
                continue
            _, token_idx = torch.where(expert_mask[expert_idx])
            current_state = hidden_states[token_idx]
            gate_up = current_state @ gate_up_proj[expert_idx] + gate_up_proj_bias[expert_idx]
            gate, up = gate_up[..., ::2], gate_up[..., 1::2]
            gate = gate.clamp(min=None, max=limit)
            up = up.clamp(min=-limit, max=limit)
            glu = gate * torch.sigmoid(gate * alpha)
            gated_output = (up + 1) * glu
            out = gated_output @ down_proj[expert_idx] + down_proj_bias[expert_idx]
            weighted_output = out * routing_weights[token_idx, expert_idx, None]
            next_states.index_add_(0, token_idx, weighted_output.to(hidden_states.dtype))
        return next_states.view(batch_size, sequence_length, hidden_dim)
    if mt == "granitemoe":
        wi, wo = W[m + "input_linear.weight"], W[m + "output_linear.weight"]
        num_experts = wi.shape[0]
        logits = F.linear(hidden_states, W[m + "router.layer.weight"])
        top_k_logits, top_k_indices = logits.topk(top_k, dim=1)
        top_k_gates = torch.softmax(top_k_logits, dim=1)
        zeros = torch.zeros([top_k_gates.size(0), num_experts], dtype=top_k_gates.dtype)
        gates = zeros.scatter(1, top_k_indices, 1)
        expert_size = gates.long().sum(0).tolist()
        top_k_experts = top_k_indices.flatten()
        _, index_sorted_experts = top_k_experts.sort(0)
        batch_index = index_sorted_experts.div(top_k, rounding_mode="trunc")
        batch_gates = top_k_gates.flatten()[index_sorted_experts]
        expert_inputs = hidden_states[batch_index]
        input_list = expert_inputs.split(expert_size, dim=0)
        hs = torch.cat([F.linear(input_list[i], wi[i]) for i in range(num_experts)], dim=0)
        chunked_hidden_states = hs.chunk(2, dim=-1)
        hs = act(chunked_hidden_states[0]) * chunked_hidden_states[1]
        output_list = hs.split(expert_size, dim=0)
        expert_outputs = torch.cat([F.linear(output_list[i], wo[i]) for i in range(num_experts)], dim=0)
        expert_outputs = expert_outputs * batch_gates[:, None]
        zeros = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=expert_outputs.dtype)
        layer_output = zeros.index_add(0, batch_index, expert_outputs)
        return layer_output.view(batch_size, sequence_length, hidden_dim)
    router_logits = F.linear(hidden_states, W[m + "gate.weight"])
    num_experts = router_logits.shape[-1]
    routing_weights = F.softmax(router_logits, dim=1, dtype=router_logits.dtype)
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    if mt == "mixtral" or cfg.get("norm_topk_prob", False):
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=num_experts).permute(2, 1, 0)
    names = ("w1", "w3", "w2") if mt == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    for expert_idx in range(num_experts):
        g, u, dn = (W[m + "experts.%d.%s.weight" % (expert_idx, n)] for n in names)
        idx, top_x = torch.where(expert_mask[expert_idx])
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current_hidden_states = F.linear(act(F.linear(current_state, g)) * F.linear(current_state, u), dn)
        current_hidden_states = current_hidden_states * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    if mt == "qwen2_moe":
        shared = F.linear(act(F.linear(hidden_states, W[m + "shared_expert.gate_proj.weight"]))
                          * F.linear(hidden_states, W[m + "shared_expert.up_proj.weight"]),
                          W[m + "shared_expert.down_proj.weight"])
        shared = torch.sigmoid(F.linear(hidden_states, W[m + "shared_expert_gate.weight"])) * shared  # F.sigmoid in HF
        final_hidden_states = final_hidden_states + shared
    return final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)


def moe_checks(args, folders, outputs, inputs, gaps):
    import torch
    import torch.nn.functional as F
    act = F.silu

    for case in hf_models.MOE_CASES:
        mt, v = hf_models.split_case(case)
        folder = folders[case]
        cfg, t = hf_reference.load(folder)
        want, absent = moe_layout(case, cfg)
        bad = [n for n, shape in want.items() if n not in t or list(t[n].shape) != shape]
        bad += [n for n in absent if n in t]
        report(not bad, "%s: published tensor names and shapes (%d checked)%s" % (
            case, len(want) + len(absent), (": " + ", ".join(bad[:4])) if bad else ""))

        # Which layers have the sparse block, and no top-k choice near a tie.
        layers = [i for i, _ in gaps[case]]
        if mt in ("qwen2_moe", "qwen3_moe"):
            sparse = [i for i in range(cfg["num_hidden_layers"]) if hf_reference.qwen_moe_sparse(i, cfg)]
        else:
            sparse = list(range(cfg["num_hidden_layers"]))
        report(layers == sparse and sparse, "%s: sparse layers %s (dense: %s)" % (
            case, layers, [i for i in range(cfg["num_hidden_layers"]) if i not in sparse]))
        worst = min(g for _, g in gaps[case])
        report(worst > hf_reference.TOPK_GAP, "%s: smallest top-k router gap %.3g (> %g)" % (
            case, worst, hf_reference.TOPK_GAP))

        # The gathered sparse block against the Hugging Face loop, on the
        # first sparse layer's weights.
        W = hf_reference.Tensors({n: (a.double() if a.is_floating_point() else a) for n, a in t.items()},
                                 "model.")
        p = "model.layers.%d." % sparse[0]
        m = p + ("block_sparse_moe." if mt in ("mixtral", "granitemoe") else "mlp.")
        g = torch.Generator().manual_seed(args.seed)
        h = torch.randn(2, 9, cfg["hidden_size"], generator=g, dtype=torch.float64)
        if mt == "gpt_oss":
            ours, _, _ = hf_reference.gpt_oss_block(cfg, W, m, h * 2.0)
            h = h * 2.0
        else:
            ours, _ = hf_reference.moe_block(mt, cfg, W, m, h, act)
        theirs = hf_loop_block(mt, cfg, W, m, h, act)
        r = float((ours - theirs).abs().max() / theirs.abs().max())
        report(r < 1e-12, "%s: sparse block == the Hugging Face loop (relative %.3g)" % (case, r))

    # One expert, top-1: the MoE layer is the dense SwiGLU MLP with the same
    # weights (Qwen2-MoE: plus its gated shared expert).
    g = torch.Generator().manual_seed(args.seed + 1)

    def rnd(*shape, std=0.1):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std
    d, f = 16, 8
    h = rnd(2, 5, d, std=1.0)
    gate, up, down = rnd(f, d), rnd(f, d), rnd(d, f)
    dense = hf_reference.swiglu(h, gate, up, down, act)
    for mt in hf_reference.MOE_TYPES:
        cfg = {"num_experts_per_tok": 1, "norm_topk_prob": False}
        if mt == "mixtral":
            m, ts = "block_sparse_moe.", {"gate.weight": rnd(1, d), "experts.0.w1.weight": gate,
                                          "experts.0.w3.weight": up, "experts.0.w2.weight": down}
        elif mt == "granitemoe":
            m, ts = "block_sparse_moe.", {"router.layer.weight": rnd(1, d),
                                          "input_linear.weight": torch.cat([gate, up])[None],
                                          "output_linear.weight": down[None]}
        else:
            m, ts = "mlp.", {"gate.weight": rnd(1, d), "experts.0.gate_proj.weight": gate,
                             "experts.0.up_proj.weight": up, "experts.0.down_proj.weight": down}
        want = dense
        if mt == "qwen2_moe":
            sg, su, sd, sgate = rnd(12, d), rnd(12, d), rnd(d, 12), rnd(1, d)
            ts.update({"shared_expert.gate_proj.weight": sg, "shared_expert.up_proj.weight": su,
                       "shared_expert.down_proj.weight": sd, "shared_expert_gate.weight": sgate})
            want = dense + torch.sigmoid(F.linear(h, sgate)) * hf_reference.swiglu(h, sg, su, sd, act)
        W = hf_reference.Tensors({"model.layers.0." + m + n: a for n, a in ts.items()}, "model.")
        got, _ = hf_reference.moe_block(mt, cfg, W, "model.layers.0." + m, h, act)
        r = float((got - want).abs().max() / want.abs().max())
        report(r < 1e-14, "%s: 1 expert, top-1 == the dense SwiGLU MLP%s (relative %.3g)" % (
            mt, " + gated shared expert" if mt == "qwen2_moe" else "", r))

    # Routing weights: renormalized ones sum to 1, the others do not; top-k
    # of the logits then softmax (GraniteMoE) == softmax, top-k, renormalize.
    logits = rnd(50, 8, std=3.0)
    for k in (1, 2, 4):
        w_norm, i_norm, _ = hf_reference.route(logits, k, "softmax_topk", True)
        w_raw, i_raw, _ = hf_reference.route(logits, k, "softmax_topk", False)
        w_gr, i_gr, _ = hf_reference.route(logits, k, "topk_softmax")
        s_norm = float((w_norm.sum(-1) - 1).abs().max())
        report(s_norm < 1e-14, "top-%d with norm_topk_prob: weights sum to 1 (max |sum - 1| %.3g)" % (k, s_norm))
        report(bool((w_raw.sum(-1) < 1 - 1e-6).all()), "top-%d without norm_topk_prob: weights sum below 1 "
               "(largest sum %.6f)" % (k, float(w_raw.sum(-1).max())))
        same = bool((i_gr == i_norm).all()) and float((w_gr - w_norm).abs().max()) < 1e-14
        report(same, "top-%d: GraniteMoE's top-k-then-softmax == softmax, top-k, renormalize" % k)

    # Config fields the MoE tests rely on change the output.
    for case, changes, why in SENSITIVE_MOE:
        gdir = with_config(folders[case], os.path.join(args.work, "changed"), **changes)
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matters (relative change %.3g)" % (case, why, r))

    # Tensors a loader must read from the right place: scaled, and swapped.
    def scaled(name, k):
        return lambda t: {n: (a * k if n == name else a) for n, a in t.items()}
    for case, name, k in (("qwen2_moe", "model.layers.0.mlp.shared_expert_gate.weight", 0.0),
                          ("qwen2_moe", "model.layers.0.self_attn.q_proj.bias", 0.0),
                          ("qwen3_moe", "model.layers.0.self_attn.q_norm.weight", 3.0),
                          ("olmoe", "model.layers.0.self_attn.k_norm.weight", 3.0),
                          ("olmoe", "model.layers.0.self_attn.q_norm.weight", 3.0)):
        gdir = with_tensors(folders[case], os.path.join(args.work, "scaled"), scaled(name, k))
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matters (relative change %.3g)" % (case, name, r))

    def swap_mixtral(t):
        t = dict(t)
        for e in range(hf_models.MOE_E):
            p = "model.layers.0.block_sparse_moe.experts.%d." % e
            t[p + "w1.weight"], t[p + "w3.weight"] = t[p + "w3.weight"], t[p + "w1.weight"]
        return t

    def swap_granite(t):
        t = dict(t)
        n = "model.layers.0.block_sparse_moe.input_linear.weight"
        f = t[n].shape[1] // 2
        t[n] = np.concatenate([t[n][:, f:], t[n][:, :f]], axis=1)
        return t
    for case, fn, why in (("mixtral", swap_mixtral, "w1 (gate) and w3 (up) swapped"),
                          ("granitemoe", swap_granite, "input_linear halves (gate first) swapped")):
        gdir = with_tensors(folders[case], os.path.join(args.work, "swapped"), fn)
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s changes the output (relative change %.3g)" % (case, why, r))
    gpt_oss_checks(args, folders, outputs, inputs)


SENSITIVE_DEEPSEEK = [
    ("deepseek_v2", {"rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 4, "mscale": 0.707,
                                      "mscale_all_dim": 0, "original_max_position_embeddings": 16,
                                      "type": "yarn"}},
     "DeepSeek-V2 mscale_all_dim (the softmax scale times mscale^2; the rotation's factor then g(1))"),
    ("deepseek_v2", {"rope_scaling": None}, "DeepSeek-V2 YaRN"),
    ("deepseek_v2", {"routed_scaling_factor": 2.0}, "DeepSeek-V2 routed_scaling_factor"),
    ("deepseek_v2:grouped", {"topk_method": "greedy"}, "DeepSeek-V2 group_limited_greedy"),
    ("deepseek_v2:grouped", {"topk_group": 3}, "DeepSeek-V2 topk_group"),
    ("deepseek_v3", {"rope_interleave": False}, "DeepSeek-V3 rope_interleave"),
    ("deepseek_v3", {"norm_topk_prob": False}, "DeepSeek-V3 norm_topk_prob"),
    ("deepseek_v3", {"routed_scaling_factor": 1.0}, "DeepSeek-V3 routed_scaling_factor"),
    ("deepseek_v3", {"topk_group": 4}, "DeepSeek-V3 topk_group (all groups)"),
    ("deepseek_v3", {"n_group": 1, "topk_group": 1}, "DeepSeek-V3 n_group"),
    ("deepseek_v3", {"rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 4, "mscale": 1.0,
                                      "original_max_position_embeddings": 16, "type": "yarn"}},
     "DeepSeek-V3 mscale_all_dim"),
]


def deepseek_checks(args, folders, outputs, inputs, gaps):
    """DeepSeek-V2 and V3: no group or expert choice near a tie, the config
    fields and tensors the cases rely on change the output, and the FP8
    checkpoint is the unquantized one of its dequantized weights (and close
    to the unquantized deepseek_v3 case it was quantized from)."""
    for case in hf_models.DEEPSEEK_CASES:
        cfg, _ = hf_reference.load(folders[case])
        sparse = list(range(cfg["first_k_dense_replace"], cfg["num_hidden_layers"]))
        layers = [i for i, _ in gaps[case]]
        report(layers == sparse, "%s: sparse layers %s" % (case, layers))
        worst = min(g for _, g in gaps[case])
        report(worst > hf_reference.TOPK_GAP, "%s: smallest group / expert choice gap %.3g (> %g)" % (
            case, worst, hf_reference.TOPK_GAP))
    for case, changes, why in SENSITIVE_DEEPSEEK:
        gdir = with_config(folders[case], os.path.join(args.work, "changed"), **changes)
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matters (relative change %.3g)" % (case, why, r))

    def edit(name, fn):
        return lambda t: {n: (fn(a) if n == name else a) for n, a in t.items()}
    a1, m1 = "model.layers.1.self_attn.", "model.layers.1.mlp."
    for case, name, fn, why in (
            ("deepseek_v3", m1 + "gate.e_score_correction_bias", lambda a: a * 0, "e_score_correction_bias"),
            ("deepseek_v3", a1 + "q_a_layernorm.weight", lambda a: a * 3, "q_a_layernorm"),
            ("deepseek_v3", a1 + "kv_a_layernorm.weight", lambda a: a * 3, "kv_a_layernorm"),
            ("deepseek_v3", m1 + "shared_experts.down_proj.weight", lambda a: a * 0, "the shared experts"),
            ("deepseek_v2", a1 + "kv_a_proj_with_mqa.weight",
             lambda a: np.concatenate([a[:-8], a[-8:] * 0]), "the RoPE key (the last rows of kv_a_proj_with_mqa)"),
            ("deepseek_v3:fp8", a1 + "kv_b_proj.weight_scale_inv", lambda a: a * 2, "kv_b_proj's weight_scale_inv"),
            ("deepseek_v3:fp8", m1 + "experts.3.down_proj.weight_scale_inv",
             lambda a: np.concatenate([a[:-1], a[-1:] * 2]), "the last (partial) block's scale of an expert")):
        gdir = with_tensors(folders[case], os.path.join(args.work, "edited"), edit(name, fn))
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matter(s) (relative change %.3g)" % (case, why, r))

    # FP8: the blocks of a weight have different scales, the last ones
    # partial; the model is the one of its dequantized weights, and within
    # e4m3's error of the deepseek_v3 weights it was made from.
    cfg, t = hf_reference.load(folders["deepseek_v3:fp8"])
    rows, cols = cfg["quantization_config"]["weight_block_size"]
    w, s = t[a1 + "q_a_proj.weight"], t[a1 + "q_a_proj.weight_scale_inv"]
    report(list(s.shape) == [-(-w.shape[0] // rows), -(-w.shape[1] // cols)] and w.shape[0] % rows != 0
           and len(set(s.flatten().tolist())) == s.numel(),
           "deepseek_v3:fp8: q_a_proj %s in blocks of %s: %s scales, all different, the last row of blocks "
           "partial" % (list(w.shape), [rows, cols], list(s.shape)))

    def dequantized(t):
        import torch
        full = hf_reference.fp8_dequantized(cfg, {n: torch.from_numpy(a) for n, a in t.items()})
        return {n: a.float().numpy() for n, a in full.items()}
    gdir = with_tensors(folders["deepseek_v3:fp8"], os.path.join(args.work, "dequantized"), dequantized)
    with open(os.path.join(gdir, "config.json")) as f:
        c = json.load(f)
    del c["quantization_config"]
    with open(os.path.join(gdir, "config.json"), "w") as f:
        json.dump(c, f)
    r = rel(hf_reference.forward(gdir, inputs["deepseek_v3:fp8"]), outputs["deepseek_v3:fp8"])
    report(r < 1e-6, "deepseek_v3:fp8: == its dequantized weights, unquantized (relative %.3g)" % r)
    # e4m3 keeps 3 bits of mantissa: a dequantized weight is within 1/16 of
    # the deepseek_v3 weight it was quantized from (and not equal to it;
    # weights under 1/64 measured against 1/64).
    _, plain = hf_reference.load(folders["deepseek_v3"])
    ws = hf_reference.fp8_dequantized(cfg, t)
    worst = 0.0
    for n, a in plain.items():
        if n + "_scale_inv" in t:
            q = ws[n].float()
            worst = max(worst, float(((q - a).abs() / a.abs().clamp(min=1 / 64)).max()))
    report(1e-3 < worst <= 1 / 16, "deepseek_v3:fp8: every FP8 weight within %.3g of deepseek_v3's (<= 1/16)"
           % worst)


def gpt_oss_checks(args, folders, outputs, inputs):
    """gpt-oss: the tensors and the clamp the case relies on matter, and the
    MXFP4 experts are the unquantized ones transformers dequantizes them to."""
    m0 = "model.layers.0.mlp.experts."

    def edit(name, fn):
        return lambda t: {n: (fn(a) if n == name else a) for n, a in t.items()}

    def even_odd(a):  # gate and up of gate_up_proj (or its bias) swapped
        out = a.copy()
        out[..., 0::2], out[..., 1::2] = a[..., 1::2], a[..., 0::2]
        return out

    def nibbles(a):  # the two e2m1 values of every byte swapped
        return ((a >> 4) | (a << 4)).astype(np.uint8)
    for case, name, fn, why in (
            ("gpt_oss", "model.layers.1.self_attn.sinks", lambda a: a * 0 - 1e4, "sinks"),
            ("gpt_oss", "model.layers.0.self_attn.q_proj.bias", lambda a: a * 0, "q_proj.bias"),
            ("gpt_oss", "model.layers.0.self_attn.o_proj.bias", lambda a: a * 0, "o_proj.bias"),
            ("gpt_oss", "model.layers.0.mlp.router.bias", lambda a: a * 0, "router.bias"),
            ("gpt_oss", m0 + "gate_up_proj", even_odd, "gate_up_proj's even (gate) and odd (up) columns"),
            ("gpt_oss", m0 + "gate_up_proj_bias", even_odd, "gate_up_proj_bias's even and odd entries"),
            ("gpt_oss", m0 + "down_proj_bias", lambda a: a * 0, "down_proj_bias"),
            ("gpt_oss:mxfp4", m0 + "gate_up_proj_blocks", nibbles, "the nibble order of the MXFP4 blocks"),
            ("gpt_oss:mxfp4", m0 + "down_proj_scales", lambda a: (a + 1).astype(np.uint8),
             "the MXFP4 scales")):
        gdir = with_tensors(folders[case], os.path.join(args.work, "edited"), edit(name, fn))
        r = rel(hf_reference.forward(gdir, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matter(s) (relative change %.3g)" % (case, why, r))

    # The clamp at 7 is reached, and shows in the output.
    for case in ("gpt_oss", "gpt_oss:mxfp4"):
        hf_reference.forward(folders[case], inputs[case])
        gate, up, total = hf_reference.CLAMPED[0]
        report(gate > total / 100 and up > total / 100,
               "%s: the clamp at 7 is reached: %d gate and %d up values of the %d of the chosen experts "
               "(%.1f%%, %.1f%%)" % (case, gate, up, total, 100.0 * gate / total, 100.0 * up / total))
        hf_reference.SWIGLU_LIMIT = float("inf")
        try:
            r = rel(hf_reference.forward(folders[case], inputs[case]), outputs[case])
        finally:
            hf_reference.SWIGLU_LIMIT = 7.0
        report(r > 1e-3, "%s: the clamp matters (relative change %.3g without it)" % (case, r))

    # The MXFP4 checkpoint is the unquantized one whose gate_up_proj and
    # down_proj are what convert_moe_packed_tensors makes of its blocks.
    import torch

    def dequantized(t):
        out = {}
        for n, a in t.items():
            if n.endswith("_blocks"):
                base = n[:-len("_blocks")]
                out[base] = hf_reference.convert_moe_packed_tensors(
                    torch.from_numpy(a), torch.from_numpy(t[base + "_scales"])).float().numpy()
            elif not n.endswith("_scales"):
                out[n] = a
        return out
    gdir = with_tensors(folders["gpt_oss:mxfp4"], os.path.join(args.work, "dequantized"), dequantized)
    r = rel(hf_reference.forward(gdir, inputs["gpt_oss:mxfp4"]), outputs["gpt_oss:mxfp4"])
    report(r < 1e-6, "gpt_oss:mxfp4: == its dequantized experts as gate_up_proj / down_proj (relative %.3g)" % r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--moe", action="store_true",
                    help="the mixture-of-experts (and DeepSeek) cases and checks only")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    folders, outputs, inputs, gaps = {}, {}, {}, {}

    cases = hf_models.MOE_CASES + hf_models.DEEPSEEK_CASES
    if not args.moe:
        cases = hf_models.CASES + cases
    for case in cases:
        mt, v = hf_models.split_case(case)
        folder = os.path.join(args.work, case.replace(":", "-"))
        cfg = hf_models.make(mt, folder, args.seed, v)
        inp = hf_models.make_inputs(mt, folder, 2, 7, args.seed)
        y = hf_reference.forward(folder, inp)
        folders[case], outputs[case], inputs[case] = folder, y, inp
        gaps[case] = list(hf_reference.ROUTER_GAPS)
        ok = bool(np.isfinite(y).all()) and list(y.shape) == expected_shape(mt, cfg, inp)
        report(ok, "%s: forward %s, max |y| %.3g" % (case, list(y.shape), float(np.abs(y).max())))
        # Deterministic: the same seed writes the same folder.
        again = os.path.join(args.work, "again")
        shutil.rmtree(again, ignore_errors=True)
        hf_models.make(mt, again, args.seed, v)
        report(rel(hf_reference.forward(again, inp), y) == 0.0, "%s: same seed, same model" % case)

    moe_checks(args, folders, outputs, inputs, gaps)
    deepseek_checks(args, folders, outputs, inputs, gaps)
    if args.moe:
        print("%d checks failed" % len(FAILED) if FAILED else "all checks passed")
        return 1 if FAILED else 0

    # Sharded checkpoints hold the same model as one file would.
    for case in ("llama:llama3", "falcon:40b"):
        f = folders[case]
        report(os.path.exists(os.path.join(f, "model.safetensors.index.json")), "%s: sharded" % case)
        one = with_tensors(f, os.path.join(args.work, "one"), lambda t: t)
        report(rel(hf_reference.forward(one, inputs[case]), outputs[case]) == 0.0,
               "%s: shards == one file" % case)

    # Prefix added (gpt2, bloom publish none) or removed (llama, bert).
    for case, prefix, add in (("gpt2", "transformer.", True), ("bloom", "transformer.", True),
                              ("llama:linear", "model.", False), ("bert", "bert.", False)):
        def ren(t, prefix=prefix, add=add):
            if add:
                return {prefix + k: a for k, a in t.items()}
            return {(k[len(prefix):] if k.startswith(prefix) else k): a for k, a in t.items()}
        g = with_tensors(folders[case], os.path.join(args.work, "prefix"), ren)
        report(rel(hf_reference.forward(g, inputs[case]), outputs[case]) == 0.0,
               "%s: prefix %s %s, same output" % (case, prefix, "added" if add else "removed"))

    # The features the tests rely on show in the output.
    for case, changes, why, *limit in SENSITIVE:
        g = with_config(folders[case], os.path.join(args.work, "changed"), **changes)
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r > (limit[0] if limit else 1e-3), "%s: %s matters (relative change %.3g)" % (case, why, r))

    # Tensors a loader must read from the right place.
    def scaled(name, k):
        return lambda t: {n: (a * k if n == name else a) for n, a in t.items()}
    for case, name in (("bart", "final_logits_bias"), ("bert", "bert.embeddings.token_type_embeddings.weight"),
                       ("roberta", "roberta.embeddings.position_embeddings.weight"),
                       ("whisper", "model.encoder.embed_positions.weight"),
                       ("gptj", "lm_head.bias"), ("phi", "lm_head.bias")):
        g = with_tensors(folders[case], os.path.join(args.work, "scaled"), scaled(name, 0.0))
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r > 1e-3, "%s: %s matters (relative change %.3g)" % (case, name, r))
    # ... and tensors it must ignore.
    for case, name in (("qwen2", "lm_head.weight"), ("gpt2", "h.0.attn.bias"),
                       ("bert", "cls.predictions.decoder.weight"), ("whisper", "model.decoder.embed_tokens.weight"),
                       ("t5:v1.0", "lm_head.weight"), ("bart", "lm_head.weight")):
        g = with_tensors(folders[case], os.path.join(args.work, "scaled"), scaled(name, 3.0))
        r = rel(hf_reference.forward(g, inputs[case]), outputs[case])
        report(r == 0.0, "%s: %s is not read (relative change %.3g)" % (case, name, r))

    # The llama3 case covers all three frequency bands of the scaling.
    with open(os.path.join(folders["llama:llama3"], "config.json")) as f:
        c = json.load(f)
    sc, hd = c["rope_scaling"], c["head_dim"]
    wl = 2 * math.pi * c["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    old = sc["original_max_position_embeddings"]
    bands = {"high" if w < old / sc["high_freq_factor"] else "low" if w > old / sc["low_freq_factor"] else "medium"
             for w in wl}
    report(bands == {"high", "medium", "low"}, "llama:llama3: frequency bands %s" % sorted(bands))

    # ALiBi slopes as DSL.md states them.
    def dsl_slopes(h):
        n = 2 ** int(math.floor(math.log2(h)))
        s = [2 ** (-8 * (k + 1) / n) for k in range(n)]
        k = 0
        while len(s) < h:
            s.append(2 ** (-4 * (2 * k + 1) / n))
            k += 1
        return s
    worst = max(abs(a - b) for h in range(1, 33) for a, b in zip(hf_reference.alibi_slopes(h).tolist(), dsl_slopes(h)))
    report(worst < 1e-6, "ALiBi slopes for 1..32 heads match DSL.md (max difference %.3g)" % worst)

    # T5 buckets: exact below the half, logarithmic up to max_distance.
    import torch

    def dsl_bucket(r, bidirectional, nb, md):
        b = 0
        if bidirectional:
            nb //= 2
            if r > 0:
                b = nb
            r = abs(r)
        else:
            r = max(-r, 0)
        exact = nb // 2
        if r < exact:
            return b + r
        return b + min(nb - 1, exact + int(math.log(r / exact) / math.log(md / exact) * (nb - exact)))
    bad = 0
    for bi in (True, False):
        for nb, md in ((32, 128), (8, 16), (8, 128)):
            rel_pos = torch.arange(-200, 201)
            got = hf_reference.t5_bucket(rel_pos, bi, nb, md).tolist()
            bad += sum(g != dsl_bucket(r, bi, nb, md) for g, r in zip(got, rel_pos.tolist()))
    report(bad == 0, "T5 relative buckets match the T5 definition (%d differ)" % bad)

    print("%d checks failed" % len(FAILED) if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
