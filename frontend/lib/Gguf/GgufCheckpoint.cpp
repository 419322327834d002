//===- GgufCheckpoint.cpp - llama.cpp's GGUF tensor layouts ---------------===//
//
// Maps each canonical parameter to the tensor llama.cpp's loader reads for
// it (the names of LLM_TENSOR_NAMES in src/llama-arch.cpp, the shapes of
// load_arch_tensors in src/models/<arch>.cpp, reversed into row-major
// order). GGUF stores every linear weight as [out, in] like nn.Linear (the
// converter transposed GPT-2's Conv1D weights), the experts of a layer
// stacked in one tensor [experts, out, in], and fuses q, k and v (GPT-2,
// Phi-3) and Phi-3's gate and up by rows.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/GgufCheckpoint.h"

#include "GgufArchs.h"

#include "llvm/ADT/Twine.h"
#include <set>
#include <tuple>

using namespace mlir;
using namespace mlir::tfm;
using gguf::ArchInfo;
namespace GgufFlag = gguf::GgufFlag;
namespace json = llvm::json;

llvm::ArrayRef<gguf::ArchInfo> gguf::getArchs() {
  static const ArchInfo archs[] = {
#define TFM_GGUF_ARCH(Id, Name, RopeKind, Flags)                               \
  {ArchId::Id, Name, Rope::RopeKind, [] {                                      \
     using namespace GgufFlag;                                                 \
     return unsigned(Flags);                                                   \
   }()},
#include "GgufArchs.def"
  };
  return archs;
}

const gguf::ArchInfo *gguf::lookupArch(llvm::StringRef name) {
  for (const ArchInfo &a : getArchs())
    if (a.name == name)
      return &a;
  return nullptr;
}

std::string gguf::archList() {
  std::string out;
  for (const ArchInfo &a : getArchs())
    out += (out.empty() ? "" : ", ") + a.name.str();
  return out;
}

llvm::ArrayRef<llvm::StringRef> mlir::tfm::ggufCheckpointArchs() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> n;
    for (const ArchInfo &a : gguf::getArchs())
      n.push_back(a.name);
    return n;
  }();
  return names;
}

bool mlir::tfm::isGgufCheckpointArch(llvm::StringRef arch) {
  return gguf::lookupArch(arch) != nullptr;
}

namespace {

class Mapper {
public:
  Mapper(const ModelSpec &spec, const ParamSpec &p, const ArchInfo &arch)
      : spec(spec), p(p), key(p.key), arch(arch),
        stack(key.stack >= 0 ? &spec.stacks[key.stack] : &spec.mainStack()) {}
  HfSource map();

private:
  using Kind = HfSource::Kind;

  bool isBias() const {
    switch (key.role) {
#define TFM_PARAM_ROLE(Id, Spelling, IsBias)                                   \
  case ParamRole::Id:                                                          \
    return IsBias;
#include "tfm/Frontend/Params.def"
    }
    return false;
  }
  std::string suffix() const { return isBias() ? ".bias" : ".weight"; }
  /// `name` (with `blk.{i}.` for a layer's tensors) and `suffix` (the
  /// parameter's when empty).
  std::string tensorName(llvm::StringRef name,
                         llvm::StringRef suffix = "") const {
    std::string full =
        key.layer >= 0 ? ("blk." + llvm::Twine(key.layer) + "." + name).str()
                       : name.str();
    return full + (suffix.empty() ? this->suffix() : suffix.str());
  }
  /// Tensor `name` (tensorName), read as stored under `shape` (the
  /// parameter's when empty).
  HfSource read(llvm::StringRef name, std::vector<int64_t> shape = {},
                llvm::StringRef suffix = "") {
    HfSource s;
    s.kind = Kind::Copy;
    s.names = {tensorName(name, suffix)};
    s.base = false;
    s.shape = shape.empty() ? p.shape : std::move(shape);
    return s;
  }
  /// Rows offset + r of `name`, stored with `shape`.
  HfSource rows(llvm::StringRef name, std::vector<int64_t> shape,
                int64_t offset) {
    HfSource s = read(name, std::move(shape));
    s.kind = Kind::Rows;
    s.offset = offset;
    s.block = p.shape[0];
    s.stride = 0;
    return s;
  }
  HfSource unmapped(const llvm::Twine &why) {
    HfSource s;
    s.kind = Kind::Unmapped;
    s.why = why.str();
    return s;
  }
  HfSource attention();
  HfSource ffn();

  const ModelSpec &spec;
  const ParamSpec &p;
  const ParamKey &key;
  const ArchInfo &arch;
  const StackSpec *stack;
};

} // namespace

