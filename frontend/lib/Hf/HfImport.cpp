//===- HfImport.cpp - .tfm descriptions from Hugging Face configs ---------===//
//
// One reader per model_type (the Import column of ModelTypes.def) reads the
// fields of config.json the way that type's Hugging Face configuration and
// modeling code do (the defaults of the configuration class when a field is
// absent) and fills a .tfm model; LLaMA-like decoders share one reader driven
// by their row. Every field read is marked; a field the mapping does not read
// is either known not to change the forward pass (listed in the header
// comment with the reason) or unknown: an error, since it may change the
// forward pass (a warning, listed too, with --allow-unknown). A value that
// changes the math in a way the language cannot express is an error; nothing
// is approximated.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfImport.h"

#include "Importer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include <cmath>

using namespace mlir::tfm;
using namespace mlir::tfm::hf;
using llvm::StringRef;
namespace json = llvm::json;

namespace {

//===----------------------------------------------------------------------===//
// Writing the sections most types share
//===----------------------------------------------------------------------===//

/// vocab, context, d_model and layers, after arch (and input).
void writeSizes(ModelBlock m, int64_t vocab, int64_t context, int64_t d,
                int64_t layers) {
  m.set<KeyId::Vocab>(str(vocab))
      .set<KeyId::Context>(str(context))
      .set<KeyId::DModel>(str(d))
      .set<KeyId::Layers>(str(layers));
}

/// embedding { position; tie_output }.
void writeEmbedding(ModelBlock m, const std::string &position, bool tie) {
  m.sub<SectionId::Embedding>()
      .set<KeyId::Position>(position)
      .set<KeyId::TieOutput>(str(tie));
}

/// attention { heads; kv_heads, head_dim (when they differ from the
/// defaults); mask (when given) }: the section, for the keys that follow.
Block<SectionId::Attention>
writeAttentionSizes(ModelBlock m, int64_t d, int64_t heads, int64_t kvHeads,
                    int64_t headDim, const std::optional<std::string> &mask) {
  auto attn = m.sub<SectionId::Attention>().set<KeyId::Heads>(str(heads));
  if (kvHeads != heads)
    attn.set<KeyId::KvHeads>(str(kvHeads));
  if (d % heads != 0 || headDim != d / heads)
    attn.set<KeyId::HeadDim>(str(headDim));
  if (mask)
    attn.set<KeyId::Mask>(*mask);
  return attn;
}

/// attention { heads; kv_heads (when it differs); mask = causal; bias }.
void writeCausalAttention(ModelBlock m, int64_t heads, int64_t kvHeads,
                          bool bias) {
  auto attn = m.sub<SectionId::Attention>().set<KeyId::Heads>(str(heads));
  if (kvHeads != heads)
    attn.set<KeyId::KvHeads>(str(kvHeads));
  attn.set<KeyId::Mask>("causal").set<KeyId::Bias>(str(bias));
}

/// ffn { hidden; activation; bias }; no activation after an error in it.
void writeFfn(ModelBlock m, std::optional<int64_t> hidden,
              const std::optional<std::string> &act, bool bias) {
  auto ffn = m.sub<SectionId::Ffn>();
  if (hidden)
    ffn.set<KeyId::Hidden>(str(*hidden));
  if (act)
    ffn.set<KeyId::Activation>(*act);
  ffn.set<KeyId::Bias>(str(bias));
}

/// norm { kind; placement; eps }.
void writeNorm(ModelBlock m, StringRef kind, StringRef placement,
               const std::string &eps) {
  m.sub<SectionId::Norm>()
      .set<KeyId::Kind>(kind)
      .set<KeyId::Placement>(placement)
      .set<KeyId::Eps>(eps);
}

/// The sections of the GPT-style decoders: embedding { position;
/// tie_output }, attention { heads; kv_heads; mask = causal; bias }, ffn {
/// hidden; activation; bias }, and LayerNorms before attention and ffn.
struct DecoderLayers {
  std::string position;
  bool tie;
  int64_t heads, kvHeads;
  bool attentionBias;
  int64_t hidden;
  std::optional<std::string> activation;
  bool ffnBias;
  double eps;
};

void writeDecoderLayers(ModelBlock m, const DecoderLayers &l) {
  writeEmbedding(m, l.position, l.tie);
  writeCausalAttention(m, l.heads, l.kvHeads, l.attentionBias);
  writeFfn(m, l.hidden, l.activation, l.ffnBias);
  writeNorm(m, "layernorm", "pre", formatNumber(l.eps));
}

void noLmHead(Importer &I) {
  I.ignore("tie_word_embeddings",
           "the description has no LM head (output = hidden)");
}

const std::initializer_list<StringRef> kSummaryFields = {
    "summary_type", "summary_use_proj", "summary_activation",
    "summary_proj_to_labels", "summary_first_dropout"};

//===----------------------------------------------------------------------===//
// The model types with a reader of their own
//===----------------------------------------------------------------------===//

void importGpt2(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("n_embd", "hidden_size", 768);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 12);
  int64_t vocab = I.sizeOr("vocab_size", 50257);
  int64_t context = I.sizeOr("n_positions", "max_position_embeddings", 1024);
  int64_t layers = I.sizeOr("n_layer", "num_hidden_layers", 12);
  std::optional<int64_t> inner = I.optionalSize("n_inner");
  auto act = I.activationOr("activation_function", "gelu_new");
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", true);
  bool scaled = I.boolOr("scale_attn_weights", true);
  if (I.boolOr("scale_attn_by_inverse_layer_idx", false))
    I.unsupported("scale_attn_by_inverse_layer_idx", "true",
                  "the attention scale 1/(layer + 1) differs per layer");
  if (I.boolOr("add_cross_attention", false))
    I.unsupported("add_cross_attention", "true",
                  "a GPT-2 with cross-attention is not supported");
  I.ignore("reorder_and_upcast_attn",
           "numerics of half-precision attention (the compiled model "
           "accumulates in f32)");
  I.ignore("n_ctx", "legacy copy of n_positions, not read");
  I.ignore(kSummaryFields,
           "sequence-summary head of GPT2DoubleHeadsModel (not part of the "
           "description)");

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Output>("lm_head");
  writeDecoderLayers(m, {"learned", tie, heads, heads, true,
                         inner.value_or(4 * d), act, true, eps});
  if (!scaled)
    m.sub<SectionId::Attention>().set<KeyId::Scale>("1");
}

void importGptNeoX(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", 6144);
  int64_t heads = I.sizeOr("num_attention_heads", 64);
  int64_t headDim = I.headSize("hidden_size", d, "num_attention_heads", heads);
  int64_t vocab = I.sizeOr("vocab_size", 50432);
  int64_t context = I.sizeOr("max_position_embeddings", 2048);
  int64_t layers = I.sizeOr("num_hidden_layers", 44);
  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  if (I.boolOr("use_parallel_residual", true))
    m.set<KeyId::Residual>("parallel(norms = 2)");
  m.set<KeyId::Output>("lm_head");
  // GPTNeoXConfig keeps rotary_pct and rotary_emb_base and copies them to
  // partial_rotary_factor and rope_theta.
  double pct = I.ropeNum("rotary_pct", "partial_rotary_factor",
                         "partial_rotary_factor", 0.25);
  double theta =
      I.ropeNum("rotary_emb_base", "rope_theta", "rope_theta", 10000);
  int64_t rotary = I.partialRotary("rotary_pct", pct, headDim);
  bool bias = I.boolOr("attention_bias", true);
  int64_t inter = I.sizeOr("intermediate_size", 24576);
  auto act = I.activationOr("hidden_act", "gelu");
  double eps = I.numOr("layer_norm_eps", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);

  writeDecoderLayers(m, {I.rope(theta, "half", rotary, headDim), tie, heads,
                         heads, bias, inter, act, true, eps});
}

void importGptJ(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("n_embd", "hidden_size", 4096);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 16);
  int64_t headDim = I.headSize("n_embd", d, "n_head", heads);
  int64_t vocab = I.sizeOr("vocab_size", 50400);
  int64_t context = I.sizeOr("n_positions", "max_position_embeddings", 2048);
  int64_t layers = I.sizeOr("n_layer", "num_hidden_layers", 28);
  int64_t rotary = headDim;
  if (I.has("rotary_dim") || !I.cfg.get("rotary_dim")) {
    rotary = I.intOr("rotary_dim", 64);
    if (rotary < 2 || rotary % 2 != 0 || rotary > headDim)
      I.unsupported("rotary_dim", str(rotary),
                    "it must be even, at least 2 and at most the head size " +
                        str(headDim));
  } else {
    (void)I.raw("rotary_dim");
    I.unsupported("rotary_dim", "null",
                  "Hugging Face's GPT-J then builds positions for the whole "
                  "of n_embd, which does not match a head");
  }
  std::optional<int64_t> inner = I.optionalSize("n_inner");
  auto act = I.activationOr("activation_function", "gelu_new");
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);
  I.ignore("rotary", "not read by Hugging Face's GPT-J (always rotary)");
  I.ignore("scale_attn_weights",
           "not read by Hugging Face's GPT-J (always 1/sqrt(head size))");
  I.ignore(kSummaryFields,
           "sequence-summary head (not part of the description)");

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Residual>("parallel(norms = 1)");
  m.set<KeyId::Output>("lm_head(bias = true)");
  writeDecoderLayers(m,
                     {I.rope(10000, "interleaved", rotary, headDim), tie, heads,
                      heads, false, inner.value_or(4 * d), act, true, eps});
}

