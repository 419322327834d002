//===- HfCheckpoint.cpp - Hugging Face checkpoint layouts -----------------===//
//
// Maps each canonical parameter to the tensor of its model type's family in
// ModelTypes.def: the module names follow the modeling code of the type in
// Hugging Face transformers (modeling_<type>.py), and this file knows how a
// canonical parameter is read out of each kind of tensor: fused projections
// and how their outputs are split, GPT-2's Conv1D weights stored [in, out],
// position tables that start at an offset, and the stacked parameters of a
// mixture of experts, read one tensor per expert or out of a tensor that
// stacks every expert's fused projections (GraniteMoE's, or gpt-oss's
// interleaved and input-major ones, which may be stored in MXFP4), latent
// attention's projections and norms and the router's selection bias
// (DeepSeek), and the linear weights a block-scaled FP8 checkpoint stores
// so. Norms whose convention differs (Gemma's 1 + w) are the .tfm's
// business: their weights are copied as they are.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfCheckpoint.h"
#include "tfm/Frontend/GgufCheckpoint.h"

#include "ModelTypes.h"

#include "llvm/ADT/StringExtras.h"
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::tfm;
using hf::FamilyInfo;
using hf::ModelTypeInfo;
using hf::Tensor;
namespace json = llvm::json;
namespace FamilyFlag = hf::FamilyFlag;

llvm::ArrayRef<llvm::StringRef> mlir::tfm::hfCheckpointTypes() {
  return hf::getModelTypeNames();
}

bool mlir::tfm::isHfCheckpointType(llvm::StringRef type) {
  return hf::lookupModelType(type) != nullptr;
}

namespace {

bool isBiasRole(ParamRole role) {
  switch (role) {
#define TFM_PARAM_ROLE(Id, Spelling, IsBias)                                   \
  case ParamRole::Id:                                                          \
    return IsBias;
#include "tfm/Frontend/Params.def"
  }
  return false;
}

/// The tensor an attention parameter reads (q, k, v, o, a q/k norm, or a
/// projection or norm of latent attention).
std::optional<Tensor> attentionTensor(ParamRole role, bool cross) {
  switch (role) {
  case ParamRole::QAWeight:
    return Tensor::AttnQA;
  case ParamRole::QANormWeight:
    return Tensor::AttnQANorm;
  case ParamRole::QBWeight:
    return Tensor::AttnQB;
  case ParamRole::KvAWeight:
    return Tensor::AttnKvA;
  case ParamRole::KvANormWeight:
    return Tensor::AttnKvANorm;
  case ParamRole::KvBWeight:
    return Tensor::AttnKvB;
  case ParamRole::QWeight:
  case ParamRole::QBias:
    return cross ? Tensor::CrossQ : Tensor::AttnQ;
  case ParamRole::KWeight:
  case ParamRole::KBias:
    return cross ? Tensor::CrossK : Tensor::AttnK;
  case ParamRole::VWeight:
  case ParamRole::VBias:
    return cross ? Tensor::CrossV : Tensor::AttnV;
  case ParamRole::OWeight:
  case ParamRole::OBias:
    return cross ? Tensor::CrossO : Tensor::AttnO;
  case ParamRole::QNormWeight:
    return Tensor::AttnQNorm;
  case ParamRole::KNormWeight:
    return Tensor::AttnKNorm;
  default:
    return std::nullopt;
  }
}

/// The projection a feed-forward parameter is: FfnUp, FfnGate or FfnDown.
std::optional<Tensor> ffnTensor(ParamRole role) {
  switch (role) {
  case ParamRole::UpWeight:
  case ParamRole::UpBias:
    return Tensor::FfnUp;
  case ParamRole::GateWeight:
  case ParamRole::GateBias:
    return Tensor::FfnGate;
  case ParamRole::DownWeight:
  case ParamRole::DownBias:
    return Tensor::FfnDown;
  default:
    return std::nullopt;
  }
}

/// Whether `p`, read as `s`, is a linear weight that a block-scaled FP8
/// checkpoint quantizes: a weight matrix of attention or of a feed-forward
/// network (dense, the shared expert's, the experts'), one [N, K] or a
/// stack of them. DeepSeek-V3's checkpoints keep their routers, norms,
/// embeddings and LM head in BF16, and transformers' FP8 quantizer converts
/// nn.Linear modules only.
bool isFp8Linear(const ParamSpec &p, const HfSource &s) {
  ParamBlock block = p.key.block;
  ParamRole role = p.key.role;
  if (block != ParamBlock::Attn && block != ParamBlock::CrossAttn &&
      block != ParamBlock::Ffn)
    return false;
  if (isBiasRole(role) || role == ParamRole::RouterWeight ||
      role == ParamRole::SharedScaleWeight || s.mxfp4)
    return false;
  bool reads =
      s.kind == HfSource::Kind::Copy || s.kind == HfSource::Kind::Transpose ||
      s.kind == HfSource::Kind::Rows || s.kind == HfSource::Kind::TransposeRows;
  return reads && (s.shape.size() == 2 || s.shape.size() == 3);
}

class Mapper {
public:
  Mapper(const ModelSpec &spec, const ParamSpec &p, const ModelTypeInfo &type)
      : spec(spec), p(p), key(p.key), type(type),
        fam(hf::getFamily(type.family)), d(spec.dModel),
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
  HfSource unmapped(const llvm::Twine &why) {
    HfSource s;
    s.kind = Kind::Unmapped;
    s.why = why.str();
    return s;
  }
  bool isBias() const { return isBiasRole(key.role); }
  std::string suffix() const { return isBias() ? ".bias" : ".weight"; }

