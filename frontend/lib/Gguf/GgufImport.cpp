//===- GgufImport.cpp - .tfm descriptions from GGUF files -----------------===//
//
// Reads a GGUF file with the runtime's reader (runtime/src/gguf.c, built
// into the frontend under other names: GgufRename.h) and writes the model
// llama.cpp runs from it. The keys and their defaults follow llama.cpp's
// llama_model_base::load_hparams (src/llama-model.cpp) and each
// architecture's load_arch_hparams / load_arch_tensors / graph
// (src/models/<arch>.cpp) at the version tfm is compared with (v0.5.0).
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/GgufImport.h"

#include "../Hf/Importer.h"
#include "GgufArchs.h"
#include "tfm/Frontend/Diagnostics.h"
#include "tfm/Frontend/GgufCheckpoint.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include "GgufRename.h"
extern "C" {
#include "gguf.h"
}

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace mlir::tfm;
using gguf::ArchId;
using gguf::ArchInfo;
using hf::ModelBlock;
using llvm::StringRef;
using llvm::Twine;

bool mlir::tfm::isGgufPath(StringRef path) {
  return path.ends_with_insensitive(".gguf");
}

namespace {

/// The shortest decimal that reads back as the same float: GGUF's float32
/// values (eps = 1e-05 is stored as 9.99999974e-06) written as llama.cpp
/// uses them and as they were meant.
std::string formatFloat32(double v) {
  float f = static_cast<float>(v);
  for (int precision = 1; precision <= 9; ++precision) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f)
      return hf::formatNumber(std::strtod(buf, nullptr));
  }
  return hf::formatNumber(v);
}

/// A GGUF file being imported: typed reads of its metadata that mark each
/// key read, and the diagnostics.
class Reader {
public:
  Reader(StringRef path, tfm_gguf *g, HfDiagnosticFn diag)
      : path(path), g(g), diag(diag) {}

  bool failed() const { return errors != 0; }
  void error(const Twine &key, const Twine &problem) {
    ++errors;
    diag(HfSeverity::Error, path + ": " + key + ": " + problem);
  }
  void note(const Twine &text) { notes.push_back(text.str()); }

  /// `{arch}.suffix`.
  std::string key(StringRef suffix) const { return arch + "." + suffix.str(); }
  /// The value of `name` (marked read), or null.
  const tfm_gguf_value *find(StringRef name) {
    read.insert(name);
    return tfm_gguf_find(g, name.str().c_str());
  }
  bool has(StringRef suffix) { return find(key(suffix)) != nullptr; }
  /// Marks `{arch}.suffix` read: its value does not change the model.
  void ignore(StringRef suffix, StringRef why) {
    if (tfm_gguf_find(g, key(suffix).c_str())) {
      read.insert(key(suffix));
      ignored.push_back(key(suffix) + " (" + why.str() + ")");
    }
  }

  /// An integer in [lo, hi], or an array of them that are all equal
  /// (llama.cpp's get_key_or_arr: a value per layer). `required` makes a
  /// missing key an error.
  std::optional<int64_t> integer(StringRef suffix, bool required,
                                 int64_t lo = 1, int64_t hi = INT32_MAX) {
    std::string k = key(suffix);
    const tfm_gguf_value *v = find(k);
    if (!v) {
      if (required)
        error(k, "missing (llama.cpp's " + arch + " needs it)");
      return std::nullopt;
    }
    auto one = [&](const tfm_gguf_value &e) -> std::optional<int64_t> {
      int64_t out = 0;
      if (e.type == TFM_GGUF_STRING || e.type == TFM_GGUF_FLOAT32 ||
          e.type == TFM_GGUF_FLOAT64 || e.type == TFM_GGUF_BOOL ||
          e.type == TFM_GGUF_ARRAY) {
        error(k, Twine("expected an integer, got a ") +
                     tfm_gguf_type_name(e.type));
        return std::nullopt;
      }
      if (tfm_gguf_value_int(&e, lo, hi, &out) != TFM_OK) {
        error(k, "must be in [" + Twine(lo) + ", " + Twine(hi) + "]");
        return std::nullopt;
      }
      return out;
    };
    if (v->type != TFM_GGUF_ARRAY)
      return one(*v);
    if (v->count == 0) {
      error(k, "an empty array");
      return std::nullopt;
    }
    std::optional<int64_t> first;
    for (uint64_t i = 0; i < v->count; ++i) {
      tfm_gguf_value e = tfm_gguf_array_at(v, i);
      std::optional<int64_t> x = one(e);
      if (!x)
        return std::nullopt;
      if (first && *x != *first) {
        error(k, "differs between layers (" + Twine(*first) + " and " +
                     Twine(*x) +
                     "); a .tfm model has one value for all its layers");
        return std::nullopt;
      }
      first = x;
    }
    return first;
  }
  std::optional<double> number(StringRef suffix, bool required) {
    std::string k = key(suffix);
    const tfm_gguf_value *v = find(k);
    if (!v) {
      if (required)
        error(k, "missing (llama.cpp's " + arch + " needs it)");
      return std::nullopt;
    }
    if (v->type != TFM_GGUF_FLOAT32 && v->type != TFM_GGUF_FLOAT64) {
      error(k,
            Twine("expected a float32, got a ") + tfm_gguf_type_name(v->type));
      return std::nullopt;
    }
    double out = 0;
    if (tfm_gguf_value_float(v, &out) != TFM_OK || !std::isfinite(out)) {
      error(k, "not a finite number");
      return std::nullopt;
    }
    return out;
  }
  std::optional<bool> boolean(StringRef suffix) {
    std::string k = key(suffix);
    const tfm_gguf_value *v = find(k);
    if (!v)
      return std::nullopt;
    int out = 0;
    if (v->type != TFM_GGUF_BOOL || tfm_gguf_value_bool(v, &out) != TFM_OK) {
      error(k, Twine("expected a bool, got a ") + tfm_gguf_type_name(v->type));
      return std::nullopt;
    }
    return out != 0;
  }
  std::optional<std::string> string(StringRef name) {
    const tfm_gguf_value *v = find(name);
    if (!v)
      return std::nullopt;
    const char *s = nullptr;
    size_t len = 0;
    if (v->type != TFM_GGUF_STRING ||
        tfm_gguf_value_string(v, &s, &len) != TFM_OK) {
      error(name,
            Twine("expected a string, got a ") + tfm_gguf_type_name(v->type));
      return std::nullopt;
    }
    return std::string(s, len);
  }

