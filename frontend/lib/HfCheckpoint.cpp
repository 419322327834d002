//===- HfCheckpoint.cpp - Hugging Face checkpoint layouts -----------------===//
//
// Each layout follows the modeling code of its type in Hugging Face
// transformers (modeling_<type>.py): the module names of the checkpoint, the
// fused projections and how their outputs are split, GPT-2's Conv1D weights
// stored [in, out], and the position tables that start at an offset. Norms
// whose convention differs (Gemma's 1 + w) are the .tfm's business: their
// weights are copied as they are.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfCheckpoint.h"
#include "tfm/Frontend/Keys.h"

#include "llvm/ADT/StringSwitch.h"
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::tfm;
namespace json = llvm::json;

/// The words of `checkpoint = huggingface(type = ...)` in Keys.def.
llvm::ArrayRef<llvm::StringRef> mlir::tfm::hfCheckpointTypes() {
  const KeySchema *key = findKeySchema(SectionId::Model, KeyId::Checkpoint);
  return findValueSchema(*key, "huggingface")->args.front().words;
}

bool mlir::tfm::isHfCheckpointType(llvm::StringRef type) {
  return llvm::is_contained(hfCheckpointTypes(), type);
}

namespace {

/// Types that share one layout.
enum class Family {
  GPT2,
  GPTJ,
  NeoX,
  Llama, ///< llama, mistral, qwen2, qwen3, gemma
  Gemma2,
  Phi,
  Phi3,
  Falcon,
  Bloom,
  Bert, ///< bert, roberta
  ViT,
  T5,
  Bart,
  Whisper,
};

std::optional<Family> familyOf(llvm::StringRef type) {
  return llvm::StringSwitch<std::optional<Family>>(type)
      .Case("gpt2", Family::GPT2)
      .Case("gptj", Family::GPTJ)
      .Case("gpt_neox", Family::NeoX)
      .Cases({"llama", "mistral", "qwen2", "qwen3", "gemma"}, Family::Llama)
      .Case("gemma2", Family::Gemma2)
      .Case("phi", Family::Phi)
      .Case("phi3", Family::Phi3)
      .Case("falcon", Family::Falcon)
      .Case("bloom", Family::Bloom)
      .Cases({"bert", "roberta"}, Family::Bert)
      .Case("vit", Family::ViT)
      .Case("t5", Family::T5)
      .Case("bart", Family::Bart)
      .Case("whisper", Family::Whisper)
      .Default(std::nullopt);
}

/// The base model's attribute in the task models (`base_model_prefix`).
llvm::StringRef basePrefix(llvm::StringRef type) {
  return llvm::StringSwitch<llvm::StringRef>(type)
      .Cases({"gpt2", "gptj", "falcon", "bloom"}, "transformer.")
      .Case("gpt_neox", "gpt_neox.")
      .Case("bert", "bert.")
      .Case("roberta", "roberta.")
      .Case("vit", "vit.")
      .Case("t5", "")
      .Default("model.");
}

/// How q, k and v sit in a fused projection's output axis.
enum class Fused {
  Concat,  ///< [q | k | v] (GPT-2 c_attn, Phi-3 qkv_proj)
  PerHead, ///< [heads, 3, head_dim] (GPT-NeoX, BLOOM)
  Grouped, ///< [kv_heads, heads / kv_heads + 2, head_dim] (Falcon)
};

class Mapper {
public:
  Mapper(const ModelSpec &spec, const ParamSpec &p, Family fam)
      : spec(spec), p(p), key(p.key), fam(fam), d(spec.dModel),
        stack(key.stack >= 0 ? &spec.stacks[key.stack] : &spec.mainStack()) {}
  HfSource map();

private:
  using Kind = HfSource::Kind;