void importPhi(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", 2048);
  int64_t heads = I.sizeOr("num_attention_heads", 32);
  int64_t kvHeads = I.sizeOr("num_key_value_heads", heads);
  int64_t headDim = I.headSize("hidden_size", d, "num_attention_heads", heads);
  int64_t vocab = I.sizeOr("vocab_size", 51200);
  int64_t context = I.sizeOr("max_position_embeddings", 2048);
  int64_t layers = I.sizeOr("num_hidden_layers", 24);
  double theta = I.ropeNum("rope_theta", 10000);
  int64_t rotary =
      I.partialRotary("partial_rotary_factor",
                      I.ropeNum("partial_rotary_factor", 0.5), headDim);
  std::string position = I.rope(theta, "half", rotary, headDim);
  if (I.boolOr("qk_layernorm", false))
    I.unsupported("qk_layernorm", "true",
                  "Phi's Q/K LayerNorms have biases; the language's qk_norm "
                  "has none");
  int64_t inter = I.sizeOr("intermediate_size", 8192);
  auto act = I.activationOr("hidden_act", "gelu_new");
  double eps = I.numOr("layer_norm_eps", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Residual>("parallel(norms = 1)");
  m.set<KeyId::Output>("lm_head(bias = true)");
  writeDecoderLayers(
      m, {position, tie, heads, kvHeads, true, inter, act, true, eps});
}

/// Falcon's residual: parallel attention with one norm, or with two
/// (new_decoder_architecture), or sequential. Nothing when it is an error.
std::optional<StringRef> falconResidual(Importer &I, bool newArch,
                                        bool parallel,
                                        std::optional<int64_t> numLn) {
  if (newArch && !parallel) {
    I.unsupported("new_decoder_architecture", "true with parallel_attn = false",
                  "Hugging Face's Falcon cannot run this combination either");
    return std::nullopt;
  }
  if (newArch) {
    int64_t n = numLn.value_or(2);
    if (n == 2)
      return StringRef("parallel(norms = 2)");
    if (n == 1)
      return StringRef("parallel(norms = 1)");
    I.unsupported("num_ln_in_parallel_attn", str(n), "expected 1 or 2");
    return std::nullopt;
  }
  if (parallel) {
    if (numLn.value_or(1) != 1)
      I.unsupported("num_ln_in_parallel_attn", str(*numLn),
                    "Hugging Face's Falcon reads two norms only with "
                    "new_decoder_architecture");
    return StringRef("parallel(norms = 1)");
  }
  if (numLn)
    I.ignore("num_ln_in_parallel_attn", "not read with parallel_attn = false");
  return std::nullopt;
}

void importFalcon(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", "n_embed", 4544);
  int64_t heads = I.sizeOr("num_attention_heads", "n_head", 71);
  (void)I.headSize("hidden_size", d, "num_attention_heads", heads);
  int64_t vocab = I.sizeOr("vocab_size", 65024);
  int64_t context = I.sizeOr("max_position_embeddings", 2048);
  int64_t layers = I.sizeOr("num_hidden_layers", "n_layer", 32);

  if (I.boolOr("alibi", false))
    I.unsupported("alibi", "true",
                  "Falcon adds the ALiBi bias before the 1/sqrt(head size) "
                  "scaling, the language after it");
  bool newArch = I.boolOr("new_decoder_architecture", false);
  bool multiQuery = I.boolOr("multi_query", true);
  bool parallel = I.boolOr("parallel_attn", true);
  std::optional<int64_t> numLn = I.getInt("num_ln_in_parallel_attn");
  int64_t kvHeads = heads;
  if (newArch) {
    kvHeads = I.sizeOr("num_kv_heads", "n_head_kv", heads);
    I.ignore("multi_query", "not read with new_decoder_architecture "
                            "(num_kv_heads is)");
  } else {
    kvHeads = multiQuery ? 1 : heads;
    I.ignore({"num_kv_heads", "n_head_kv"},
             "not read without new_decoder_architecture (multi_query is)");
  }
  if (I.boolOr("apply_residual_connection_post_layernorm", false))
    I.unsupported("apply_residual_connection_post_layernorm", "true",
                  "Hugging Face's Falcon does not read it; its residual is "
                  "the layer input");
  std::optional<StringRef> residual =
      falconResidual(I, newArch, parallel, numLn);
  bool bias = I.boolOr("bias", false);
  double theta = I.ropeNum("rope_theta", 10000);
  std::string position = I.rope(theta, "half", 0, 0);
  int64_t inter = I.sizeOr("ffn_hidden_size", 4 * d);
  auto act = I.activationOr("activation", "gelu");
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", true);

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  if (residual)
    m.set<KeyId::Residual>(*residual);
  m.set<KeyId::Output>("lm_head");
  writeDecoderLayers(
      m, {position, tie, heads, kvHeads, bias, inter, act, bias, eps});
}

void importBloom(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", "n_embed", 64);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 8);
  (void)I.headSize("hidden_size", d, "n_head", heads);
  int64_t vocab = I.sizeOr("vocab_size", 250880);
  I.note("context = 2048: BLOOM's config sets no longest sequence (ALiBi "
         "positions have none); 2048 is the length BLOOM was trained with. "
         "Raise it at will.");
  int64_t layers = I.sizeOr("n_layer", "num_hidden_layers", 2);
  if (I.boolOr("apply_residual_connection_post_layernorm", false))
    I.unsupported("apply_residual_connection_post_layernorm", "true",
                  "a residual taken after the norm cannot be written");
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", true);
  I.ignore({"pretraining_tp", "slow_but_exact"},
           "tensor-parallel slicing of the projections (same result)");
  I.ignore({"attention_softmax_in_fp32", "bias_dropout_fusion",
            "masked_softmax_fusion", "offset_alibi", "skip_bias_add",
            "skip_bias_add_qkv", "n_inner", "seq_length"},
           "Megatron-DeepSpeed settings, not read by Hugging Face's BLOOM "
           "(its feed-forward is always 4 * hidden_size)");

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, 2048, d, layers);
  m.set<KeyId::Output>("lm_head");
  m.sub<SectionId::Embedding>()
      .set<KeyId::Position>("alibi")
      .set<KeyId::Norm>("true")
      .set<KeyId::TieOutput>(str(tie));
  writeCausalAttention(m, heads, heads, true);
  writeFfn(m, 4 * d, std::string("gelu_tanh"), true);
  writeNorm(m, "layernorm", "pre", formatNumber(eps));
}

void importBert(Importer &I, ModelBlock m) {
  bool roberta = I.type.id == ModelType::Roberta;
  int64_t d = I.sizeOr("hidden_size", 768);
  int64_t heads = I.sizeOr("num_attention_heads", 12);
  (void)I.headSize("hidden_size", d, "num_attention_heads", heads);
  int64_t maxPos = I.sizeOr("max_position_embeddings", 512);
  int64_t vocab = I.sizeOr("vocab_size", 30522);
  int64_t context = maxPos;
  if (roberta) {
    int64_t pad = I.intOr("pad_token_id", 1);
    if (pad != 1)
      I.unsupported("pad_token_id", str(pad),
                    "the roberta checkpoint layout skips the first 2 rows "
                    "of position_embeddings, as pad_token_id = 1 makes "
                    "RoBERTa number positions from 2");
    if (maxPos <= 2)
      I.error("max_position_embeddings", "expected more than 2");
    context = maxPos - 2;
    I.note("context = max_position_embeddings - 2 = " + str(context) +
           ": RoBERTa numbers positions from pad_token_id + 1 = 2, so the "
           "checkpoint reader skips the first 2 rows of "
           "position_embeddings. Padding tokens inside a sequence (position "
           "1 in RoBERTa) are not modelled: pad at the end and use "
           "attention { padding = true }.");
  }
  int64_t layers = I.sizeOr("num_hidden_layers", 12);
  I.note(std::string("output = hidden: the last hidden state of ") +
         (roberta ? "RobertaModel" : "BertModel") +
         " (the pooler and the task heads are not part of the description)");
  std::string posType = I.strOr("position_embedding_type", "absolute");
  if (posType != "absolute")
    I.unsupported("position_embedding_type", posType,
                  "only absolute positions are supported");
  if (I.boolOr("is_decoder", false))
    I.unsupported("is_decoder", "true",
                  "a causal BERT with an LM head is not supported");
  if (I.boolOr("add_cross_attention", false))
    I.unsupported("add_cross_attention", "true",
                  "cross-attention in an encoder is not supported");
  int64_t types = I.intOr("type_vocab_size", 2);
  if (types > Importer::kMaxSize)
    I.error("type_vocab_size", "too large");
  if (types < 0)
    I.error("type_vocab_size", "expected an integer >= 0");
  int64_t inter = I.sizeOr("intermediate_size", 3072);
  auto act = I.activationOr("hidden_act", "gelu");
  double eps = I.numOr("layer_norm_eps", 1e-12);
  noLmHead(I);

  m.set<KeyId::Arch>("encoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Output>("hidden");
  m.sub<SectionId::Embedding>()
      .set<KeyId::Position>("learned")
      .set<KeyId::Types>(str(types))
      .set<KeyId::Norm>("true");
  m.sub<SectionId::Attention>()
      .set<KeyId::Heads>(str(heads))
      .set<KeyId::Bias>("true");
  writeFfn(m, inter, act, true);
  writeNorm(m, "layernorm", "post", formatNumber(eps));
}

void importVit(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", 768);
  int64_t heads = I.sizeOr("num_attention_heads", 12);
  (void)I.headSize("hidden_size", d, "num_attention_heads", heads);
  int64_t size = I.sizeOr("image_size", 224);
  int64_t patch = I.sizeOr("patch_size", 16);
  int64_t channels = I.sizeOr("num_channels", 3);
  int64_t layers = I.sizeOr("num_hidden_layers", 12);
  I.note("output = hidden: the last hidden state of ViTModel after its final "
         "norm (the pooler and the classifier are not part of the "
         "description)");
  bool qkvBias = I.boolOr("qkv_bias", true);
  int64_t inter = I.sizeOr("intermediate_size", 3072);
  auto act = I.activationOr("hidden_act", "gelu");
  double eps = I.numOr("layer_norm_eps", 1e-12);
  I.ignore({"encoder_stride"},
           "decoder of ViTForMaskedImageModeling (not part of the "
           "description)");
  I.ignore({"pooler_output_size", "pooler_act"},
           "pooler (not part of the description)");
  noLmHead(I);

  m.set<KeyId::Arch>("encoder")
      .set<KeyId::Input>("image(size = " + str(size) + ", patch = " +
                         str(patch) + ", channels = " + str(channels) + ")")
      .set<KeyId::DModel>(str(d))
      .set<KeyId::Layers>(str(layers))
      .set<KeyId::Output>("hidden");
  m.sub<SectionId::Embedding>()
      .set<KeyId::Position>("learned")
      .set<KeyId::ClsToken>("true");
  m.sub<SectionId::Attention>()
      .set<KeyId::Heads>(str(heads))
      .set<KeyId::Bias>(str(qkvBias))
      .set<KeyId::OutBias>("true");
  writeFfn(m, inter, act, true);
  writeNorm(m, "layernorm", "pre", formatNumber(eps));
}

/// T5's feed-forward_proj: ACT or gated-ACT.
std::optional<std::string> t5Activation(Importer &I) {
  std::string proj = I.strOr("feed_forward_proj", "relu");
  llvm::SmallVector<StringRef> parts;
  StringRef(proj).split(parts, '-');
  bool gated = parts.size() == 2 && parts[0] == "gated";
  if (parts.size() > 2 || (parts.size() == 2 && !gated)) {
    I.unsupported("feed_forward_proj", proj,
                  "expected ACT or gated-ACT, as gated-gelu");
    return std::nullopt;
  }
  // T5Config: "gated-gelu" means gelu_new, for backward compatibility.
  std::string actName = proj == "gated-gelu" ? "gelu_new" : parts.back().str();
  std::optional<std::string> act =
      I.activation("feed_forward_proj", actName, gated);
  // Saved configs also hold the derived fields.
  if (auto derived = I.getStr("dense_act_fn"); derived && *derived != actName)
    I.error("dense_act_fn",
            *derived + " disagrees with feed_forward_proj = " + proj);
  if (auto derived = I.getBool("is_gated_act"); derived && *derived != gated)
    I.error("is_gated_act",
            str(*derived) + " disagrees with feed_forward_proj = " + proj);
  return act;
}

/// Whether T5's head is the shared embedding, scaled.
bool t5TiedHead(Importer &I) {
  // T5ForConditionalGeneration rescales the decoder output by
  // d_model ** -0.5 before a tied head. transformers 4 reads both from
  // tie_word_embeddings (T5 1.0: tied and scaled; 1.1: a head of its own,
  // unscaled); transformers 5 keeps that flag as scale_decoder_outputs and
  // always writes tie_word_embeddings = true (T5Config.__post_init__). The
  // head follows the published checkpoint in both forms: a T5 1.1 folder
  // holds its own lm_head.
  if (!I.has("scale_decoder_outputs")) {
    (void)I.raw("scale_decoder_outputs");
    return I.boolOr("tie_word_embeddings", true);
  }
  bool tie = *I.getBool("scale_decoder_outputs");
  if (auto forced = I.getBool("tie_word_embeddings"); forced && !*forced)
    I.unsupported("tie_word_embeddings", "false with scale_decoder_outputs",
                  "transformers 5 always writes tie_word_embeddings = true "
                  "for T5; this config is neither form");
  I.note(std::string("output: scale_decoder_outputs = ") + str(tie) +
         " (transformers 5 form): " +
         (tie ? "the head is the shared embedding and the decoder output "
                "is scaled by d_model ** -0.5"
              : "the head is the checkpoint's own lm_head, unscaled, as "
                "transformers 4 reads tie_word_embeddings = false "
                "(transformers 5 ties it to the embedding regardless)"));
  return tie;
}

void importT5(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 512);
  int64_t heads = I.sizeOr("num_heads", "num_attention_heads", 8);
  int64_t layers = I.sizeOr("num_layers", "num_hidden_layers", 6);
  int64_t decoderLayers = I.sizeOr("num_decoder_layers", layers);
  int64_t vocab = I.sizeOr("vocab_size", 32128);
  int64_t context = 512;
  if (I.has("n_positions")) {
    context = I.sizeOr("n_positions", 512);
    I.note("context = n_positions = " + str(context) +
           ": a legacy field Hugging Face's T5 does not read (relative "
           "positions set no longest sequence); raise it at will.");
  } else {
    I.note("context = 512: T5's relative positions set no longest sequence; "
           "512 is the length T5 was trained with. Raise it at will.");
  }
  std::optional<std::string> act = t5Activation(I);
  bool tie = t5TiedHead(I);
  int64_t buckets = I.sizeOr("relative_attention_num_buckets", 32);
  int64_t maxDistance = I.sizeOr("relative_attention_max_distance", 128);
  int64_t dkv = I.sizeOr("d_kv", 64);
  int64_t dff = I.sizeOr("d_ff", 2048);
  double eps = I.numOr("layer_norm_epsilon", 1e-6);
  I.ignore("output_past", "legacy generation setting");

  m.set<KeyId::Arch>("encoder_decoder")
      .set<KeyId::Vocab>(str(vocab))
      .set<KeyId::Context>(str(context))
      .set<KeyId::DModel>(str(d))
      .set<KeyId::Output>(
          tie ? "lm_head(scale = " + formatNumber(1.0 / std::sqrt(double(d))) +
                    ")"
              : std::string("lm_head"));
  writeEmbedding(m,
                 "relative(buckets = " + str(buckets) +
                     ", max_distance = " + str(maxDistance) + ")",
                 tie);
  m.sub<SectionId::Attention>()
      .set<KeyId::Heads>(str(heads))
      .set<KeyId::HeadDim>(str(dkv))
      .set<KeyId::Bias>("false")
      .set<KeyId::Scale>("1");
  writeFfn(m, dff, act, false);
  writeNorm(m, "rmsnorm", "pre", formatNumber(eps));
  m.sub<SectionId::Encoder>().set<KeyId::Layers>(str(layers));
  m.sub<SectionId::Decoder>().set<KeyId::Layers>(str(decoderLayers));
}