  /// The tensor `name`, or null.
  const tfm_gguf_tensor *tensor(StringRef name) const {
    return tfm_gguf_find_tensor(g, name.str().c_str());
  }
  /// Whether layer 0 of the model has `blk.0.<name>`.
  bool hasLayerTensor(StringRef name) const {
    return tensor(("blk.0." + name).str()) != nullptr;
  }

  /// Every key not read: an error for those of the model ({arch}.*) and of
  /// unknown groups; general.*, tokenizer.* and quantize.* describe the
  /// file, its tokenizer (read by the runtime) and its quantization.
  void checkUnread() {
    for (size_t i = 0; i < tfm_gguf_num_kv(g); ++i) {
      StringRef k = tfm_gguf_key(g, i);
      if (read.contains(k) || k.starts_with("general.") ||
          k.starts_with("tokenizer.") || k.starts_with("quantize."))
        continue;
      if (k.starts_with(arch + "."))
        error(k, "unknown key; tfmc import does not know whether it changes "
                 "the model llama.cpp's " +
                     arch + " computes, so it refuses the file");
      else
        error(k, "unknown key (not of the model, its tokenizer or its "
                 "quantization)");
    }
  }

  StringRef path;
  tfm_gguf *g;
  std::string arch;
  std::vector<std::string> notes, ignored;

private:
  HfDiagnosticFn diag;
  unsigned errors = 0;
  llvm::StringSet<> read;
};

/// The model's name: the file's stem, as a .tfm name.
std::string modelName(StringRef path, StringRef arch) {
  StringRef stem = llvm::sys::path::stem(path);
  std::string name;
  for (char c : stem)
    name += llvm::isAlnum(c) || c == '_' ? c : '_';
  if (name.empty() || llvm::all_of(name, [](char c) { return c == '_'; }))
    return arch.str();
  if (llvm::isDigit(name[0]))
    name = "m_" + name;
  return name;
}

/// The sizes every architecture reads, and what the layout needs of them.
struct Sizes {
  int64_t vocab = 0, context = 0, d = 0, layers = 0, ffn = 0;
  int64_t heads = 0, kvHeads = 0, headDim = 0, ropeDim = 0;
};

class Importer {
public:
  Importer(Reader &r, const ArchInfo &arch) : r(r), arch(arch) {}
  std::optional<std::string> run();

private:
  bool readSizes();
  /// `position = rope(...)` from rope.freq_base, the architecture's pairs,
  /// rope.dimension_count and rope.scaling.*.
  std::string rope();
  /// LLaMA 3's RoPE scaling from the factors convert_hf_to_gguf.py stores in
  /// rope_freqs.weight (one per rotated pair, computed from factor,
  /// low_freq_factor, high_freq_factor and the original context): the
  /// `scaling = llama3, ...` arguments whose factors they are, or "" after
  /// an error.
  std::string llama3Scaling(const tfm_gguf_tensor &freqs, double theta);
  /// deepseek2's YaRN: the `scaling = yarn, ...` arguments, and the softmax
  /// scale llama.cpp multiplies by mscale^2 (`yarnScale`).
  std::string deepseekYarn(std::optional<double> factor);
  void attention(hf::Block<SectionId::Attention> a);
  void denseFfn(hf::Block<SectionId::Ffn> f, StringRef activation);
  void experts(hf::Block<SectionId::Ffn> f, bool sharedAllowed);
  /// The sliding window of gemma2 / gemma3 as a mask.
  std::string slidingMask(int64_t defaultPattern, bool windowByDefault);
  void deepseek(hf::Block<SectionId::Attention> a, hf::Block<SectionId::Ffn> f);
  /// Checks the written model against the file's tensors.
  void verify(StringRef text);
  /// That tensor `t` has the row-major `shape` that `param` reads.
  void checkShape(const tfm_gguf_tensor &t, llvm::ArrayRef<int64_t> want,
                  StringRef param);

  Reader &r;
  const ArchInfo &arch;
  Sizes s;
  bool tied = false;
  /// rope_freqs.weight was read as LLaMA 3's scaling (not a parameter).
  bool ropeFreqsRead = false;
  /// deepseek2 with YaRN: the attention scale llama.cpp computes.
  std::optional<float> yarnScale;
  /// The `position = rope(...)` written.
  std::string ropeText;
};