HfSource Mapper::attention() {
  const AttentionSpec &a = stack->attention;
  auto qkv = [&](int which, llvm::StringRef name) {
    if (!arch.has(GgufFlag::FusedQkv))
      return read(name);
    // attn_qkv [q | k | v] (GPT-2's c_attn, Phi-3's qkv_proj).
    int64_t qn = a.heads * a.headDim, kvn = a.kvHeads * a.headDim;
    int64_t total = qn + 2 * kvn;
    int64_t offset = which == 0 ? 0 : which == 1 ? qn : qn + kvn;
    if (isBias())
      return rows("attn_qkv", {total}, offset);
    return rows("attn_qkv", {total, spec.dModel}, offset);
  };
  switch (key.role) {
  case ParamRole::QWeight:
  case ParamRole::QBias:
    return qkv(0, "attn_q");
  case ParamRole::KWeight:
  case ParamRole::KBias:
    return qkv(1, "attn_k");
  case ParamRole::VWeight:
  case ParamRole::VBias:
    return qkv(2, "attn_v");
  case ParamRole::OWeight:
  case ParamRole::OBias:
    return read("attn_output");
  case ParamRole::QNormWeight:
    return read("attn_q_norm");
  case ParamRole::KNormWeight:
    return read("attn_k_norm");
  case ParamRole::QAWeight:
    return read("attn_q_a");
  case ParamRole::QANormWeight:
    return read("attn_q_a_norm");
  case ParamRole::QBWeight:
    return read("attn_q_b");
  case ParamRole::KvAWeight:
    return read("attn_kv_a_mqa");
  case ParamRole::KvANormWeight:
    return read("attn_kv_a_norm");
  case ParamRole::KvBWeight: {
    // The unsplit kv_b of older files [heads * (nope + v), kv_rank]; newer
    // converters split each head's rows (convert_hf_to_gguf.py's
    // DeepseekV2Model.modify_tensors) into attn_k_b, the nope rows
    // transposed [heads, kv_rank, nope], and attn_v_b [heads, v, kv_rank]
    // (llama.cpp's wk_b {nope, kv_rank, heads}, wv_b {kv_rank, v, heads}),
    // which are read as its parts.
    HfSource s = read("attn_kv_b");
    int64_t nope = a.headDim - a.ropeDim;
    s.parts = {{tensorName("attn_k_b"), {a.heads, a.kvRank, nope}, true},
               {tensorName("attn_v_b"), {a.heads, a.valueDim, a.kvRank}}};
    return s;
  }
  default:
    return unmapped("llama.cpp's " + arch.name +
                    " has no tensor for this attention parameter");
  }
}

HfSource Mapper::ffn() {
  int64_t h = stack->ffn.hidden;
  auto experts = [&](llvm::StringRef name) {
    if (isBias())
      return unmapped("llama.cpp's experts have no biases");
    // [experts, out, in], expert e at [e].
    HfSource s = read(name);
    s.experts = p.shape[0];
    s.perExpert = false;
    return s;
  };
  switch (key.role) {
  case ParamRole::GateWeight:
  case ParamRole::GateBias:
    if (arch.has(GgufFlag::FusedGateUp))
      return isBias() ? unmapped("Phi-3's fused ffn_up has no bias")
                      : rows("ffn_up", {2 * h, spec.dModel}, 0);
    return read("ffn_gate");
  case ParamRole::UpWeight:
  case ParamRole::UpBias:
    if (arch.has(GgufFlag::FusedGateUp)) {
      if (!isGatedActivation(stack->ffn.activation))
        return unmapped("Phi-3's ffn_up holds the gate and up projections: "
                        "the ffn needs a gated activation");
      return isBias() ? unmapped("Phi-3's fused ffn_up has no bias")
                      : rows("ffn_up", {2 * h, spec.dModel}, h);
    }
    return read("ffn_up");
  case ParamRole::DownWeight:
  case ParamRole::DownBias:
    return read("ffn_down");
  case ParamRole::RouterWeight:
    return read("ffn_gate_inp");
  case ParamRole::RouterSelectionBias:
    return read("exp_probs_b", {}, ".bias");
  case ParamRole::ExpertsGateWeight:
  case ParamRole::ExpertsGateBias:
    return experts("ffn_gate_exps");
  case ParamRole::ExpertsUpWeight:
  case ParamRole::ExpertsUpBias:
    return experts("ffn_up_exps");
  case ParamRole::ExpertsDownWeight:
  case ParamRole::ExpertsDownBias:
    return experts("ffn_down_exps");
  case ParamRole::SharedGateWeight:
    return read("ffn_gate_shexp");
  case ParamRole::SharedUpWeight:
    return read("ffn_up_shexp");
  case ParamRole::SharedDownWeight:
    return read("ffn_down_shexp");
  case ParamRole::SharedScaleWeight:
    return read("ffn_gate_inp_shexp");
  default:
    return unmapped("llama.cpp's " + arch.name +
                    " has no tensor for this feed-forward parameter");
  }
}