  HfSource source(Kind kind, std::vector<std::string> names,
                  std::vector<int64_t> shape, bool base = true) {
    HfSource s;
    s.kind = kind;
    s.names = std::move(names);
    s.shape = std::move(shape);
    s.base = base;
    return s;
  }
  HfSource copy(std::string name, bool base = true) {
    return source(Kind::Copy, {std::move(name)}, p.shape, base);
  }
  HfSource unmapped(const llvm::Twine &why) {
    HfSource s;
    s.kind = Kind::Unmapped;
    s.why = why.str();
    return s;
  }
  bool isBias() const {
    switch (key.role) {
    case ParamRole::Bias:
    case ParamRole::QBias:
    case ParamRole::KBias:
    case ParamRole::VBias:
    case ParamRole::OBias:
    case ParamRole::UpBias:
    case ParamRole::GateBias:
    case ParamRole::DownBias:
      return true;
    default:
      return false;
    }
  }
  std::string suffix() const { return isBias() ? ".bias" : ".weight"; }
  /// An nn.Linear (or a norm) `module`: weight or bias as stored.
  HfSource linear(const std::string &module) { return copy(module + suffix()); }
  /// A GPT-2 Conv1D: the weight is stored [in, out].
  HfSource conv1d(const std::string &module) {
    if (isBias())
      return copy(module + ".bias");
    return source(Kind::Transpose, {module + ".weight"},
                  {p.shape[1], p.shape[0]});
  }
  /// A norm; BERT's old checkpoints spell weight and bias gamma and beta,
  /// which from_pretrained renames.
  HfSource norm(const std::string &module) {
    HfSource s = linear(module);
    if (fam == Family::Bert)
      s.names.push_back(module + (isBias() ? ".beta" : ".gamma"));
    return s;
  }
  /// Rows [offset, offset + rows) of the canonical shape's first axis.
  HfSource rows(Kind kind, std::string name, std::vector<int64_t> shape,
                int64_t offset, int64_t block, int64_t stride) {
    HfSource s = source(kind, {std::move(name)}, std::move(shape));
    s.offset = offset;
    s.block = block;
    s.stride = stride;
    return s;
  }
  /// A learned position table whose row p is position p - offset; it may
  /// hold more positions than the model's context.
  HfSource positions(std::string name, int64_t offset) {
    HfSource s = rows(Kind::Rows, std::move(name), {spec.context + offset, d},
                      offset, spec.context, 0);
    s.atLeast = true;
    return s;
  }
  HfSource fusedQKV(const std::string &module, Fused layout, bool conv1d);
  HfSource attention(const AttentionSpec &a, bool cross);
  HfSource ffn();
  HfSource layerNorm(ParamBlock block);

  /// The stack's name in encoder-decoder checkpoints ("encoder", "decoder").
  std::string hfStack() const {
    if (spec.stacks.size() == 2)
      return stack->name;
    return spec.arch == Arch::encoder ? "encoder" : "decoder";
  }
  std::string layerPrefix() const {
    std::string i = std::to_string(key.layer);
    switch (fam) {
    case Family::GPT2:
    case Family::GPTJ:
    case Family::Falcon:
    case Family::Bloom:
      return "h." + i + ".";
    case Family::Bert:
    case Family::ViT:
      return "encoder.layer." + i + ".";
    case Family::T5:
      return hfStack() + ".block." + i + ".";
    case Family::Bart:
    case Family::Whisper:
      return hfStack() + ".layers." + i + ".";
    default:
      return "layers." + i + ".";
    }
  }

  const ModelSpec &spec;
  const ParamSpec &p;
  const ParamKey &key;
  Family fam;
  int64_t d;
  const StackSpec *stack;
};

} // namespace

HfSource Mapper::fusedQKV(const std::string &module, Fused layout,
                          bool conv1d) {
  const AttentionSpec &a = stack->attention;
  int64_t hd = a.headDim, qn = a.heads * hd, kvn = a.kvHeads * hd;
  int64_t total = qn + 2 * kvn;
  int which = 0; // q, k, v
  switch (key.role) {
  case ParamRole::KWeight:
  case ParamRole::KBias:
    which = 1;
    break;
  case ParamRole::VWeight:
  case ParamRole::VBias:
    which = 2;
    break;
  default:
    break;
  }
  int64_t n = p.shape[0], offset = 0, block = n, stride = 0;
  switch (layout) {
  case Fused::Concat:
    offset = which == 0 ? 0 : which == 1 ? qn : qn + kvn;
    break;
  case Fused::PerHead:
    if (a.kvHeads != a.heads)
      return unmapped("a fused query_key_value of this type holds as many "
                      "key/value heads as query heads (kv_heads = " +
                      llvm::Twine(a.kvHeads) +
                      ", heads = " + llvm::Twine(a.heads) + ")");
    offset = which * hd;
    block = hd;
    stride = 3 * hd;
    break;
  case Fused::Grouped: {
    int64_t g = a.heads / a.kvHeads;
    offset = which == 0 ? 0 : which == 1 ? g * hd : (g + 1) * hd;
    block = which == 0 ? g * hd : hd;
    stride = (g + 2) * hd;
    break;
  }
  }
  std::string name = module + suffix();
  if (isBias())
    return rows(Kind::Rows, name, {total}, offset, block, stride);
  if (conv1d)
    return rows(Kind::TransposeRows, name, {d, total}, offset, block, stride);
  return rows(Kind::Rows, name, {total, d}, offset, block, stride);
}