  /// The names the family gives `t`, placeholders filled in, each followed
  /// by `suffix`; empty when it has none.
  std::vector<std::string> names(Tensor t, llvm::StringRef suffix) const;
  /// `t` copied as it is stored, under `shape` (the parameter's when
  /// empty): an nn.Embedding, nn.Linear or norm module with `suffix`, or a
  /// parameter or buffer with none.
  HfSource read(Tensor t, llvm::StringRef suffix,
                std::vector<int64_t> shape = {}, bool base = true);
  HfSource module(Tensor t) { return read(t, suffix()); }
  /// An nn.Linear, or a GPT-2 Conv1D whose weight is stored [in, out].
  HfSource linear(Tensor t);
  /// A norm; BERT's old checkpoints spell weight and bias gamma and beta,
  /// which from_pretrained renames.
  HfSource norm(Tensor t);
  /// Rows of the single tensor `t`: canonical row r is source row
  /// offset + (r / block) * stride + r % block.
  HfSource rows(Tensor t, Kind kind, std::vector<int64_t> shape, int64_t offset,
                int64_t block, int64_t stride);
  /// A learned position table whose row p is position p - offset; it may
  /// hold more positions than the model's context.
  HfSource positions();
  /// `t` (AttnQ, AttnK or AttnV) out of the fused AttnQkv.
  HfSource fusedQKV(Tensor t);
  HfSource attention(bool cross);
  HfSource ffn();
  /// A parameter of a mixture of experts: the router, the stacked experts
  /// and the shared expert.
  HfSource moe();
  /// The stacked experts' parameter of the projection `t` (ExpertGate,
  /// ExpertUp or ExpertDown): one tensor per expert, or a slice of each
  /// expert of a stacked tensor.
  HfSource experts(Tensor t);
  /// The gate (ExpertGate) or up (ExpertUp) stack out of gpt-oss's
  /// interleaved, input-major gate_up_proj.
  HfSource interleavedGateUp(Tensor t);