bool Importer::readSizes() {
  s.context = r.integer("context_length", true).value_or(0);
  s.d = r.integer("embedding_length", true).value_or(0);
  s.layers = r.integer("block_count", true, 1, 1024).value_or(0);
  s.heads = r.integer("attention.head_count", true).value_or(0);
  s.kvHeads = r.integer("attention.head_count_kv", false).value_or(s.heads);
  if (r.failed())
    return false;
  int64_t byHeads = s.d / s.heads;
  s.headDim = r.integer("attention.key_length", false).value_or(byHeads);
  int64_t valueDim =
      r.integer("attention.value_length", false).value_or(byHeads);
  if (arch.id != ArchId::Deepseek2 && valueDim != s.headDim)
    r.error(r.key("attention.value_length"),
            Twine(valueDim) + " differs from attention.key_length " +
                Twine(s.headDim) +
                " (tfm's heads have one size for keys and values)");
  s.ropeDim = r.integer("rope.dimension_count", false).value_or(s.headDim);
  if (s.heads % s.kvHeads != 0)
    r.error(r.key("attention.head_count_kv"),
            Twine(s.kvHeads) + " does not divide attention.head_count " +
                Twine(s.heads));

  // The vocabulary: the rows of token_embd (which llama.cpp checks against
  // its token list).
  const tfm_gguf_tensor *embd = r.tensor("token_embd.weight");
  if (!embd && tfm_gguf_num_tensors(r.g) == 0) {
    r.error("tensors", "none: a vocabulary-only file (its tokenizer.* "
                       "describe a tokenizer, not a model)");
    return false;
  }
  if (!embd) {
    r.error("token_embd.weight", "missing: the file has no token embeddings");
    return false;
  }
  s.vocab = embd->n_dims == 2 ? embd->ne[1] : 0;
  if (embd->n_dims != 2 || embd->ne[0] != s.d)
    r.error("token_embd.weight", "has " + Twine(embd->n_dims) +
                                     " dimensions, expected [" + Twine(s.d) +
                                     ", vocab] (ggml order)");
  if (std::optional<int64_t> v = r.integer("vocab_size", false);
      v && *v != s.vocab)
    r.error(r.key("vocab_size"), Twine(*v) + " differs from the " +
                                     Twine(s.vocab) +
                                     " rows of token_embd.weight");
  if (const tfm_gguf_value *tokens = r.find("tokenizer.ggml.tokens");
      tokens && tokens->type == TFM_GGUF_ARRAY &&
      static_cast<int64_t>(tokens->count) != s.vocab)
    r.error("tokenizer.ggml.tokens", Twine(tokens->count) +
                                         " tokens, but token_embd.weight has " +
                                         Twine(s.vocab) + " rows");
  // gemma2 always reads its head from token_embd (a file's output.weight
  // would be a tensor the model does not read).
  tied = !r.tensor("output.weight") || arch.id == ArchId::Gemma2;
  return !r.failed();
}

std::string Importer::rope() {
  double theta = r.number("rope.freq_base", false).value_or(10000.0);
  std::string out = "rope(theta = " + formatFloat32(theta) + ", style = " +
                    (arch.rope == gguf::Rope::Norm ? "interleaved" : "half");
  if (s.ropeDim != s.headDim && arch.id != ArchId::Deepseek2) {
    if (arch.id == ArchId::Llama)
      r.error(r.key("rope.dimension_count"),
              Twine(s.ropeDim) + " differs from the head size " +
                  Twine(s.headDim) + " (llama.cpp refuses it for llama)");
    out += ", dim = " + std::to_string(s.ropeDim);
  }
  // llama.cpp: the scaling type defaults to linear, its factor to 1.
  std::optional<std::string> type;
  if (r.has("rope.scaling.type"))
    type = r.string(r.key("rope.scaling.type"));
  std::optional<double> factor = r.number("rope.scaling.factor", false);
  if (!factor)
    factor = r.number("rope.scale_linear", false);
  r.ignore("rope.scaling.finetuned", "a note on training");
  if (const tfm_gguf_tensor *freqs = r.tensor("rope_freqs.weight")) {
    std::string llama3 = llama3Scaling(*freqs, theta);
    if (llama3.empty())
      return out + ")";
    if (type || factor)
      r.error(r.key("rope.scaling.type"),
              "rope.scaling.* beside rope_freqs.weight (LLaMA 3's scaling): "
              "llama.cpp would apply both");
    ropeFreqsRead = true;
    return out + ", " + llama3 + ")";
  }
  if (r.tensor("rope_factors_long.weight") ||
      r.tensor("rope_factors_short.weight"))
    r.error("rope_factors_long.weight",
            "LongRoPE (Phi-3's long-context scaling) is not supported");
  std::string kind = type.value_or("linear");
  bool scaled = factor && *factor != 0.0 && *factor != 1.0;
  if (kind == "none" || (kind == "linear" && !scaled)) {
    r.ignore("rope.scaling.original_context_length", "not used without YaRN");
    return out + ")";
  }
  if (kind == "linear") {
    r.ignore("rope.scaling.original_context_length", "not used without YaRN");
    return out + ", scaling = linear, factor = " + formatFloat32(*factor) + ")";
  }
  if (kind == "yarn" && arch.id == ArchId::Deepseek2)
    return out + ", " + deepseekYarn(factor) + ")";
  r.error(r.key("rope.scaling.type"),
          "'" + kind + "' is not supported for " + arch.name +
              " (supported: none, linear" +
              (arch.id == ArchId::Deepseek2 ? ", yarn" : "") + ")");
  return out + ")";
}