HfSource Mapper::attention(const AttentionSpec &a, bool cross) {
  std::string l = layerPrefix();
  char proj = 0; // q k v o, or n / m for the q and k norms
  switch (key.role) {
  case ParamRole::QWeight:
  case ParamRole::QBias:
    proj = 'q';
    break;
  case ParamRole::KWeight:
  case ParamRole::KBias:
    proj = 'k';
    break;
  case ParamRole::VWeight:
  case ParamRole::VBias:
    proj = 'v';
    break;
  case ParamRole::OWeight:
  case ParamRole::OBias:
    proj = 'o';
    break;
  case ParamRole::QNormWeight:
    proj = 'n';
    break;
  case ParamRole::KNormWeight:
    proj = 'm';
    break;
  default:
    return unmapped("not an attention parameter");
  }
  bool qkv = proj == 'q' || proj == 'k' || proj == 'v';
  auto separate = [&](const std::string &att, llvm::StringRef q,
                      llvm::StringRef k, llvm::StringRef v,
                      llvm::StringRef o) -> HfSource {
    llvm::StringRef m = proj == 'q' ? q : proj == 'k' ? k : proj == 'v' ? v : o;
    return linear(att + m.str());
  };
  if ((proj == 'n' || proj == 'm') &&
      !llvm::is_contained({Family::Llama, Family::Phi}, fam))
    return unmapped("this type has no q/k norms");
  if (cross &&
      !llvm::is_contained({Family::T5, Family::Bart, Family::Whisper}, fam))
    return unmapped("this type has no cross-attention");
  switch (fam) {
  case Family::GPT2:
    if (qkv)
      return fusedQKV(l + "attn.c_attn", Fused::Concat, /*conv1d=*/true);
    return conv1d(l + "attn.c_proj");
  case Family::GPTJ:
    return separate(l + "attn.", "q_proj", "k_proj", "v_proj", "out_proj");
  case Family::NeoX:
    if (qkv)
      return fusedQKV(l + "attention.query_key_value", Fused::PerHead, false);
    return linear(l + "attention.dense");
  case Family::Llama:
  case Family::Gemma2:
    if (proj == 'n' || proj == 'm')
      return linear(l +
                    (proj == 'n' ? "self_attn.q_norm" : "self_attn.k_norm"));
    return separate(l + "self_attn.", "q_proj", "k_proj", "v_proj", "o_proj");
  case Family::Phi:
    if (proj == 'n' || proj == 'm')
      return linear(l + (proj == 'n' ? "self_attn.q_layernorm"
                                     : "self_attn.k_layernorm"));
    return separate(l + "self_attn.", "q_proj", "k_proj", "v_proj", "dense");
  case Family::Phi3:
    if (qkv)
      return fusedQKV(l + "self_attn.qkv_proj", Fused::Concat, false);
    return linear(l + "self_attn.o_proj");
  case Family::Falcon:
    if (qkv)
      return fusedQKV(l + "self_attention.query_key_value", Fused::Grouped,
                      false);
    return linear(l + "self_attention.dense");
  case Family::Bloom:
    if (qkv)
      return fusedQKV(l + "self_attention.query_key_value", Fused::PerHead,
                      false);
    return linear(l + "self_attention.dense");
  case Family::Bert:
    if (qkv)
      return separate(l + "attention.self.", "query", "key", "value", "");
    return linear(l + "attention.output.dense");
  case Family::ViT:
    if (qkv)
      return separate(l + "attention.attention.", "query", "key", "value", "");
    return linear(l + "attention.output.dense");
  case Family::T5:
    return separate(
        l + (cross ? "layer.1.EncDecAttention." : "layer.0.SelfAttention."),
        "q", "k", "v", "o");
  case Family::Bart:
  case Family::Whisper:
    // Whisper's k_proj has no bias (bias=False): a model with attention
    // biases reads zeros for it, which is what Whisper computes.
    if (fam == Family::Whisper && key.role == ParamRole::KBias)
      return source(Kind::Zeros, {}, p.shape);
    return separate(l + (cross ? "encoder_attn." : "self_attn."), "q_proj",
                    "k_proj", "v_proj", "out_proj");
  }
  (void)a;
  return unmapped("unknown type");
}