  /// The stack's name in encoder-decoder checkpoints ("encoder", "decoder").
  std::string hfStack() const {
    if (spec.stacks.size() == 2)
      return stack->name;
    return spec.arch == Arch::encoder ? "encoder" : "decoder";
  }
  bool twoNorms() const {
    return spec.residual == Residual::Parallel && spec.parallelNorms == 2;
  }

  const ModelSpec &spec;
  const ParamSpec &p;
  const ParamKey &key;
  const ModelTypeInfo &type;
  const FamilyInfo &fam;
  int64_t d;
  const StackSpec *stack;
};

} // namespace

std::vector<std::string> Mapper::names(Tensor t, llvm::StringRef suffix) const {
  auto fill = [&](llvm::StringRef pattern) {
    std::string out;
    while (!pattern.empty()) {
      auto [head, tail] = pattern.split('{');
      out += head;
      if (head.size() == pattern.size())
        break;
      auto [name, rest] = tail.split('}');
      if (name == "i")
        out += std::to_string(key.layer);
      else if (name == "stack")
        out += hfStack();
      else if (name == "ffn")
        out += stack->hasCross ? "2" : "1";
      else if (name == "e")
        out += "{e}"; // the expert: the runtime reads one tensor per expert
      pattern = rest;
    }
    return out;
  };
  std::vector<std::string> out;
  for (llvm::StringRef pattern : fam.names(t))
    out.push_back((isLayerTensor(t) ? fill(fam.layer) : "") + fill(pattern) +
                  suffix.str());
  return out;
}

HfSource Mapper::read(Tensor t, llvm::StringRef suffix,
                      std::vector<int64_t> shape, bool base) {
  std::vector<std::string> n = names(t, suffix);
  if (n.empty())
    return unmapped(hf::whyMissing(t));
  return source(Kind::Copy, std::move(n), shape.empty() ? p.shape : shape,
                base);
}

HfSource Mapper::linear(Tensor t) {
  HfSource s = module(t);
  if (s.kind == Kind::Copy && !isBias() && fam.has(FamilyFlag::Conv1D)) {
    s.kind = Kind::Transpose;
    s.shape = {p.shape[1], p.shape[0]};
  }
  return s;
}

HfSource Mapper::norm(Tensor t) {
  HfSource s = module(t);
  if (s.kind == Kind::Copy && fam.has(FamilyFlag::GammaBeta))
    for (std::string &name : names(t, isBias() ? ".beta" : ".gamma"))
      s.names.push_back(std::move(name));
  return s;
}

HfSource Mapper::rows(Tensor t, Kind kind, std::vector<int64_t> shape,
                      int64_t offset, int64_t block, int64_t stride) {
  HfSource s = read(t, suffix(), std::move(shape));
  if (s.kind == Kind::Unmapped)
    return s;
  s.names.resize(1);
  s.kind = kind;
  s.offset = offset;
  s.block = block;
  s.stride = stride;
  return s;
}

HfSource Mapper::positions() {
  int64_t offset = type.positionOffset;
  HfSource s = rows(Tensor::PositionEmbed, Kind::Rows,
                    {spec.context + offset, d}, offset, spec.context, 0);
  s.atLeast = s.kind != Kind::Unmapped;
  return s;
}

