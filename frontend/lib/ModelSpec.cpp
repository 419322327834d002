//===- ModelSpec.cpp - parameters, inputs and JSON of a model -------------===//

#include "tfm/Frontend/ModelSpec.h"
#include "tfm/Frontend/HfCheckpoint.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::tfm;
namespace json = llvm::json;

llvm::StringRef mlir::tfm::stringifyArch(Arch a) {
  switch (a) {
  case Arch::encoder:
    return "encoder";
  case Arch::decoder:
    return "decoder";
  case Arch::encoder_decoder:
    return "encoder_decoder";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyDType(DType d) {
  switch (d) {
  case DType::f32:
    return "f32";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyPosition(PositionEncoding p) {
  switch (p) {
  case PositionEncoding::learned:
    return "learned";
  case PositionEncoding::sinusoidal:
    return "sinusoidal";
  case PositionEncoding::rope:
    return "rope";
  case PositionEncoding::alibi:
    return "alibi";
  case PositionEncoding::relative:
    return "relative";
  case PositionEncoding::none:
    return "none";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyRopeScaling(RopeScaling r) {
  switch (r) {
  case RopeScaling::none:
    return "none";
  case RopeScaling::linear:
    return "linear";
  case RopeScaling::yarn:
    return "yarn";
  case RopeScaling::llama3:
    return "llama3";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyOutput(OutputKind o) {
  switch (o) {
  case OutputKind::lm_head:
    return "lm_head";
  case OutputKind::hidden:
    return "hidden";
  case OutputKind::classifier:
    return "classifier";
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyNormPlacement(NormPlacement p) {
  switch (p) {
  case NormPlacement::Pre:
    return "pre";
  case NormPlacement::Post:
    return "post";
  case NormPlacement::Sandwich:
    return "sandwich";
  }
  return "";
}

std::optional<NormPlacement>
mlir::tfm::symbolizeNormPlacement(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<NormPlacement>>(s)
      .Case("pre", NormPlacement::Pre)
      .Case("post", NormPlacement::Post)
      .Case("sandwich", NormPlacement::Sandwich)
      .Default(std::nullopt);
}

llvm::StringRef mlir::tfm::stringifyResidual(Residual r) {
  switch (r) {
  case Residual::Sequential:
    return "sequential";
  case Residual::Parallel:
    return "parallel";
  }
  return "";
}

std::optional<Residual> mlir::tfm::symbolizeResidual(llvm::StringRef s) {
  return llvm::StringSwitch<std::optional<Residual>>(s)
      .Case("sequential", Residual::Sequential)
      .Case("parallel", Residual::Parallel)
      .Default(std::nullopt);
}

llvm::StringRef mlir::tfm::stringifyParamBlock(ParamBlock b) {
  switch (b) {
#define TFM_PARAM_BLOCK(Id, Spelling, Scope, IsNorm)                           \
  case ParamBlock::Id:                                                         \
    return Spelling;
#include "tfm/Frontend/Params.def"
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyParamRole(ParamRole r) {
  switch (r) {
#define TFM_PARAM_ROLE(Id, Spelling, IsBias)                                   \
  case ParamRole::Id:                                                          \
    return Spelling;
#include "tfm/Frontend/Params.def"
  }
  return "";
}

llvm::StringRef mlir::tfm::stringifyParamInit(ParamInit i) {
  switch (i) {
  case ParamInit::normal:
    return "normal";
  case ParamInit::ones:
    return "ones";
  case ParamInit::zeros:
    return "zeros";
  }
  return "";
}

ParamScope mlir::tfm::getParamScope(ParamBlock b) {
  switch (b) {
#define TFM_PARAM_BLOCK(Id, Spelling, Scope, IsNorm)                           \
  case ParamBlock::Id:                                                         \
    return ParamScope::Scope;
#include "tfm/Frontend/Params.def"
  }
  return ParamScope::Model;
}

static bool isNorm(ParamBlock b) {
  switch (b) {
#define TFM_PARAM_BLOCK(Id, Spelling, Scope, IsNorm)                           \
  case ParamBlock::Id:                                                         \
    return IsNorm;
#include "tfm/Frontend/Params.def"
  }
  return false;
}

static bool isBias(ParamRole r) {
  switch (r) {
#define TFM_PARAM_ROLE(Id, Spelling, IsBias)                                   \
  case ParamRole::Id:                                                          \
    return IsBias;
#include "tfm/Frontend/Params.def"
  }
  return false;
}

int64_t ParamSpec::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> ParamSpec::fullShape() const {
  std::vector<int64_t> full = shape;
  if (shardAxis >= 0)
    full[shardAxis] = shardFull;
  return full;
}

ParamInit ParamSpec::init() const {
  if (isBias(key.role))
    return ParamInit::zeros;
  if (isNorm(key.block))
    return ParamInit::ones;
  return ParamInit::normal;
}

const ParamSpec *ParamTable::find(const ParamKey &key) const {
  auto it = byKey.find(key);
  return it == byKey.end() ? nullptr : &entries[it->second];
}

std::optional<unsigned> ParamTable::indexOf(llvm::StringRef name) const {
  auto it = byName.find(name);
  if (it == byName.end())
    return std::nullopt;
  return it->second;
}

int64_t ParamTable::numElements() const {
  int64_t n = 0;
  for (const ParamSpec &p : entries)
    n += p.numElements();
  return n;
}

void ParamTable::add(ParamKey key, llvm::StringRef stackPrefix,
                     std::vector<int64_t> shape, DType dtype, int64_t shardAxis,
                     int64_t shardFull) {
  std::string name = stackPrefix.str();
  if (key.layer >= 0)
    name += "layers." + std::to_string(key.layer) + ".";
  name += (stringifyParamBlock(key.block) + "." + stringifyParamRole(key.role))
              .str();
  unsigned index = entries.size();
  byKey.emplace(key, index);
  byName.try_emplace(name, index);
  entries.push_back(
      {key, std::move(name), std::move(shape), dtype, shardAxis, shardFull});
}

namespace {
/// Builds the table in canonical order.
class ParamTableBuilder {
public:
  ParamTableBuilder(const ModelSpec &spec) : spec(spec), d(spec.dModel) {}
  ParamTable build();

private:
  /// Adds a parameter of the whole model's `shape`; with tensor
  /// parallelism, `axis` (-1: none) is split into `parts` blocks (fewer
  /// than the ranks: blocks are replicated; more: each rank holds several).
  void add(ParamBlock block, ParamRole role, std::vector<int64_t> shape,
           int64_t axis = -1, int64_t local = 0) {
    ParamScope scope = getParamScope(block);
    assert((scope == ParamScope::Model) == (stack < 0) &&
           (scope == ParamScope::Layer) == (layer >= 0) &&
           "parameter added outside its scope");
    (void)scope;
    const std::string &prefix =
        stack >= 0 ? spec.stacks[stack].prefix : std::string();
    int64_t full = 0;
    if (spec.tensorParallel > 1 && axis >= 0) {
      full = shape[axis];
      shape[axis] = local;
    } else {
      axis = -1;
    }
    table.add({stack, layer, block, role}, prefix, std::move(shape), spec.dtype,
              axis, full);
  }
  void norm(ParamBlock block, const NormSpec &n) {
    add(block, ParamRole::Weight, {d});
    if (n.kind == NormKind::layernorm)
      add(block, ParamRole::Bias, {d});
  }
  // Megatron's split: Q, K, V (and their biases) by output rows, the
  // output projection by input columns; its bias is added once, after the
  // all-reduce.
  void attention(ParamBlock block, const AttentionSpec &a) {
    if (a.latent())
      return latentAttention(block, a);
    int64_t q = a.heads * a.headDim, kv = a.kvHeads * a.headDim;
    int64_t lq = spec.localHeads(a) * a.headDim;
    int64_t lkv = spec.localKvHeads(a) * a.headDim;
    add(block, ParamRole::QWeight, {q, d}, 0, lq);
    if (a.bias)
      add(block, ParamRole::QBias, {q}, 0, lq);
    add(block, ParamRole::KWeight, {kv, d}, 0, lkv);
    if (a.bias)
      add(block, ParamRole::KBias, {kv}, 0, lkv);
    add(block, ParamRole::VWeight, {kv, d}, 0, lkv);
    if (a.bias)
      add(block, ParamRole::VBias, {kv}, 0, lkv);
    add(block, ParamRole::OWeight, {d, q}, 1, lq);
    if (a.outBias)
      add(block, ParamRole::OBias, {d});
    if (a.qkNorm && a.qkNormFull) {
      // Over the whole projections (tensor parallelism refuses it: the norm
      // would need every rank's heads).
      add(block, ParamRole::QNormWeight, {q});
      add(block, ParamRole::KNormWeight, {kv});
    } else if (a.qkNorm) {
      add(block, ParamRole::QNormWeight, {a.headDim});
      add(block, ParamRole::KNormWeight, {a.headDim});
    }
    if (a.sinks)
      add(block, ParamRole::Sinks, {a.heads}, 0, spec.localHeads(a));
  }
  // Latent attention by heads: the query's (or its up projection's) rows,
  // the latent's up projection's rows (each head's key and value rows are
  // contiguous), the output projection's columns; the latents' projections
  // and norms are replicated (every rank keeps the whole latent cache).
  void latentAttention(ParamBlock block, const AttentionSpec &a) {
    int64_t lh = spec.localHeads(a);
    int64_t nope = a.headDim - a.ropeDim;
    int64_t q = a.heads * a.headDim, kvb = a.heads * (nope + a.valueDim);
    int64_t o = a.heads * a.valueDim;
    if (a.qRank > 0) {
      add(block, ParamRole::QAWeight, {a.qRank, d});
      add(block, ParamRole::QANormWeight, {a.qRank});
      add(block, ParamRole::QBWeight, {q, a.qRank}, 0, lh * a.headDim);
    } else {
      add(block, ParamRole::QWeight, {q, d}, 0, lh * a.headDim);
    }
    add(block, ParamRole::KvAWeight, {a.kvRank + a.ropeDim, d});
    add(block, ParamRole::KvANormWeight, {a.kvRank});
    add(block, ParamRole::KvBWeight, {kvb, a.kvRank}, 0,
        lh * (nope + a.valueDim));
    add(block, ParamRole::OWeight, {d, o}, 1, lh * a.valueDim);
  }
  // Up and gate by output rows, down by input columns; a mixture of
  // experts splits every expert so, and replicates the router.
  void ffn(const FfnSpec &f) {
    if (f.sparse(layer))
      return experts(f);
    int64_t h = spec.localFfnHidden(f);
    add(ParamBlock::Ffn, ParamRole::UpWeight, {f.hidden, d}, 0, h);
    if (f.bias)
      add(ParamBlock::Ffn, ParamRole::UpBias, {f.hidden}, 0, h);
    if (isGatedActivation(f.activation)) {
      add(ParamBlock::Ffn, ParamRole::GateWeight, {f.hidden, d}, 0, h);
      if (f.bias)
        add(ParamBlock::Ffn, ParamRole::GateBias, {f.hidden}, 0, h);
    }
    add(ParamBlock::Ffn, ParamRole::DownWeight, {d, f.hidden}, 1, h);
    if (f.bias)
      add(ParamBlock::Ffn, ParamRole::DownBias, {d});
  }

  void experts(const FfnSpec &f) {
    int64_t e = f.experts, w = f.expertHidden, h = spec.localExpertHidden(f);
    add(ParamBlock::Ffn, ParamRole::RouterWeight, {e, d});
    if (f.routerBias)
      add(ParamBlock::Ffn, ParamRole::RouterBias, {e});
    if (f.selectionBias)
      add(ParamBlock::Ffn, ParamRole::RouterSelectionBias, {e});
    add(ParamBlock::Ffn, ParamRole::ExpertsUpWeight, {e, w, d}, 1, h);
    if (f.bias)
      add(ParamBlock::Ffn, ParamRole::ExpertsUpBias, {e, w}, 1, h);
    if (isGatedActivation(f.activation)) {
      add(ParamBlock::Ffn, ParamRole::ExpertsGateWeight, {e, w, d}, 1, h);
      if (f.bias)
        add(ParamBlock::Ffn, ParamRole::ExpertsGateBias, {e, w}, 1, h);
    }
    add(ParamBlock::Ffn, ParamRole::ExpertsDownWeight, {e, d, w}, 2, h);
    if (f.bias)
      add(ParamBlock::Ffn, ParamRole::ExpertsDownBias, {e, d});
    if (f.sharedHidden > 0) {
      int64_t s = f.sharedHidden, ls = spec.localSharedHidden(f);
      add(ParamBlock::Ffn, ParamRole::SharedUpWeight, {s, d}, 0, ls);
      if (isGatedActivation(f.activation))
        add(ParamBlock::Ffn, ParamRole::SharedGateWeight, {s, d}, 0, ls);
      add(ParamBlock::Ffn, ParamRole::SharedDownWeight, {d, s}, 1, ls);
      if (f.sharedGate)
        add(ParamBlock::Ffn, ParamRole::SharedScaleWeight, {1, d});
    }
  }

  const ModelSpec &spec;
  int64_t d;
  int32_t stack = -1;
  int64_t layer = -1;
  ParamTable table;
};
} // namespace

ParamTable ParamTableBuilder::build() {
  const InputSpec &input = spec.input;
  if (input.image) {
    add(ParamBlock::Patch, ParamRole::Weight,
        {d, input.channels * input.patch * input.patch});
    add(ParamBlock::Patch, ParamRole::Bias, {d});
    if (spec.mainStack().embedding.clsToken)
      add(ParamBlock::Embed, ParamRole::ClsToken, {d});
  } else if (!input.features) {
    add(ParamBlock::TokenEmbed, ParamRole::Weight, {spec.vocab, d}, 0,
        spec.localVocab());
  }
  if (int64_t types = spec.mainStack().embedding.types)
    add(ParamBlock::TypeEmbed, ParamRole::Weight, {types, d});
  for (stack = 0; stack < int32_t(spec.stacks.size()); ++stack) {
    const StackSpec &s = spec.stacks[stack];
    if (s.embedding.position == PositionEncoding::learned)
      add(ParamBlock::PositionEmbed, ParamRole::Weight, {spec.context, d});
    if (s.embedding.norm)
      norm(ParamBlock::EmbedNorm, s.norm);
    if (s.embedding.position == PositionEncoding::relative)
      add(ParamBlock::RelativeBias, ParamRole::Weight,
          {s.embedding.relativeBuckets, s.attention.heads}, 1,
          spec.localHeads(s.attention));
    bool sandwich = s.norm.placement == NormPlacement::Sandwich;
    for (layer = 0; layer < s.layers; ++layer) {
      norm(ParamBlock::AttnNorm, s.norm);
      attention(ParamBlock::Attn, s.attention);
      if (sandwich)
        norm(ParamBlock::AttnPostNorm, s.norm);
      if (s.hasCross) {
        norm(ParamBlock::CrossNorm, s.norm);
        attention(ParamBlock::CrossAttn, s.cross);
      }
      // A parallel residual with one norm uses attn_norm for the ffn too.
      if (spec.residual != Residual::Parallel || spec.parallelNorms == 2)
        norm(ParamBlock::FfnNorm, s.norm);
      ffn(s.ffn);
      if (sandwich)
        norm(ParamBlock::FfnPostNorm, s.norm);
    }
    layer = -1;
    if (s.norm.final)
      norm(ParamBlock::FinalNorm, s.norm);
  }
  stack = -1;
  const OutputSpec &output = spec.output;
  if (output.kind == OutputKind::lm_head &&
      !spec.mainStack().embedding.tieOutput)
    add(ParamBlock::LmHead, ParamRole::Weight, {spec.vocab, d}, 0,
        spec.localVocab());
  if (output.kind == OutputKind::lm_head && output.lmBias)
    add(ParamBlock::LmHead, ParamRole::Bias, {spec.vocab}, 0,
        spec.localVocab());
  if (output.kind == OutputKind::classifier) {
    add(ParamBlock::Classifier, ParamRole::Weight, {output.classes, d});
    add(ParamBlock::Classifier, ParamRole::Bias, {output.classes});
  }
  return std::move(table);
}

std::string ModelSpec::tensorParallelProblem(int64_t ranks) const {
  if (ranks < 1)
    return "the number of ranks must be at least 1";
  if (ranks == 1)
    return "";
  auto checkAttention = [&](const StackSpec &s, const AttentionSpec &a,
                            llvm::StringRef what) -> std::string {
    std::string where = (s.name + " " + what).str();
    if (a.heads % ranks != 0)
      return where + " has " + std::to_string(a.heads) +
             " heads, which do not split over " + std::to_string(ranks) +
             " ranks";
    if (a.kvHeads % ranks != 0 && ranks % a.kvHeads != 0)
      return where + " has " + std::to_string(a.kvHeads) +
             " KV heads: they split over the ranks when the ranks divide "
             "them, and are replicated when they divide the ranks; " +
             std::to_string(ranks) + " ranks do neither";
    return "";
  };
  // Every rank must hold a block of the padded vocabulary: with
  // ceil(V / N) rows each, the first N - 1 blocks must not cover it all.
  if (vocab > 0 && llvm::divideCeil(vocab, ranks) * (ranks - 1) >= vocab)
    return "its vocabulary of " + std::to_string(vocab) +
           " tokens is too small to give each of " + std::to_string(ranks) +
           " ranks a block";
  for (const StackSpec &s : stacks) {
    if (std::string p = checkAttention(s, s.attention, "attention"); !p.empty())
      return p;
    if (s.hasCross)
      if (std::string p = checkAttention(s, s.cross, "cross_attention");
          !p.empty())
        return p;
    if (s.embedding.position == PositionEncoding::alibi)
      return s.name + " uses ALiBi, whose slope depends on the head: "
                      "tensor parallelism does not split it yet";
    if (s.attention.qkNormFull)
      return s.name + " attention normalizes Q and K over all heads "
                      "(qk_norm_width = projection), which tensor parallelism "
                      "does not split yet";
    auto split = [&](int64_t units, llvm::StringRef what) -> std::string {
      if (units % ranks == 0)
        return "";
      return (s.name + " ffn has " + std::to_string(units) + " " + what +
              ", which do not split over " + std::to_string(ranks) + " ranks")
          .str();
    };
    const FfnSpec &f = s.ffn;
    bool anyDense = f.experts == 0;
    for (int64_t l = 0; l < s.layers && !anyDense; ++l)
      anyDense = !f.sparse(l);
    if (std::string p = anyDense ? split(f.hidden, "hidden units") : "";
        !p.empty())
      return p;
    if (f.experts > 0) {
      if (std::string p = split(f.expertHidden, "hidden units per expert");
          !p.empty())
        return p;
      if (std::string p = split(f.sharedHidden, "shared expert units");
          !p.empty())
        return p;
      // A routed expert's down bias is weighted per token: it cannot be
      // added once after the all-reduce as a dense ffn's is.
      if (f.bias)
        return s.name + " ffn has experts with biases, which tensor "
                        "parallelism does not split yet";
    }
  }
  return "";
}

ParamTable ModelSpec::params() const {
  return ParamTableBuilder(*this).build();
}

int64_t ModelSpec::paramCount() const { return params().numElements(); }

static constexpr int64_t kDimB = -1, kDimT = -2, kDimS = -3;

std::vector<TensorSpec> ModelSpec::inputs() const {
  std::vector<TensorSpec> in;
  if (arch == Arch::encoder_decoder) {
    in.push_back({"src", "int32", {kDimB, kDimS}, "tokens"});
    in.push_back({"tgt", "int32", {kDimB, kDimT}, "tokens"});
    if (stacks.front().attention.padding)
      in.push_back({"src_lengths", "int32", {kDimB}, "lengths", "src"});
    if (stacks.back().attention.padding)
      in.push_back({"tgt_lengths", "int32", {kDimB}, "lengths", "tgt"});
    return in;
  }
  std::string first = input.image      ? "pixels"
                      : input.features ? "features"
                                       : "tokens";
  if (input.image)
    in.push_back({"pixels",
                  "float32",
                  {kDimB, input.channels, input.size, input.size},
                  "pixels"});
  else if (input.features)
    in.push_back({"features", "float32", {kDimB, kDimT, dModel}, "features"});
  else
    in.push_back({"tokens", "int32", {kDimB, kDimT}, "tokens"});
  if (mainStack().attention.padding)
    in.push_back({"lengths", "int32", {kDimB}, "lengths", first});
  if (mainStack().embedding.types > 0)
    in.push_back({"types",
                  "int32",
                  {kDimB, kDimT},
                  "types",
                  "",
                  mainStack().embedding.types});
  return in;
}

std::vector<TensorSpec> ModelSpec::outputs() const {
  int64_t t = input.image ? context : kDimT;
  switch (output.kind) {
  case OutputKind::lm_head:
    return {{"logits", "float32", {kDimB, t, vocab}, "logits"}};
  case OutputKind::hidden:
    return {{"hidden", "float32", {kDimB, t, dModel}, "hidden"}};
  case OutputKind::classifier:
    return {{"logits", "float32", {kDimB, output.classes}, "logits"}};
  }
  return {};
}

/// The description's spelling of a tensor element type.
static std::string tensorDType(DType d) {
  switch (d) {
  case DType::f32:
    return "float32";
  case DType::f16:
    return "float16";
  case DType::bf16:
    return "bfloat16";
  }
  return "";
}

static json::Value shapeJSON(const std::vector<int64_t> &shape) {
  json::Array a;
  for (int64_t d : shape) {
    if (d == kDimB)
      a.push_back("B");
    else if (d == kDimT)
      a.push_back("T");
    else if (d == kDimS)
      a.push_back("S");
    else
      a.push_back(d);
  }
  return a;
}

static json::Value attentionJSON(const AttentionSpec &a, bool cross) {
  json::Object o{
      {"heads", a.heads},      {"kv_heads", a.kvHeads},
      {"head_dim", a.headDim}, {"bias", a.bias},
      {"scale", a.scale},      {"scale_is_default", a.scaleIsDefault},
      {"out_bias", a.outBias}, {"qk_norm", a.qkNorm},
      {"softcap", a.softcap}};
  if (a.sinks)
    o["sinks"] = true;
  if (a.qkNormFull)
    o["qk_norm_width"] = "projection";
  if (a.clip > 0.0)
    o["clip"] = a.clip;
  if (a.latent()) {
    o["kv_rank"] = a.kvRank;
    o["q_rank"] = a.qRank;
    o["rope_dim"] = a.ropeDim;
    o["value_dim"] = a.valueDim;
  }
  if (!cross) {
    o["mask"] = stringifyMaskKind(a.mask).str();
    if (a.mask == MaskKind::sliding) {
      o["window"] = a.window;
      o["global_every"] = a.globalEvery;
    }
    o["padding"] = a.padding;
  }
  return o;
}

static json::Value ffnJSON(const StackSpec &s) {
  const FfnSpec &f = s.ffn;
  json::Object o{{"hidden", f.hidden},
                 {"activation", stringifyActivation(f.activation).str()},
                 {"bias", f.bias}};
  if (f.experts > 0) {
    json::Array sparse;
    for (int64_t l = 0; l < s.layers; ++l)
      if (f.sparse(l))
        sparse.push_back(l);
    o["experts"] = json::Object{{"count", f.experts},
                                {"per_token", f.perToken},
                                {"hidden", f.expertHidden},
                                {"router", stringifyRouterKind(f.router).str()},
                                {"normalize", f.normalize},
                                {"router_bias", f.routerBias},
                                {"routed_scale", f.routedScale},
                                {"groups", f.groups},
                                {"topk_groups", f.topkGroups},
                                {"selection_bias", f.selectionBias},
                                {"shared_hidden", f.sharedHidden},
                                {"shared_gate", f.sharedGate},
                                {"first_dense", f.firstDense},
                                {"sparse_every", f.sparseEvery},
                                {"sparse_layers", std::move(sparse)}};
  }
  return o;
}

json::Value ModelSpec::toJSON() const {
  json::Object root;
  root["name"] = name;
  root["arch"] = stringifyArch(arch).str();
  if (vocab)
    root["vocab"] = vocab;
  root["context"] = context;
  root["d_model"] = dModel;
  root["dtype"] = stringifyDType(dtype).str();
  if (input.image)
    root["input"] = json::Object{{"kind", "image"},
                                 {"size", input.size},
                                 {"patch", input.patch},
                                 {"channels", input.channels}};
  else
    root["input"] =
        json::Object{{"kind", input.features ? "features" : "tokens"}};
  json::Object out{{"kind", stringifyOutput(output.kind).str()}};
  if (output.kind == OutputKind::lm_head) {
    out["bias"] = output.lmBias;
    out["scale"] = output.lmScale;
    out["softcap"] = output.lmSoftcap;
  }
  if (output.kind == OutputKind::classifier) {
    out["classes"] = output.classes;
    out["pool"] = stringifyPoolKind(output.pool).str();
  }
  root["output"] = std::move(out);
  root["residual"] = stringifyResidual(residual).str();
  if (residualScale != 1.0)
    root["residual_scale"] = residualScale;
  if (residual == Residual::Parallel)
    root["residual_norms"] = parallelNorms;
  json::Array stackArr;
  for (const StackSpec &s : stacks) {
    json::Object e{{"position", stringifyPosition(s.embedding.position).str()},
                   {"tie_output", s.embedding.tieOutput},
                   {"scale", s.embedding.scale},
                   {"cls_token", s.embedding.clsToken},
                   {"types", s.embedding.types},
                   {"norm", s.embedding.norm}};
    if (s.embedding.multiplier != 1.0)
      e["multiplier"] = s.embedding.multiplier;
    const EmbeddingSpec &es = s.embedding;
    if (es.position == PositionEncoding::rope) {
      e["rope_theta"] = es.ropeTheta;
      if (es.ropeLocalTheta > 0.0)
        e["rope_local_theta"] = es.ropeLocalTheta;
      e["rope_style"] = stringifyRopeStyle(es.ropeStyle).str();
      e["rope_dim"] = es.ropeDim;
      e["rope_scaling"] = stringifyRopeScaling(es.ropeScaling).str();
      e["rope_factor"] = es.ropeFactor;
      e["rope_low_freq_factor"] = es.ropeLowFreqFactor;
      e["rope_high_freq_factor"] = es.ropeHighFreqFactor;
      e["rope_original_context"] = es.ropeOriginalContext;
      if (es.ropeScaling == RopeScaling::yarn) {
        e["rope_beta_fast"] = es.ropeBetaFast;
        e["rope_beta_slow"] = es.ropeBetaSlow;
        e["rope_truncate"] = es.ropeTruncate;
        e["rope_attention_factor"] = es.ropeAttentionFactor;
      }
    }
    if (es.position == PositionEncoding::relative) {
      e["relative_buckets"] = es.relativeBuckets;
      e["relative_max_distance"] = es.relativeMaxDistance;
    }
    json::Object st{
        {"name", s.name},
        {"prefix", s.prefix},
        {"layers", s.layers},
        {"embedding", std::move(e)},
        {"attention", attentionJSON(s.attention, false)},
        {"ffn", ffnJSON(s)},
        {"norm", json::Object{{"kind", stringifyNormKind(s.norm.kind).str()},
                              {"placement",
                               stringifyNormPlacement(s.norm.placement).str()},
                              {"eps", s.norm.eps},
                              {"offset", s.norm.offset},
                              {"final", s.norm.final},
                              {"final_eps", s.norm.finalEps}}}};
    if (s.hasCross)
      st["cross_attention"] = attentionJSON(s.cross, true);
    stackArr.push_back(std::move(st));
  }
  root["stacks"] = std::move(stackArr);
  auto tensors = [](const std::vector<TensorSpec> &ts) {
    json::Array a;
    for (const TensorSpec &t : ts) {
      json::Object o{{"name", t.name},
                     {"dtype", t.dtype},
                     {"shape", shapeJSON(t.shape)},
                     {"usage", t.role}};
      if (!t.of.empty())
        o["usage_of"] = t.of;
      if (t.range > 0) {
        o["range"] = t.range;
        o["optional"] = true;
      }
      a.push_back(std::move(o));
    }
    return a;
  };
  root["inputs"] = tensors(inputs());
  root["outputs"] = tensors(outputs());
  json::Array params;
  int64_t count = 0;
  // How the checkpoint stores its tensors beyond its type's layout.
  HfCheckpointOptions hfOptions;
  if (hfFp8BlockRows > 0 && hfFp8BlockCols > 0)
    hfOptions.fp8Block = HfFp8Block{hfFp8BlockRows, hfFp8BlockCols};
  for (const ParamSpec &p : this->params()) {
    // Keys sort after "shape" in the printed object: readers of older
    // descriptions see name and shape first.
    json::Object param{
        {"name", p.name},
        {"shape", shapeJSON(p.shape)},
        {"type", tensorDType(p.dtype)},
        {"where",
         json::Object{
             {"stack", p.key.stack >= 0 ? stacks[p.key.stack].name : ""},
             {"layer", p.key.layer},
             {"block", stringifyParamBlock(p.key.block).str()},
             {"role", stringifyParamRole(p.key.role).str()}}},
        {"synthetic", stringifyParamInit(p.init()).str()}};
    if (p.shardAxis >= 0)
      param["shard"] =
          json::Object{{"axis", p.shardAxis}, {"full", p.shardFull}};
    if (std::optional<json::Value> source = hfSourceJSON(*this, p, hfOptions))
      param["source"] = std::move(*source);
    params.push_back(std::move(param));
    count += p.numElements();
  }
  root["parameters"] = std::move(params);
  if (tensorParallel > 1)
    root["tensor_parallel"] = tensorParallel;
  root["checkpoint"] = hfCheckpointJSON(*this);
  root["parameter_count"] = count;
  return root;
}