HfSource Mapper::ffn() {
  std::string l = layerPrefix();
  char which = 0; // up, gate, down
  switch (key.role) {
  case ParamRole::UpWeight:
  case ParamRole::UpBias:
    which = 'u';
    break;
  case ParamRole::GateWeight:
  case ParamRole::GateBias:
    which = 'g';
    break;
  case ParamRole::DownWeight:
  case ParamRole::DownBias:
    which = 'd';
    break;
  default:
    return unmapped("not an ffn parameter");
  }
  bool gated = isGatedActivation(stack->ffn.activation);
  auto plain = [&](const std::string &up, const std::string &down) -> HfSource {
    if (which == 'g')
      return unmapped("this type's ffn has no gate (a gated activation "
                      "needs one)");
    return linear(l + (which == 'u' ? up : down));
  };
  switch (fam) {
  case Family::GPT2:
    if (which == 'g')
      return unmapped("this type's ffn has no gate (a gated activation "
                      "needs one)");
    return conv1d(l + (which == 'u' ? "mlp.c_fc" : "mlp.c_proj"));
  case Family::GPTJ:
    return plain("mlp.fc_in", "mlp.fc_out");
  case Family::NeoX:
  case Family::Falcon:
  case Family::Bloom:
    return plain("mlp.dense_h_to_4h", "mlp.dense_4h_to_h");
  case Family::Llama:
  case Family::Gemma2:
    if (!gated)
      return unmapped("this type's ffn is gated (gate_proj, up_proj)");
    return linear(l + (which == 'u'   ? "mlp.up_proj"
                       : which == 'g' ? "mlp.gate_proj"
                                      : "mlp.down_proj"));
  case Family::Phi:
    return plain("mlp.fc1", "mlp.fc2");
  case Family::Bart:
  case Family::Whisper:
    return plain("fc1", "fc2");
  case Family::Phi3: {
    if (which == 'd')
      return linear(l + "mlp.down_proj");
    if (!gated)
      return unmapped("this type's ffn is gated (gate_up_proj)");
    // gate_up_proj's output is [gate | up] (chunk(2) gives gate first).
    int64_t h = stack->ffn.hidden;
    std::string name = l + "mlp.gate_up_proj" + suffix();
    int64_t offset = which == 'g' ? 0 : h;
    if (isBias())
      return rows(Kind::Rows, name, {2 * h}, offset, h, 0);
    return rows(Kind::Rows, name, {2 * h, d}, offset, h, 0);
  }
  case Family::Bert:
  case Family::ViT:
    return plain("intermediate.dense", "output.dense");
  case Family::T5: {
    std::string dense = "layer." + std::string(stack->hasCross ? "2" : "1") +
                        ".DenseReluDense.";
    if (which == 'd')
      return linear(l + dense + "wo");
    // T5 v1.1's gated-gelu: act(wi_0(x)) * wi_1(x).
    if (gated)
      return linear(l + dense + (which == 'g' ? "wi_0" : "wi_1"));
    return plain(dense + "wi", dense + "wo");
  }
  }
  return unmapped("unknown type");
}