HfSource Mapper::fusedQKV(Tensor t) {
  const AttentionSpec &a = stack->attention;
  int64_t hd = a.headDim, qn = a.heads * hd, kvn = a.kvHeads * hd;
  int64_t total = qn + 2 * kvn;
  int which = t == Tensor::AttnQ ? 0 : t == Tensor::AttnK ? 1 : 2;
  int64_t n = p.shape[0], offset = 0, block = n, stride = 0;
  switch (fam.fused) {
  case hf::Fused::None:
  case hf::Fused::Concat:
    offset = which == 0 ? 0 : which == 1 ? qn : qn + kvn;
    break;
  case hf::Fused::PerHead:
    if (a.kvHeads != a.heads)
      return unmapped("a fused query_key_value of this type holds as many "
                      "key/value heads as query heads (kv_heads = " +
                      llvm::Twine(a.kvHeads) +
                      ", heads = " + llvm::Twine(a.heads) + ")");
    offset = which * hd;
    block = hd;
    stride = 3 * hd;
    break;
  case hf::Fused::Grouped: {
    int64_t g = a.heads / a.kvHeads;
    offset = which == 0 ? 0 : which == 1 ? g * hd : (g + 1) * hd;
    block = which == 0 ? g * hd : hd;
    stride = (g + 2) * hd;
    break;
  }
  }
  if (isBias())
    return rows(Tensor::AttnQkv, Kind::Rows, {total}, offset, block, stride);
  if (fam.has(FamilyFlag::Conv1D))
    return rows(Tensor::AttnQkv, Kind::TransposeRows, {d, total}, offset, block,
                stride);
  return rows(Tensor::AttnQkv, Kind::Rows, {total, d}, offset, block, stride);
}

HfSource Mapper::attention(bool cross) {
  // A parameter [heads] of its own (gpt-oss's self_attn.sinks).
  if (key.role == ParamRole::Sinks)
    return read(Tensor::AttnSinks, "");
  std::optional<Tensor> t = attentionTensor(key.role, cross);
  if (!t)
    return unmapped("not an attention parameter");
  bool qkNorm = *t == Tensor::AttnQNorm || *t == Tensor::AttnKNorm;
  if (qkNorm && !fam.has(*t))
    return unmapped(hf::whyMissing(*t));
  // Latent attention's norms (RMSNorms over the latents).
  if (*t == Tensor::AttnQANorm || *t == Tensor::AttnKvANorm)
    return norm(*t);
  if (cross && !fam.has(Tensor::CrossQ))
    return unmapped(hf::whyMissing(Tensor::CrossQ));
  // Whisper's k_proj has no bias (bias=False): a model with attention
  // biases reads zeros for it, which is what Whisper computes.
  if (key.role == ParamRole::KBias && fam.has(FamilyFlag::ZeroKeyBias))
    return source(Kind::Zeros, {}, p.shape);
  bool qkv = *t == Tensor::AttnQ || *t == Tensor::AttnK || *t == Tensor::AttnV;
  if (qkv && fam.has(Tensor::AttnQkv))
    return fusedQKV(*t);
  return linear(*t);
}

HfSource Mapper::experts(Tensor t) {
  int64_t e = p.shape[0];
  if (fam.has(t)) {
    // nn.Linear modules per expert: expert e's slice is its tensor.
    std::vector<int64_t> part(p.shape.begin() + 1, p.shape.end());
    HfSource s = read(t, suffix(), part);
    s.experts = e;
    s.perExpert = true;
    return s;
  }
  if (t == Tensor::ExpertDown && fam.has(Tensor::StackedDown))
    return read(Tensor::StackedDown, suffix()); // [E, d, F] as it is
  if (t != Tensor::ExpertDown && fam.has(Tensor::StackedGateUp)) {
    // Per expert [gate | up] along the rows: F.linear(x, weight[e]) gives
    // 2F outputs, chunk(2) gives the gate first.
    if (!isGatedActivation(stack->ffn.activation))
      return unmapped("this type's experts are gated (their stacked "
                      "projection holds gate and up): the ffn needs a gated "
                      "activation");
    int64_t h = p.shape[1];
    std::vector<int64_t> shape = p.shape;
    shape[1] = 2 * h;
    HfSource s = rows(Tensor::StackedGateUp, Kind::Rows, shape,
                      t == Tensor::ExpertGate ? 0 : h, h, 0);
    if (s.kind != Kind::Unmapped)
      s.experts = e;
    return s;
  }
  if (t != Tensor::ExpertDown && fam.has(Tensor::InterleavedGateUp))
    return interleavedGateUp(t);
  if (t == Tensor::ExpertDown && fam.has(Tensor::InputMajorDown)) {
    // down_proj [E, F, d]: out = h @ W[e], each expert's [d, F] transposed;
    // its bias [E, d] as it is.
    if (isBias())
      return read(Tensor::InputMajorDown, "_bias");
    HfSource s = read(Tensor::InputMajorDown, "", {e, p.shape[2], p.shape[1]});
    s.kind = Kind::Transpose;
    s.experts = e;
    s.mxfp4 = true;
    return s;
  }
  return unmapped(hf::whyMissing(t));
}