HfSource Mapper::map() {
  switch (key.block) {
  case ParamBlock::TokenEmbed:
    return read("token_embd");
  case ParamBlock::PositionEmbed:
    return read("position_embd");
  case ParamBlock::AttnNorm:
    if (spec.residual == Residual::Parallel && spec.parallelNorms == 2)
      return unmapped("llama.cpp's " + arch.name +
                      " has no second norm for a parallel block");
    return read("attn_norm");
  case ParamBlock::FfnNorm:
    return read("ffn_norm");
  case ParamBlock::AttnPostNorm:
    return read("post_attention_norm");
  case ParamBlock::FfnPostNorm:
    return read("post_ffw_norm");
  case ParamBlock::Attn:
    return attention();
  case ParamBlock::Ffn:
    return ffn();
  case ParamBlock::FinalNorm:
    return read("output_norm");
  case ParamBlock::LmHead:
    return read("output");
  default:
    return unmapped("GGUF files of llama.cpp's decoder architectures have no "
                    "such tensor");
  }
}

std::optional<HfSource> mlir::tfm::getGgufSource(const ModelSpec &spec,
                                                 const ParamSpec &p) {
  if (spec.ggufArch.empty())
    return std::nullopt;
  const ArchInfo *arch = gguf::lookupArch(spec.ggufArch);
  if (!arch) {
    HfSource s;
    s.kind = HfSource::Kind::Unmapped;
    s.why = "unknown GGUF architecture '" + spec.ggufArch + "'";
    return s;
  }
  // The source is the whole tensor; a rank's shard is cut from it.
  ParamSpec full = p;
  full.shape = p.fullShape();
  full.shardAxis = -1;
  return Mapper(spec, full, *arch).map();
}

std::vector<std::string>
mlir::tfm::ggufCheckpointProblems(const ModelSpec &spec) {
  std::vector<std::string> problems;
  if (spec.ggufArch.empty())
    return problems;
  const ArchInfo *arch = gguf::lookupArch(spec.ggufArch);
  if (!arch) {
    problems.push_back("unknown GGUF architecture '" + spec.ggufArch +
                       "' (supported: " + gguf::archList() + ")");
    return problems;
  }
  std::string who = "llama.cpp's " + arch->name.str();
  for (const StackSpec &stack : spec.stacks) {
    const EmbeddingSpec &e = stack.embedding;
    bool rope = e.position == PositionEncoding::rope;
    if (arch->rope == gguf::Rope::None && rope)
      problems.push_back(who + " has no rotary positions; this model has "
                               "'position = rope'");
    if (arch->rope != gguf::Rope::None && !rope)
      problems.push_back(who + " rotates queries and keys (RoPE): write "
                               "'position = rope(...)'");
    // Q and K are read as they lie: the style must be the pairs llama.cpp
    // rotates, or the scores would silently differ.
    if (rope && arch->rope == gguf::Rope::Norm &&
        e.ropeStyle != RopeStyle::interleaved)
      problems.push_back(
          who +
          " rotates adjacent pairs (llama.cpp's rope type NORM; its "
          "converter permuted the rows of Q and K for it): write 'rope(style "
          "= interleaved)'");
    if (rope && arch->rope == gguf::Rope::Neox &&
        e.ropeStyle != RopeStyle::half)
      problems.push_back(who + " rotates the halves of each head (llama.cpp's "
                               "rope type NEOX): write 'rope(style = half)'");
    if (arch->has(GgufFlag::NormPlusOne) && stack.norm.offset != 0.0)
      problems.push_back(who + "'s norm weights are stored with Gemma's 1 "
                               "already added (convert_hf_to_gguf.py adds "
                               "it): 'norm { offset }' must be 0");
  }
  // Every layer of a stack maps the same way: report the first layer's.
  std::set<std::tuple<int32_t, ParamBlock, ParamRole>> seen;
  for (const ParamSpec &p : spec.params()) {
    if (p.key.layer >= 0 &&
        !seen.insert({p.key.stack, p.key.block, p.key.role}).second)
      continue;
    std::optional<HfSource> s = getGgufSource(spec, p);
    if (s && s->kind == HfSource::Kind::Unmapped)
      problems.push_back("GGUF architecture " + spec.ggufArch +
                         " has no tensor for '" + p.name + "': " + s->why);
  }
  return problems;
}

json::Value mlir::tfm::ggufCheckpointJSON(const ModelSpec &spec) {
  // LLaMA 3's RoPE scaling is in the description; the converter also stores
  // its factors as rope_freqs.weight, which is then no parameter.
  json::Array ignore;
  for (const StackSpec &stack : spec.stacks)
    if (stack.embedding.position == PositionEncoding::rope &&
        stack.embedding.ropeScaling == RopeScaling::llama3)
      ignore.push_back("rope_freqs.weight");
  return json::Object{{"format", "gguf"},
                      {"arch", spec.ggufArch},
                      {"prefixes", json::Array{}},
                      {"ignore", std::move(ignore)}};
}