std::string Importer::llama3Scaling(const tfm_gguf_tensor &freqs,
                                    double theta) {
  int64_t n = s.ropeDim / 2;
  if (arch.id != ArchId::Llama) {
    r.error("rope_freqs.weight", "per-dimension RoPE frequency factors are "
                                 "read for llama only");
    return "";
  }
  if (freqs.type != TFM_GGML_F32 || freqs.n_dims != 1 || freqs.ne[0] != n) {
    r.error("rope_freqs.weight",
            "expected F32 [" + Twine(n) + "] (one factor per rotated pair)");
    return "";
  }
  std::vector<float> f(n);
  std::memcpy(f.data(), freqs.data, n * sizeof(float));
  // The factors of the converter's formula (conversion/llama.py,
  // generate_extra_tensors) for each candidate; the first that gives every
  // stored factor (to float32 rounding) is the scaling, and any other that
  // would is the same on every rotated pair.
  double maxFactor = *std::max_element(f.begin(), f.end());
  const double contexts[] = {8192, 4096, 2048, 16384, 32768, 65536, 131072};
  const double lows[] = {1, 2, 4, 8};
  const double highs[] = {2, 4, 8, 16, 32, 64};
  for (double ctx : contexts)
    for (double low : lows)
      for (double high : highs) {
        if (high <= low)
          continue;
        bool match = true;
        for (int64_t i = 0; i < n && match; ++i) {
          double freq = 1.0 / std::pow(theta, 2.0 * i / s.ropeDim);
          double wavelen = 2 * M_PI / freq, want;
          if (wavelen < ctx / high)
            want = 1;
          else if (wavelen > ctx / low)
            want = maxFactor;
          else {
            double smooth = (ctx / wavelen - low) / (high - low);
            want = 1 / ((1 - smooth) / maxFactor + smooth);
          }
          match = std::fabs(want - f[i]) <= 1e-5 * std::fabs(want);
        }
        if (match) {
          r.note("rope_freqs.weight read as LLaMA 3's scaling: the factors "
                 "of factor " +
                 formatFloat32(maxFactor) + ", low_freq_factor " +
                 formatFloat32(low) + ", high_freq_factor " +
                 formatFloat32(high) + ", original context " +
                 Twine(int64_t(ctx)));
          return "scaling = llama3, factor = " + formatFloat32(maxFactor) +
                 ", low_freq_factor = " + formatFloat32(low) +
                 ", high_freq_factor = " + formatFloat32(high) +
                 ", original_context = " + std::to_string(int64_t(ctx));
        }
      }
  r.error("rope_freqs.weight",
          "per-dimension RoPE frequency factors that are not LLaMA 3's "
          "scaling (no factor, low/high frequency factor and original "
          "context give them) are not supported");
  return "";
}

std::string Importer::deepseekYarn(std::optional<double> factor) {
  if (!factor || *factor <= 1.0) {
    r.error(r.key("rope.scaling.factor"),
            "YaRN needs a factor > 1 (llama.cpp's freq_scale = 1 / factor)");
    return "";
  }
  int64_t context = r.integer("rope.scaling.original_context_length", false)
                        .value_or(s.context);
  // The converter writes 0.1 * mscale_all_dim; llama.cpp divides by 0.1
  // (TAG_DEEPSEEK2_YARN_LOG_MUL_FIX), takes mscale = mscale_all_dim, so the
  // rotation's cos and sin are not scaled (llama_context: yarn_attn_factor
  // = get_mscale(f, m) / get_mscale(f, m) / (1 + 0.1 ln f), which ggml's
  // rope multiplies back), and scales the scores by mscale^2 with mscale =
  // 1 + 0.1 mscale_all_dim ln f (deepseek2.cpp).
  std::optional<double> logMul =
      r.number("rope.scaling.yarn_log_multiplier", false);
  if (!logMul || *logMul == 0.0) {
    r.error(r.key("rope.scaling.yarn_log_multiplier"),
            "missing or 0: YaRN for deepseek2 is read with it (as "
            "convert_hf_to_gguf.py writes DeepSeek's mscale_all_dim)");
    return "";
  }
  if (std::optional<double> attn = r.number("rope.scaling.attn_factor", false);
      attn && *attn != 1.0)
    r.error(r.key("rope.scaling.attn_factor"),
            formatFloat32(*attn) + ": a factor on YaRN's rotation is not "
                                   "supported (only 1)");
  // llama.cpp v0.5.0 does not read these: it uses ext_factor 1 and
  // beta_fast 32, beta_slow 1.
  for (StringRef k :
       {"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor",
        "rope.scaling.yarn_beta_fast", "rope.scaling.yarn_beta_slow"})
    r.ignore(k, "not read by llama.cpp");
  float m = static_cast<float>(*logMul) / 0.1f;
  float ms = 1.0f + 0.1f * m * std::log(static_cast<float>(*factor));
  int64_t headDim =
      r.integer("attention.key_length_mla", false).value_or(s.headDim);
  yarnScale = ms * ms / std::sqrt(static_cast<float>(headDim));
  r.note("attention scale = mscale^2 / sqrt(head_dim) with mscale = 1 + 0.1 "
         "* " +
         formatFloat32(m) + " * ln(" + formatFloat32(*factor) +
         ") (llama.cpp's deepseek2 with YaRN)");
  return "scaling = yarn, factor = " + formatFloat32(*factor) +
         ", original_context = " + std::to_string(context) +
         ", beta_fast = 32, beta_slow = 1, mscale = " + formatFloat32(m) +
         ", mscale_all_dim = " + formatFloat32(m);
}

void Importer::attention(hf::Block<SectionId::Attention> a) {
  a.set<KeyId::Heads>(hf::str(s.heads));
  if (s.kvHeads != s.heads)
    a.set<KeyId::KvHeads>(hf::str(s.kvHeads));
  if (s.headDim * s.heads != s.d)
    a.set<KeyId::HeadDim>(hf::str(s.headDim));
}