HfSource Mapper::layerNorm(ParamBlock block) {
  std::string l = layerPrefix();
  bool twoNorms =
      spec.residual == Residual::Parallel && spec.parallelNorms == 2;
  switch (block) {
  case ParamBlock::AttnNorm:
    switch (fam) {
    case Family::GPT2:
    case Family::GPTJ:
      return norm(l + "ln_1");
    case Family::Falcon:
      return norm(l + (twoNorms ? "ln_attn" : "input_layernorm"));
    case Family::Bert:
      return norm(l + "attention.output.LayerNorm");
    case Family::ViT:
      return norm(l + "layernorm_before");
    case Family::T5:
      return norm(l + "layer.0.layer_norm");
    case Family::Bart:
    case Family::Whisper:
      return norm(l + "self_attn_layer_norm");
    default:
      return norm(l + "input_layernorm");
    }
  case ParamBlock::FfnNorm:
    switch (fam) {
    case Family::GPT2:
      return norm(l + "ln_2");
    case Family::GPTJ:
    case Family::Phi:
      return unmapped("this type has one norm per layer (parallel(norms = 1))");
    case Family::Falcon:
      return norm(l + (twoNorms ? "ln_mlp" : "post_attention_layernorm"));
    case Family::Gemma2:
      return norm(l + "pre_feedforward_layernorm");
    case Family::Bert:
      return norm(l + "output.LayerNorm");
    case Family::ViT:
      return norm(l + "layernorm_after");
    case Family::T5:
      return norm(l + (stack->hasCross ? "layer.2" : "layer.1") +
                  ".layer_norm");
    case Family::Bart:
    case Family::Whisper:
      return norm(l + "final_layer_norm");
    default:
      return norm(l + "post_attention_layernorm");
    }
  case ParamBlock::AttnPostNorm:
  case ParamBlock::FfnPostNorm:
    if (fam != Family::Gemma2)
      return unmapped("this type has no sandwich norms");
    return norm(l + (block == ParamBlock::AttnPostNorm
                         ? "post_attention_layernorm"
                         : "post_feedforward_layernorm"));
  case ParamBlock::CrossNorm:
    if (fam == Family::T5)
      return norm(l + "layer.1.layer_norm");
    if (fam == Family::Bart || fam == Family::Whisper)
      return norm(l + "encoder_attn_layer_norm");
    return unmapped("this type has no cross-attention");
  default:
    return unmapped("not a layer norm");
  }
}