/// BART's fairseq fields that Hugging Face's BartModel does not read,
/// accepted with the values of its post-norm layout.
void bartFairseqFields(Importer &I) {
  struct Expected {
    StringRef field;
    json::Value value;
    StringRef whyNot;
  };
  const Expected fields[] = {
      {"add_bias_logits", false,
       "an LM-head bias is not read by Hugging Face's BART"},
      {"add_final_layer_norm", false,
       "Hugging Face's BART has no final norm (that is mBART)"},
      {"normalize_before", false,
       "Hugging Face's BART is post-norm (pre-norm is mBART)"},
      {"normalize_embedding", true,
       "Hugging Face's BART always normalizes the embeddings"},
      {"static_position_embeddings", false,
       "Hugging Face's BART has learned positions"},
      {"extra_pos_embeddings", 2, "Hugging Face's BART's position offset is 2"},
  };
  for (const Expected &f : fields)
    I.expect(f.field, f.value,
             "fairseq setting, not read by Hugging Face's BART", f.whyNot);
}

void importBart(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 1024);
  int64_t encLayers = I.sizeOr("encoder_layers", "num_hidden_layers", 12);
  int64_t decLayers = I.sizeOr("decoder_layers", 12);
  int64_t encHeads =
      I.sizeOr("encoder_attention_heads", "num_attention_heads", 16);
  int64_t decHeads = I.sizeOr("decoder_attention_heads", 16);
  int64_t encFfn = I.sizeOr("encoder_ffn_dim", 4096);
  int64_t decFfn = I.sizeOr("decoder_ffn_dim", 4096);
  (void)I.headSize("d_model", d, "encoder_attention_heads", encHeads);
  (void)I.headSize("d_model", d, "decoder_attention_heads", decHeads);
  int64_t maxPos = I.sizeOr("max_position_embeddings", 1024);
  int64_t vocab = I.sizeOr("vocab_size", 50265);
  I.note("positions: BART's learned position tables have 2 extra leading "
         "rows (positions start at 2); the checkpoint reader skips them.");
  I.note("BartForConditionalGeneration adds final_logits_bias, a buffer "
         "stored in the checkpoints, to the logits: it is read as the LM "
         "head's bias.");
  auto act = I.activationOr("activation_function", "gelu");
  bool scale = I.boolOr("scale_embedding", false);
  bool tie = I.boolOr("tie_word_embeddings", true);
  bartFairseqFields(I);
  I.ignore("force_bos_token_to_be_generated", "generation settings");
  I.ignore("classif_dropout", "dropout (inference runs without it)");

  m.set<KeyId::Arch>("encoder_decoder")
      .set<KeyId::Vocab>(str(vocab))
      .set<KeyId::Context>(str(maxPos))
      .set<KeyId::DModel>(str(d))
      .set<KeyId::Output>("lm_head(bias = true)");
  auto emb = m.sub<SectionId::Embedding>()
                 .set<KeyId::Position>("learned")
                 .set<KeyId::Norm>("true");
  if (scale)
    emb.set<KeyId::Scale>("true");
  emb.set<KeyId::TieOutput>(str(tie));
  auto attn = m.sub<SectionId::Attention>();
  if (encHeads == decHeads)
    attn.set<KeyId::Heads>(str(encHeads));
  attn.set<KeyId::Bias>("true");
  writeFfn(m, encFfn == decFfn ? std::optional<int64_t>(encFfn) : std::nullopt,
           act, true);
  writeNorm(m, "layernorm", "post", "1e-05");
  auto stack = [&](auto block, int64_t layers, int64_t heads, int64_t ffn) {
    block.template set<KeyId::Layers>(str(layers));
    if (encHeads != decHeads)
      block.template sub<SectionId::Attention>().template set<KeyId::Heads>(
          str(heads));
    if (encFfn != decFfn)
      block.template sub<SectionId::Ffn>().template set<KeyId::Hidden>(
          str(ffn));
  };
  stack(m.sub<SectionId::Encoder>(), encLayers, encHeads, encFfn);
  stack(m.sub<SectionId::Decoder>(), decLayers, decHeads, decFfn);
}

void importWhisper(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 384);
  int64_t heads = I.sizeOr("encoder_attention_heads", "num_attention_heads", 6);
  (void)I.headSize("d_model", d, "encoder_attention_heads", heads);
  int64_t vocab = I.sizeOr("vocab_size", 51865);
  int64_t context = I.sizeOr("max_source_positions", 1500);
  int64_t layers = I.sizeOr("encoder_layers", "num_hidden_layers", 4);
  I.note("Whisper's encoder only: features are the output of its "
         "convolutional stem (conv1, GELU, conv2 with stride 2, GELU), which "
         "is not part of the description; the output is the encoder's last "
         "hidden state after its final norm.");
  I.note("positions: Whisper's encoder adds embed_positions, a table stored "
         "in the checkpoint (sinusoids of its own layout), so the "
         "description reads it as learned positions.");
  I.note("attention bias = true: Whisper's k_proj has no bias; a key bias "
         "adds the same amount to every score of a query and changes "
         "nothing, so the checkpoint reader supplies zeros.");
  int64_t ffnDim = I.sizeOr("encoder_ffn_dim", 1536);
  auto act = I.activationOr("activation_function", "gelu");
  I.ignore("scale_embedding", "not used by Whisper's encoder");
  I.ignore({"decoder_layers", "decoder_attention_heads", "decoder_ffn_dim",
            "max_target_positions", "tie_word_embeddings"},
           "decoder (tfmc import writes Whisper's encoder only)");
  I.ignore("num_mel_bins",
           "input of the convolutional stem (not part of the description)");
  I.ignore({"use_weighted_layer_sum", "classifier_proj_size"},
           "audio-classification head (not part of the description)");
  I.ignore({"apply_spec_augment", "mask_time_prob", "mask_time_length",
            "mask_time_min_masks", "mask_feature_prob", "mask_feature_length",
            "mask_feature_min_masks"},
           "SpecAugment (training)");
  I.ignore("median_filter_width", "timestamps (generation settings)");

  m.set<KeyId::Arch>("encoder").set<KeyId::Input>("features");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Output>("hidden");
  m.sub<SectionId::Embedding>().set<KeyId::Position>("learned");
  m.sub<SectionId::Attention>()
      .set<KeyId::Heads>(str(heads))
      .set<KeyId::Bias>("true");
  writeFfn(m, ffnDim, act, true);
  writeNorm(m, "layernorm", "pre", "1e-05");
}

/// gpt-oss's quantization_config: transformers' Mxfp4 quantizer, which
/// stores the experts' gate_up_proj and down_proj (GptOssExperts, the only
/// modules it converts) as MXFP4 blocks and scales. The checkpoint layout
/// reads those tensors in either form, so which modules stay unquantized
/// (modules_to_not_convert) and whether transformers dequantizes them when
/// loading (dequantize) change nothing.
void gptOssQuantization(Importer &I) {
  const json::Value *v = I.raw("quantization_config");
  if (!v)
    return;
  const json::Object *q = v->getAsObject();
  if (!q) {
    I.error("quantization_config", "expected an object, got " + showJson(*v));
    return;
  }
  const json::Value *method = q->get("quant_method");
  if (!method) {
    I.error("quantization_config.quant_method",
            "missing (it names the quantization)");
  } else if (method->getAsString() != std::optional<StringRef>("mxfp4")) {
    I.unsupported("quantization_config.quant_method", show(*method),
                  "tfm reads gpt-oss checkpoints unquantized or with MXFP4 "
                  "experts (mxfp4)");
  } else {
    I.note("experts: quantization_config quant_method = mxfp4: the "
           "checkpoint's MXFP4 experts (mlp.experts.gate_up_proj_blocks and "
           "_scales, down_proj_blocks and _scales) are dequantized as they "
           "are loaded, as transformers dequantizes them "
           "(convert_moe_packed_tensors), to f32 (bf16 with --dtype bf16)");
  }
  for (const auto &kv : *q)
    if (kv.first != "quant_method" && kv.first != "modules_to_not_convert" &&
        kv.first != "dequantize")
      I.unknownField("quantization_config." + kv.first.str());
}