void Importer::denseFfn(hf::Block<SectionId::Ffn> f, StringRef activation) {
  f.set<KeyId::Hidden>(hf::str(s.ffn));
  f.set<KeyId::Activation>(activation);
  f.set<KeyId::Bias>(hf::str(r.hasLayerTensor("ffn_up.bias") ||
                             r.hasLayerTensor("ffn_down.bias")));
}

void Importer::experts(hf::Block<SectionId::Ffn> f, bool sharedAllowed) {
  int64_t n = r.integer("expert_count", true, 1, 1 << 16).value_or(0);
  int64_t k = r.integer("expert_used_count", true, 1, 1 << 16).value_or(0);
  if (n == 0 || k == 0)
    return;
  if (k > n)
    r.error(r.key("expert_used_count"),
            Twine(k) + " is more than expert_count " + Twine(n));
  f.set<KeyId::Experts>(hf::str(n));
  f.set<KeyId::ExpertsPerToken>(hf::str(k));
  // qwen3moe: expert_feed_forward_length, or n_ff / n_expert_used; llama
  // (Mixtral): feed_forward_length is the experts' width.
  int64_t width = s.ffn;
  if (arch.id != ArchId::Llama)
    width = r.integer("expert_feed_forward_length", arch.id != ArchId::Qwen3Moe)
                .value_or(s.ffn / k);
  f.set<KeyId::ExpertHidden>(hf::str(width));
  // llama.cpp limits the experts to groups for every architecture whose
  // file has expert_group_count > 1; tfm maps that for deepseek2 only.
  if (arch.id != ArchId::Deepseek2) {
    if (r.integer("expert_group_count", false, 0).value_or(0) > 1)
      r.error(r.key("expert_group_count"),
              "group-limited routing is supported for deepseek2 only");
    r.integer("expert_group_used_count", false, 0);
  }
  if (!sharedAllowed &&
      r.integer("expert_shared_count", false, 0).value_or(0) > 0)
    r.error(r.key("expert_shared_count"),
            "llama.cpp's " + arch.name + " has no shared experts");
  if (arch.id != ArchId::Deepseek2) {
    std::string why = "not read by llama.cpp's " + arch.name.str() +
                      ": a softmax over all experts, the chosen renormalized";
    for (StringRef k :
         {"expert_gating_func", "expert_weights_norm", "expert_weights_scale"})
      r.ignore(k, why);
  }
}

std::string Importer::slidingMask(int64_t defaultPattern,
                                  bool windowByDefault) {
  std::optional<int64_t> window =
      r.integer("attention.sliding_window", false, 0);
  if (!window && windowByDefault)
    window = 4096; // gemma2's default (llama_model_gemma2::load_arch_hparams)
  if (!window || *window == 0)
    return "causal";
  int64_t every = defaultPattern;
  const tfm_gguf_value *pattern =
      r.find(r.key("attention.sliding_window_pattern"));
  if (pattern && pattern->type == TFM_GGUF_ARRAY) {
    // One bool a layer (true: sliding): it must be "full every K-th".
    std::vector<bool> sliding;
    for (uint64_t i = 0; i < pattern->count; ++i) {
      tfm_gguf_value e = tfm_gguf_array_at(pattern, i);
      int b = 0;
      if (e.type != TFM_GGUF_BOOL || tfm_gguf_value_bool(&e, &b) != TFM_OK) {
        r.error(r.key("attention.sliding_window_pattern"),
                "expected an array of bools");
        return "causal";
      }
      sliding.push_back(b != 0);
    }
    every = 0;
    for (size_t i = 0; i < sliding.size(); ++i)
      if (!sliding[i]) {
        every = static_cast<int64_t>(i) + 1;
        break;
      }
    for (size_t i = 0; i < sliding.size(); ++i)
      if (sliding[i] != (every == 0 || (i + 1) % every != 0)) {
        r.error(r.key("attention.sliding_window_pattern"),
                "a mix of full and sliding layers other than every K-th "
                "layer full is not supported");
        return "causal";
      }
  } else if (pattern) {
    every = r.integer("attention.sliding_window_pattern", false, 0).value_or(0);
  }
  // llama.cpp: layer il slides when il % K < K - 1 (K = 0: every layer).
  std::string mask = "sliding(window = " + std::to_string(*window);
  if (every > 1)
    mask += ", global_every = " + std::to_string(every);
  else if (every == 1)
    return "causal"; // every layer full
  return mask + ")";
}

