//===- TfmOps.td - tfm dialect model-level ops -------------*- tablegen -*-===//
//
// The model level of the tfm dialect: the ops that MLIRGen builds from a
// model description (tfm.multi_head_attention, tfm.ffn, tfm.linear, ...),
// the primitive ops tfm-decompose rewrites them into, the fused ops of
// tfm-fuse-attention (tfm.attention, tfm.cache_write) and the packed-weight
// view of tfm-model-abi (tfm.unpack_weight), all on tensors with value
// semantics. convert-tfm-to-linalg lowers them to linalg and to the
// destination-style kernel ops of TfmKernelOps.td. Their reference is
// docs/Dialect.md.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_OPS_TD
#define TFM_OPS_TD

include "tfm/Dialect/TfmDialect.td"
include "tfm/Dialect/TfmAttrs.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def Tfm_FloatTensor : RankedTensorOf<[F32, F16, BF16]>;
def Tfm_IntTensor : RankedTensorOf<[I32, I64]>;

//===----------------------------------------------------------------------===//
// Model level
//===----------------------------------------------------------------------===//

def Tfm_ParamOp : Tfm_Op<"param", [Pure]> {
  let summary = "a named model parameter (weight) with a static shape";
  let description = [{
    Reads the parameter `name` from the model's weights. The name is the
    canonical safetensors name from the language reference.

    ```mlir
    %w = tfm.param "layers.0.attn.q.weight" : tensor<768x768xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_EmbedOp : Tfm_Op<"embed", [Pure]> {
  let summary = "token embedding lookup";
  let description = [{
    Gathers rows of `table` ([vocab, d_model]) for the token ids `tokens`
    ([B, T]). With `scale`, the rows are multiplied by sqrt(d_model).

    With `vocab_shards = N` (tensor parallelism) `table` is this rank's
    block of the vocabulary, rows [rank * V, (rank + 1) * V) with V its
    rows: a token outside the block gives a zero row, and a `tfm.all_reduce`
    of the N ranks' results is the embedding.

    ```mlir
    %x = tfm.embed %tokens, %table {scale} : (tensor<?x?xi32>, tensor<100x16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_IntTensor:$tokens, Tfm_FloatTensor:$table,
      UnitAttr:$scale, OptionalAttr<I64Attr>:$vocab_shards);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$tokens `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_PositionsOp : Tfm_Op<"positions", [Pure, AttrSizedOperandSegments]> {
  let summary = "add absolute position embeddings";
  let description = [{
    Adds position `p`'s embedding to row `p` of each sequence of `input`
    ([B, T, d_model]). `learned` reads rows of `table` ([context, d_model]);
    `sinusoidal` computes PE(p, 2i) = sin(p / 10000^(2i/d_model)),
    PE(p, 2i+1) = cos(...) and takes no table. With `positions` ([B]), row
    `t` of sequence `b` is at position positions[b] + t (a sequence that
    continues after positions[b] cached tokens).

    ```mlir
    %y = tfm.positions %x, %table {kind = #tfm.position<learned>} : (tensor<?x?x16xf32>, tensor<32x16xf32>) -> tensor<?x?x16xf32>
    %z = tfm.positions %x {kind = #tfm.position<sinusoidal>} : (tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_FloatTensor>:$table,
      Optional<Tfm_IntTensor>:$positions, Tfm_PositionKindAttr:$kind);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` $table^)? (`positions` `(` $positions^ `)`)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_NormOp : Tfm_Op<"norm", [Pure]> {
  let summary = "layer norm or RMS norm over the last dimension";
  let description = [{
    `layernorm`: (x - mean) / sqrt(var + eps) * weight + bias, with the biased
    variance. `rmsnorm`: x / sqrt(mean(x^2) + eps) * weight, no bias. With
    `offset`, the norm multiplies by (offset + weight) instead (Gemma's
    RMSNorm has offset 1).

    ```mlir
    %y = tfm.norm %x, %w, %b {kind = #tfm.norm<layernorm>, eps = 1.0e-05 : f64} : (tensor<?x?x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
      Optional<Tfm_FloatTensor>:$bias, Tfm_NormKindAttr:$kind, F64Attr:$eps,
      DefaultValuedAttr<F64Attr, "0.0">:$offset);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_LinearOp : Tfm_Op<"linear", [Pure, AttrSizedOperandSegments]> {
  let summary = "y = act(x W^T + b) * m + r over the last dimension";
  let description = [{
    `weight` is stored [out, in] as in PyTorch's nn.Linear; `bias` is [out].
    The epilogue is optional and folded in by tfm-fuse-epilogues: an
    `activation` of the biased product, then the elementwise product with
    `mul` (a gated FFN's other half) and the sum with `residual` (a
    residual connection), both of the result's type.

    ```mlir
    %y = tfm.linear %x, %w, %b : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    %z = tfm.linear %y, %w2 residual %x {activation = #tfm.activation<gelu>} : (tensor<?x?x64xf32>, tensor<16x64xf32>, tensor<?x?x16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weight,
      Optional<Tfm_FloatTensor>:$bias, Optional<Tfm_FloatTensor>:$mul,
      Optional<Tfm_FloatTensor>:$residual,
      OptionalAttr<Tfm_ActivationAttr>:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`mul` $mul^)? (`residual` $residual^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<
      (ins "Type":$result, "Value":$input, "Value":$weight, "Value":$bias), [{
      build($_builder, $_state, result, input, weight, bias, Value(), Value(),
            ActivationAttr());
    }]>];
  let hasVerifier = 1;
}

def Tfm_MultiHeadAttentionOp
    : Tfm_Op<"multi_head_attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "multi-head attention block with its projections";
  let description = [{
    Projects `query` ([B, T, d_model]) with `wq` and `source` ([B, S, d_kv])
    with `wk` and `wv`, splits heads (`heads` query heads, `kv_heads` key/value
    heads of size `head_dim`), normalizes each head of Q and K when `qk_norm`
    weights ([head_dim] each, for Q then K) are given (`qk_norm_kind`,
    `qk_norm_eps`, multiplying by `qk_norm_offset + weight`), applies RoPE to
    Q and K when `rope_inv_freq` is set (the first 2 * size(rope_inv_freq)
    dimensions of each head rotate, pair i at position p by angle
    p * rope_inv_freq[i]; with `rope_scale`, cos and sin times it), computes
    softmax(M + bias + cap(Q K^T * scale)) V
    per head, merges heads and projects with `wo`. For self-attention `source`
    is `query`.

    The score modifiers, in order: `softcap` (scores become
    softcap * tanh(scores / softcap)); `alibi_slopes` (head h adds
    slopes[h] * (j - i) for query position i and key position j); the T5
    relative bias `relative` ([buckets, heads]: table[bucket(j - i), h], with
    `relative_max_distance` and `relative_bidirectional`); then the mask
    `mask` (and key lengths when `lengths` is given). Key positions are
    aligned to the end as in `tfm.mask`. With `sinks` ([heads], gpt-oss),
    head h's learned sink logit joins each softmax's denominator. With
    `qk_norm_full` the `qk_norm` weights span the whole projections
    ([heads * head_dim] and [kv_heads * head_dim], OLMoE) and the norms
    apply before the heads are split; with `clip`, Q, K and V are clamped
    to [-clip, clip] after the projections and norms (OLMo's clip_qkv).

    `biases` are empty or the Q, K and V biases; `out_bias` is the output
    projection's.

    With a KV cache (`cache`: the transposed key cache [B', KV, head_dim, S]
    and the value cache [B', KV, S, head_dim], B' >= B, and `positions` [B],
    each sequence's cached length), the new keys and values of sequence b
    are written at positions[b].., the queries attend to the cache (query
    row t of sequence b is at position positions[b] + t), and the updated
    caches are the second and third results. With `ring` (a sliding
    window), the caches are ring buffers of S slots: position p is kept in
    slot p mod S (see tfm.attention). With `block_table` ([B, M], i32: a
    paged cache), the caches are pools of blocks shared by the sequences,
    [N, KV, head_dim, BS] and [N, KV, BS, head_dim], and position p of
    sequence b lives in block block_table[b, p / BS] at slot p mod BS (see
    tfm.cache_write).

    ```mlir
    %y = tfm.multi_head_attention %x, %x weights(%wq, %wk, %wv, %wo)
           {heads = 4 : i64, kv_heads = 2 : i64, head_dim = 4 : i64,
            mask = #tfm.mask<causal>, scale = 5.0e-01 : f64}
           : (tensor<?x?x16xf32>, tensor<?x?x16xf32>, tensor<16x16xf32>,
              tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$query, Tfm_FloatTensor:$source,
      Tfm_FloatTensor:$wq, Tfm_FloatTensor:$wk, Tfm_FloatTensor:$wv,
      Tfm_FloatTensor:$wo, Variadic<Tfm_FloatTensor>:$biases,
      Optional<Tfm_FloatTensor>:$out_bias, Variadic<Tfm_FloatTensor>:$qk_norm,
      Optional<Tfm_FloatTensor>:$relative, Optional<Tfm_FloatTensor>:$sinks,
      Optional<Tfm_IntTensor>:$lengths, Variadic<Tfm_FloatTensor>:$cache,
      Optional<Tfm_IntTensor>:$positions, Optional<Tfm_IntTensor>:$block_table,
      I64Attr:$heads, I64Attr:$kv_heads, I64Attr:$head_dim,
      Tfm_MaskKindAttr:$mask, OptionalAttr<I64Attr>:$window, F64Attr:$scale,
      OptionalAttr<DenseF64ArrayAttr>:$rope_inv_freq,
      OptionalAttr<Tfm_RopeStyleAttr>:$rope_style,
      OptionalAttr<F64Attr>:$rope_scale,
      OptionalAttr<Tfm_NormKindAttr>:$qk_norm_kind,
      OptionalAttr<F64Attr>:$qk_norm_eps, OptionalAttr<F64Attr>:$qk_norm_offset,
      UnitAttr:$qk_norm_full, OptionalAttr<F64Attr>:$clip,
      OptionalAttr<F64Attr>:$softcap,
      OptionalAttr<DenseF64ArrayAttr>:$alibi_slopes,
      OptionalAttr<I64Attr>:$relative_max_distance,
      UnitAttr:$relative_bidirectional, UnitAttr:$ring);
  let results = (outs Tfm_FloatTensor:$result,
      Variadic<Tfm_FloatTensor>:$cache_out);
  let assemblyFormat = [{
    $query `,` $source `weights` `(` $wq `,` $wk `,` $wv `,` $wo `)`
    (`biases` `(` $biases^ `)`)? (`out_bias` `(` $out_bias^ `)`)?
    (`qk_norm` `(` $qk_norm^ `)`)? (`relative` `(` $relative^ `)`)?
    (`sinks` `(` $sinks^ `)`)?
    (`lengths` `(` $lengths^ `)`)? (`cache` `(` $cache^ `)`)?
    (`positions` `(` $positions^ `)`)?
    (`block_table` `(` $block_table^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_LatentAttentionOp
    : Tfm_Op<"latent_attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "multi-head latent attention block (DeepSeek-V2/V3)";
  let description = [{
    DeepSeek's multi-head latent attention over `input` ([B, T, d_model]),
    `heads` heads of `head_dim` = nope + `rope_dim` query/key values and
    `value_dim` value values:

    - the query q = x wq^T, or with `wq_a` (a rank-R query latent) q =
      norm(x wq_a^T; q_a_norm) wq^T; per head [q_nope (nope), q_rope
      (rope_dim)];
    - the latent c = x wkv_a^T = [c_kv (kv_rank), k_rope (rope_dim)]; c_kv
      normalized with `kv_a_norm`, k_rope one key part shared by all heads;
    - q_rope and k_rope rotated by RoPE (`rope_inv_freq`, `rope_style`,
      `rope_scale`, as in tfm.multi_head_attention);
    - head h's key [c_kv W_uk[h]^T, k_rope] and value c_kv W_uv[h]^T, with
      `wkv_b` ([heads * (nope + value_dim), kv_rank]) holding each head's
      W_uk (nope rows) then W_uv (value_dim rows);
    - softmax(M + scale q k^T) v per head, merged and projected with `wo`.

    The norms are `norm_kind` with `norm_eps` (weight times `norm_offset` +
    weight). It is computed in the absorbed form of DeepSeek's inference
    code: head h's query becomes [q_nope W_uk[h], q_rope] (kv_rank +
    rope_dim values), its keys are the latent rows [c_kv, k_rope] and its
    values the rows c_kv, shared by all heads (one KV head), and the output
    o W_uv[h]^T. So the KV cache (`cache`: one transposed cache [B', 1,
    kv_rank + rope_dim, S], with `positions` [B]) holds the latent:
    kv_rank + rope_dim values per token, and the updated cache is the
    second result. With `block_table` the cache is a pool of blocks
    [N, 1, kv_rank + rope_dim, BS], as in tfm.multi_head_attention.

    ```mlir
    %y = tfm.latent_attention %x weights(%wq, %wkva, %kvnorm, %wkvb, %wo)
           {heads = 2 : i64, head_dim = 6 : i64, rope_dim = 2 : i64,
            value_dim = 4 : i64, kv_rank = 8 : i64,
            mask = #tfm.mask<causal>, scale = 0.40824829 : f64,
            norm_kind = #tfm.norm<rmsnorm>, norm_eps = 1.0e-06 : f64}
           : (tensor<?x?x16xf32>, tensor<12x16xf32>, tensor<10x16xf32>,
              tensor<8xf32>, tensor<16x8xf32>, tensor<16x8xf32>)
           -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$wq,
      Tfm_FloatTensor:$wkv_a, Tfm_FloatTensor:$kv_a_norm,
      Tfm_FloatTensor:$wkv_b, Tfm_FloatTensor:$wo,
      Optional<Tfm_FloatTensor>:$wq_a, Optional<Tfm_FloatTensor>:$q_a_norm,
      Optional<Tfm_IntTensor>:$lengths, Variadic<Tfm_FloatTensor>:$cache,
      Optional<Tfm_IntTensor>:$positions, Optional<Tfm_IntTensor>:$block_table,
      I64Attr:$heads, I64Attr:$head_dim, I64Attr:$rope_dim, I64Attr:$value_dim,
      I64Attr:$kv_rank, Tfm_MaskKindAttr:$mask, F64Attr:$scale,
      OptionalAttr<DenseF64ArrayAttr>:$rope_inv_freq,
      OptionalAttr<Tfm_RopeStyleAttr>:$rope_style,
      OptionalAttr<F64Attr>:$rope_scale, Tfm_NormKindAttr:$norm_kind,
      F64Attr:$norm_eps, OptionalAttr<F64Attr>:$norm_offset);
  let results = (outs Tfm_FloatTensor:$result,
      Variadic<Tfm_FloatTensor>:$cache_out);
  let assemblyFormat = [{
    $input `weights` `(` $wq `,` $wkv_a `,` $kv_a_norm `,` $wkv_b `,` $wo `)`
    (`query_latent` `(` $wq_a^ `,` $q_a_norm `)`)?
    (`lengths` `(` $lengths^ `)`)? (`cache` `(` $cache^ `)`)?
    (`positions` `(` $positions^ `)`)?
    (`block_table` `(` $block_table^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_FfnOp : Tfm_Op<"ffn", [Pure, AttrSizedOperandSegments]> {
  let summary = "position-wise feed-forward network";
  let description = [{
    `down(act(up(x)))`, or for `swiglu`/`geglu`
    `down(act(gate(x)) * up(x))` with act = silu / exact gelu. `biases` are
    empty or one per weight, in the order up, gate, down; or all but down's
    (tensor parallelism: the down projection's bias is added after the
    `tfm.all_reduce` of its partial sums).

    ```mlir
    %y = tfm.ffn %x up(%wu) down(%wd) biases(%bu, %bd) {activation = #tfm.activation<gelu>}
           : (tensor<?x?x16xf32>, tensor<64x16xf32>, tensor<16x64xf32>, tensor<64xf32>, tensor<16xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$up_weight,
      Optional<Tfm_FloatTensor>:$gate_weight, Tfm_FloatTensor:$down_weight,
      Variadic<Tfm_FloatTensor>:$biases, Tfm_ActivationAttr:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `up` `(` $up_weight `)` (`gate` `(` $gate_weight^ `)`)?
    `down` `(` $down_weight `)` (`biases` `(` $biases^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_MoeOp : Tfm_Op<"moe", [Pure, AttrSizedOperandSegments]> {
  let summary = "mixture-of-experts feed-forward network";
  let description = [{
    A mixture of experts in place of a `tfm.ffn` (language version 3). The
    router scores the experts: `logits = x router_weight^T (+ router_bias)`
    ([..., E] for E experts). `router` chooses `experts_per_token` = K of
    them and weighs them:
    - `softmax` (Mixtral, Qwen-MoE, OLMoE): p = softmax(logits) over all E,
      the K largest kept (`normalize`: divided by their sum);
    - `topk_softmax` (GraniteMoE, gpt-oss): the K largest logits, softmax
      over them;
    - `sigmoid` (DeepSeek-V3's noaux_tc): s = sigmoid(logits); the K
      largest s + `selection_bias` are chosen (the bias chooses only), and
      their s kept (`normalize`: divided by their sum);
    with `groups` > 1 the experts form that many equal groups, and only
    those of the `topk_groups` best groups can be chosen (the others score
    0): a group scores its largest softmax probability (`softmax`,
    DeepSeek-V2's group_limited_greedy) or the sum of its two largest
    s + bias (`sigmoid`); then multiplied by `routed_scale`. Each chosen
    expert e is an ffn as
    `tfm.ffn` computes it (`activation`) with the weights at [e] of the
    stacks `up_weight` [E, F, D], `gate_weight` [E, F, D] (gated
    activations) and `down_weight` [E, D, F], and `expert_biases` (none, or
    up [E, F], gate [E, F] for gated activations, down [E, D]); the result
    is the weighted sum of their outputs. With `shared` weights (up [S, D],
    gate [S, D] for gated activations, down [D, S]), a shared expert that
    every token runs is added, multiplied by sigmoid(x shared_scale^T) when
    `shared_scale` [1, D] is given (Qwen2-MoE).

    tfm-decompose rewrites it into the router's `tfm.linear`, `tfm.route`
    and `tfm.moe_experts`; the shared expert into its linears.

    ```mlir
    %y = tfm.moe %x router(%wr) up(%wu) gate(%wg) down(%wd)
           {experts_per_token = 2 : i64, router = #tfm.router<softmax>,
            activation = #tfm.activation<swiglu>}
           : (tensor<?x?x16xf32>, tensor<4x16xf32>, tensor<4x32x16xf32>,
              tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$router_weight,
      Optional<Tfm_FloatTensor>:$router_bias, Tfm_FloatTensor:$up_weight,
      Optional<Tfm_FloatTensor>:$gate_weight, Tfm_FloatTensor:$down_weight,
      Variadic<Tfm_FloatTensor>:$expert_biases,
      Variadic<Tfm_FloatTensor>:$shared,
      Optional<Tfm_FloatTensor>:$shared_scale,
      Optional<Tfm_FloatTensor>:$selection_bias, I64Attr:$experts_per_token,
      Tfm_RouterKindAttr:$router, UnitAttr:$normalize,
      DefaultValuedAttr<F64Attr, "1.0">:$routed_scale,
      DefaultValuedAttr<I64Attr, "1">:$groups,
      DefaultValuedAttr<I64Attr, "1">:$topk_groups,
      Tfm_ActivationAttr:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `router` `(` $router_weight (`,` $router_bias^)? `)`
    `up` `(` $up_weight `)` (`gate` `(` $gate_weight^ `)`)?
    `down` `(` $down_weight `)` (`expert_biases` `(` $expert_biases^ `)`)?
    (`shared` `(` $shared^ `)`)? (`shared_scale` `(` $shared_scale^ `)`)?
    (`selection_bias` `(` $selection_bias^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_PatchEmbedOp : Tfm_Op<"patch_embed", [Pure]> {
  let summary = "cut an image into patches and project them";
  let description = [{
    `pixels` [B, C, S, S] is cut into (S/patch)^2 patches, each flattened in
    (channel, row, column) order and projected by `weight` [d_model, C*P*P]
    and `bias` [d_model]. The result is [B, (S/P)^2, d_model].

    ```mlir
    %x = tfm.patch_embed %img, %w, %b {patch = 4 : i64} : (tensor<?x3x8x8xf32>, tensor<16x48xf32>, tensor<16xf32>) -> tensor<?x4x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$pixels, Tfm_FloatTensor:$weight,
      Tfm_FloatTensor:$bias, I64Attr:$patch);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$pixels `,` $weight `,` $bias attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_PrependTokenOp : Tfm_Op<"prepend_token", [Pure]> {
  let summary = "prepend a learned token to every sequence";
  let description = [{
    ```mlir
    %y = tfm.prepend_token %x, %cls : (tensor<?x4x16xf32>, tensor<16xf32>) -> tensor<?x5x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$token);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $token attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_PoolOp : Tfm_Op<"pool", [Pure]> {
  let summary = "pool a sequence to one vector";
  let description = [{
    `cls` reads position 0; `mean` averages over all positions, or over the
    first `lengths[b]` positions when `lengths` is given.

    ```mlir
    %p = tfm.pool %x {kind = #tfm.pool<mean>} : (tensor<?x?x16xf32>) -> tensor<?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_IntTensor>:$lengths,
      Tfm_PoolKindAttr:$kind);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input (`lengths` `(` $lengths^ `)`)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_AllReduceOp : Tfm_Op<"all_reduce", [Pure]> {
  let summary = "sum over the tensor-parallel ranks, then a bias";
  let description = [{
    Tensor parallelism (`tfmc --tensor-parallel N`): every one of the
    `ranks` processes holds a partial sum `input` (the output of a
    row-parallel projection: its heads or FFN units of the whole); the
    result, the same on every rank, is their sum plus `bias` (broadcast over
    the last dimension), the bias the projection has in one process. The
    runtime performs it with MPI_Allreduce.

    ```mlir
    %y = tfm.all_reduce %partial, %bias {ranks = 2 : i64} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_FloatTensor>:$bias,
      I64Attr:$ranks);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_AllGatherOp : Tfm_Op<"all_gather", [Pure]> {
  let summary = "concatenation of the tensor-parallel ranks' blocks";
  let description = [{
    Every one of the `ranks` processes holds a block `input` [..., C] (rank
    2 or more) of a tensor split on its last dimension (the logits of its
    vocabulary rows); the result [..., ranks * C], the same on every rank,
    is the blocks in rank order. The runtime performs it with
    MPI_Allgather.

    ```mlir
    %l = tfm.all_gather %local {ranks = 2 : i64} : tensor<?x?x50xf32> -> tensor<?x?x100xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, I64Attr:$ranks);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Primitive level (shared elementwise ops)
//===----------------------------------------------------------------------===//

class Tfm_BinaryOp<string mnemonic, string what>
    : Tfm_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise "#what;
  let description = [{
    Elementwise }]#what#[{ of two tensors of the same type (residual
    connections, gated feed-forward products).

    ```mlir
    %z = tfm.}]#mnemonic#[{ %x, %y : tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$lhs, Tfm_FloatTensor:$rhs);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Tfm_AddOp : Tfm_BinaryOp<"add", "sum">;
def Tfm_MulOp : Tfm_BinaryOp<"mul", "product">;

def Tfm_RouteOp : Tfm_Op<"route", [Pure, AllTypesMatch<["logits", "result"]>]> {
  let summary = "a mixture of experts' routing weights";
  let description = [{
    From the router's `logits` [..., E], the weight of each expert for each
    row: the `experts_per_token` = K largest logits of the row are chosen
    (the lower index first among equal ones); `softmax` gives a chosen
    expert softmax(logits)[e] (over all E), divided by the sum of the
    chosen ones with `normalize`; `topk_softmax` gives the softmax over the
    chosen logits; `sigmoid` (DeepSeek-V3) gives a chosen expert
    sigmoid(logits)[e], chosen by sigmoid + `selection_bias` [E], divided by
    the chosen ones' sum (+ 1e-20) with `normalize`. With `groups` > 1 only
    the experts of the `topk_groups` best of `groups` equal groups can be
    chosen, as `tfm.moe` says. The weights are multiplied by
    `routed_scale`; the others are 0.

    ```mlir
    %w = tfm.route %logits {experts_per_token = 2 : i64, router = #tfm.router<softmax>, normalize} : tensor<?x?x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$logits,
      Optional<Tfm_FloatTensor>:$selection_bias, I64Attr:$experts_per_token,
      Tfm_RouterKindAttr:$router, UnitAttr:$normalize,
      DefaultValuedAttr<F64Attr, "1.0">:$routed_scale,
      DefaultValuedAttr<I64Attr, "1">:$groups,
      DefaultValuedAttr<I64Attr, "1">:$topk_groups);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $logits (`selection_bias` `(` $selection_bias^ `:`
    type($selection_bias) `)`)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_MoeExpertsOp : Tfm_Op<"moe_experts", [Pure, AttrSizedOperandSegments]> {
  let summary = "the routed experts of a mixture of experts";
  let description = [{
    sum over e of `weights`[..., e] * ffn_e(`input`), ffn_e the `tfm.ffn`
    (`activation`) of the weights at [e] of `up_weight` [E, F, D],
    `gate_weight` [E, F, D] (gated activations) and `down_weight`
    [E, D, F], with `biases` none or up [E, F], gate [E, F] (gated), down
    [E, D]. `weights` [..., E] are a `tfm.route`'s: an expert whose weight
    is 0 contributes nothing, and the CPU kernel (tfm.moe_kernel) runs only
    the experts of nonzero weight of each row. With the `dense` option
    tfm-decompose rewrites it into every expert's ffn over every row (the
    reference form, and the CUDA path).

    ```mlir
    %y = tfm.moe_experts %x, %w up(%wu) gate(%wg) down(%wd) {activation = #tfm.activation<swiglu>}
           : (tensor<?x?x16xf32>, tensor<?x?x4xf32>, tensor<4x32x16xf32>,
              tensor<4x32x16xf32>, tensor<4x16x32xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$weights,
      Tfm_FloatTensor:$up_weight, Optional<Tfm_FloatTensor>:$gate_weight,
      Tfm_FloatTensor:$down_weight, Variadic<Tfm_FloatTensor>:$biases,
      Tfm_ActivationAttr:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weights `up` `(` $up_weight `)`
    (`gate` `(` $gate_weight^ `)`)? `down` `(` $down_weight `)`
    (`biases` `(` $biases^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_RowScaleOp : Tfm_Op<"row_scale", [Pure]> {
  let summary = "multiply each row by a scalar of its own";
  let description = [{
    `input` [..., D] times `scale` [..., 1] (broadcast over the last
    dimension), after `activation` of the scale when given: a shared
    expert's sigmoid gate, an expert's routing weight.

    ```mlir
    %y = tfm.row_scale %x, %s {activation = #tfm.activation<sigmoid>} : (tensor<?x?x16xf32>, tensor<?x?x1xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$scale,
      OptionalAttr<Tfm_ActivationAttr>:$activation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $scale attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_MatmulOp : Tfm_Op<"matmul", [Pure]> {
  let summary = "batched matrix product with transpose flags";
  let description = [{
    `lhs` [..., M, K] (or [..., K, M] with `transpose_lhs`) times `rhs`
    [..., K, N] (or [..., N, K] with `transpose_rhs`). Both operands have the
    same rank >= 2 and the same batch dimensions.

    ```mlir
    %s = tfm.matmul %q, %k {transpose_rhs} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$lhs, Tfm_FloatTensor:$rhs,
      UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_ClipOp : Tfm_Op<"clip", [Pure, SameOperandsAndResultType]> {
  let summary = "clamp to [-limit, limit]";
  let description = [{
    OLMo's clip_qkv on the projected queries, keys and values.

    ```mlir
    %y = tfm.clip %x {limit = 8.000000e+00 : f64} : tensor<?x4x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, F64Attr:$limit);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_ScaleOp : Tfm_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiply by a constant";
  let description = [{
    ```mlir
    %y = tfm.scale %x {factor = 1.250000e-01 : f64} : tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_MaskOp : Tfm_Op<"mask", [Pure]> {
  let summary = "set masked attention scores to -inf";
  let description = [{
    `input` holds scores [B, H, T, S]. `causal` masks key j > query i,
    `sliding` also masks keys j <= i - window; key positions are aligned to
    the end (query i is at position i + S - T). With `lengths` ([B]), keys
    j >= lengths[b] are masked too (padding).

    ```mlir
    %m = tfm.mask %s {kind = #tfm.mask<sliding>, window = 4 : i64} : (tensor<?x4x?x?xf32>) -> tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_IntTensor>:$lengths,
      Tfm_MaskKindAttr:$kind, OptionalAttr<I64Attr>:$window);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input (`lengths` `(` $lengths^ `)`)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_SoftmaxOp
    : Tfm_Op<"softmax", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "softmax along one axis";
  let description = [{
    A row whose entries are all -inf gives zeros. With `sinks` (attention
    sinks, gpt-oss: scores [B, H, T, S] over axis 3, one logit per head
    [H]), head h's sink logit joins each row's denominator:
    p_j = exp(s_j) / (exp(sinks[h]) + sum_k exp(s_k)).

    ```mlir
    %p = tfm.softmax %s {axis = 3 : i64} : tensor<?x4x?x?xf32>
    %q = tfm.softmax %s sinks(%sinks : tensor<4xf32>) {axis = 3 : i64} : tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Optional<Tfm_FloatTensor>:$sinks,
      I64Attr:$axis);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`sinks` `(` $sinks^ `:` type($sinks) `)`)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_ActivationOp : Tfm_Op<"activation", [Pure, SameOperandsAndResultType]> {
  let summary = "elementwise activation";
  let description = [{
    `relu`, `gelu` (erf), `gelu_tanh` or `silu`; the gated kinds are spelled
    with `tfm.mul` at this level.

    ```mlir
    %y = tfm.activation %x {kind = #tfm.activation<gelu_tanh>} : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_ActivationAttr:$kind);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_SplitHeadsOp : Tfm_Op<"split_heads", [Pure]> {
  let summary = "[B, T, H*D] -> [B, H, T, D]";
  let description = [{
    ```mlir
    %h = tfm.split_heads %x {heads = 4 : i64} : (tensor<?x?x16xf32>) -> tensor<?x4x?x4xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, I64Attr:$heads);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_MergeHeadsOp : Tfm_Op<"merge_heads", [Pure]> {
  let summary = "[B, H, T, D] -> [B, T, H*D]";
  let description = [{
    ```mlir
    %x = tfm.merge_heads %h : (tensor<?x4x?x4xf32>) -> tensor<?x?x16xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_TransposeOp : Tfm_Op<"transpose", [Pure]> {
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is input dimension `permutation[i]`.

    ```mlir
    %kt = tfm.transpose %k {permutation = array<i64: 0, 1, 3, 2>} : (tensor<?x4x?x8xf32>) -> tensor<?x4x8x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_RopeOp : Tfm_Op<"rope", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "rotary position embedding on [B, H, T, D]";
  let description = [{
    With R = 2 * size(inv_freq) <= D, rotates pairs (i, i + R/2) (`half`) or
    (2i, 2i+1) (`interleaved`) of the first R dimensions of each head vector
    at position p by the angle p * inv_freq[i]; dimensions R.. pass through.
    The front end computes the table (theta^(-2i/R), rescaled by `linear`,
    `llama3` or `yarn` scaling). With `scale` (YaRN's attention factor),
    cos and sin are multiplied by it: the rotated dimensions are scaled.
    Row t of sequence b is at position p = t, or positions[b] + t with
    `positions` ([B]).

    ```mlir
    %r = tfm.rope %q {inv_freq = array<f64: 1.0, 0.1>, style = #tfm.rope_style<half>} : tensor<?x4x?x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input,
      Optional<Tfm_IntTensor>:$positions, DenseF64ArrayAttr:$inv_freq,
      Tfm_RopeStyleAttr:$style, OptionalAttr<F64Attr>:$scale);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`positions` `(` $positions^ `:` type($positions) `)`)? attr-dict
    `:` type($result)
  }];
  let hasVerifier = 1;
}

def Tfm_SoftcapOp : Tfm_Op<"softcap", [Pure, SameOperandsAndResultType]> {
  let summary = "cap * tanh(x / cap), elementwise";
  let description = [{
    Soft-caps attention scores and the LM head's logits (Gemma 2). `cap`
    is > 0.

    ```mlir
    %c = tfm.softcap %s {cap = 5.0e+01 : f64} : tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, F64Attr:$cap);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_AlibiOp : Tfm_Op<"alibi", [Pure, SameOperandsAndResultType]> {
  let summary = "add ALiBi linear position biases to attention scores";
  let description = [{
    `input` holds scores [B, H, T, S]; head h adds slopes[h] * (j - i) to
    the score of query i and key j, with key positions aligned to the end as
    in `tfm.mask` (query i is at position i + S - T). `slopes` has H entries.

    ```mlir
    %b = tfm.alibi %s {slopes = array<f64: 0.25, 0.0625>} : tensor<?x2x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, DenseF64ArrayAttr:$slopes);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Tfm_RelativeBiasOp : Tfm_Op<"relative_bias", [Pure]> {
  let summary = "add T5 relative position biases to attention scores";
  let description = [{
    `input` holds scores [B, H, T, S]; adds table[bucket(j - i), h] (table
    [buckets, H]) to the score of query i and key j, key positions aligned
    to the end as in `tfm.mask`. The buckets are T5's
    `_relative_position_bucket` with `max_distance`, bidirectional (half the
    buckets per sign) when `bidirectional` is set.

    ```mlir
    %b = tfm.relative_bias %s, %table {max_distance = 128 : i64, bidirectional} : (tensor<?x4x?x?xf32>, tensor<32x4xf32>) -> tensor<?x4x?x?xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, Tfm_FloatTensor:$table,
      I64Attr:$max_distance, UnitAttr:$bidirectional);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input `,` $table attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Tfm_RepeatKvOp : Tfm_Op<"repeat_kv", [Pure]> {
  let summary = "repeat key/value heads for grouped-query attention";
  let description = [{
    [B, KV, S, D] -> [B, KV * repeats, S, D]; result head h is input head
    h / repeats.

    ```mlir
    %k4 = tfm.repeat_kv %k {repeats = 2 : i64} : (tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$input, I64Attr:$repeats);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fused level
//===----------------------------------------------------------------------===//

def Tfm_AttentionOp : Tfm_Op<"attention", [Pure, AttrSizedOperandSegments]> {
  let summary = "fused scaled dot-product attention";
  let description = [{
    softmax(M + bias + cap(Q K^T * scale)) V for `query` [B, H, T, D], `key`
    [B, KV, S, D] and `value` [B, KV, S, Dv], with H a multiple of KV (query
    head h reads key/value head h / (H / KV)). The score modifiers apply in
    this order, as `tfm.softcap`, `tfm.alibi`, `tfm.relative_bias` and
    `tfm.mask` do: `softcap`, `alibi_slopes`, the relative bias table
    `relative` ([buckets, H], with `relative_max_distance` and
    `relative_bidirectional`), then `mask` and `window`; `lengths` ([B])
    masks keys past each sequence's length. A row whose keys are all masked
    gives zeros. The result is [B, H, T, Dv].

    Key positions are aligned to the end (query row i is at key position
    i + S - T) unless `positions` ([B]) is given: then query row i of
    sequence b is at position positions[b] + i, and keys past
    positions[b] + T are not read (a KV cache filled up to there). With
    `key_transposed`, `key` is [B, KV, D, S] (the layout of the cache);
    with `value_transposed`, `value` is [B, KV, Dv, S] (latent attention's
    values: rows of its transposed latent cache).
    With `ring` (and `positions`), the S keys are a ring buffer: with
    e = positions[b] + T positions written, slot j holds position
    e - 1 - ((e - 1 - j) mod S), or none if j >= e. With `sinks` ([H],
    gpt-oss), head h's sink logit joins the softmax's denominator of each
    row (as `tfm.softmax` with sinks). With `block_table` ([B, M], i32, with
    `positions`), `key` and `value` are pools of blocks of BS positions
    ([N, KV, D, BS] transposed, [N, KV, BS, Dv]) and key position j of
    sequence b is slot j mod BS of block block_table[b, j / BS]: a paged KV
    cache of M * BS positions per sequence.

    ```mlir
    %o = tfm.attention %q, %k, %v {mask = #tfm.mask<causal>, scale = 1.250000e-01 : f64}
           : (tensor<?x4x?x8xf32>, tensor<?x2x?x8xf32>, tensor<?x2x?x8xf32>) -> tensor<?x4x?x8xf32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$query, Tfm_FloatTensor:$key,
      Tfm_FloatTensor:$value, Optional<Tfm_FloatTensor>:$relative,
      Optional<Tfm_IntTensor>:$lengths, Optional<Tfm_IntTensor>:$positions,
      Optional<Tfm_FloatTensor>:$sinks, Optional<Tfm_IntTensor>:$block_table,
      Tfm_MaskKindAttr:$mask, OptionalAttr<I64Attr>:$window, F64Attr:$scale,
      OptionalAttr<F64Attr>:$softcap,
      OptionalAttr<DenseF64ArrayAttr>:$alibi_slopes,
      OptionalAttr<I64Attr>:$relative_max_distance,
      UnitAttr:$relative_bidirectional, UnitAttr:$key_transposed,
      UnitAttr:$ring, UnitAttr:$value_transposed);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`relative` `(` $relative^ `)`)?
    (`lengths` `(` $lengths^ `)`)? (`positions` `(` $positions^ `)`)?
    (`sinks` `(` $sinks^ `)`)? (`block_table` `(` $block_table^ `)`)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Tfm_CacheWriteOp
    : Tfm_Op<"cache_write", [Pure, AllTypesMatch<["cache", "result"]>]> {
  let summary = "writes new keys or values into a KV cache";
  let description = [{
    Writes `update` ([B, KV, T, D]) into `cache` at each sequence's position:
    cache[b, h, positions[b] + t, :] = update[b, h, t, :], or, with
    `transposed`, into a key cache kept as [B', KV, D, S]:
    cache[b, h, :, positions[b] + t]. The cache may hold more sequences than
    the update (B' >= B); the others are unchanged. With `ring`, position
    p goes to slot p mod S (a sliding window's ring buffer). The result is
    the updated cache (bufferized in place). The cache may hold f16 or bf16
    where the update is wider (`tfmc --kv-cache`): the values are rounded to
    the nearest, ties to even, as they are written. With `block_table`
    ([B, M], i32: a paged cache), `cache` is a pool of N blocks of BS
    positions ([N, KV, BS, D], or [N, KV, D, BS] transposed) and position p
    of sequence b goes to slot p mod BS of block block_table[b, p / BS].

    ```mlir
    %c2 = tfm.cache_write %k into %c at %pos {transposed} : tensor<?x2x1x8xf32> into tensor<?x2x8x?xf32> at tensor<?xi32>
    ```
  }];
  let arguments = (ins Tfm_FloatTensor:$update, Tfm_FloatTensor:$cache,
      Tfm_IntTensor:$positions, Optional<Tfm_IntTensor>:$block_table,
      UnitAttr:$transposed, UnitAttr:$ring);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $update `into` $cache `at` $positions
    (`pages` $block_table^ `:` type($block_table))? attr-dict `:`
    type($update) `into` type($cache) `at` type($positions)
  }];
  let hasVerifier = 1;
}

def Tfm_UnpackWeightOp : Tfm_Op<"unpack_weight", [Pure]> {
  let summary = "the [N, K] view of a weight packed in column panels";
  let description = [{
    `packed` [P, K, W] holds a linear weight [N, K] in panels of W output
    columns: packed[p, k, c] = weight[p * W + c, k], zero beyond N. The
    runtime packs weights this way once, at load, so that the matmul kernel
    streams each panel contiguously; convert-tfm-to-linalg hands the packed
    form straight to the kernel. An f32 weight may also come in bf16 pairs
    of K ([P, ceil(K / 2), 2 W] bf16) or quantized to int8 in quads of K
    ([P, ceil(K / 4) + 2, 4 W] i8: the quads, then a row of the columns'
    f32 scales and one of their i32 sums times 128); only tfm.linear reads
    int8 quads. `runtime/include/tfm/packed_layout.h` is the reference for
    these layouts, which the runtime and this verifier share. A stack of
    weights (a mixture of experts' [E, N, K]) is packed weight by weight:
    [E, P, K, W].

    ```mlir
    %w = tfm.unpack_weight %p : tensor<3x16x32xf32> -> tensor<70x16xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, F16, BF16, I8]>:$packed);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = "$packed attr-dict `:` type($packed) `->` type($result)";
  let hasVerifier = 1;
}

def Tfm_GgmlWeightOp : Tfm_Op<"ggml_weight", [Pure]> {
  let summary = "the [N, K] view of a weight in ggml's block-quantized rows";
  let description = [{
    `rows` holds a linear weight [N, K] as N rows of ggml blocks of the
    type that `ggml_type` ([1] i32, ggml's `enum ggml_type`) names: F32, F16,
    BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K, the layouts of
    `runtime/include/tfm/ggml_blocks.h`. The type is the weights' own (a
    GGUF file's, or what `--quantize` asked for) and is chosen when they
    are loaded, so that one compiled model runs every mix of types a file
    holds (llama.cpp's Q4_K_M stores some weights Q6_K). `rows` is sized
    for the widest type (N K f32 values); the bytes of the type in use come
    first. convert-tfm-to-linalg hands both straight to the
    `tfm.ggml_linear_kernel` of the tfm.linear that reads the weight,
    which multiplies the blocks without expanding them in memory, or to the
    `tfm.ggml_embed_kernel` of a tfm.embed that reads it as its table; no
    other op may read it. K is a multiple of 32.

    ```mlir
    %w = tfm.ggml_weight %rows, %type : tensor<8192xi8>, tensor<1xi32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I8]>:$rows,
      RankedTensorOf<[I32]>:$ggml_type);
  let results = (outs Tfm_FloatTensor:$result);
  let assemblyFormat = [{
    $rows `,` $ggml_type attr-dict `:` type($rows) `,` type($ggml_type) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

#endif // TFM_OPS_TD