/// gpt-oss (GptOssConfig, modeling_gpt_oss.py): LLaMA's decoder with q, k,
/// v and o biases, attention sinks, sliding and full layers (layer_types),
/// YaRN, and every layer a mixture of num_local_experts experts with
/// biases behind a router with a bias (GptOssTopKRouter: the top k logits,
/// then their softmax) and the clamped SwiGLU of GptOssExperts.
void importGptOss(Importer &I, ModelBlock m) {
  int64_t d = I.sizeOr("hidden_size", 2880);
  int64_t heads = I.sizeOr("num_attention_heads", 64);
  // GptOssConfig (transformers 5): num_key_value_heads and head_dim null
  // are heads and hidden_size / heads; absent, their defaults 8 and 64.
  auto isNull = [&](StringRef key) {
    return I.cfg.get(key) != nullptr && !I.has(key);
  };
  int64_t kvHeads = I.sizeOr("num_key_value_heads",
                             isNull("num_key_value_heads") ? heads : 8);
  int64_t headDim =
      isNull("head_dim")
          ? I.headSize("hidden_size", d, "num_attention_heads", heads)
          : I.sizeOr("head_dim", 64);
  (void)I.raw("head_dim");
  int64_t layers = I.sizeOr("num_hidden_layers", 36);
  if (layers > 65536) {
    I.error("num_hidden_layers", str(layers) + " is too large");
    layers = 1;
  }
  int64_t vocab = I.sizeOr("vocab_size", 201088);
  int64_t context = I.sizeOr("max_position_embeddings", 131072);
  double eps = I.numOr("rms_norm_eps", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);

  // transformers 4's GptOssConfig sets attention_bias = True whatever the
  // config says; transformers 5 reads it.
  if (!I.boolOr("attention_bias", true))
    I.unsupported("attention_bias", "false",
                  "transformers 4 gives gpt-oss's q, k, v and o projections "
                  "biases whatever attention_bias says, and transformers 5 "
                  "reads it: the versions disagree");

  // Positions: YaRN. GptOssConfig's default when the config gives no
  // scaling (transformers 5's; rope_scaling = null means no scaling to
  // transformers 4 and the default to transformers 5).
  double theta = I.ropeNum("rope_theta", 150000);
  std::string position;
  if (!I.cfg.get("rope_scaling") && !I.cfg.get("rope_parameters")) {
    position = "rope(theta = " + formatNumber(theta) +
               ", style = half, scaling = yarn, factor = 32, "
               "original_context = 4096, beta_fast = 32, beta_slow = 1, "
               "truncate = false)";
    I.note("positions: the config gives no rope_scaling: GptOssConfig's "
           "default, YaRN with factor 32 over 4096 positions, beta_fast 32, "
           "beta_slow 1, truncate false");
  } else if (!I.has("rope_scaling") && !I.has("rope_parameters")) {
    (void)I.raw("rope_scaling");
    (void)I.raw("rope_parameters");
    I.unsupported("rope_scaling", "null",
                  "transformers 4 reads it as no RoPE scaling and transformers "
                  "5 as GptOssConfig's default YaRN: the versions disagree");
  } else {
    position = I.rope(theta, "half", 0, headDim, context);
  }

  // Layers: sliding_attention or full_attention (layer_types; by default
  // the even layers slide), the sliding ones within sliding_window.
  std::vector<bool> sliding(layers);
  for (int64_t i = 0; i < layers; ++i)
    sliding[i] = (i + 1) % 2 != 0;
  bool listed = I.layerTypes(layers, sliding);
  std::optional<int64_t> window = 128;
  if (I.cfg.get("sliding_window"))
    window = I.getInt("sliding_window");
  std::optional<std::string> mask =
      I.slidingMask(sliding, window, listed ? "layer_types" : "sliding_window");

  // The experts: GptOssExperts hard-codes the clamp (7.0) and the sigmoid
  // gain (1.702) that swiglu_clamp has; the configs that name them must
  // agree.
  int64_t experts = I.sizeOr("num_local_experts", "num_experts", 128);
  int64_t perToken = I.sizeOr("num_experts_per_tok", 4);
  if (perToken > experts)
    I.error("num_experts_per_tok",
            str(perToken) + " is more than the " + str(experts) + " experts");
  int64_t inter = I.sizeOr("intermediate_size", 2880);
  double limit = I.numOr("swiglu_limit", 7.0);
  if (limit != 7.0)
    I.unsupported("swiglu_limit", formatNumber(limit),
                  "the language's swiglu_clamp clamps the gate above and the "
                  "up projection on both sides at 7, the limit of gpt-oss's "
                  "modeling code");
  double alpha = I.numOr("swiglu_alpha", 1.702);
  if (alpha != 1.702)
    I.unsupported("swiglu_alpha", formatNumber(alpha),
                  "the language's swiglu_clamp has the sigmoid gain 1.702 of "
                  "gpt-oss's modeling code");
  I.ignore("hidden_act", "not read by gpt-oss's modeling code (its experts' "
                         "activation is the clamped SwiGLU, swiglu_clamp)");
  I.ignore({"output_router_logits", "router_aux_loss_coef"},
           "the router's auxiliary load-balancing loss (training only)");
  I.ignore({"experts_per_token", "initial_context_length"},
           "OpenAI's original config fields, not read by Hugging Face's "
           "gpt-oss (num_experts_per_tok and rope_scaling are)");
  gptOssQuantization(I);

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Output>("lm_head");
  writeEmbedding(m, position, tie);
  auto attn = writeAttentionSizes(m, d, heads, kvHeads, headDim, mask);
  attn.set<KeyId::Bias>("true").set<KeyId::Sinks>("true");
  m.sub<SectionId::Ffn>()
      .set<KeyId::Hidden>(str(inter))
      .set<KeyId::Activation>("swiglu_clamp")
      .set<KeyId::Bias>("true")
      .set<KeyId::Experts>(str(experts))
      .set<KeyId::ExpertsPerToken>(str(perToken))
      .set<KeyId::Router>("topk_softmax")
      .set<KeyId::RouterBias>("true");
  writeNorm(m, "rmsnorm", "pre", formatNumber(eps));
}

//===----------------------------------------------------------------------===//
// DeepSeek-V2 and V3
//===----------------------------------------------------------------------===//

/// The blocks of a block-scaled FP8 checkpoint.
struct Fp8Blocks {
  int64_t rows, cols;
};

/// DeepSeek's quantization_config: transformers' fine-grained FP8
/// (FineGrainedFP8Config), as DeepSeek-V3 and R1 publish their linear
/// weights: F8_E4M3 weights with one weight_scale_inv per weight_block_size
/// block. The checkpoint layout reads such weights (and unquantized ones)
/// as the compiled model's fp8 arguments say; which modules stay
/// unquantized (modules_to_not_convert) and whether transformers
/// dequantizes them when loading (dequantize) change nothing.
std::optional<Fp8Blocks> deepseekQuantization(Importer &I) {
  const json::Value *v = I.raw("quantization_config");
  if (!v)
    return std::nullopt;
  const json::Object *q = v->getAsObject();
  if (!q) {
    I.error("quantization_config", "expected an object, got " + showJson(*v));
    return std::nullopt;
  }
  bool ok = true;
  auto word = [&](StringRef key, StringRef dflt, StringRef why) {
    const json::Value *f = q->get(key);
    if (!f) {
      if (dflt.empty()) {
        I.error("quantization_config." + key,
                "missing (it names the quantization)");
        ok = false;
      }
      return;
    }
    std::optional<StringRef> s = f->getAsString();
    if (s && *s == (dflt.empty() ? StringRef("fp8") : dflt))
      return;
    I.unsupported("quantization_config." + key, show(*f), why);
    ok = false;
  };
  word("quant_method", "",
       "tfm reads DeepSeek checkpoints unquantized or in FP8 with block "
       "scales (fp8)");
  // DeepSeek's own field; transformers' FP8 is always float8_e4m3fn.
  word("fmt", "e4m3",
       "tfm reads FP8 weights in e4m3 (float8_e4m3fn), the format of "
       "DeepSeek's FP8 checkpoints");
  word("activation_scheme", "dynamic",
       "static activation scales are not read: tfm dequantizes the weights "
       "and computes with unquantized activations");
  Fp8Blocks blocks{128, 128};
  if (const json::Value *b = q->get("weight_block_size")) {
    const json::Array *a = b->getAsArray();
    std::optional<int64_t> rows, cols;
    if (a && a->size() == 2) {
      rows = (*a)[0].getAsInteger();
      cols = (*a)[1].getAsInteger();
    }
    if (b->kind() == json::Value::Null) {
      I.unsupported("quantization_config.weight_block_size", "null",
                    "one scale per tensor is not read: tfm reads FP8 "
                    "weights with a scale per block");
      ok = false;
    } else if (!rows || !cols || *rows <= 0 || *cols <= 0 ||
               *rows > Importer::kMaxSize || *cols > Importer::kMaxSize) {
      I.error("quantization_config.weight_block_size",
              "expected [rows, cols], two integers > 0, got " + showJson(*b));
      ok = false;
    } else {
      blocks = {*rows, *cols};
    }
  } else {
    I.note("checkpoint: quantization_config gives no weight_block_size: "
           "FineGrainedFP8Config's default, blocks of [128, 128]");
  }
  for (const auto &kv : *q)
    if (!llvm::is_contained({"quant_method", "fmt", "activation_scheme",
                             "weight_block_size", "modules_to_not_convert",
                             "dequantize"},
                            StringRef(kv.first)))
      I.unknownField("quantization_config." + kv.first.str());
  if (!ok)
    return std::nullopt;
  I.note("checkpoint: quantization_config quant_method = fp8: the linear "
         "weights of attention and of the MLPs and experts may be stored "
         "in F8_E4M3 with a weight_scale_inv per block of " +
         str(blocks.rows) + " x " + str(blocks.cols) +
         " (fp8_block_rows, fp8_block_cols); they are dequantized as they "
         "are loaded, to f32 (bf16 with --dtype bf16), as transformers "
         "does with dequantize = true, and the activations are not "
         "quantized (activation_scheme dynamic)");
  return blocks;
}