void Importer::deepseek(hf::Block<SectionId::Attention> a,
                        hf::Block<SectionId::Ffn> f) {
  int64_t kvRank = r.integer("attention.kv_lora_rank", true).value_or(0);
  int64_t qRank = r.integer("attention.q_lora_rank", false, 0).value_or(0);
  // The head sizes after decompression: key_length_mla / value_length_mla
  // (newer files), else key_length / value_length.
  int64_t headDim =
      r.integer("attention.key_length_mla", false).value_or(s.headDim);
  int64_t byHeads = s.d / s.heads;
  int64_t valueDim =
      r.integer("attention.value_length_mla", false)
          .value_or(
              r.integer("attention.value_length", false).value_or(byHeads));
  // Newer converters split kv_b into attn_k_b and attn_v_b (the model's
  // kv_b is read from them) and give the head sizes in the _mla keys, their
  // key_length / value_length being the latent's; llama.cpp reads the split
  // tensors only with both _mla keys (is_mla).
  if (r.hasLayerTensor("attn_k_b.weight") ||
      r.hasLayerTensor("attn_v_b.weight"))
    for (StringRef k :
         {"attention.key_length_mla", "attention.value_length_mla"})
      if (!r.has(k))
        r.error(r.key(k), "missing: a file with kv_b split into attn_k_b "
                          "and attn_v_b gives the head sizes in "
                          ".attention.key_length_mla and .value_length_mla "
                          "(llama.cpp reads the split tensors only with "
                          "both; .key_length is then the latent's)");
  a.set<KeyId::Heads>(hf::str(s.heads));
  a.set<KeyId::HeadDim>(hf::str(headDim));
  a.set<KeyId::KvRank>(hf::str(kvRank));
  if (qRank > 0)
    a.set<KeyId::QRank>(hf::str(qRank));
  a.set<KeyId::RopeDim>(hf::str(s.ropeDim));
  a.set<KeyId::ValueDim>(hf::str(valueDim));
  a.set<KeyId::Mask>("causal");
  a.set<KeyId::Bias>("false");
  // MoE: leading dense layers, routed experts, shared ones.
  s.ffn = r.integer("feed_forward_length", true).value_or(0);
  f.set<KeyId::Hidden>(hf::str(s.ffn));
  f.set<KeyId::Activation>("swiglu");
  f.set<KeyId::Bias>("false");
  experts(f, true);
  int64_t gating = r.integer("expert_gating_func", false, 0, 3).value_or(0);
  bool sigmoid = gating == 2;
  if (gating == 3)
    r.error(r.key("expert_gating_func"),
            "3 (softmax over the chosen experts' logits) is not supported");
  f.set<KeyId::Router>(sigmoid ? "sigmoid" : "softmax");
  if (r.hasLayerTensor("exp_probs_b.bias") ||
      r.tensor(("blk." + Twine(s.layers - 1) + ".exp_probs_b.bias").str()))
    f.set<KeyId::SelectionBias>("true");
  if (r.boolean("expert_weights_norm").value_or(false))
    f.set<KeyId::Normalize>("true");
  double scale = r.number("expert_weights_scale", false).value_or(0.0);
  if (scale != 0.0 && scale != 1.0)
    f.set<KeyId::RoutedScale>(formatFloat32(scale));
  int64_t shared = r.integer("expert_shared_count", true, 0).value_or(0);
  int64_t width = r.integer("expert_feed_forward_length", true).value_or(0);
  if (shared > 0)
    f.set<KeyId::SharedHidden>(hf::str(shared * width));
  int64_t dense = r.integer("leading_dense_block_count", false, 0).value_or(0);
  if (dense > 0)
    f.set<KeyId::FirstDense>(hf::str(dense));
  int64_t groups = r.integer("expert_group_count", false, 0).value_or(0);
  int64_t used = r.integer("expert_group_used_count", false, 0).value_or(0);
  if (groups > 1) {
    if (!sigmoid)
      r.error(r.key("expert_group_count"),
              "llama.cpp scores a group by its two best experts (DeepSeek-V3); "
              "tfm's grouped softmax router is DeepSeek-V2's (its best one)");
    f.set<KeyId::Router>("sigmoid(groups = " + std::to_string(groups) +
                         ", topk_groups = " + std::to_string(used) + ")");
  }
  // The attention scale: head_dim^-0.5, with YaRN times mscale^2.
  if (yarnScale)
    a.set<KeyId::Scale>(formatFloat32(*yarnScale));
}