HfSource Mapper::interleavedGateUp(Tensor t) {
  if (!isGatedActivation(stack->ffn.activation))
    return unmapped("this type's experts are gated (their stacked "
                    "projection holds gate and up): the ffn needs a gated "
                    "activation");
  // gate_up_proj [E, d, 2F]: gate_up = x @ W[e] + b[e], gate =
  // gate_up[..., ::2], up = gate_up[..., 1::2]. Expert e's gate row f is
  // column 2f of W[e] (its up row column 2f + 1), and its bias entry
  // b[e][2f] (2f + 1).
  int64_t e = p.shape[0], h = p.shape[1];
  HfSource s =
      isBias() ? read(Tensor::InterleavedGateUp, "_bias", {e, 2 * h})
               : read(Tensor::InterleavedGateUp, "", {e, p.shape[2], 2 * h});
  s.kind = isBias() ? Kind::Rows : Kind::TransposeRows;
  s.offset = t == Tensor::ExpertGate ? 0 : 1;
  s.block = 1;
  s.stride = 2;
  s.experts = e;
  s.mxfp4 = !isBias();
  return s;
}

HfSource Mapper::moe() {
  switch (key.role) {
  case ParamRole::RouterWeight:
  case ParamRole::RouterBias:
    return linear(Tensor::MoeRouter);
  case ParamRole::RouterSelectionBias:
    // A parameter (or buffer) of the router module, [experts].
    return read(Tensor::MoeSelectionBias, "");
  case ParamRole::ExpertsUpWeight:
  case ParamRole::ExpertsUpBias:
    return experts(Tensor::ExpertUp);
  case ParamRole::ExpertsGateWeight:
  case ParamRole::ExpertsGateBias:
    return experts(Tensor::ExpertGate);
  case ParamRole::ExpertsDownWeight:
  case ParamRole::ExpertsDownBias:
    return experts(Tensor::ExpertDown);
  case ParamRole::SharedUpWeight:
    return linear(Tensor::SharedUp);
  case ParamRole::SharedGateWeight:
    return linear(Tensor::SharedGate);
  case ParamRole::SharedDownWeight:
    return linear(Tensor::SharedDown);
  case ParamRole::SharedScaleWeight:
    return linear(Tensor::SharedScale);
  default:
    return unmapped("not a mixture-of-experts parameter");
  }
}

HfSource Mapper::ffn() {
  std::optional<Tensor> t = ffnTensor(key.role);
  if (!t)
    return moe();
  if (fam.has(Tensor::MoeRouter) && !fam.has(Tensor::FfnGate) &&
      !fam.has(Tensor::FfnUp) && !fam.has(Tensor::FfnGateUp))
    return unmapped("every layer of this type is a mixture of experts (its "
                    "checkpoints have no dense ffn)");
  bool gated = isGatedActivation(stack->ffn.activation);
  // gate_up_proj's output is [gate | up] (chunk(2) gives gate first).
  int64_t h = stack->ffn.hidden;
  auto gateUp = [&](int64_t offset) {
    if (isBias())
      return rows(Tensor::FfnGateUp, Kind::Rows, {2 * h}, offset, h, 0);
    return rows(Tensor::FfnGateUp, Kind::Rows, {2 * h, d}, offset, h, 0);
  };
  if (*t == Tensor::FfnGate) {
    if (!fam.has(Tensor::FfnGate) && fam.has(Tensor::FfnGateUp))
      return gateUp(0);
    return linear(Tensor::FfnGate);
  }
  if (gated) {
    if (*t == Tensor::FfnUp && fam.has(Tensor::FfnGatedUp))
      return linear(Tensor::FfnGatedUp);
    if (*t == Tensor::FfnUp && fam.has(Tensor::FfnGateUp))
      return gateUp(h);
    if (*t == Tensor::FfnDown && fam.has(Tensor::FfnGatedDown))
      return linear(Tensor::FfnGatedDown);
  }
  if (fam.has(*t))
    return linear(*t);
  // A family whose ffn is always gated: name its gated projections.
  std::string gatedNames;
  for (Tensor g : {Tensor::FfnGate, Tensor::FfnGatedUp, Tensor::FfnGateUp})
    for (llvm::StringRef pattern : fam.names(g))
      gatedNames +=
          (gatedNames.empty() ? "" : ", ") + pattern.rsplit('.').second.str();
  return unmapped(hf::whyMissing(*t) + " (" + gatedNames + ")");
}