/// DeepSeek-V2 and V3 (DeepseekV2Config / DeepseekV3Config,
/// modeling_deepseek_v2.py / modeling_deepseek_v3.py): LLaMA's decoder
/// with multi-head latent attention (q_lora_rank, kv_lora_rank, the
/// decoupled RoPE key of qk_rope_head_dim, interleaved pairs, YaRN with
/// mscale in the softmax scale), a dense MLP in the first
/// first_k_dense_replace layers, and after them a mixture of
/// n_routed_experts experts and the shared experts: V2's softmax router
/// (topk_method greedy or group_limited_greedy), V3's sigmoid router with
/// e_score_correction_bias among the best of n_group groups (noaux_tc). The
/// fields DeepSeek's own config carries for its modeling_deepseek.py
/// (topk_method for V3, scoring_func, moe_layer_freq) are accepted with the
/// values for which it and transformers compute the same.
void importDeepseek(Importer &I, ModelBlock m) {
  // Read by DeepSeek's modeling_deepseek.py only; accepted with the values
  // for which it computes what transformers computes.
  const StringRef kDeepseekOwnFields =
      "DeepSeek's own config fields, read by its modeling_deepseek.py and "
      "not by transformers (their values agree with what transformers "
      "computes)";
  bool v3 = I.type.id == ModelType::DeepseekV3;
  StringRef cls = v3 ? "DeepseekV3" : "DeepseekV2";
  auto isNull = [&](StringRef key) {
    return I.cfg.get(key) != nullptr && !I.has(key);
  };
  auto refuseNull = [&](StringRef key, const llvm::Twine &why) {
    if (!isNull(key))
      return false;
    (void)I.raw(key);
    I.unsupported(key, "null", why);
    return true;
  };
  int64_t vocab = I.sizeOr("vocab_size", v3 ? 129280 : 32000);
  int64_t d = I.sizeOr("hidden_size", v3 ? 7168 : 4096);
  int64_t inter = I.sizeOr("intermediate_size", v3 ? 18432 : 11008);
  int64_t layers = I.sizeOr("num_hidden_layers", v3 ? 61 : 32);
  if (layers > 65536) {
    I.error("num_hidden_layers", str(layers) + " is too large");
    layers = 1;
  }
  int64_t heads = I.sizeOr("num_attention_heads", v3 ? 128 : 32);
  int64_t context = I.sizeOr("max_position_embeddings", v3 ? 4096 : 2048);
  double eps = I.numOr("rms_norm_eps", 1e-6);
  bool tie = I.boolOr("tie_word_embeddings", false);
  I.ignore("pretraining_tp",
           "tensor-parallel slicing of the projections (same result)");

  // The attention: every head its own key and value from the latent, no
  // biases, the latents' norms with DeepseekRMSNorm's default eps.
  int64_t kvHeads = isNull("num_key_value_heads")
                        ? heads
                        : I.sizeOr("num_key_value_heads", v3 ? 128 : heads);
  if (kvHeads != heads)
    I.unsupported("num_key_value_heads",
                  str(kvHeads) + (I.cfg.get("num_key_value_heads")
                                      ? ""
                                      : " (" + cls.str() + "Config's default)"),
                  "latent attention gives every head its own key and value "
                  "(kv_b_proj), which transformers' attention would repeat "
                  "num_attention_heads / num_key_value_heads times: it must "
                  "equal num_attention_heads = " +
                      str(heads));
  if (I.boolOr("attention_bias", false))
    I.unsupported("attention_bias", "true",
                  "latent attention has no biases in the language "
                  "(q_a_proj, kv_a_proj_with_mqa and o_proj would have "
                  "them)");
  if (!v3 && I.boolOr("mlp_bias", false))
    I.unsupported("mlp_bias", "true",
                  "the language's shared expert has no biases (DeepseekV2MLP "
                  "gives the dense MLPs and the shared experts biases)");
  if (eps != 1e-6)
    I.unsupported("rms_norm_eps", formatNumber(eps),
                  cls + "Attention builds q_a_layernorm and kv_a_layernorm "
                        "with eps 1e-6 whatever rms_norm_eps says, and the "
                        "language gives every norm of the model one eps");
  std::optional<int64_t> qRank;
  if (isNull("q_lora_rank"))
    (void)I.raw("q_lora_rank"); // the query projected directly: q_proj
  else
    qRank = I.sizeOr("q_lora_rank", 1536);
  int64_t kvRank = I.sizeOr("kv_lora_rank", 512);
  int64_t ropeDim = I.sizeOr("qk_rope_head_dim", 64);
  int64_t nope = I.sizeOr("qk_nope_head_dim", 128);
  int64_t valueDim = I.sizeOr("v_head_dim", 128);
  int64_t headDim = nope + ropeDim;
  if (ropeDim % 2 != 0)
    I.unsupported("qk_rope_head_dim", str(ropeDim),
                  "RoPE rotates pairs of values: it must be even");
  // Set by the configuration classes from qk_rope_head_dim (and
  // transformers 5 saves them); DeepseekV3Config lets a saved value win.
  if (v3) {
    I.expect("head_dim", json::Value(ropeDim),
             "derived by DeepseekV3Config (qk_rope_head_dim)",
             "DeepseekV3Config's head_dim is the rotated width, "
             "qk_rope_head_dim = " +
                 str(ropeDim) + "; another value would rotate another width");
    I.expect("qk_head_dim", json::Value(headDim),
             "derived by DeepseekV3Config (qk_nope_head_dim + "
             "qk_rope_head_dim)",
             "DeepseekV3Attention's query and key heads are qk_head_dim "
             "wide, which must be qk_nope_head_dim + qk_rope_head_dim = " +
                 str(headDim));
  } else {
    I.ignore({"head_dim", "qk_head_dim"},
             "not read by deepseek_v2's modeling code (DeepseekV2Config "
             "derives them from qk_rope_head_dim and qk_nope_head_dim)");
  }

  // Positions: RoPE on the qk_rope_head_dim values of each head, as pairs
  // of neighbours (V2's complex rotation, V3's rope_interleave), and the
  // softmax scale times mscale^2 with YaRN.
  double theta = I.ropeNum("rope_theta", 10000);
  StringRef style = "interleaved";
  if (v3) {
    if (!I.boolOr("rope_interleave", true))
      style = "half";
  } else {
    I.ignore("rope_interleave",
             "not read by deepseek_v2's modeling code (apply_rotary_emb "
             "always rotates pairs of neighbours)");
  }
  Importer::RopeScaling scaling;
  std::string position = I.rope(theta, style, 0, headDim, context, &scaling);
  std::optional<double> scale;
  if (scaling.type != "default" && scaling.factor && scaling.mscaleAllDim &&
      *scaling.mscaleAllDim != 0) {
    // Attention.__init__: self.scaling = self.qk_head_dim ** (-0.5);
    // mscale = yarn_get_mscale(factor, mscale_all_dim); self.scaling =
    // self.scaling * mscale * mscale.
    double f = *scaling.factor, all = *scaling.mscaleAllDim;
    double mscale = f <= 1 ? 1.0 : 0.1 * all * std::log(f) + 1.0;
    scale = std::pow(double(headDim), -0.5) * mscale * mscale;
    I.note("attention scale = qk_head_dim ** -0.5 * mscale ** 2 = " +
           formatNumber(*scale) + ", mscale = 0.1 * mscale_all_dim * " +
           "ln(factor) + 1 = " + formatNumber(mscale) + " (" + cls +
           "Attention with YaRN" +
           (v3 ? std::string(")")
               : std::string("; as DeepSeek's modeling_deepseek.py, and "
                             "transformers since July 2026: its earlier "
                             "releases left mscale out for deepseek_v2)")));
  }

  // The MLPs: dense in layers 0 .. first_k_dense_replace - 1, the mixture
  // of experts after them (transformers reads no moe_layer_freq).
  std::optional<std::string> act =
      I.activation("hidden_act", I.strOr("hidden_act", "silu"), true);
  int64_t firstDense = I.intOr("first_k_dense_replace", v3 ? 3 : 0);
  if (firstDense < 0) {
    I.error("first_k_dense_replace", "expected an integer >= 0");
    firstDense = 0;
  }
  I.expect("moe_layer_freq", json::Value(1), kDeepseekOwnFields,
           "transformers' " + cls.str() +
               "DecoderLayer makes every layer from first_k_dense_replace on "
               "sparse, DeepSeek's modeling_deepseek.py only those with "
               "layer % moe_layer_freq == 0: the versions disagree");
  I.ignore({"aux_loss_alpha", "seq_aux"},
           "the router's auxiliary load-balancing loss (training only)");
  I.ignore("ep_size", "expert parallelism of DeepSeek's own modeling code "
                      "(same result)");
  if (v3)
    I.ignore("num_nextn_predict_layers",
             "multi-token prediction, not run by transformers (its module, "
             "stored as model.layers.61, is not read)");

  std::optional<Fp8Blocks> fp8 = deepseekQuantization(I);
  if (fp8)
    m.set<KeyId::Checkpoint>("huggingface(type = " + I.modelType +
                             ", fp8_block_rows = " + str(fp8->rows) +
                             ", fp8_block_cols = " + str(fp8->cols) + ")");
  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  m.set<KeyId::Output>("lm_head");
  writeEmbedding(m, position, tie);
  auto attn = m.sub<SectionId::Attention>()
                  .set<KeyId::Heads>(str(heads))
                  .set<KeyId::HeadDim>(str(headDim))
                  .set<KeyId::KvRank>(str(kvRank));
  if (qRank)
    attn.set<KeyId::QRank>(str(*qRank));
  attn.set<KeyId::RopeDim>(str(ropeDim))
      .set<KeyId::ValueDim>(str(valueDim))
      .set<KeyId::Mask>("causal")
      .set<KeyId::Bias>("false");
  if (scale)
    attn.set<KeyId::Scale>(formatNumber(*scale));
  writeFfn(m, inter, act, false);
  writeNorm(m, "rmsnorm", "pre", formatNumber(eps));

  std::initializer_list<StringRef> moeFields = {
      "n_routed_experts",     "num_local_experts",
      "num_experts_per_tok",  "moe_intermediate_size",
      "n_shared_experts",     "n_group",
      "topk_group",           "topk_method",
      "scoring_func",         "norm_topk_prob",
      "routed_scaling_factor"};
  if (firstDense >= layers) {
    I.note("ffn: every layer is a dense MLP of intermediate_size "
           "(first_k_dense_replace >= num_hidden_layers)");
    I.ignore(moeFields, "not read: no layer is sparse "
                        "(first_k_dense_replace >= num_hidden_layers)");
    return;
  }

  // The experts (after an error in a field, the others are still read).
  refuseNull("n_routed_experts",
             v3 ? "DeepseekV3MoE needs the number of routed experts"
                : "DeepSeek's modeling_deepseek.py then runs a dense MLP in "
                  "every layer and transformers' DeepseekV2Moe fails: the "
                  "versions disagree");
  // DeepseekV3Config.attribute_map: num_local_experts is n_routed_experts.
  int64_t experts = v3 ? I.sizeOr("n_routed_experts", "num_local_experts", 256)
                       : I.sizeOr("n_routed_experts", 64);
  int64_t perToken = 0;
  if (!v3 && !I.has("num_experts_per_tok")) {
    (void)I.raw("num_experts_per_tok");
    I.error("num_experts_per_tok",
            "missing: DeepseekV2Config's default None chooses no experts "
            "(DeepseekV2Moe needs their number)");
  } else {
    perToken = I.sizeOr("num_experts_per_tok", 8);
    if (perToken > experts)
      I.error("num_experts_per_tok",
              str(perToken) + " is more than the " + str(experts) + " experts");
  }
  int64_t expertHidden = I.sizeOr("moe_intermediate_size", v3 ? 2048 : 1407);
  int64_t shared = 0;
  if (!refuseNull("n_shared_experts",
                  v3 ? "DeepseekV3MoE's shared experts are "
                       "moe_intermediate_size * n_shared_experts wide"
                     : "DeepSeek's modeling_deepseek.py then runs no shared "
                       "experts and transformers' DeepseekV2Moe fails: the "
                       "versions disagree")) {
    int64_t n = I.intOr("n_shared_experts", v3 ? 1 : 2);
    if (n < 0 || n > Importer::kMaxSize / expertHidden)
      I.error("n_shared_experts", "expected an integer >= 0");
    else
      shared = n * expertHidden;
  }

  // The router.
  std::string router;
  bool normalize = false;
  double routedScale = 1.0;
  auto groupsOf = [&](StringRef method) -> std::optional<std::string> {
    // The experts form n_group groups; the best topk_group of them hold
    // the experts a token can choose.
    bool bad = false;
    for (StringRef key : {"n_group", "topk_group"}) {
      if (refuseNull(key, method + " needs " + key)) {
        bad = true;
      } else if (!v3 && !I.cfg.get(key)) {
        I.error(key, "missing: DeepseekV2Config's default None has no "
                     "groups for topk_method group_limited_greedy");
        bad = true;
      }
    }
    int64_t groups = I.sizeOr("n_group", 8);
    int64_t topk = I.sizeOr("topk_group", 4);
    if (bad)
      return std::nullopt;
    if (experts % groups != 0) {
      I.unsupported("n_group", str(groups),
                    "the " + str(experts) +
                        " routed experts form n_group equal groups");
      return std::nullopt;
    }
    if (v3 && experts / groups < 2) {
      I.unsupported("n_group", str(groups),
                    "DeepseekV3TopkRouter scores a group by its two best "
                    "experts: each group needs at least 2");
      return std::nullopt;
    }
    if (topk > groups) {
      I.unsupported("topk_group", str(topk),
                    "at most n_group = " + str(groups) + " groups");
      return std::nullopt;
    }
    if (groups == 1)
      return std::string();
    return "(groups = " + str(groups) + ", topk_groups = " + str(topk) + ")";
  };
  if (v3) {
    I.expect("topk_method", "noaux_tc", kDeepseekOwnFields,
             "transformers' DeepseekV3TopkRouter always routes as noaux_tc "
             "(sigmoid scores, chosen with e_score_correction_bias among the "
             "best groups)");
    I.expect("scoring_func", "sigmoid", kDeepseekOwnFields,
             "transformers' DeepseekV3TopkRouter always scores the experts "
             "with a sigmoid");
    if (std::optional<std::string> g = groupsOf("noaux_tc"))
      router = "sigmoid" + *g;
    normalize = I.boolOr("norm_topk_prob", true);
    routedScale = I.numOr("routed_scaling_factor", 2.5);
  } else {
    I.expect("scoring_func", "softmax", kDeepseekOwnFields,
             "transformers' DeepseekV2Moe always scores the experts with a "
             "softmax");
    std::string method = I.strOr("topk_method", "greedy");
    if (method == "greedy") {
      router = "softmax";
      I.ignore({"n_group", "topk_group"}, "not read with topk_method greedy");
    } else if (method == "group_limited_greedy") {
      if (std::optional<std::string> g = groupsOf(method))
        router = "softmax" + *g;
    } else {
      I.unsupported("topk_method", method,
                    "supported: greedy, group_limited_greedy (DeepseekV2Moe)");
    }
    // DeepseekV2Moe weighs the chosen experts p * routed_scaling_factor;
    // DeepSeek's modeling_deepseek.py does the same unless norm_topk_prob
    // (with more than one expert a token), then it divides them by their
    // sum and leaves routed_scaling_factor out.
    if (I.boolOr("norm_topk_prob", false) && perToken > 1)
      I.unsupported("norm_topk_prob", "true",
                    "transformers' DeepseekV2Moe does not read it (it weighs "
                    "the chosen experts p * routed_scaling_factor) and "
                    "DeepSeek's modeling_deepseek.py divides them by their "
                    "sum and leaves routed_scaling_factor out: the versions "
                    "disagree");
    routedScale = I.numOr("routed_scaling_factor", 1.0);
  }
  if (!(routedScale > 0))
    I.unsupported("routed_scaling_factor", formatNumber(routedScale),
                  "the language's routed_scale must be > 0");

  auto ffn = m.sub<SectionId::Ffn>();
  ffn.set<KeyId::Experts>(str(experts))
      .set<KeyId::ExpertsPerToken>(str(perToken));
  if (expertHidden != inter)
    ffn.set<KeyId::ExpertHidden>(str(expertHidden));
  if (!router.empty())
    ffn.set<KeyId::Router>(router);
  if (v3)
    ffn.set<KeyId::SelectionBias>("true");
  if (normalize)
    ffn.set<KeyId::Normalize>("true");
  if (routedScale != 1 && routedScale > 0)
    ffn.set<KeyId::RoutedScale>(formatNumber(routedScale));
  if (shared > 0)
    ffn.set<KeyId::SharedHidden>(str(shared));
  if (firstDense > 0)
    ffn.set<KeyId::FirstDense>(str(firstDense));
}