std::optional<std::string> Importer::run() {
  if (!readSizes())
    return std::nullopt;
  hf::Section model{modelName(r.path, arch.name), {}, {}};
  ModelBlock m(model);
  m.set<KeyId::Checkpoint>("gguf(arch = " + arch.name.str() + ")");
  m.set<KeyId::Arch>("decoder");
  m.set<KeyId::Vocab>(hf::str(s.vocab));
  m.set<KeyId::Context>(hf::str(s.context));
  m.set<KeyId::DModel>(hf::str(s.d));
  m.set<KeyId::Layers>(hf::str(s.layers));
  m.set<KeyId::Output>("lm_head");
  auto emb = m.sub<SectionId::Embedding>();
  auto att = m.sub<SectionId::Attention>();
  auto ffn = m.sub<SectionId::Ffn>();
  auto norm = m.sub<SectionId::Norm>();
  r.ignore("attention.causal", "causal, as every architecture read here");
  if (const tfm_gguf_value *causal = r.find(r.key("attention.causal"))) {
    int c = 1;
    if (causal->type != TFM_GGUF_BOOL ||
        tfm_gguf_value_bool(causal, &c) != TFM_OK || !c)
      r.error(r.key("attention.causal"),
              "must be true (a decoder of causal attention)");
  }
  bool rms = arch.id != ArchId::Gpt2;
  std::optional<double> eps =
      rms ? r.number("attention.layer_norm_rms_epsilon", true)
          : r.number("attention.layer_norm_epsilon", true);
  // The converter writes both epsilons when a config names both; llama.cpp
  // reads the one of its norms.
  r.ignore(rms ? "attention.layer_norm_epsilon"
               : "attention.layer_norm_rms_epsilon",
           "not read by llama.cpp's " + arch.name.str());

  if (arch.id == ArchId::Gpt2) {
    emb.set<KeyId::Position>("learned");
    if (r.has("rope.freq_base") || r.has("rope.dimension_count"))
      r.error(r.key("rope.freq_base"), "gpt2 has no rotary positions");
  } else if (arch.id != ArchId::Deepseek2) {
    ropeText = rope();
    emb.set<KeyId::Position>(ropeText);
  } else {
    // Latent attention rotates its rope_dim values in adjacent pairs.
    emb.set<KeyId::Position>(rope());
  }
  emb.set<KeyId::TieOutput>(hf::str(tied));

  switch (arch.id) {
  case ArchId::Llama:
  case ArchId::Qwen2:
  case ArchId::Qwen3:
  case ArchId::Qwen3Moe:
  case ArchId::Phi3: {
    attention(att);
    att.set<KeyId::Mask>("causal");
    bool qkvBias =
        r.hasLayerTensor("attn_q.bias") || r.hasLayerTensor("attn_qkv.bias");
    bool outBias = r.hasLayerTensor("attn_output.bias");
    att.set<KeyId::Bias>(hf::str(qkvBias));
    if (qkvBias != outBias)
      att.set<KeyId::OutBias>(hf::str(outBias));
    if (arch.id == ArchId::Qwen3 || arch.id == ArchId::Qwen3Moe)
      att.set<KeyId::QkNorm>("true");
    if (arch.id == ArchId::Phi3 &&
        r.integer("attention.sliding_window", false, 0).value_or(0) > 0)
      r.note(r.key("attention.sliding_window") +
             " not applied: llama.cpp disables Phi-3's sliding window");
    bool moe = arch.id == ArchId::Qwen3Moe ||
               (arch.id == ArchId::Llama && r.has("expert_count") &&
                r.integer("expert_count", false, 0).value_or(0) > 0);
    s.ffn = r.integer("feed_forward_length", !moe || arch.id == ArchId::Llama)
                .value_or(0);
    if (moe) {
      if (s.ffn > 0)
        ffn.set<KeyId::Hidden>(hf::str(s.ffn));
      ffn.set<KeyId::Activation>("swiglu");
      ffn.set<KeyId::Bias>("false");
      experts(ffn, false);
      ffn.set<KeyId::Normalize>("true");
    } else {
      denseFfn(ffn, "swiglu");
      r.ignore("expert_count", "0: no experts");
      r.ignore("expert_used_count", "0: no experts");
    }
    norm.set<KeyId::Kind>("rmsnorm");
    norm.set<KeyId::Placement>("pre");
    break;
  }
  case ArchId::Gemma2:
  case ArchId::Gemma3: {
    bool g2 = arch.id == ArchId::Gemma2;
    emb.set<KeyId::Scale>("true");
    attention(att);
    std::string mask = slidingMask(g2 ? 2 : 6, g2);
    att.set<KeyId::Mask>(mask);
    att.set<KeyId::Bias>("false");
    if (!g2)
      att.set<KeyId::QkNorm>("true");
    // llama.cpp's 27B (46 layers for gemma2, 62 for gemma3) scales by
    // (d_model / heads)^-0.5, the others by head_dim^-0.5.
    bool big = s.layers == (g2 ? 46 : 62);
    double scale =
        1.0 / std::sqrt(static_cast<double>(big ? s.d / s.heads : s.headDim));
    if (big || s.headDim * s.heads != s.d)
      att.set<KeyId::Scale>(formatFloat32(scale));
    if (big)
      r.note(Twine("attention scale (d_model / heads)^-0.5: llama.cpp's ") +
             arch.name + " of " + Twine(s.layers) + " layers (27B)");
    if (g2) {
      double softcap = r.number("attn_logit_softcapping", false).value_or(50.0);
      if (softcap != 0.0)
        att.set<KeyId::Softcap>(formatFloat32(softcap));
    }
    double final =
        r.number("final_logit_softcapping", false).value_or(g2 ? 30.0 : 0.0);
    if (final != 0.0)
      m.set<KeyId::Output>("lm_head(softcap = " + formatFloat32(final) + ")");
    // The sliding layers' base: rope(local_theta) when it differs.
    double theta = r.number("rope.freq_base", false).value_or(10000.0);
    std::optional<double> swaBase = r.number("rope.freq_base_swa", false);
    // gemma2: the sliding layers' base defaults to rope.freq_base, gemma3:
    // to 10000 (llama_hparams::rope_freq_base_train_swa).
    // The sliding layers rotate with it; gemma3's unscaled (their
    // rope_freq_scale_train_swa stays 1), gemma2's as the others.
    double local = swaBase.value_or(g2 ? theta : 10000.0);
    if (local != theta && StringRef(mask).starts_with("sliding")) {
      if (g2 && StringRef(ropeText).contains("scaling"))
        r.error(r.key("rope.freq_base_swa"),
                formatFloat32(local) + " differs from rope.freq_base " +
                    formatFloat32(theta) +
                    " with RoPE scaling: llama.cpp's gemma2 scales its "
                    "sliding layers too, tfm's local_theta does not");
      ropeText.pop_back();
      emb.set<KeyId::Position>(ropeText +
                               ", local_theta = " + formatFloat32(local) + ")");
    }
    s.ffn = r.integer("feed_forward_length", true).value_or(0);
    denseFfn(ffn, "geglu_tanh");
    norm.set<KeyId::Kind>("rmsnorm");
    norm.set<KeyId::Placement>("sandwich");
    break;
  }
  case ArchId::Gpt2:
    attention(att);
    att.set<KeyId::Mask>("causal");
    att.set<KeyId::Bias>("true");
    s.ffn = r.integer("feed_forward_length", true).value_or(0);
    denseFfn(ffn, "gelu_tanh");
    ffn.set<KeyId::Bias>("true");
    norm.set<KeyId::Kind>("layernorm");
    norm.set<KeyId::Placement>("pre");
    break;
  case ArchId::Deepseek2: {
    deepseek(att, ffn);
    norm.set<KeyId::Kind>("rmsnorm");
    norm.set<KeyId::Placement>("pre");
    break;
  }
  }
  if (eps)
    norm.set<KeyId::Eps>(formatFloat32(*eps));
  r.checkUnread();
  if (r.failed())
    return std::nullopt;

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# Written by `tfmc import` from " << r.path << "\n";
  os << "# (GGUF, llama.cpp architecture " << arch.name << ").\n";
  if (!r.ignored.empty()) {
    os << "#\n# Keys that do not change the forward pass (not written):\n";
    for (const std::string &k : r.ignored)
      hf::printWrapped(k, "#   ", "#     ", os);
  }
  if (!r.notes.empty()) {
    os << "#\n# Choices:\n";
    for (const std::string &n : r.notes)
      hf::printWrapped(n, "#   ", "#     ", os);
  }
  hf::printModel(model, os);
  verify(text);
  if (r.failed())
    return std::nullopt;
  return text;
}