HfSource Mapper::map() {
  switch (key.block) {
  case ParamBlock::TokenEmbed:
    return module(Tensor::TokenEmbed);
  case ParamBlock::PositionEmbed:
    if (fam.has(Tensor::ImagePositions))
      return read(Tensor::ImagePositions, "", {1, spec.context, d});
    return positions();
  case ParamBlock::TypeEmbed:
    return module(Tensor::TypeEmbed);
  case ParamBlock::EmbedNorm:
    return norm(Tensor::EmbedNorm);
  case ParamBlock::RelativeBias:
    return module(Tensor::RelativeBias);
  case ParamBlock::Patch:
    if (isBias())
      return module(Tensor::PatchEmbed);
    // A Conv2d weight [d, C, P, P]: flattened in (channel, row, column)
    // order it is the canonical [d, C*P*P].
    return read(Tensor::PatchEmbed, ".weight",
                {d, spec.input.channels, spec.input.patch, spec.input.patch});
  case ParamBlock::Embed:
    return read(Tensor::ClsToken, "", {1, 1, d});
  case ParamBlock::AttnNorm:
    return norm(twoNorms() && fam.has(Tensor::ParallelAttnNorm)
                    ? Tensor::ParallelAttnNorm
                    : Tensor::AttnNorm);
  case ParamBlock::FfnNorm:
    return norm(twoNorms() && fam.has(Tensor::ParallelFfnNorm)
                    ? Tensor::ParallelFfnNorm
                    : Tensor::FfnNorm);
  case ParamBlock::AttnPostNorm:
    return norm(Tensor::AttnPostNorm);
  case ParamBlock::FfnPostNorm:
    return norm(Tensor::FfnPostNorm);
  case ParamBlock::CrossNorm:
    return norm(Tensor::CrossNorm);
  case ParamBlock::Attn:
    return attention(false);
  case ParamBlock::CrossAttn:
    return attention(true);
  case ParamBlock::Ffn:
    return ffn();
  case ParamBlock::FinalNorm:
    return norm(Tensor::FinalNorm);
  case ParamBlock::LmHead:
    if (isBias() && fam.has(Tensor::LogitsBias))
      return read(Tensor::LogitsBias, "", {1, spec.vocab}, /*base=*/false);
    if (isBias() && fam.has(FamilyFlag::NoHeadBias))
      return unmapped("this type's LM head has no bias");
    return read(Tensor::LmHead, suffix(), {}, /*base=*/false);
  case ParamBlock::Classifier:
    return read(Tensor::Classifier, suffix(), {}, /*base=*/false);
  }
  return unmapped("unknown parameter");
}