HfSource Mapper::map() {
  switch (key.block) {
  case ParamBlock::TokenEmbed:
    switch (fam) {
    case Family::GPT2:
    case Family::GPTJ:
      return copy("wte.weight");
    case Family::NeoX:
      return copy("embed_in.weight");
    case Family::Falcon:
    case Family::Bloom:
      return copy("word_embeddings.weight");
    case Family::Bert:
      return copy("embeddings.word_embeddings.weight");
    case Family::T5:
    case Family::Bart: {
      // One shared table; the stacks' embed_tokens are tied copies that a
      // checkpoint may carry instead.
      HfSource s = copy("shared.weight");
      s.names.push_back("encoder.embed_tokens.weight");
      s.names.push_back("decoder.embed_tokens.weight");
      return s;
    }
    case Family::ViT:
    case Family::Whisper:
      return unmapped("this type has no token embedding");
    default:
      return copy("embed_tokens.weight");
    }
  case ParamBlock::PositionEmbed:
    switch (fam) {
    case Family::GPT2:
      return positions("wpe.weight", 0);
    case Family::Bert:
      // RoBERTa numbers positions from padding_idx + 1 = 2.
      return positions("embeddings.position_embeddings.weight",
                       spec.hfType == "roberta" ? 2 : 0);
    case Family::Bart:
      // BartLearnedPositionalEmbedding's offset of 2.
      return positions(hfStack() + ".embed_positions.weight", 2);
    case Family::Whisper:
      return positions(hfStack() + ".embed_positions.weight", 0);
    case Family::ViT:
      return source(Kind::Copy, {"embeddings.position_embeddings"},
                    {1, spec.context, d});
    default:
      return unmapped("this type has no learned position table");
    }
  case ParamBlock::TypeEmbed:
    if (fam != Family::Bert)
      return unmapped("this type has no token types");
    return copy("embeddings.token_type_embeddings.weight");
  case ParamBlock::EmbedNorm:
    if (fam == Family::Bert)
      return norm("embeddings.LayerNorm");
    if (fam == Family::Bloom)
      return norm("word_embeddings_layernorm");
    if (fam == Family::Bart)
      return norm(hfStack() + ".layernorm_embedding");
    return unmapped("this type has no embedding norm");
  case ParamBlock::RelativeBias:
    if (fam != Family::T5)
      return unmapped("this type has no relative position bias");
    // Only the first block of a stack has the table; the others share it.
    return copy(hfStack() +
                ".block.0.layer.0.SelfAttention.relative_attention_bias."
                "weight");
  case ParamBlock::Patch:
    if (fam != Family::ViT)
      return unmapped("this type has no patch embedding");
    if (isBias())
      return copy("embeddings.patch_embeddings.projection.bias");
    // A Conv2d weight [d, C, P, P]: flattened in (channel, row, column)
    // order it is the canonical [d, C*P*P].
    return source(Kind::Copy, {"embeddings.patch_embeddings.projection.weight"},
                  {d, spec.input.channels, spec.input.patch, spec.input.patch});
  case ParamBlock::Embed:
    if (fam != Family::ViT)
      return unmapped("this type has no class token");
    return source(Kind::Copy, {"embeddings.cls_token"}, {1, 1, d});
  case ParamBlock::AttnNorm:
  case ParamBlock::FfnNorm:
  case ParamBlock::AttnPostNorm:
  case ParamBlock::FfnPostNorm:
  case ParamBlock::CrossNorm:
    return layerNorm(key.block);
  case ParamBlock::Attn:
    return attention(stack->attention, false);
  case ParamBlock::CrossAttn:
    return attention(stack->cross, true);
  case ParamBlock::Ffn:
    return ffn();
  case ParamBlock::FinalNorm:
    switch (fam) {
    case Family::GPT2:
    case Family::GPTJ:
    case Family::Falcon:
    case Family::Bloom:
      return norm("ln_f");
    case Family::NeoX:
      return norm("final_layer_norm");
    case Family::Phi:
      return norm("final_layernorm");
    case Family::ViT:
      return norm("layernorm");
    case Family::T5:
      return norm(hfStack() + ".final_layer_norm");
    case Family::Bart:
    case Family::Whisper:
      return norm(hfStack() + ".layer_norm");
    case Family::Bert:
      return unmapped("this type has no final norm");
    default:
      return norm("norm");
    }
  case ParamBlock::LmHead:
    switch (fam) {
    case Family::NeoX:
      if (isBias())
        return unmapped("this type's LM head has no bias");
      return copy("embed_out.weight", /*base=*/false);
    case Family::Bart:
      // final_logits_bias is a [1, vocab] buffer.
      if (isBias())
        return source(Kind::Copy, {"final_logits_bias"}, {1, spec.vocab},
                      /*base=*/false);
      return copy("lm_head.weight", /*base=*/false);
    case Family::Bert:
    case Family::ViT:
    case Family::Whisper:
      return unmapped("this type's checkpoints have no plain LM head");
    default:
      return copy(std::string("lm_head") + suffix(), /*base=*/false);
    }
  case ParamBlock::Classifier:
    if (fam != Family::ViT)
      return unmapped("this type's classification head is not a linear "
                      "layer on the final hidden state");
    return copy(std::string("classifier") + suffix(), /*base=*/false);
  }
  return unmapped("unknown parameter");
}

std::optional<HfSource> mlir::tfm::getHfSource(const ModelSpec &spec,
                                               const ParamSpec &p) {
  if (spec.hfType.empty())
    return std::nullopt;
  std::optional<Family> fam = familyOf(spec.hfType);
  if (!fam) {
    HfSource s;
    s.kind = HfSource::Kind::Unmapped;
    s.why = "unknown model type '" + spec.hfType + "'";
    return s;
  }
  // The source is the whole tensor; a rank's shard is cut from it.
  ParamSpec full = p;
  full.shape = p.fullShape();
  full.shardAxis = -1;
  return Mapper(spec, full, *fam).map();
}

std::vector<std::string>
mlir::tfm::hfCheckpointProblems(const ModelSpec &spec) {
  std::vector<std::string> problems;
  if (spec.hfType.empty())
    return problems;
  if (!familyOf(spec.hfType)) {
    problems.push_back("unknown Hugging Face model type '" + spec.hfType + "'");
    return problems;
  }
  // Every layer of a stack maps the same way: report the first layer's.
  std::set<std::tuple<int32_t, ParamBlock, ParamRole>> seen;
  for (const ParamSpec &p : spec.params()) {
    if (p.key.layer >= 0 &&
        !seen.insert({p.key.stack, p.key.block, p.key.role}).second)
      continue;
    std::optional<HfSource> s = getHfSource(spec, p);
    if (s && s->kind == HfSource::Kind::Unmapped)
      problems.push_back("model type " + spec.hfType + " has no tensor for '" +
                         p.name + "': " + s->why);
  }
  return problems;
}