//===----------------------------------------------------------------------===//
// LLaMA-like decoders
//===----------------------------------------------------------------------===//

/// What a LLaMA-like decoder's config and modeling code do beyond LLaMA's
/// core (RMSNorm, RoPE half, a gated feed-forward, grouped-query attention).
namespace DecoderTrait {
enum : uint32_t {
  /// attention_bias: biases on q, k, v and o.
  AttentionBias = 1 << 0,
  /// q, k and v with biases, o without; attention_bias is not read.
  QkvBias = 1 << 1,
  /// No attention biases; attention_bias is listed as not read.
  NoAttentionBias = 1 << 2,
  /// mlp_bias: biases on the feed-forward.
  MlpBias = 1 << 3,
  /// The activation is hidden_activation, gelu_pytorch_tanh when unset (not
  /// the legacy hidden_act) (Gemma).
  GemmaActivation = 1 << 4,
  /// The activation is hidden_activation (default gelu_pytorch_tanh);
  /// hidden_act is not read (Gemma 2).
  HiddenActivation = 1 << 5,
  /// head_dim is hidden_size / heads; a head_dim field is not read.
  NoHeadDim = 1 << 6,
  /// partial_rotary_factor is read even when absent (default 1).
  PartialRotary = 1 << 7,
  /// original_max_position_embeddings is read only by longrope scaling.
  LongRope = 1 << 8,
  /// sliding_window, when set: every layer attends within the window.
  SlidingWindow = 1 << 9,
  /// An absent sliding_window is its default, 4096 (Mistral).
  WindowByDefault = 1 << 10,
  /// use_sliding_window: layers from max_window_layers on slide.
  UseSlidingWindow = 1 << 11,
  /// Every other layer slides, the first one included (Gemma 2).
  AlternatingWindow = 1 << 12,
  /// layer_types (newer configs) says which layers slide.
  LayerTypes = 1 << 13,
  /// Gemma's conventions: embeddings scaled by sqrt(d_model), norm weights
  /// as 1 + w, use_bidirectional_attention read (true is an error).
  Gemma = 1 << 14,
  /// RMSNorm on q and k (qk_norm).
  QkNorm = 1 << 15,
  /// Norms after attention and the feed-forward too (sandwich).
  SandwichNorms = 1 << 16,
  /// query_pre_attn_scalar, attn_logit_softcapping and
  /// final_logit_softcapping, with Gemma 2's defaults 256, 50 and 30.
  Softcapping = 1 << 17,
  /// max_sequence_length is listed as not read (LLaMA fine-tunes).
  MaxSequenceLength = 1 << 18,
  /// pretraining_tp is listed as not changing the result.
  PretrainingTp = 1 << 19,
  /// qkv_bias (default true) says whether q, k and v have biases
  /// (transformers 5's Qwen2-MoE); attention_bias is listed as not read.
  QkvBiasField = 1 << 20,
  /// use_sliding_window = true is an error unless layer_types says which
  /// layers slide: the versions of the Qwen-MoE modeling code disagree.
  MoeSlidingWindow = 1 << 21,
  /// Every layer a mixture of num_local_experts experts of width
  /// intermediate_size; softmax, top k, always renormalized (Mixtral).
  MixtralExperts = 1 << 22,
  /// num_experts experts of width moe_intermediate_size in the layers that
  /// mlp_only_layers and decoder_sparse_step leave sparse, the others a
  /// dense MLP of intermediate_size; norm_topk_prob (Qwen2-MoE, Qwen3-MoE).
  QwenExperts = 1 << 23,
  /// A shared expert of shared_expert_intermediate_size behind a sigmoid
  /// gate (Qwen2-MoE).
  SharedExpert = 1 << 24,
  /// num_local_experts experts of width intermediate_size, the top k
  /// logits then their softmax, and GraniteMoE's multipliers: the attention
  /// scale attention_multiplier, logits divided by logits_scaling,
  /// embedding_multiplier and residual_multiplier.
  GraniteExperts = 1 << 25,
  /// OLMoE's attention: q_norm and k_norm RMSNorms over the whole q and k
  /// projections (qk_norm_width = projection), clip_qkv (when set) as clip.
  OlmoeAttention = 1 << 26,
  /// Every layer a mixture of num_experts experts of width
  /// intermediate_size; softmax, top k, norm_topk_prob (OLMoE).
  OlmoeExperts = 1 << 27,
};
} // namespace DecoderTrait

/// The defaults of a LLaMA-like type's configuration class and its
/// DecoderTraits: the row of ModelTypes.def.
struct LlamaLike {
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0, kvHeads = 0,
          headDim = 0, context = 0;
  double eps = 0;
  bool tie = false;
  uint32_t traits = 0;
  /// rope_theta's default.
  double theta = 10000;
  /// A mixture of experts: the defaults of the number of experts, of those
  /// each token runs, of their width (0: intermediate_size's) and of the
  /// shared expert's width.
  int64_t experts = 0, perToken = 0, expertHidden = 0, shared = 0;

  constexpr LlamaLike() = default;
  constexpr LlamaLike(int64_t vocab, int64_t hidden, int64_t inter,
                      int64_t layers, int64_t heads, int64_t kvHeads,
                      int64_t headDim, int64_t context, double eps, bool tie,
                      uint32_t traits)
      : vocab(vocab), hidden(hidden), inter(inter), layers(layers),
        heads(heads), kvHeads(kvHeads), headDim(headDim), context(context),
        eps(eps), tie(tie), traits(traits) {}
  bool has(uint32_t trait) const { return (traits & trait) != 0; }
  constexpr LlamaLike withTheta(double t) const {
    LlamaLike out = *this;
    out.theta = t;
    return out;
  }
  constexpr LlamaLike withExperts(int64_t n, int64_t k, int64_t width,
                                  int64_t sharedWidth) const {
    LlamaLike out = *this;
    out.experts = n;
    out.perToken = k;
    out.expertHidden = width;
    out.shared = sharedWidth;
    return out;
  }
};

/// The .tfm activation of a LLaMA-like type (gated); `field` names the
/// field it came from.
std::optional<std::string> llamaActivation(Importer &I, const LlamaLike &df) {
  using namespace DecoderTrait;
  std::string actField = "hidden_act";
  std::string actName;
  if (df.has(GemmaActivation)) {
    // GemmaMLP reads hidden_activation and, when it is unset, uses
    // gelu_pytorch_tanh (the approximate GELU Gemma was trained with);
    // hidden_act is the legacy field it overrides.
    if (auto a = I.getStr("hidden_activation")) {
      actField = "hidden_activation";
      actName = *a;
    } else {
      actName = "gelu_pytorch_tanh";
      if (const json::Value *v = I.cfg.get("hidden_act")) {
        std::string legacy = show(*v);
        if (legacy != actName)
          I.note("ffn activation: hidden_activation is unset, so the "
                 "activation is gelu_pytorch_tanh as in Google's reference "
                 "implementation and transformers 4.39-4.47 (the legacy "
                 "hidden_act = " +
                 legacy + " is not used)");
      }
    }
    I.ignore("hidden_act", "legacy activation field, overridden by "
                           "hidden_activation");
  } else if (df.has(HiddenActivation)) {
    actField = "hidden_activation";
    actName = I.strOr("hidden_activation", "gelu_pytorch_tanh");
    I.ignore("hidden_act",
             "not read by Gemma 2's modeling code (hidden_activation is)");
  } else {
    actName = I.strOr("hidden_act", "silu");
  }
  return I.activation(actField, actName, true);
}