std::optional<HfSource>
mlir::tfm::getHfSource(const ModelSpec &spec, const ParamSpec &p,
                       const HfCheckpointOptions &options) {
  if (!spec.ggufArch.empty())
    return getGgufSource(spec, p);
  if (spec.hfType.empty())
    return std::nullopt;
  const ModelTypeInfo *type = hf::lookupModelType(spec.hfType);
  if (!type) {
    HfSource s;
    s.kind = HfSource::Kind::Unmapped;
    s.why = "unknown model type '" + spec.hfType + "'";
    return s;
  }
  // The source is the whole tensor; a rank's shard is cut from it.
  ParamSpec full = p;
  full.shape = p.fullShape();
  full.shardAxis = -1;
  HfSource s = Mapper(spec, full, *type).map();
  if (options.fp8Block && isFp8Linear(full, s))
    s.fp8Block = options.fp8Block;
  return s;
}

std::vector<std::string>
mlir::tfm::hfCheckpointProblems(const ModelSpec &spec) {
  if (!spec.ggufArch.empty())
    return ggufCheckpointProblems(spec);
  std::vector<std::string> problems;
  if (spec.hfType.empty())
    return problems;
  if (!hf::lookupModelType(spec.hfType)) {
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

std::optional<json::Value>
mlir::tfm::hfSourceJSON(const ModelSpec &spec, const ParamSpec &p,
                        const HfCheckpointOptions &options) {
  std::optional<HfSource> s = getHfSource(spec, p, options);
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
  if (s->experts > 0) {
    o["experts"] = s->experts;
    o["per_expert"] = s->perExpert;
  }
  if (s->mxfp4)
    o["mxfp4"] = true;
  if (s->fp8Block)
    o["fp8_block"] = json::Array{s->fp8Block->rows, s->fp8Block->cols};
  if (!s->parts.empty()) {
    json::Array parts;
    for (const HfSourcePart &part : s->parts) {
      json::Object po{{"tensor", part.name},
                      {"shape", json::Array(part.shape)}};
      if (part.transpose)
        po["transpose"] = true;
      parts.push_back(std::move(po));
    }
    o["parts"] = std::move(parts);
  }
  return json::Value(std::move(o));
}

json::Value mlir::tfm::hfCheckpointJSON(const ModelSpec &spec) {
  if (!spec.ggufArch.empty())
    return ggufCheckpointJSON(spec);
  if (spec.hfType.empty())
    return json::Object{{"format", "canonical"}};
  // Tensors of published checkpoints that are not parameters of the model:
  // buffers, tied copies, and the parts tfm does not run. Patterns match
  // the name with or without the base-model prefix; `*` matches any run of
  // characters.
  json::Array prefixes;
  json::Array ignore{"*position_ids", "*.inv_freq"};
  if (const ModelTypeInfo *type = hf::lookupModelType(spec.hfType)) {
    const FamilyInfo &fam = hf::getFamily(type->family);
    if (!type->prefix.empty())
      prefixes.push_back(type->prefix.str());
    for (llvm::StringRef pattern : fam.names(Tensor::Ignore))
      ignore.push_back(pattern.str());
    // As T5EncoderModel.
    if (spec.stacks.size() == 1 && spec.arch == Arch::encoder)
      for (llvm::StringRef pattern : fam.names(Tensor::IgnoreWithoutDecoder))
        ignore.push_back(pattern.str());
    bool lmHead = spec.output.kind == OutputKind::lm_head;
    if (!(lmHead && spec.output.lmBias)) // a zero buffer
      for (llvm::StringRef name : fam.names(Tensor::LogitsBias))
        ignore.push_back(name.str());
    if (lmHead && spec.mainStack().embedding.tieOutput) {
      llvm::SmallVector<llvm::StringRef, 3> head = fam.names(Tensor::LmHead);
      ignore.push_back((head.empty() ? "lm_head" : head.front()).str() +
                       ".weight");
    }
  }
  return json::Object{{"format", "huggingface"},
                      {"type", spec.hfType},
                      {"prefixes", std::move(prefixes)},
                      {"ignore", std::move(ignore)}};
}