static llvm::StringRef kindName(HfSource::Kind k) {
  switch (k) {
  case HfSource::Kind::Copy:
    return "copy";
  case HfSource::Kind::Transpose:
    return "transpose";
  case HfSource::Kind::Rows:
    return "rows";
  case HfSource::Kind::TransposeRows:
    return "transpose_rows";
  case HfSource::Kind::Zeros:
    return "zeros";
  case HfSource::Kind::Unmapped:
    return "unmapped";
  }
  return "";
}

std::optional<json::Value> mlir::tfm::hfSourceJSON(const ModelSpec &spec,
                                                   const ParamSpec &p) {
  std::optional<HfSource> s = getHfSource(spec, p);
  if (!s)
    return std::nullopt;
  json::Object o{{"transform", kindName(s->kind).str()}};
  if (s->kind == HfSource::Kind::Unmapped) {
    o["why"] = s->why;
    return json::Value(std::move(o));
  }
  if (s->kind == HfSource::Kind::Zeros)
    return json::Value(std::move(o));
  json::Array names;
  for (const std::string &n : s->names)
    names.push_back(n);
  o["tensor"] = std::move(names);
  o["base"] = s->base;
  json::Array shape;
  for (int64_t d : s->shape)
    shape.push_back(d);
  o["shape"] = std::move(shape);
  if (s->atLeast)
    o["at_least"] = true;
  if (s->kind == HfSource::Kind::Rows ||
      s->kind == HfSource::Kind::TransposeRows) {
    o["offset"] = s->offset;
    o["block"] = s->block;
    o["stride"] = s->stride;
  }
  return json::Value(std::move(o));
}

json::Value mlir::tfm::hfCheckpointJSON(const ModelSpec &spec) {
  if (spec.hfType.empty())
    return json::Object{{"format", "canonical"}};
  llvm::StringRef type = spec.hfType;
  json::Array prefixes;
  if (!basePrefix(type).empty())
    prefixes.push_back(basePrefix(type).str());
  // Tensors of published checkpoints that are not parameters of the model:
  // buffers, tied copies, and the parts tfm does not run. Patterns match
  // the name with or without the base-model prefix; `*` matches any run of
  // characters.
  json::Array ignore{"*position_ids", "*.inv_freq"};
  std::optional<Family> fam = familyOf(type);
  bool lmHead = spec.output.kind == OutputKind::lm_head;
  bool tied = lmHead && spec.mainStack().embedding.tieOutput;
  if (fam) {
    switch (*fam) {
    case Family::GPT2:
    case Family::GPTJ:
      ignore.push_back("*.attn.bias");
      ignore.push_back("*.attn.masked_bias");
      break;
    case Family::NeoX:
      ignore.push_back("*.attention.bias");
      ignore.push_back("*.attention.masked_bias");
      break;
    case Family::Bert:
    case Family::ViT:
      ignore.push_back("pooler.*"); // the pooled output is not computed
      break;
    case Family::T5:
    case Family::Bart:
      ignore.push_back("encoder.embed_tokens.weight");
      ignore.push_back("decoder.embed_tokens.weight");
      if (spec.stacks.size() == 1 && spec.arch == Arch::encoder)
        ignore.push_back("decoder.*"); // as T5EncoderModel
      if (*fam == Family::Bart && !(lmHead && spec.output.lmBias))
        ignore.push_back("final_logits_bias"); // a zero buffer
      break;
    case Family::Whisper:
      // The model reads `features` after the convolution stem, and is the
      // encoder only.
      ignore.push_back("encoder.conv1.*");
      ignore.push_back("encoder.conv2.*");
      ignore.push_back("decoder.*");
      ignore.push_back("proj_out.*");
      break;
    default:
      break;
    }
  }
  if (tied)
    ignore.push_back(fam == Family::NeoX ? "embed_out.weight"
                                         : "lm_head.weight");
  return json::Object{{"format", "huggingface"},
                      {"type", spec.hfType},
                      {"prefixes", std::move(prefixes)},
                      {"ignore", std::move(ignore)}};
}