void Importer::checkShape(const tfm_gguf_tensor &t,
                          llvm::ArrayRef<int64_t> want, StringRef param) {
  std::vector<int64_t> shape(t.ne, t.ne + t.n_dims);
  std::reverse(shape.begin(), shape.end());
  if (llvm::ArrayRef<int64_t>(shape) == want)
    return;
  auto show = [](llvm::ArrayRef<int64_t> v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i)
      out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
  };
  r.error(t.name, "has shape " + show(shape) + " (row-major), expected " +
                      show(want) + " for '" + param + "'");
}

void Importer::verify(StringRef text) {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "written.tfm"), llvm::SMLoc());
  std::string messages;
  llvm::raw_string_ostream os(messages);
  MLIRContext ctx;
  SourceMgrDiagnosticHandler handler(sm, &ctx, os);
  DiagEmitter diags(sm, &ctx);
  FileAST ast = parseFile(text, diags);
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  if (diags.errorCount() != 0 || specs.size() != 1) {
    r.error("the written description",
            "does not resolve (a bug of tfmc import):\n" + messages);
    return;
  }
  const ModelSpec &spec = specs.front();
  llvm::StringSet<> used;
  for (const ParamSpec &p : spec.params()) {
    std::optional<HfSource> src = getGgufSource(spec, p);
    if (!src || src->kind == HfSource::Kind::Unmapped) {
      r.error(p.name, "the layout has no tensor for it" +
                          (src ? ": " + src->why : std::string()));
      continue;
    }
    const std::string &name = src->names.front();
    const tfm_gguf_tensor *t = r.tensor(name);
    // A tensor that may be stored in parts (deepseek2's kv_b): whole or in
    // all of its parts, never both.
    std::string parts;
    size_t found = 0;
    for (const HfSourcePart &part : src->parts) {
      parts += (parts.empty() ? "'" : "' and '") + part.name;
      found += r.tensor(part.name) != nullptr;
    }
    parts += parts.empty() ? "" : "'";
    if (t && found) {
      r.error(name, "and its parts " + parts +
                        " are all in the file: it is stored whole or split "
                        "(the model's '" +
                        p.name + "' reads one of them)");
      used.insert(name);
      for (const HfSourcePart &part : src->parts)
        used.insert(part.name);
      continue;
    }
    if (!t && found) {
      for (const HfSourcePart &part : src->parts) {
        const tfm_gguf_tensor *pt = r.tensor(part.name);
        if (!pt) {
          r.error(part.name, "missing: the file splits " + name + " into " +
                                 parts + " (the model's '" + p.name +
                                 "' reads them)");
          continue;
        }
        used.insert(part.name);
        checkShape(*pt, part.shape, p.name);
      }
      continue;
    }
    if (!t) {
      r.error(name, "missing (the model's '" + p.name + "' reads it" +
                        (parts.empty() ? "" : ", or its parts " + parts) + ")");
      continue;
    }
    used.insert(name);
    checkShape(*t, src->shape, p.name);
  }
  if (ropeFreqsRead)
    used.insert("rope_freqs.weight");
  for (size_t i = 0; i < tfm_gguf_num_tensors(r.g); ++i) {
    StringRef name = tfm_gguf_tensor_at(r.g, i)->name;
    if (!used.contains(name))
      r.error(name, "a tensor the model does not read (tfmc import does not "
                    "know what it does in llama.cpp's " +
                        arch.name + ")");
  }
}

} // namespace

std::optional<std::string> mlir::tfm::importGguf(StringRef path,
                                                 HfDiagnosticFn diag) {
  tfm_gguf *g = nullptr;
  if (tfm_gguf_open(path.str().c_str(), &g) != TFM_OK) {
    diag(HfSeverity::Error, tfm_last_error());
    return std::nullopt;
  }
  Reader r(path, g, diag);
  std::optional<std::string> result;
  // A shard of a file split by llama.cpp's gguf-split holds part of the
  // tensors (the first: the metadata and its share).
  if (const tfm_gguf_value *count = r.find("split.count")) {
    int64_t n = 0;
    if (tfm_gguf_value_int(count, 0, INT32_MAX, &n) == TFM_OK && n > 1)
      r.error("split.count",
              Twine(n) + ": a shard of a file split by gguf-split; tfmc "
                         "import reads a whole file (merge the shards with "
                         "gguf-split --merge)");
    r.find("split.no");
    r.find("split.tensors.count");
  }
  if (r.failed()) {
    tfm_gguf_close(g);
    return std::nullopt;
  }
  std::optional<std::string> name = r.string("general.architecture");
  if (!name) {
    if (!r.failed())
      r.error("general.architecture", "missing");
  } else if (const ArchInfo *arch = gguf::lookupArch(*name)) {
    r.arch = *name;
    result = Importer(r, *arch).run();
  } else {
    r.error("general.architecture",
            "'" + *name + "' is not supported (supported: " + gguf::archList() +
                ")");
  }
  tfm_gguf_close(g);
  return r.failed() ? std::nullopt : result;
}