/// The sliding_window of the configuration classes that have one.
constexpr int64_t kDefaultWindow = 4096;

/// The mask of a LLaMA-like type: causal, or its sliding-window layers.
std::optional<std::string> llamaMask(Importer &I, const LlamaLike &df,
                                     int64_t layers) {
  using namespace DecoderTrait;
  std::vector<bool> sliding(layers, false);
  std::optional<int64_t> window;
  std::string maskField = "sliding_window";
  if (df.has(SlidingWindow)) {
    if (I.has("sliding_window") ||
        (df.has(WindowByDefault) && !I.cfg.get("sliding_window")))
      window = I.intOr("sliding_window", kDefaultWindow);
    else
      (void)I.raw("sliding_window");
    if (window)
      sliding.assign(layers, true);
  } else if (df.has(UseSlidingWindow)) {
    bool use = I.boolOr("use_sliding_window", false);
    if (use) {
      int64_t maxWindowLayers = I.intOr("max_window_layers", 28);
      window = I.intOr("sliding_window", kDefaultWindow);
      for (int64_t i = 0; i < layers; ++i)
        sliding[i] = i >= maxWindowLayers;
      maskField = "max_window_layers";
    } else {
      I.ignore({"sliding_window", "max_window_layers"},
               "not read with use_sliding_window = false");
    }
  } else if (df.has(MoeSlidingWindow)) {
    // Which layers slide differs between the versions of the modeling code
    // (transformers 4: from max_window_layers on, or none outside flash
    // attention; transformers 5: Qwen2-MoE the odd layers below
    // max_window_layers, Qwen3-MoE every layer); layer_types settles it.
    if (I.boolOr("use_sliding_window", false)) {
      if (!(df.has(LayerTypes) && I.has("layer_types")))
        I.unsupported("use_sliding_window", "true",
                      "the versions of Hugging Face's " + I.modelType +
                          " disagree on which layers slide" +
                          (df.has(LayerTypes)
                               ? "; a config with layer_types says it"
                               : ""));
      (void)I.raw("max_window_layers");
      window = I.intOr("sliding_window", kDefaultWindow);
    } else {
      I.ignore({"sliding_window", "max_window_layers"},
               "not read with use_sliding_window = false");
    }
  } else if (df.has(AlternatingWindow)) {
    window = I.intOr("sliding_window", kDefaultWindow);
    for (int64_t i = 0; i < layers; ++i)
      sliding[i] = (i + 1) % 2 != 0;
  }
  if (df.has(LayerTypes) && I.layerTypes(layers, sliding)) {
    maskField = "layer_types";
    if (!window && llvm::is_contained(sliding, true) &&
        !df.has(MoeSlidingWindow))
      window = I.getInt("sliding_window");
  }
  return I.slidingMask(sliding, window, maskField);
}

/// Which layers of a Qwen-MoE model run the experts (Qwen2MoeDecoderLayer):
/// layer i does when it is not in mlp_only_layers and (i + 1) %
/// decoder_sparse_step == 0, the others run a dense MLP.
std::vector<bool> qwenSparseLayers(Importer &I, int64_t layers, int64_t step) {
  std::vector<int64_t> dense;
  if (const json::Value *v = I.raw("mlp_only_layers")) {
    const json::Array *list = v->getAsArray();
    if (!list)
      I.error("mlp_only_layers",
              "expected a list of layer indices, got " + showJson(*v));
    for (size_t k = 0; list && k < list->size(); ++k) {
      std::optional<int64_t> i = (*list)[k].getAsInteger();
      if (!i) {
        I.error("mlp_only_layers",
                "entry " + std::to_string(k) +
                    " is not a layer index: " + showJson((*list)[k]));
        continue;
      }
      dense.push_back(*i);
    }
  }
  std::vector<bool> sparse(layers);
  for (int64_t i = 0; i < layers; ++i)
    sparse[i] = !llvm::is_contained(dense, i) && (i + 1) % step == 0;
  return sparse;
}

/// The ffn keys of a LLaMA-like mixture of experts: the experts, the
/// router, the shared expert and which layers are sparse. `inter` is the
/// width of the ffn already written (`hidden`).
void llamaExperts(Importer &I, ModelBlock m, const LlamaLike &df,
                  int64_t layers, int64_t inter) {
  using namespace DecoderTrait;
  int64_t experts = df.experts, expertHidden = inter, shared = 0;
  int64_t firstDense = 0, every = 1;
  bool normalize = false, topk = false;
  std::vector<bool> sparse(layers, true);
  if (df.has(MixtralExperts)) {
    // MixtralConfig.attribute_map: num_experts is num_local_experts.
    experts = I.sizeOr("num_local_experts", "num_experts", df.experts);
    normalize = true;
    I.note("normalize = true: Mixtral always divides the chosen experts' "
           "weights by their sum (MixtralSparseMoeBlock)");
    // MixtralSparseMoeBlock multiplies the router's input by noise only
    // when training.
    I.ignore("router_jitter_noise",
             "noise on the router's input (training only)");
  } else if (df.has(OlmoeExperts)) {
    // OlmoeConfig.attribute_map: num_local_experts is num_experts.
    experts = I.sizeOr("num_experts", "num_local_experts", df.experts);
    normalize = I.boolOr("norm_topk_prob", false);
  } else if (df.has(GraniteExperts)) {
    experts = I.sizeOr("num_local_experts", df.experts);
    // GraniteMoeTopKGating: the top k logits, then their softmax.
    topk = true;
  } else {
    // Qwen3MoeConfig (transformers 5) maps num_local_experts to
    // num_experts.
    experts = I.type.id == ModelType::Qwen3Moe
                  ? I.sizeOr("num_experts", "num_local_experts", df.experts)
                  : I.sizeOr("num_experts", df.experts);
    expertHidden = I.sizeOr("moe_intermediate_size",
                            df.expertHidden ? df.expertHidden : inter);
    normalize = I.boolOr("norm_topk_prob", false);
    every = I.sizeOr("decoder_sparse_step", 1);
    sparse = qwenSparseLayers(I, layers, every);
    if (df.has(SharedExpert)) {
      shared = I.intOr("shared_expert_intermediate_size", df.shared);
      if (shared < 0 || shared > Importer::kMaxSize)
        I.error("shared_expert_intermediate_size",
                "expected an integer >= 0 and at most " +
                    str(Importer::kMaxSize));
    }
  }
  int64_t perToken = I.sizeOr("num_experts_per_tok", df.perToken);
  if (perToken > experts)
    I.error("num_experts_per_tok",
            str(perToken) + " is more than the " + str(experts) + " experts");
  I.ignore({"output_router_logits", "router_aux_loss_coef"},
           "the router's auxiliary load-balancing loss (training only)");

  // The language's sparse layers: [first_dense, ...) where (i + 1) %
  // sparse_every == 0.
  if (!llvm::is_contained(sparse, true)) {
    I.note("ffn: every layer is a dense MLP of intermediate_size (no layer "
           "is left sparse by mlp_only_layers and decoder_sparse_step)");
    return;
  }
  auto matches = [&](int64_t k) {
    for (int64_t i = 0; i < layers; ++i)
      if (sparse[i] != (i >= k && (i + 1) % every == 0))
        return false;
    return true;
  };
  while (firstDense < layers && !matches(firstDense))
    ++firstDense;
  if (firstDense == layers) {
    std::string pattern;
    for (bool s : sparse)
      pattern += s ? 'S' : 'D';
    const json::Value *list = I.cfg.get("mlp_only_layers");
    I.unsupported("mlp_only_layers", list ? showJson(*list) : "[]",
                  "the layers would be " + pattern +
                      " (S: experts, D: a dense MLP); the language's dense "
                      "layers are the first K (first_dense) and, after "
                      "them, all but every N-th (sparse_every = "
                      "decoder_sparse_step)");
    return;
  }

  auto ffn = m.sub<SectionId::Ffn>();
  ffn.set<KeyId::Experts>(str(experts))
      .set<KeyId::ExpertsPerToken>(str(perToken));
  if (expertHidden != inter)
    ffn.set<KeyId::ExpertHidden>(str(expertHidden));
  if (topk)
    ffn.set<KeyId::Router>("topk_softmax");
  if (normalize)
    ffn.set<KeyId::Normalize>("true");
  if (shared > 0)
    ffn.set<KeyId::SharedHidden>(str(shared)).set<KeyId::SharedGate>("true");
  if (firstDense > 0)
    ffn.set<KeyId::FirstDense>(str(firstDense));
  if (every > 1)
    ffn.set<KeyId::SparseEvery>(str(every));
}

/// GraniteMoE's multipliers: attention_multiplier is the attention scale
/// (GraniteMoeAttention.scaling), the logits are divided by logits_scaling,
/// embedding_multiplier multiplies the token embeddings (embedding {
/// multiplier }, or scale = true when it is sqrt(d_model)) and
/// residual_multiplier each block's output before the residual add
/// (residual = sequential(scale)).
void graniteMultipliers(Importer &I, ModelBlock m, int64_t d) {
  // Versions of GraniteMoeModel that read position_embedding_type apply
  // RoPE only when it is "rope"; the others always do.
  std::string position = I.strOr("position_embedding_type", "rope");
  if (position != "rope")
    I.unsupported("position_embedding_type", position,
                  "the versions of Hugging Face's GraniteMoE disagree on "
                  "what it means (some ignore it and apply RoPE)");
  double attention = I.numOr("attention_multiplier", 1.0);
  if (attention == 0)
    I.unsupported("attention_multiplier", "0",
                  "the attention scale must not be 0");
  else
    m.sub<SectionId::Attention>().set<KeyId::Scale>(formatNumber(attention));
  double logits = I.numOr("logits_scaling", 1.0);
  if (!(logits > 0))
    I.unsupported("logits_scaling", formatNumber(logits),
                  "the logits are divided by it: the LM head's scale 1 / "
                  "logits_scaling must be > 0");
  else if (logits != 1)
    m.set<KeyId::Output>("lm_head(scale = " + formatNumber(1.0 / logits) + ")");
  double embedding = I.numOr("embedding_multiplier", 1.0);
  if (embedding == std::sqrt(double(d))) {
    m.sub<SectionId::Embedding>().set<KeyId::Scale>("true");
    I.note("embedding { scale = true }: embedding_multiplier = " +
           formatNumber(embedding) + " is sqrt(hidden_size)");
  } else if (!(embedding > 0)) {
    I.unsupported("embedding_multiplier", formatNumber(embedding),
                  "the language's embedding multiplier must be > 0");
  } else if (embedding != 1) {
    m.sub<SectionId::Embedding>().set<KeyId::Multiplier>(
        formatNumber(embedding));
  }
  double residual = I.numOr("residual_multiplier", 1.0);
  if (!(residual > 0))
    I.unsupported("residual_multiplier", formatNumber(residual),
                  "the language's residual scale (sequential(scale)) must "
                  "be > 0");
  else if (residual != 1)
    m.set<KeyId::Residual>("sequential(scale = " + formatNumber(residual) +
                           ")");
}

/// OLMoE's clip_qkv: q, k (after their norms) and v clamped to [-c, c]
/// (OlmoeAttention.forward); null is no clamp.
void olmoeClip(Importer &I, Block<SectionId::Attention> attn) {
  std::optional<double> clip = I.getNum("clip_qkv");
  if (!clip)
    return;
  if (!(*clip > 0))
    I.unsupported("clip_qkv", formatNumber(*clip),
                  "the language clamps q, k and v to [-clip, clip] with "
                  "clip > 0 (clip = 0 is no clamp)");
  else
    attn.set<KeyId::Clip>(formatNumber(*clip));
}

/// LLaMA and the decoders built like it (their rows' LlamaLike).
void importLlamaLike(Importer &I, ModelBlock m, const LlamaLike &df) {
  using namespace DecoderTrait;
  int64_t d = I.sizeOr("hidden_size", df.hidden);
  int64_t heads = I.sizeOr("num_attention_heads", df.heads);
  int64_t kvHeads =
      I.sizeOr("num_key_value_heads", df.kvHeads ? df.kvHeads : heads);
  int64_t headDim;
  if (df.has(NoHeadDim)) {
    headDim = I.headSize("hidden_size", d, "num_attention_heads", heads);
  } else {
    std::optional<int64_t> hd = I.getInt("head_dim");
    if (!hd && df.headDim)
      hd = df.headDim;
    headDim =
        hd ? *hd : I.headSize("hidden_size", d, "num_attention_heads", heads);
    if (headDim <= 0 || headDim > Importer::kMaxSize) {
      I.error("head_dim",
              "expected an integer > 0 and at most " + str(Importer::kMaxSize));
      headDim = 1;
    }
  }
  int64_t layers = I.sizeOr("num_hidden_layers", df.layers);
  if (layers > 65536) {
    I.error("num_hidden_layers", str(layers) + " is too large");
    layers = 1;
  }
  int64_t vocab = I.sizeOr("vocab_size", df.vocab);
  int64_t context = I.sizeOr("max_position_embeddings", df.context);

  // Attention projections.
  bool bias = df.has(QkvBias), outBias = false;
  if (df.has(AttentionBias))
    bias = outBias = I.boolOr("attention_bias", false);
  if (!df.has(QkvBias))
    outBias = bias;
  if (df.has(NoAttentionBias))
    I.ignore("attention_bias", "not read by this type's modeling code (its "
                               "attention projections have no bias)");
  if (df.has(QkvBiasField)) {
    bias = I.boolOr("qkv_bias", true);
    I.ignore("attention_bias",
             "not read by this type's modeling code (q, k and v take "
             "qkv_bias; o_proj has no bias)");
  }

  // Feed-forward.
  bool mlpBias = df.has(MlpBias) ? I.boolOr("mlp_bias", false) : false;
  std::optional<std::string> act = llamaActivation(I, df);
  int64_t inter = I.sizeOr("intermediate_size", df.inter);

  // Positions.
  double theta = I.ropeNum("rope_theta", df.theta);
  int64_t rotary = headDim;
  if (I.hasRope("partial_rotary_factor", "partial_rotary_factor") ||
      df.has(PartialRotary))
    rotary = I.partialRotary("partial_rotary_factor",
                             I.ropeNum("partial_rotary_factor", 1.0), headDim);
  std::string position = I.rope(theta, "half", rotary, headDim);
  if (df.has(LongRope))
    I.ignore("original_max_position_embeddings",
             "read only with rope_scaling longrope");

  std::optional<std::string> mask = llamaMask(I, df, layers);
  if (df.has(Gemma) && I.boolOr("use_bidirectional_attention", false))
    I.unsupported("use_bidirectional_attention", "true",
                  "a Gemma decoder with bidirectional attention (an embedding "
                  "model) is not supported");
  if (df.has(MaxSequenceLength))
    I.ignore("max_sequence_length",
             "not read by Hugging Face's LLaMA (a training setting some "
             "fine-tunes keep; the context is max_position_embeddings)");
  bool tie = I.boolOr("tie_word_embeddings", df.tie);
  double eps = I.numOr("rms_norm_eps", df.eps);
  if (df.has(PretrainingTp))
    I.ignore("pretraining_tp",
             "tensor-parallel slicing of the projections (same result)");

  // Gemma 2: scale, softcapping.
  std::optional<double> attnSoftcap, finalSoftcap, queryScalar;
  if (df.has(Softcapping)) {
    queryScalar = I.numOr("query_pre_attn_scalar", 256);
    attnSoftcap = I.getNum("attn_logit_softcapping");
    finalSoftcap = I.getNum("final_logit_softcapping");
    if (!I.cfg.get("attn_logit_softcapping"))
      attnSoftcap = 50.0;
    if (!I.cfg.get("final_logit_softcapping"))
      finalSoftcap = 30.0;
    if (*queryScalar <= 0)
      I.error("query_pre_attn_scalar", "expected a number > 0");
  }

  m.set<KeyId::Arch>("decoder");
  writeSizes(m, vocab, context, d, layers);
  if (finalSoftcap && *finalSoftcap != 0)
    m.set<KeyId::Output>("lm_head(softcap = " + formatNumber(*finalSoftcap) +
                         ")");
  else
    m.set<KeyId::Output>("lm_head");
  writeEmbedding(m, position, tie);
  if (df.has(Gemma))
    m.sub<SectionId::Embedding>().set<KeyId::Scale>("true");
  auto attn = writeAttentionSizes(m, d, heads, kvHeads, headDim, mask);
  attn.set<KeyId::Bias>(str(bias));
  if (outBias != bias)
    attn.set<KeyId::OutBias>(str(outBias));
  if (df.has(QkNorm))
    attn.set<KeyId::QkNorm>("true");
  if (df.has(OlmoeAttention)) {
    attn.set<KeyId::QkNorm>("true").set<KeyId::QkNormWidth>("projection");
    olmoeClip(I, attn);
  }
  if (queryScalar && *queryScalar > 0)
    attn.set<KeyId::Scale>(formatNumber(1.0 / std::sqrt(*queryScalar)));
  if (attnSoftcap && *attnSoftcap != 0)
    attn.set<KeyId::Softcap>(formatNumber(*attnSoftcap));
  writeFfn(m, inter, act, mlpBias);
  writeNorm(m, "rmsnorm", df.has(SandwichNorms) ? "sandwich" : "pre",
            formatNumber(eps));
  if (df.has(Gemma))
    m.sub<SectionId::Norm>().set<KeyId::Offset>("1");
  if (df.has(MixtralExperts | QwenExperts | OlmoeExperts | GraniteExperts))
    llamaExperts(I, m, df, layers, inter);
  if (df.has(GraniteExperts))
    graniteMultipliers(I, m, d);
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

using ImportFn = void (*)(Importer &, ModelBlock);

/// The Import column of a row: a reader of its own, or LlamaLike(...).
struct Reader {
  constexpr Reader(ImportFn fn) : fn(fn) {}
  constexpr Reader(const LlamaLike &llama) : llama(llama) {}
  void operator()(Importer &I, ModelBlock m) const {
    if (fn)
      fn(I, m);
    else
      importLlamaLike(I, m, llama);
  }

  ImportFn fn = nullptr;
  LlamaLike llama;
};

using namespace DecoderTrait;
const Reader kReaders[] = {
#define TFM_HF_TYPE(Id, Name, Family, Prefix, PositionOffset, Import)          \
  Reader(Import),
#include "ModelTypes.def"
};

/// The model's name: the folder holding the config, as a .tfm name.
std::string modelName(StringRef filename, StringRef modelType) {
  llvm::SmallString<256> path(filename);
  (void)llvm::sys::fs::make_absolute(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  StringRef folder =
      llvm::sys::path::filename(llvm::sys::path::parent_path(path));
  std::string name;
  for (char c : folder)
    name += llvm::isAlnum(c) || c == '_' ? c : '_';
  if (name.empty() || llvm::all_of(name, [](char c) { return c == '_'; }))
    return modelType.str();
  if (llvm::isDigit(name[0]))
    name = "m_" + name;
  return name;
}

} // namespace

llvm::ArrayRef<StringRef> mlir::tfm::getHfImportModelTypes() {
  return getModelTypeNames();
}

std::optional<std::string> mlir::tfm::findHfConfig(StringRef path,
                                                   HfDiagnosticFn diag) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status)) {
    diag(HfSeverity::Error, "cannot read '" + path + "': " + ec.message());
    return std::nullopt;
  }
  if (!llvm::sys::fs::is_directory(status))
    return path.str();
  llvm::SmallString<256> config(path);
  llvm::sys::path::append(config, "config.json");
  if (!llvm::sys::fs::exists(config)) {
    diag(HfSeverity::Error,
         path + ": no config.json in this folder (tfmc import reads a "
                "Hugging Face model folder or its config.json)");
    return std::nullopt;
  }
  return std::string(config);
}

std::optional<std::string>
mlir::tfm::importHfConfig(StringRef filename, StringRef text,
                          HfDiagnosticFn diag, const HfImportOptions &options) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed) {
    std::string message = llvm::toString(parsed.takeError());
    // "[line:column, byte=N]: message"
    llvm::Regex re("^\\[([0-9]+):([0-9]+), byte=[0-9]+\\]: (.*)$");
    llvm::SmallVector<StringRef> groups;
    if (re.match(message, &groups))
      diag(HfSeverity::Error, filename + ":" + groups[1] + ":" + groups[2] +
                                  ": invalid JSON: " + groups[3]);
    else
      diag(HfSeverity::Error, filename + ": invalid JSON: " + message);
    return std::nullopt;
  }
  const json::Object *cfg = parsed->getAsObject();
  if (!cfg) {
    diag(HfSeverity::Error,
         filename + ": expected a JSON object (a Hugging Face config.json)");
    return std::nullopt;
  }
  std::string supported = llvm::join(getModelTypeNames(), ", ");
  const json::Value *typeValue = cfg->get("model_type");
  if (!typeValue || typeValue->kind() == json::Value::Null) {
    diag(HfSeverity::Error,
         filename +
             ": model_type: missing; it names the architecture "
             "(supported: " +
             supported + ")");
    return std::nullopt;
  }
  std::optional<StringRef> typeName = typeValue->getAsString();
  if (!typeName) {
    diag(HfSeverity::Error, filename + ": model_type: expected a string, got " +
                                showJson(*typeValue));
    return std::nullopt;
  }
  const ModelTypeInfo *type = lookupModelType(*typeName);
  if (!type) {
    StringRef why = refusedModelType(*typeName);
    diag(HfSeverity::Error,
         filename + ": model_type = " + *typeName + " is not supported (" +
             (why.empty() ? "" : why + "; ") + "supported: " + supported + ")");
    return std::nullopt;
  }

  Importer importer(filename, *cfg, *type, diag, options);
  (void)importer.raw("model_type");
  Section model{modelName(filename, type->name), {}, {}};
  ModelBlock(model).set<KeyId::Checkpoint>("huggingface(type = " + type->name +
                                           ")");
  kReaders[static_cast<unsigned>(type->id)](importer, ModelBlock(model));
  std::string result = importer.finish(model);
  if (importer.failed())
    return std::nullopt;
  return result;
}
