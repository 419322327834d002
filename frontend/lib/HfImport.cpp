//===- HfImport.cpp - .tfm descriptions from Hugging Face configs ---------===//
//
// One function per model_type reads the fields of config.json the way that
// type's Hugging Face configuration and modeling code do (the defaults of the
// configuration class when a field is absent) and fills a .tfm model. Every
// field read is marked; a field the mapping does not read is either known
// not to change the forward pass (listed in the header comment with the
// reason) or unknown: an error, since it may change the forward pass (a
// warning, listed too, with --allow-unknown). A value that changes the math
// in a way the language cannot express is an error; nothing is approximated.
//
// The RoPE settings are read in both forms Hugging Face writes:
// transformers 4 keeps `rope_theta` (GPT-NeoX: `rotary_emb_base`) and
// `partial_rotary_factor` (`rotary_pct`) at the top level and the scaling in
// `rope_scaling`; transformers 5 moves all of them into `rope_parameters`
// (`RotaryEmbeddingConfigMixin.convert_rope_params_to_dict` and
// `standardize_rope_params` in modeling_rope_utils.py), one dict for the
// model or one per layer type. A value given in both places must agree.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfImport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>
#include <map>

using namespace mlir::tfm;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

namespace {

const StringRef kModelTypes[] = {
    "gpt2",    "gpt_neox", "gptj", "llama", "mistral", "qwen2", "qwen3",
    "gemma",   "gemma2",   "phi",  "phi3",  "falcon",  "bloom", "bert",
    "roberta", "vit",      "t5",   "bart",  "whisper"};

/// A number as the .tfm lexer reads it back exactly: integers without a
/// point, others in the shortest form that round-trips.
std::string formatNumber(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  for (int precision = 1; precision <= 17; ++precision) {
    std::string s = llvm::formatv("{0}", llvm::format("%.*g", precision, v));
    if (std::strtod(s.c_str(), nullptr) == v)
      return s;
  }
  return llvm::formatv("{0}", llvm::format("%.17g", v));
}

/// A JSON value as messages show it: strings without quotes.
std::string show(const json::Value &v) {
  if (auto s = v.getAsString())
    return s->str();
  if (auto d = v.getAsNumber(); d && !v.getAsInteger())
    return formatNumber(*d);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  return text;
}

/// A JSON value as JSON, for messages about its type.
std::string showJson(const json::Value &v) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  return text;
}

/// A section of the written model: keys in order, then nested sections.
struct Section {
  std::string name;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<Section> sections;

  void set(StringRef key, const Twine &value) {
    for (auto &kv : keys)
      if (kv.first == key) {
        kv.second = value.str();
        return;
      }
    keys.emplace_back(key.str(), value.str());
  }
  Section &sub(StringRef sectionName) {
    for (Section &s : sections)
      if (s.name == sectionName)
        return s;
    sections.push_back(Section{sectionName.str(), {}, {}});
    return sections.back();
  }
  bool empty() const { return keys.empty() && sections.empty(); }
};

void printSection(const Section &s, unsigned indent, llvm::raw_ostream &os) {
  std::string pad(indent, ' ');
  if (s.sections.empty()) {
    std::string line = pad + s.name + " {";
    for (size_t i = 0; i < s.keys.size(); ++i)
      line += (i ? "; " : " ") + s.keys[i].first + " = " + s.keys[i].second;
    line += " }";
    if (line.size() <= 90) {
      os << line << "\n";
      return;
    }
  }
  os << pad << s.name << " {\n";
  for (const auto &kv : s.keys)
    os << pad << "  " << kv.first << " = " << kv.second << "\n";
  for (const Section &sub : s.sections)
    printSection(sub, indent + 2, os);
  os << pad << "}\n";
}

/// Writes `text` as comment lines of at most 90 columns, the first starting
/// with `first` and the rest with `rest`.
void printWrapped(StringRef text, StringRef first, StringRef rest,
                  llvm::raw_ostream &os) {
  std::string line = first.str();
  bool empty = true;
  while (!text.empty()) {
    auto [word, tail] = text.split(' ');
    text = tail.ltrim(' ');
    if (!empty && line.size() + 1 + word.size() > 90) {
      os << line << "\n";
      line = rest.str();
      empty = true;
    }
    line += (empty ? "" : " ") + word.str();
    empty = false;
  }
  os << line << "\n";
}

/// Fields of every configuration (PretrainedConfig and generation settings)
/// that do not change the forward pass of the description.
struct KnownField {
  StringRef name;
  StringRef reason;
};
const KnownField kGenericIgnored[] = {
    {"architectures", "names of the Python classes"},
    {"auto_map", "names of the Python classes"},
    {"custom_pipelines", "names of the Python classes"},
    {"transformers_version", "provenance"},
    {"_name_or_path", "provenance"},
    {"name_or_path", "provenance"},
    {"_commit_hash", "provenance"},
    {"torch_dtype", "precision of the published weights"},
    {"dtype", "precision of the published weights"},
    {"use_bfloat16", "precision of the published weights"},
    {"initializer_range", "weight initialization"},
    {"initializer_factor", "weight initialization"},
    {"init_std", "weight initialization"},
    {"bos_token_id", "token ids (tokenizer and generation)"},
    {"eos_token_id", "token ids (tokenizer and generation)"},
    {"pad_token_id", "token ids (tokenizer and generation)"},
    {"unk_token_id", "token ids (tokenizer and generation)"},
    {"sep_token_id", "token ids (tokenizer and generation)"},
    {"cls_token_id", "token ids (tokenizer and generation)"},
    {"mask_token_id", "token ids (tokenizer and generation)"},
    {"decoder_start_token_id", "token ids (tokenizer and generation)"},
    {"forced_bos_token_id", "token ids (tokenizer and generation)"},
    {"forced_eos_token_id", "token ids (tokenizer and generation)"},
    {"tokenizer_class", "tokenizer"},
    {"prefix", "tokenizer"},
    {"use_cache", "generation settings"},
    {"max_length", "generation settings"},
    {"min_length", "generation settings"},
    {"max_new_tokens", "generation settings"},
    {"do_sample", "generation settings"},
    {"early_stopping", "generation settings"},
    {"num_beams", "generation settings"},
    {"num_beam_groups", "generation settings"},
    {"diversity_penalty", "generation settings"},
    {"temperature", "generation settings"},
    {"top_k", "generation settings"},
    {"top_p", "generation settings"},
    {"typical_p", "generation settings"},
    {"repetition_penalty", "generation settings"},
    {"length_penalty", "generation settings"},
    {"no_repeat_ngram_size", "generation settings"},
    {"encoder_no_repeat_ngram_size", "generation settings"},
    {"bad_words_ids", "generation settings"},
    {"num_return_sequences", "generation settings"},
    {"output_scores", "generation settings"},
    {"return_dict_in_generate", "generation settings"},
    {"remove_invalid_values", "generation settings"},
    {"exponential_decay_length_penalty", "generation settings"},
    {"suppress_tokens", "generation settings"},
    {"begin_suppress_tokens", "generation settings"},
    {"forced_decoder_ids", "generation settings"},
    {"task_specific_params", "generation settings"},
    {"cache_implementation", "generation settings"},
    {"output_hidden_states", "options of the Python API"},
    {"output_attentions", "options of the Python API"},
    {"return_dict", "options of the Python API"},
    {"torchscript", "options of the Python API"},
    {"chunk_size_feed_forward",
     "memory option of the Python API (same result)"},
    {"_attn_implementation", "kernel choice of the Python API"},
    {"attn_implementation", "kernel choice of the Python API"},
    {"id2label", "labels of a classification head (not part of the "
                 "description)"},
    {"label2id", "labels of a classification head (not part of the "
                 "description)"},
    {"num_labels", "labels of a classification head (not part of the "
                   "description)"},
    {"problem_type", "labels of a classification head (not part of the "
                     "description)"},
    {"finetuning_task", "training"},
    {"gradient_checkpointing", "training"},
    {"tf_legacy_loss", "training"},
    {"is_encoder_decoder", "implied by model_type"},
    {"is_decoder", "not read by this type's modeling code (only BERT and "
                   "RoBERTa read it)"},
    {"add_cross_attention", "not read by this type's modeling code (only "
                            "GPT-2 and BERT read it)"},
    {"cross_attention_hidden_size", "not read without add_cross_attention"},
};

/// Dropout and layer drop: off at inference.
bool isDropoutField(StringRef name) {
  return name.contains("dropout") || name.ends_with("pdrop") ||
         name.ends_with("layerdrop") || name == "dropout";
}

/// Fields whose presence means the checkpoint cannot be described.
const KnownField kGenericUnsupported[] = {
    {"quantization_config", "quantized checkpoints are not supported"},
};

/// Fields accepted only with the value the modeling code assumes.
struct ExpectedField {
  StringRef name;
  const char *value; // JSON
  StringRef reason;
};
const ExpectedField kGenericExpected[] = {
    {"pruned_heads", "{}", "pruned attention heads are not supported"},
    {"tie_encoder_decoder", "false",
     "tying the encoder to the decoder is not supported"},
};

class Importer {
public:
  Importer(StringRef file, const json::Object &cfg, StringRef modelType,
           HfDiagnosticFn diag, const HfImportOptions &options)
      : file(file), cfg(cfg), modelType(modelType), diag(diag),
        options(options) {}

  bool failed() const { return numErrors != 0; }

  //===--- diagnostics ----------------------------------------------------===//

  void error(const Twine &field, const Twine &problem) {
    ++numErrors;
    diag(HfSeverity::Error, file + ": " + field + ": " + problem);
  }
  /// `field = value is not supported (why)`.
  void unsupported(const Twine &field, const Twine &value, const Twine &why) {
    ++numErrors;
    std::string whyText = why.str();
    diag(HfSeverity::Error, file + ": " + field + " = " + value +
                                " is not supported" +
                                (whyText.empty() ? "" : " (" + whyText + ")"));
  }
  /// A line for the header's "Choices" list.
  void note(const Twine &text) { notes.push_back(text.str()); }
  /// A field nothing reads (`name` may be nested: `rope_scaling.beta_fast`):
  /// an error, or with --allow-unknown a warning; listed in the header.
  void unknownField(const Twine &name) {
    std::string text = name.str();
    unknown.push_back(text);
    if (options.allowUnknown) {
      diag(HfSeverity::Warning,
           file + ": " + text +
               ": unknown field, not read (check that it does not change the "
               "model)");
      return;
    }
    ++numErrors;
    diag(HfSeverity::Error,
         file + ": " + text +
             ": unknown field; tfmc import does not know whether it changes "
             "the forward pass of model_type " +
             modelType +
             ", so it refuses the config (after checking that it does not, "
             "--allow-unknown imports it with a warning)");
  }

  //===--- reading fields -------------------------------------------------===//

  bool has(StringRef key) const {
    const json::Value *v = cfg.get(key);
    return v && v->kind() != json::Value::Null;
  }
  /// The value of `key` (null when absent or null); marks it read.
  const json::Value *raw(StringRef key) {
    read.insert(key);
    const json::Value *v = cfg.get(key);
    return v && v->kind() != json::Value::Null ? v : nullptr;
  }
  std::optional<int64_t> getInt(StringRef key) {
    const json::Value *v = raw(key);
    if (!v)
      return std::nullopt;
    if (auto i = v->getAsInteger())
      return *i;
    error(key, "expected an integer, got " + showJson(*v));
    return std::nullopt;
  }
  int64_t intOr(StringRef key, int64_t dflt) {
    return getInt(key).value_or(dflt);
  }
  /// A size: an integer > 0.
  int64_t sizeOr(StringRef key, int64_t dflt) {
    return checkSize(key, intOr(key, dflt));
  }
  /// Sizes are > 0 and small enough that products of a few stay in int64.
  int64_t checkSize(StringRef key, int64_t v) {
    if (v <= 0) {
      error(key, "expected an integer > 0, got " + std::to_string(v));
      return 1;
    }
    if (v > kMaxSize) {
      error(key, std::to_string(v) + " is too large (at most " +
                     std::to_string(kMaxSize) + ")");
      return 1;
    }
    return v;
  }
  static constexpr int64_t kMaxSize = int64_t(1) << 32;
  /// A size Hugging Face also reads under a second name (attribute_map or a
  /// legacy spelling); both present must agree.
  int64_t sizeOr(StringRef key, StringRef alias, int64_t dflt) {
    std::optional<int64_t> a = getInt(key), b = getInt(alias);
    if (a && b && *a != *b)
      error(alias, std::to_string(*b) + " disagrees with " + key + " = " +
                       std::to_string(*a));
    return checkSize(a ? key : alias, a ? *a : b ? *b : dflt);
  }
  double numOr(StringRef key, StringRef alias, double dflt) {
    StringRef which;
    return getNum(key, alias, which).value_or(dflt);
  }
  /// A number Hugging Face also reads under a second name; both present
  /// must agree. `which` names the field the value came from.
  std::optional<double> getNum(StringRef key, StringRef alias,
                               StringRef &which) {
    std::optional<double> a = getNum(key), b = getNum(alias);
    if (a && b && *a != *b)
      error(alias, formatNumber(*b) + " disagrees with " + key + " = " +
                       formatNumber(*a));
    which = a || !b ? key : alias;
    return a ? a : b;
  }
  std::optional<double> getNum(StringRef key) {
    const json::Value *v = raw(key);
    if (!v)
      return std::nullopt;
    if (auto d = v->getAsNumber())
      return *d;
    error(key, "expected a number, got " + showJson(*v));
    return std::nullopt;
  }
  double numOr(StringRef key, double dflt) {
    return getNum(key).value_or(dflt);
  }
  std::optional<bool> getBool(StringRef key) {
    const json::Value *v = raw(key);
    if (!v)
      return std::nullopt;
    if (auto b = v->getAsBoolean())
      return *b;
    error(key, "expected true or false, got " + showJson(*v));
    return std::nullopt;
  }
  bool boolOr(StringRef key, bool dflt) { return getBool(key).value_or(dflt); }
  std::optional<std::string> getStr(StringRef key) {
    const json::Value *v = raw(key);
    if (!v)
      return std::nullopt;
    if (auto s = v->getAsString())
      return s->str();
    error(key, "expected a string, got " + showJson(*v));
    return std::nullopt;
  }
  std::string strOr(StringRef key, StringRef dflt) {
    return getStr(key).value_or(dflt.str());
  }

  /// Lists `key` (when present and not read) under `reason` in the header.
  void ignore(StringRef key, StringRef reason) {
    if (!cfg.get(key) || read.contains(key) || ignoredSet.contains(key))
      return;
    ignoredSet.insert(key);
    ignored[reason.str()].push_back(key.str());
  }
  void ignore(std::initializer_list<StringRef> keys, StringRef reason) {
    for (StringRef key : keys)
      ignore(key, reason);
  }
  /// A field the modeling code does not read: listed when it holds
  /// `expected` (or null), an error otherwise.
  void expect(StringRef key, const json::Value &expected, StringRef reason,
              StringRef whyNot) {
    if (read.contains(key) || ignoredSet.contains(key))
      return;
    const json::Value *v = cfg.get(key);
    if (!v)
      return;
    if (v->kind() == json::Value::Null || *v == expected) {
      ignore(key, reason);
      return;
    }
    read.insert(key);
    unsupported(key, show(*v), whyNot);
  }

  /// Applies the generic lists, warns about the fields nobody read, and
  /// writes the file.
  std::string finish(const Section &model);

  //===--- shared mappings ------------------------------------------------===//

  /// The .tfm activation of a Hugging Face ACT2FN name; `gated` for the GLU
  /// feed-forwards (gate and up projections).
  std::optional<std::string> activation(StringRef field, StringRef name,
                                        bool gated);
  /// transformers 5's `rope_parameters` (read once): the dict itself, or,
  /// when it holds one dict per layer type, the one they all share (an error
  /// when they differ). Null when absent.
  const json::Object *ropeParameters();
  /// A RoPE setting given at the top level as `key` (or its legacy `alias`)
  /// and/or in `rope_parameters` as `dictKey`: both must agree; `dflt` when
  /// neither is present.
  double ropeNum(StringRef key, StringRef alias, StringRef dictKey,
                 double dflt);
  /// Whether a RoPE setting is present in either form.
  bool hasRope(StringRef key, StringRef dictKey);
  /// `rope(...)` from theta, style, rotary dim (0: head_dim) and the
  /// scaling in `rope_scaling` or `rope_parameters`.
  std::string rope(double theta, StringRef style, int64_t dim, int64_t headDim);
  /// The rotary dimension for a fraction of head_dim, as int(head_dim * f).
  int64_t partialRotary(StringRef field, double fraction, int64_t headDim);
  /// The mask of a decoder whose layers are either full or sliding
  /// (`sliding[i]`), as `causal`, `sliding(window = W)` or
  /// `sliding(window = W, global_every = K)`.
  std::optional<std::string> slidingMask(const std::vector<bool> &sliding,
                                         std::optional<int64_t> window,
                                         StringRef why);
  /// Reads `layer_types` (newer configs) into `sliding`; false when absent.
  bool layerTypes(int64_t layers, std::vector<bool> &sliding);

  StringRef file;
  const json::Object &cfg;
  StringRef modelType;

private:
  HfDiagnosticFn diag;
  HfImportOptions options;
  unsigned numErrors = 0;
  /// `rope_parameters` after ropeParameters(); `ropePath` names it in
  /// messages (`rope_parameters` or `rope_parameters.full_attention`).
  std::optional<const json::Object *> ropeParams;
  std::string ropePath = "rope_parameters";
  /// Keys of `rope_parameters` that were read.
  llvm::StringSet<> ropeRead;
  std::vector<std::string> unknown;
  llvm::StringSet<> read;
  llvm::StringSet<> ignoredSet;
  std::map<std::string, std::vector<std::string>> ignored;
  std::vector<std::string> notes;
};

std::optional<std::string> Importer::activation(StringRef field, StringRef name,
                                                bool gated) {
  // ACT2FN names; gelu_new, gelu_fast, gelu_accurate and gelu_pytorch_tanh
  // are all 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  StringRef plain = llvm::StringSwitch<StringRef>(name)
                        .Cases({"gelu", "gelu_python"}, "gelu")
                        .Cases({"gelu_new", "gelu_fast", "gelu_accurate",
                                "gelu_pytorch_tanh"},
                               "gelu_tanh")
                        .Case("relu", "relu")
                        .Cases({"silu", "swish"}, "silu")
                        .Case("quick_gelu", "quick_gelu")
                        .Default("");
  if (plain.empty()) {
    unsupported(field, name,
                "supported: gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, "
                "relu, silu, swish, quick_gelu");
    return std::nullopt;
  }
  if (!gated)
    return plain.str();
  if (plain == "silu")
    return std::string("swiglu");
  if (plain == "gelu")
    return std::string("geglu");
  if (plain == "gelu_tanh")
    return std::string("geglu_tanh");
  unsupported(field, name,
              "a gated feed-forward takes silu, gelu or the tanh gelu");
  return std::nullopt;
}

int64_t Importer::partialRotary(StringRef field, double fraction,
                                int64_t headDim) {
  // The range first: converting a product past int64_t is undefined
  // (fuzz-import, UBSan: partial_rotary_factor = 4.4e19).
  if (!(fraction > 0 && fraction <= 1)) {
    unsupported(field, formatNumber(fraction),
                "the rotary fraction must be in (0, 1]");
    return headDim;
  }
  int64_t dim = static_cast<int64_t>(headDim * fraction);
  if (dim < 2 || dim % 2 != 0) {
    unsupported(field, formatNumber(fraction),
                "the rotary dimension int(" + std::to_string(headDim) + " * " +
                    formatNumber(fraction) + ") = " + std::to_string(dim) +
                    " must be even and at least 2");
    return headDim;
  }
  return dim;
}

const json::Object *Importer::ropeParameters() {
  if (ropeParams)
    return *ropeParams;
  ropeParams = nullptr;
  const json::Value *v = raw("rope_parameters");
  if (!v)
    return nullptr;
  const json::Object *obj = v->getAsObject();
  if (!obj) {
    error("rope_parameters", "expected an object, got " + showJson(*v));
    return nullptr;
  }
  // One dict per layer type ({"full_attention": {...}, ...}) when every
  // value is a dict; a flat dict holds numbers, strings and lists.
  bool nested = !obj->empty() && llvm::all_of(*obj, [](const auto &kv) {
    return kv.second.getAsObject() != nullptr;
  });
  if (!nested) {
    ropeParams = obj;
    return obj;
  }
  // The language has one rope(...) for all layers: the layer types must
  // share their settings (rope_type "default" when absent, as
  // standardize_rope_params fills it).
  auto normalized = [](const json::Object &o) {
    json::Object copy = o;
    if (!copy.get("rope_type") && !copy.get("type"))
      copy["rope_type"] = "default";
    return json::Value(std::move(copy));
  };
  llvm::SmallVector<std::pair<StringRef, const json::Object *>> entries;
  for (const auto &kv : *obj)
    entries.push_back({kv.first, kv.second.getAsObject()});
  llvm::sort(entries, [](auto &a, auto &b) { return a.first < b.first; });
  json::Value first = normalized(*entries.front().second);
  for (auto &[layerType, params] : entries)
    if (normalized(*params) != first) {
      unsupported("rope_parameters", showJson(*v),
                  "the layer types " + entries.front().first + " and " +
                      layerType +
                      " use different RoPE settings; a .tfm model has one "
                      "rope(...) for all layers");
      return nullptr;
    }
  ropePath = "rope_parameters." + entries.front().first.str();
  ropeParams = entries.front().second;
  return *ropeParams;
}

bool Importer::hasRope(StringRef key, StringRef dictKey) {
  const json::Object *params = ropeParameters();
  const json::Value *inDict = params ? params->get(dictKey) : nullptr;
  return has(key) || (inDict && inDict->kind() != json::Value::Null);
}

double Importer::ropeNum(StringRef key, StringRef alias, StringRef dictKey,
                         double dflt) {
  StringRef topName = key;
  std::optional<double> top =
      alias.empty() ? getNum(key) : getNum(key, alias, topName);
  std::optional<double> inDict;
  if (const json::Object *params = ropeParameters()) {
    ropeRead.insert(dictKey);
    const json::Value *f = params->get(dictKey);
    if (f && f->kind() != json::Value::Null) {
      if (auto d = f->getAsNumber())
        inDict = *d;
      else
        error(ropePath + "." + dictKey,
              "expected a number, got " + showJson(*f));
    }
  }
  if (top && inDict && *top != *inDict)
    error(ropePath + "." + dictKey,
          formatNumber(*inDict) + " disagrees with " + topName + " = " +
              formatNumber(*top) +
              " (transformers 4 and 5 would read different values)");
  return inDict ? *inDict : top ? *top : dflt;
}

std::string Importer::rope(double theta, StringRef style, int64_t dim,
                           int64_t headDim) {
  std::string args =
      "theta = " + formatNumber(theta) + ", style = " + style.str();
  if (dim != 0 && dim != headDim)
    args += ", dim = " + std::to_string(dim);

  // The scaling: transformers 4's rope_scaling (rope_type required) and/or
  // transformers 5's rope_parameters (rope_type "default" when absent).
  // Each setting may be in either; where both hold it, they must agree.
  const json::Object *scaling = nullptr;
  if (const json::Value *v = raw("rope_scaling")) {
    scaling = v->getAsObject();
    if (!scaling) {
      error("rope_scaling", "expected an object, got " + showJson(*v));
      return "rope(" + args + ")";
    }
  }
  const json::Object *params = ropeParameters();
  struct Source {
    const json::Object *obj;
    std::string path;
    llvm::StringSet<> *read;
  };
  llvm::StringSet<> scalingRead;
  llvm::SmallVector<Source, 2> sources;
  if (scaling)
    sources.push_back({scaling, "rope_scaling", &scalingRead});
  if (params)
    sources.push_back({params, ropePath, &ropeRead});

  // "rope_type" was "type" in older configs; Hugging Face reads either.
  std::optional<StringRef> type;
  std::string typeField;
  for (Source &src : sources) {
    src.read->insert("rope_type");
    src.read->insert("type");
    std::optional<StringRef> t = src.obj->getString("rope_type");
    std::string field = src.path + ".rope_type";
    if (auto old = src.obj->getString("type")) {
      if (t && *t != *old) {
        error(src.path,
              "rope_type = " + *t + " and type = " + *old + " disagree");
        return "rope(" + args + ")";
      }
      if (!t)
        field = src.path + ".type";
      t = old;
    }
    if (!t && src.obj == scaling) {
      error("rope_scaling", "has no rope_type");
      return "rope(" + args + ")";
    }
    if (!t)
      continue;
    if (type && *type != *t) {
      error(field, *t + " disagrees with " + typeField + " = " + *type);
      return "rope(" + args + ")";
    }
    type = t;
    typeField = field;
  }
  if (!type) {
    type = "default";
    typeField = ropePath + ".rope_type";
  }

  auto number = [&](StringRef key) -> std::optional<double> {
    std::optional<double> value;
    std::string where;
    for (Source &src : sources) {
      src.read->insert(key);
      const json::Value *f = src.obj->get(key);
      if (!f || f->kind() == json::Value::Null)
        continue;
      std::optional<double> d = f->getAsNumber();
      if (!d) {
        error(src.path + "." + key, "expected a number, got " + showJson(*f));
        return std::nullopt;
      }
      if (value && *value != *d) {
        error(src.path + "." + key, formatNumber(*d) + " disagrees with " +
                                        where + " = " + formatNumber(*value));
        return std::nullopt;
      }
      value = d;
      where = src.path + "." + key.str();
    }
    if (!value)
      error(sources.empty() ? "rope_scaling." + key
                            : sources.front().path + "." + key,
            "missing (rope_type = " + *type + " needs it)");
    return value;
  };
  if (*type == "linear") {
    if (auto factor = number("factor")) {
      args += ", scaling = linear, factor = " + formatNumber(*factor);
      note("context = max_position_embeddings: with linear RoPE scaling by " +
           formatNumber(*factor) +
           " the model may have been tuned for sequences up to that many "
           "times longer; raise context if so.");
    }
  } else if (*type == "llama3") {
    auto factor = number("factor");
    auto low = number("low_freq_factor");
    auto high = number("high_freq_factor");
    auto original = number("original_max_position_embeddings");
    if (factor && low && high && original)
      args += ", scaling = llama3, factor = " + formatNumber(*factor) +
              ", low_freq_factor = " + formatNumber(*low) +
              ", high_freq_factor = " + formatNumber(*high) +
              ", original_context = " + formatNumber(*original);
  } else if (*type != "default") {
    unsupported(typeField, *type, "supported: default, linear, llama3");
    return "rope(" + args + ")";
  }
  // rope_theta and partial_rotary_factor of rope_scaling are not read
  // (transformers 4 reads them at the top level only); rope_parameters'
  // keys are checked in finish(), after every reader has run.
  if (scaling)
    for (const auto &kv : *scaling)
      if (!scalingRead.contains(kv.first))
        unknownField("rope_scaling." + kv.first.str());
  return "rope(" + args + ")";
}

std::optional<std::string>
Importer::slidingMask(const std::vector<bool> &sliding,
                      std::optional<int64_t> window, StringRef why) {
  size_t n = sliding.size();
  size_t numSliding = llvm::count(sliding, true);
  if (numSliding == 0)
    return std::string("causal");
  if (!window || *window <= 0) {
    error("sliding_window", "must be an integer > 0 when layers use sliding "
                            "attention");
    return std::nullopt;
  }
  std::string w = "window = " + std::to_string(*window);
  if (numSliding == n)
    return "sliding(" + w + ")";
  // Full layers exactly where (i + 1) % K == 0.
  for (size_t k = 2; k <= n; ++k) {
    bool matches = true;
    for (size_t i = 0; i < n && matches; ++i)
      matches = sliding[i] == ((i + 1) % k != 0);
    if (matches)
      return "sliding(" + w + ", global_every = " + std::to_string(k) + ")";
  }
  std::string pattern;
  for (bool s : sliding)
    pattern += s ? 'S' : 'F';
  unsupported(why, pattern,
              "full (F) and sliding (S) layers must alternate as full "
              "every K-th layer");
  return std::nullopt;
}

bool Importer::layerTypes(int64_t layers, std::vector<bool> &sliding) {
  const json::Value *v = raw("layer_types");
  if (!v)
    return false;
  const json::Array *arr = v->getAsArray();
  if (!arr || static_cast<int64_t>(arr->size()) != layers) {
    error("layer_types",
          "expected a list of " + std::to_string(layers) + " layer types");
    return false;
  }
  sliding.clear();
  for (const json::Value &t : *arr) {
    auto s = t.getAsString();
    if (s && *s == "full_attention")
      sliding.push_back(false);
    else if (s && *s == "sliding_attention")
      sliding.push_back(true);
    else {
      unsupported("layer_types", show(t),
                  "supported: full_attention, sliding_attention");
      return false;
    }
  }
  return true;
}

std::string Importer::finish(const Section &model) {
  for (const ExpectedField &f : kGenericExpected) {
    auto expected = json::parse(f.value);
    expect(f.name, *expected, "not used by this model", f.reason);
  }
  for (const KnownField &f : kGenericUnsupported)
    if (has(f.name) && !read.contains(f.name)) {
      read.insert(f.name);
      unsupported(f.name, show(*cfg.get(f.name)), f.reason);
    }
  for (const KnownField &f : kGenericIgnored)
    ignore(f.name, f.reason);
  for (const auto &kv : cfg)
    if (isDropoutField(kv.first))
      ignore(kv.first, "dropout (inference runs without it)");

  // rope_parameters: every key must have been read by the type's mapping
  // (a type without RoPE reads none of it).
  if (ropeParams && *ropeParams)
    for (const auto &kv : **ropeParams)
      if (!ropeRead.contains(kv.first))
        unknownField(ropePath + "." + kv.first.str());
  if (has("rope_parameters") && !read.contains("rope_parameters")) {
    read.insert("rope_parameters");
    unsupported("rope_parameters", show(*cfg.get("rope_parameters")),
                "model_type " + modelType + " has no rotary positions");
  }
  std::vector<std::string> unknownTop;
  for (const auto &kv : cfg) {
    StringRef key = kv.first;
    if (read.contains(key) || ignoredSet.contains(key))
      continue;
    unknownTop.push_back(key.str());
  }
  llvm::sort(unknownTop);
  std::vector<std::string> nested = std::move(unknown);
  unknown.clear();
  for (const std::string &key : unknownTop)
    unknownField(key);
  llvm::append_range(unknown, nested);

  std::string text;
  llvm::raw_string_ostream os(text);
  os << "# Written by `tfmc import` from " << file << "\n";
  os << "# (Hugging Face model_type " << modelType << ").\n";
  if (!ignored.empty()) {
    os << "#\n# Fields of the config that do not change the forward pass "
          "(not written):\n";
    for (auto &[reason, keys] : ignored) {
      std::string line = reason + ": ";
      llvm::sort(keys);
      for (size_t i = 0; i < keys.size(); ++i)
        line += (i ? ", " : "") + keys[i];
      printWrapped(line, "#   ", "#       ", os);
    }
  }
  if (!unknown.empty()) {
    os << "#\n";
    std::string line = "Unknown fields (not read; check that they do not "
                       "change the model): ";
    for (size_t i = 0; i < unknown.size(); ++i)
      line += (i ? ", " : "") + unknown[i];
    printWrapped(line, "# ", "#   ", os);
  }
  if (!notes.empty()) {
    os << "#\n# Choices:\n";
    for (const std::string &n : notes)
      printWrapped(n, "#   ", "#     ", os);
  }
  os << "model " << model.name << " {\n";
  size_t width = 0;
  for (const auto &kv : model.keys)
    width = std::max(width, kv.first.size());
  for (const auto &kv : model.keys)
    os << "  " << kv.first << std::string(width - kv.first.size(), ' ') << " = "
       << kv.second << "\n";
  if (!model.sections.empty())
    os << "\n";
  for (const Section &s : model.sections)
    printSection(s, 2, os);
  os << "}\n";
  return text;
}

//===----------------------------------------------------------------------===//
// The model types
//===----------------------------------------------------------------------===//

std::string str(int64_t v) { return std::to_string(v); }
std::string str(bool v) { return v ? "true" : "false"; }

/// Checks that `heads` divides `d`, as every type with d_model / heads
/// head size requires; returns the head size.
int64_t headSize(Importer &I, StringRef dField, int64_t d, StringRef hField,
                 int64_t heads) {
  if (d % heads != 0) {
    I.error(hField, str(heads) + " does not divide " + dField + " = " + str(d));
    return 1;
  }
  return d / heads;
}

void noLmHead(Importer &I) {
  I.ignore("tie_word_embeddings",
           "the description has no LM head (output = hidden)");
}

void importGpt2(Importer &I, Section &m) {
  int64_t d = I.sizeOr("n_embd", "hidden_size", 768);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 12);
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 50257)));
  m.set("context",
        str(I.sizeOr("n_positions", "max_position_embeddings", 1024)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("n_layer", "num_hidden_layers", 12)));
  m.set("output", "lm_head");
  std::optional<int64_t> inner;
  if (I.has("n_inner"))
    inner = I.sizeOr("n_inner", 1);
  else
    (void)I.raw("n_inner");
  auto act = I.activation("activation_function",
                          I.strOr("activation_function", "gelu_new"), false);
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
  I.ignore({"summary_type", "summary_use_proj", "summary_activation",
            "summary_proj_to_labels", "summary_first_dropout"},
           "sequence-summary head of GPT2DoubleHeadsModel (not part of the "
           "description)");

  m.sub("embedding").set("position", "learned");
  m.sub("embedding").set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("mask", "causal");
  attn.set("bias", "true");
  if (!scaled)
    attn.set("scale", "1");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inner.value_or(4 * d)));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importGptNeoX(Importer &I, Section &m) {
  int64_t d = I.sizeOr("hidden_size", 6144);
  int64_t heads = I.sizeOr("num_attention_heads", 64);
  int64_t headDim = headSize(I, "hidden_size", d, "num_attention_heads", heads);
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 50432)));
  m.set("context", str(I.sizeOr("max_position_embeddings", 2048)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("num_hidden_layers", 44)));
  bool parallel = I.boolOr("use_parallel_residual", true);
  if (parallel)
    m.set("residual", "parallel(norms = 2)");
  m.set("output", "lm_head");
  // GPTNeoXConfig keeps rotary_pct and rotary_emb_base and copies them to
  // partial_rotary_factor and rope_theta.
  double pct = I.ropeNum("rotary_pct", "partial_rotary_factor",
                         "partial_rotary_factor", 0.25);
  double theta =
      I.ropeNum("rotary_emb_base", "rope_theta", "rope_theta", 10000);
  int64_t rotary = I.partialRotary("rotary_pct", pct, headDim);
  bool bias = I.boolOr("attention_bias", true);
  int64_t inter = I.sizeOr("intermediate_size", 24576);
  auto act = I.activation("hidden_act", I.strOr("hidden_act", "gelu"), false);
  double eps = I.numOr("layer_norm_eps", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);

  Section &emb = m.sub("embedding");
  emb.set("position", I.rope(theta, "half", rotary, headDim));
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("mask", "causal");
  attn.set("bias", str(bias));
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importGptJ(Importer &I, Section &m) {
  int64_t d = I.sizeOr("n_embd", "hidden_size", 4096);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 16);
  int64_t headDim = headSize(I, "n_embd", d, "n_head", heads);
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 50400)));
  m.set("context",
        str(I.sizeOr("n_positions", "max_position_embeddings", 2048)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("n_layer", "num_hidden_layers", 28)));
  m.set("residual", "parallel(norms = 1)");
  m.set("output", "lm_head(bias = true)");
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
  std::optional<int64_t> inner;
  if (I.has("n_inner"))
    inner = I.sizeOr("n_inner", 1);
  else
    (void)I.raw("n_inner");
  auto act = I.activation("activation_function",
                          I.strOr("activation_function", "gelu_new"), false);
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);
  I.ignore("rotary", "not read by Hugging Face's GPT-J (always rotary)");
  I.ignore("scale_attn_weights",
           "not read by Hugging Face's GPT-J (always 1/sqrt(head size))");
  I.ignore({"summary_type", "summary_use_proj", "summary_activation",
            "summary_proj_to_labels", "summary_first_dropout"},
           "sequence-summary head (not part of the description)");

  Section &emb = m.sub("embedding");
  emb.set("position", I.rope(10000, "interleaved", rotary, headDim));
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("mask", "causal");
  attn.set("bias", "false");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inner.value_or(4 * d)));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

/// LLaMA and the decoders built like it: RMSNorm, RoPE (half), gated
/// feed-forward, grouped-query attention.
void importLlamaFamily(Importer &I, Section &m) {
  StringRef type = I.modelType;
  bool llama = type == "llama", mistral = type == "mistral",
       qwen2 = type == "qwen2", qwen3 = type == "qwen3",
       gemma = type == "gemma", gemma2 = type == "gemma2",
       phi3 = type == "phi3";
  bool anyGemma = gemma || gemma2;

  // The defaults of each configuration class.
  struct Defaults {
    int64_t vocab, hidden, inter, layers, heads, kvHeads, headDim, context;
    double eps;
    bool tie;
  };
  Defaults df =
      llama ? Defaults{32000, 4096, 11008, 32, 32, 0, 0, 2048, 1e-6, false}
      : mistral
          ? Defaults{32000, 4096, 14336, 32, 32, 8, 0, 131072, 1e-6, false}
      : qwen2 ? Defaults{151936, 4096, 22016, 32, 32, 32, 0, 32768, 1e-6, false}
      : qwen3
          ? Defaults{151936, 4096, 22016, 32, 32, 32, 128, 32768, 1e-6, false}
      : gemma ? Defaults{256000, 3072, 24576, 28, 16, 16, 256, 8192, 1e-6, true}
      : gemma2 ? Defaults{256000, 2304, 9216, 26, 8, 4, 256, 8192, 1e-6, true}
               : /*phi3*/ Defaults{32064, 3072, 8192, 32,   32,
                                   0,     0,    4096, 1e-5, false};

  int64_t d = I.sizeOr("hidden_size", df.hidden);
  int64_t heads = I.sizeOr("num_attention_heads", df.heads);
  int64_t kvHeads =
      I.sizeOr("num_key_value_heads", df.kvHeads ? df.kvHeads : heads);
  int64_t headDim;
  if (phi3) {
    headDim = headSize(I, "hidden_size", d, "num_attention_heads", heads);
  } else {
    std::optional<int64_t> hd = I.getInt("head_dim");
    if (!hd && df.headDim)
      hd = df.headDim;
    headDim =
        hd ? *hd : headSize(I, "hidden_size", d, "num_attention_heads", heads);
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
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", df.vocab)));
  m.set("context", str(I.sizeOr("max_position_embeddings", df.context)));
  m.set("d_model", str(d));
  m.set("layers", str(layers));

  // Attention projections.
  bool bias = false, outBias = false;
  if (qwen2) {
    bias = true; // q, k, v with bias, o_proj without
  } else if (!mistral && !phi3) {
    bias = outBias = I.boolOr("attention_bias", false);
  }
  if (!qwen2)
    outBias = bias;
  if (mistral || phi3)
    I.ignore("attention_bias", "not read by this type's modeling code (its "
                               "attention projections have no bias)");

  // Feed-forward.
  bool mlpBias = llama ? I.boolOr("mlp_bias", false) : false;
  std::string actField = "hidden_act";
  std::string actName;
  if (gemma) {
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
  } else if (gemma2) {
    actField = "hidden_activation";
    actName = I.strOr("hidden_activation", "gelu_pytorch_tanh");
    I.ignore("hidden_act",
             "not read by Gemma 2's modeling code (hidden_activation is)");
  } else {
    actName = I.strOr("hidden_act", "silu");
  }
  auto act = I.activation(actField, actName, true);
  int64_t inter = I.sizeOr("intermediate_size", df.inter);

  // Positions.
  double theta = I.ropeNum("rope_theta", "", "rope_theta", 10000);
  int64_t rotary = headDim;
  if (I.hasRope("partial_rotary_factor", "partial_rotary_factor") || phi3)
    rotary = I.partialRotary(
        "partial_rotary_factor",
        I.ropeNum("partial_rotary_factor", "", "partial_rotary_factor", 1.0),
        headDim);
  std::string position = I.rope(theta, "half", rotary, headDim);
  if (phi3)
    I.ignore("original_max_position_embeddings",
             "read only with rope_scaling longrope");

  // The mask: sliding windows.
  std::vector<bool> sliding(layers, false);
  std::optional<int64_t> window;
  std::string maskField = "sliding_window";
  if (mistral || phi3) {
    if (I.has("sliding_window") || (mistral && !I.cfg.get("sliding_window")))
      window = I.intOr("sliding_window", 4096);
    else
      (void)I.raw("sliding_window");
    if (window)
      sliding.assign(layers, true);
  } else if (qwen2 || qwen3) {
    bool use = I.boolOr("use_sliding_window", false);
    if (use) {
      int64_t maxWindowLayers = I.intOr("max_window_layers", 28);
      window = I.intOr("sliding_window", 4096);
      for (int64_t i = 0; i < layers; ++i)
        sliding[i] = i >= maxWindowLayers;
      maskField = "max_window_layers";
    } else {
      I.ignore({"sliding_window", "max_window_layers"},
               "not read with use_sliding_window = false");
    }
  } else if (gemma2) {
    window = I.intOr("sliding_window", 4096);
    for (int64_t i = 0; i < layers; ++i)
      sliding[i] = (i + 1) % 2 != 0;
  }
  if (qwen2 || qwen3 || gemma2) {
    if (I.layerTypes(layers, sliding)) {
      maskField = "layer_types";
      if (!window && llvm::is_contained(sliding, true))
        window = I.getInt("sliding_window");
    }
  }
  std::optional<std::string> mask = I.slidingMask(sliding, window, maskField);

  if (anyGemma && I.boolOr("use_bidirectional_attention", false))
    I.unsupported("use_bidirectional_attention", "true",
                  "a Gemma decoder with bidirectional attention (an embedding "
                  "model) is not supported");
  if (llama)
    I.ignore("max_sequence_length",
             "not read by Hugging Face's LLaMA (a training setting some "
             "fine-tunes keep; the context is max_position_embeddings)");
  bool tie = I.boolOr("tie_word_embeddings", df.tie);
  double eps = I.numOr("rms_norm_eps", df.eps);
  if (llama || mistral || qwen2 || qwen3)
    I.ignore("pretraining_tp",
             "tensor-parallel slicing of the projections (same result)");

  // Gemma 2: scale, softcapping.
  std::optional<double> attnSoftcap, finalSoftcap, queryScalar;
  if (gemma2) {
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

  std::string output = "lm_head";
  if (finalSoftcap && *finalSoftcap != 0)
    output = "lm_head(softcap = " + formatNumber(*finalSoftcap) + ")";
  m.set("output", output);

  Section &emb = m.sub("embedding");
  emb.set("position", position);
  emb.set("tie_output", str(tie));
  if (anyGemma)
    emb.set("scale", "true");
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  if (kvHeads != heads)
    attn.set("kv_heads", str(kvHeads));
  if (d % heads != 0 || headDim != d / heads)
    attn.set("head_dim", str(headDim));
  if (mask)
    attn.set("mask", *mask);
  attn.set("bias", str(bias));
  if (outBias != bias)
    attn.set("out_bias", str(outBias));
  if (qwen3)
    attn.set("qk_norm", "true");
  if (queryScalar && *queryScalar > 0)
    attn.set("scale", formatNumber(1.0 / std::sqrt(*queryScalar)));
  if (attnSoftcap && *attnSoftcap != 0)
    attn.set("softcap", formatNumber(*attnSoftcap));
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", str(mlpBias));
  Section &norm = m.sub("norm");
  norm.set("kind", "rmsnorm");
  norm.set("placement", gemma2 ? "sandwich" : "pre");
  norm.set("eps", formatNumber(eps));
  if (anyGemma)
    norm.set("offset", "1");
}

void importPhi(Importer &I, Section &m) {
  int64_t d = I.sizeOr("hidden_size", 2048);
  int64_t heads = I.sizeOr("num_attention_heads", 32);
  int64_t kvHeads = I.sizeOr("num_key_value_heads", heads);
  int64_t headDim = headSize(I, "hidden_size", d, "num_attention_heads", heads);
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 51200)));
  m.set("context", str(I.sizeOr("max_position_embeddings", 2048)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("num_hidden_layers", 24)));
  m.set("residual", "parallel(norms = 1)");
  m.set("output", "lm_head(bias = true)");
  double theta = I.ropeNum("rope_theta", "", "rope_theta", 10000);
  int64_t rotary = I.partialRotary(
      "partial_rotary_factor",
      I.ropeNum("partial_rotary_factor", "", "partial_rotary_factor", 0.5),
      headDim);
  std::string position = I.rope(theta, "half", rotary, headDim);
  if (I.boolOr("qk_layernorm", false))
    I.unsupported("qk_layernorm", "true",
                  "Phi's Q/K LayerNorms have biases; the language's qk_norm "
                  "has none");
  int64_t inter = I.sizeOr("intermediate_size", 8192);
  auto act =
      I.activation("hidden_act", I.strOr("hidden_act", "gelu_new"), false);
  double eps = I.numOr("layer_norm_eps", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", false);

  Section &emb = m.sub("embedding");
  emb.set("position", position);
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  if (kvHeads != heads)
    attn.set("kv_heads", str(kvHeads));
  attn.set("mask", "causal");
  attn.set("bias", "true");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importFalcon(Importer &I, Section &m) {
  int64_t d = I.sizeOr("hidden_size", "n_embed", 4544);
  int64_t heads = I.sizeOr("num_attention_heads", "n_head", 71);
  int64_t headDim = headSize(I, "hidden_size", d, "num_attention_heads", heads);
  (void)headDim;
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 65024)));
  m.set("context", str(I.sizeOr("max_position_embeddings", 2048)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("num_hidden_layers", "n_layer", 32)));

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
  if (newArch && !parallel) {
    I.unsupported("new_decoder_architecture", "true with parallel_attn = false",
                  "Hugging Face's Falcon cannot run this combination either");
  } else if (newArch) {
    int64_t n = numLn.value_or(2);
    if (n == 2)
      m.set("residual", "parallel(norms = 2)");
    else if (n == 1)
      m.set("residual", "parallel(norms = 1)");
    else
      I.unsupported("num_ln_in_parallel_attn", str(n), "expected 1 or 2");
  } else if (parallel) {
    if (numLn.value_or(1) != 1)
      I.unsupported("num_ln_in_parallel_attn", str(*numLn),
                    "Hugging Face's Falcon reads two norms only with "
                    "new_decoder_architecture");
    m.set("residual", "parallel(norms = 1)");
  } else if (numLn) {
    I.ignore("num_ln_in_parallel_attn", "not read with parallel_attn = false");
  }
  m.set("output", "lm_head");
  bool bias = I.boolOr("bias", false);
  double theta = I.ropeNum("rope_theta", "", "rope_theta", 10000);
  std::string position = I.rope(theta, "half", 0, 0);
  int64_t inter = I.sizeOr("ffn_hidden_size", 4 * d);
  auto act = I.activation("activation", I.strOr("activation", "gelu"), false);
  double eps = I.numOr("layer_norm_epsilon", 1e-5);
  bool tie = I.boolOr("tie_word_embeddings", true);

  Section &emb = m.sub("embedding");
  emb.set("position", position);
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  if (kvHeads != heads)
    attn.set("kv_heads", str(kvHeads));
  attn.set("mask", "causal");
  attn.set("bias", str(bias));
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", str(bias));
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importBloom(Importer &I, Section &m) {
  int64_t d = I.sizeOr("hidden_size", "n_embed", 64);
  int64_t heads = I.sizeOr("n_head", "num_attention_heads", 8);
  headSize(I, "hidden_size", d, "n_head", heads);
  m.set("arch", "decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 250880)));
  m.set("context", "2048");
  I.note("context = 2048: BLOOM's config sets no longest sequence (ALiBi "
         "positions have none); 2048 is the length BLOOM was trained with. "
         "Raise it at will.");
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("n_layer", "num_hidden_layers", 2)));
  m.set("output", "lm_head");
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

  Section &emb = m.sub("embedding");
  emb.set("position", "alibi");
  emb.set("norm", "true");
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("mask", "causal");
  attn.set("bias", "true");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(4 * d));
  ffn.set("activation", "gelu_tanh");
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importBert(Importer &I, Section &m) {
  bool roberta = I.modelType == "roberta";
  int64_t d = I.sizeOr("hidden_size", 768);
  int64_t heads = I.sizeOr("num_attention_heads", 12);
  headSize(I, "hidden_size", d, "num_attention_heads", heads);
  int64_t maxPos = I.sizeOr("max_position_embeddings", 512);
  m.set("arch", "encoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 30522)));
  if (roberta) {
    int64_t pad = I.intOr("pad_token_id", 1);
    if (pad != 1)
      I.unsupported("pad_token_id", str(pad),
                    "the roberta checkpoint layout skips the first 2 rows "
                    "of position_embeddings, as pad_token_id = 1 makes "
                    "RoBERTa number positions from 2");
    if (maxPos <= 2)
      I.error("max_position_embeddings", "expected more than 2");
    m.set("context", str(maxPos - 2));
    I.note("context = max_position_embeddings - 2 = " + str(maxPos - 2) +
           ": RoBERTa numbers positions from pad_token_id + 1 = 2, so the "
           "checkpoint reader skips the first 2 rows of "
           "position_embeddings. Padding tokens inside a sequence (position "
           "1 in RoBERTa) are not modelled: pad at the end and use "
           "attention { padding = true }.");
  } else {
    m.set("context", str(maxPos));
  }
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("num_hidden_layers", 12)));
  m.set("output", "hidden");
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
  auto act = I.activation("hidden_act", I.strOr("hidden_act", "gelu"), false);
  double eps = I.numOr("layer_norm_eps", 1e-12);
  noLmHead(I);

  Section &emb = m.sub("embedding");
  emb.set("position", "learned");
  emb.set("types", str(types));
  emb.set("norm", "true");
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("bias", "true");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "post");
  norm.set("eps", formatNumber(eps));
}

void importVit(Importer &I, Section &m) {
  int64_t d = I.sizeOr("hidden_size", 768);
  int64_t heads = I.sizeOr("num_attention_heads", 12);
  headSize(I, "hidden_size", d, "num_attention_heads", heads);
  int64_t size = I.sizeOr("image_size", 224);
  int64_t patch = I.sizeOr("patch_size", 16);
  int64_t channels = I.sizeOr("num_channels", 3);
  m.set("arch", "encoder");
  m.set("input", "image(size = " + str(size) + ", patch = " + str(patch) +
                     ", channels = " + str(channels) + ")");
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("num_hidden_layers", 12)));
  m.set("output", "hidden");
  I.note("output = hidden: the last hidden state of ViTModel after its final "
         "norm (the pooler and the classifier are not part of the "
         "description)");
  bool qkvBias = I.boolOr("qkv_bias", true);
  int64_t inter = I.sizeOr("intermediate_size", 3072);
  auto act = I.activation("hidden_act", I.strOr("hidden_act", "gelu"), false);
  double eps = I.numOr("layer_norm_eps", 1e-12);
  I.ignore({"encoder_stride"},
           "decoder of ViTForMaskedImageModeling (not part of the "
           "description)");
  I.ignore({"pooler_output_size", "pooler_act"},
           "pooler (not part of the description)");
  noLmHead(I);

  Section &emb = m.sub("embedding");
  emb.set("position", "learned");
  emb.set("cls_token", "true");
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("bias", str(qkvBias));
  attn.set("out_bias", "true");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(inter));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
}

void importT5(Importer &I, Section &m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 512);
  int64_t heads = I.sizeOr("num_heads", "num_attention_heads", 8);
  int64_t layers = I.sizeOr("num_layers", "num_hidden_layers", 6);
  int64_t decoderLayers = I.sizeOr("num_decoder_layers", layers);
  m.set("arch", "encoder_decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 32128)));
  if (I.has("n_positions")) {
    int64_t n = I.sizeOr("n_positions", 512);
    m.set("context", str(n));
    I.note("context = n_positions = " + str(n) +
           ": a legacy field Hugging Face's T5 does not read (relative "
           "positions set no longest sequence); raise it at will.");
  } else {
    m.set("context", "512");
    I.note("context = 512: T5's relative positions set no longest sequence; "
           "512 is the length T5 was trained with. Raise it at will.");
  }
  m.set("d_model", str(d));

  std::string proj = I.strOr("feed_forward_proj", "relu");
  llvm::SmallVector<StringRef> parts;
  StringRef(proj).split(parts, '-');
  bool gated = parts.size() == 2 && parts[0] == "gated";
  std::optional<std::string> act;
  if (parts.size() > 2 || (parts.size() == 2 && !gated)) {
    I.unsupported("feed_forward_proj", proj,
                  "expected ACT or gated-ACT, as gated-gelu");
  } else {
    // T5Config: "gated-gelu" means gelu_new, for backward compatibility.
    std::string actName =
        proj == "gated-gelu" ? "gelu_new" : parts.back().str();
    act = I.activation("feed_forward_proj", actName, gated);
    // Saved configs also hold the derived fields.
    if (auto derived = I.getStr("dense_act_fn"); derived && *derived != actName)
      I.error("dense_act_fn",
              *derived + " disagrees with feed_forward_proj = " + proj);
    if (auto derived = I.getBool("is_gated_act"); derived && *derived != gated)
      I.error("is_gated_act",
              str(*derived) + " disagrees with feed_forward_proj = " + proj);
  }
  // T5ForConditionalGeneration rescales the decoder output by
  // d_model ** -0.5 before a tied head. transformers 4 reads both from
  // tie_word_embeddings (T5 1.0: tied and scaled; 1.1: a head of its own,
  // unscaled); transformers 5 keeps that flag as scale_decoder_outputs and
  // always writes tie_word_embeddings = true (T5Config.__post_init__). The
  // head follows the published checkpoint in both forms: a T5 1.1 folder
  // holds its own lm_head.
  bool tie;
  if (I.has("scale_decoder_outputs")) {
    tie = *I.getBool("scale_decoder_outputs");
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
  } else {
    (void)I.raw("scale_decoder_outputs");
    tie = I.boolOr("tie_word_embeddings", true);
  }
  m.set("output", tie ? "lm_head(scale = " +
                            formatNumber(1.0 / std::sqrt(double(d))) + ")"
                      : std::string("lm_head"));
  int64_t buckets = I.sizeOr("relative_attention_num_buckets", 32);
  int64_t maxDistance = I.sizeOr("relative_attention_max_distance", 128);
  int64_t dkv = I.sizeOr("d_kv", 64);
  int64_t dff = I.sizeOr("d_ff", 2048);
  double eps = I.numOr("layer_norm_epsilon", 1e-6);
  I.ignore("output_past", "legacy generation setting");

  Section &emb = m.sub("embedding");
  emb.set("position", "relative(buckets = " + str(buckets) +
                          ", max_distance = " + str(maxDistance) + ")");
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("head_dim", str(dkv));
  attn.set("bias", "false");
  attn.set("scale", "1");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(dff));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "false");
  Section &norm = m.sub("norm");
  norm.set("kind", "rmsnorm");
  norm.set("placement", "pre");
  norm.set("eps", formatNumber(eps));
  m.sub("encoder").set("layers", str(layers));
  m.sub("decoder").set("layers", str(decoderLayers));
}

void importBart(Importer &I, Section &m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 1024);
  int64_t encLayers = I.sizeOr("encoder_layers", "num_hidden_layers", 12);
  int64_t decLayers = I.sizeOr("decoder_layers", 12);
  int64_t encHeads =
      I.sizeOr("encoder_attention_heads", "num_attention_heads", 16);
  int64_t decHeads = I.sizeOr("decoder_attention_heads", 16);
  int64_t encFfn = I.sizeOr("encoder_ffn_dim", 4096);
  int64_t decFfn = I.sizeOr("decoder_ffn_dim", 4096);
  headSize(I, "d_model", d, "encoder_attention_heads", encHeads);
  headSize(I, "d_model", d, "decoder_attention_heads", decHeads);
  int64_t maxPos = I.sizeOr("max_position_embeddings", 1024);
  m.set("arch", "encoder_decoder");
  m.set("vocab", str(I.sizeOr("vocab_size", 50265)));
  m.set("context", str(maxPos));
  m.set("d_model", str(d));
  m.set("output", "lm_head(bias = true)");
  I.note("positions: BART's learned position tables have 2 extra leading "
         "rows (positions start at 2); the checkpoint reader skips them.");
  I.note("BartForConditionalGeneration adds final_logits_bias, a buffer "
         "stored in the checkpoints, to the logits: it is read as the LM "
         "head's bias.");
  auto act = I.activation("activation_function",
                          I.strOr("activation_function", "gelu"), false);
  bool scale = I.boolOr("scale_embedding", false);
  bool tie = I.boolOr("tie_word_embeddings", true);
  // Fields of fairseq's BART that Hugging Face's BartModel does not read:
  // accepted with the values of its post-norm layout.
  I.expect("add_bias_logits", json::Value(false),
           "fairseq setting, not read by Hugging Face's BART",
           "an LM-head bias is not read by Hugging Face's BART");
  I.expect("add_final_layer_norm", json::Value(false),
           "fairseq setting, not read by Hugging Face's BART",
           "Hugging Face's BART has no final norm (that is mBART)");
  I.expect("normalize_before", json::Value(false),
           "fairseq setting, not read by Hugging Face's BART",
           "Hugging Face's BART is post-norm (pre-norm is mBART)");
  I.expect("normalize_embedding", json::Value(true),
           "fairseq setting, not read by Hugging Face's BART",
           "Hugging Face's BART always normalizes the embeddings");
  I.expect("static_position_embeddings", json::Value(false),
           "fairseq setting, not read by Hugging Face's BART",
           "Hugging Face's BART has learned positions");
  I.expect("extra_pos_embeddings", json::Value(2),
           "fairseq setting, not read by Hugging Face's BART",
           "Hugging Face's BART's position offset is 2");
  I.ignore("force_bos_token_to_be_generated", "generation settings");
  I.ignore("classif_dropout", "dropout (inference runs without it)");

  Section &emb = m.sub("embedding");
  emb.set("position", "learned");
  emb.set("norm", "true");
  if (scale)
    emb.set("scale", "true");
  emb.set("tie_output", str(tie));
  Section &attn = m.sub("attention");
  if (encHeads == decHeads)
    attn.set("heads", str(encHeads));
  attn.set("bias", "true");
  Section &ffn = m.sub("ffn");
  if (encFfn == decFfn)
    ffn.set("hidden", str(encFfn));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "post");
  norm.set("eps", "1e-05");
  for (bool enc : {true, false}) {
    Section &stack = m.sub(enc ? "encoder" : "decoder");
    stack.set("layers", str(enc ? encLayers : decLayers));
    if (encHeads != decHeads)
      stack.sub("attention").set("heads", str(enc ? encHeads : decHeads));
    if (encFfn != decFfn)
      stack.sub("ffn").set("hidden", str(enc ? encFfn : decFfn));
  }
}

void importWhisper(Importer &I, Section &m) {
  int64_t d = I.sizeOr("d_model", "hidden_size", 384);
  int64_t heads = I.sizeOr("encoder_attention_heads", "num_attention_heads", 6);
  headSize(I, "d_model", d, "encoder_attention_heads", heads);
  m.set("arch", "encoder");
  m.set("input", "features");
  m.set("vocab", str(I.sizeOr("vocab_size", 51865)));
  m.set("context", str(I.sizeOr("max_source_positions", 1500)));
  m.set("d_model", str(d));
  m.set("layers", str(I.sizeOr("encoder_layers", "num_hidden_layers", 4)));
  m.set("output", "hidden");
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
  auto act = I.activation("activation_function",
                          I.strOr("activation_function", "gelu"), false);
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

  m.sub("embedding").set("position", "learned");
  Section &attn = m.sub("attention");
  attn.set("heads", str(heads));
  attn.set("bias", "true");
  Section &ffn = m.sub("ffn");
  ffn.set("hidden", str(ffnDim));
  if (act)
    ffn.set("activation", *act);
  ffn.set("bias", "true");
  Section &norm = m.sub("norm");
  norm.set("kind", "layernorm");
  norm.set("placement", "pre");
  norm.set("eps", "1e-05");
}

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
  return kModelTypes;
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
  std::string supported;
  for (StringRef t : kModelTypes)
    supported += (supported.empty() ? "" : ", ") + t.str();
  const json::Value *typeValue = cfg->get("model_type");
  if (!typeValue || typeValue->kind() == json::Value::Null) {
    diag(HfSeverity::Error,
         filename +
             ": model_type: missing; it names the architecture "
             "(supported: " +
             supported + ")");
    return std::nullopt;
  }
  std::optional<StringRef> type = typeValue->getAsString();
  if (!type) {
    diag(HfSeverity::Error, filename + ": model_type: expected a string, got " +
                                showJson(*typeValue));
    return std::nullopt;
  }
  if (!llvm::is_contained(kModelTypes, *type)) {
    diag(HfSeverity::Error, filename + ": model_type = " + *type +
                                " is not supported (supported: " + supported +
                                ")");
    return std::nullopt;
  }

  Importer importer(filename, *cfg, *type, diag, options);
  (void)importer.raw("model_type");
  Section model{modelName(filename, *type), {}, {}};
  model.set("checkpoint", "huggingface(type = " + *type + ")");
  StringRef t = *type;
  if (t == "gpt2")
    importGpt2(importer, model);
  else if (t == "gpt_neox")
    importGptNeoX(importer, model);
  else if (t == "gptj")
    importGptJ(importer, model);
  else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" ||
           t == "gemma" || t == "gemma2" || t == "phi3")
    importLlamaFamily(importer, model);
  else if (t == "phi")
    importPhi(importer, model);
  else if (t == "falcon")
    importFalcon(importer, model);
  else if (t == "bloom")
    importBloom(importer, model);
  else if (t == "bert" || t == "roberta")
    importBert(importer, model);
  else if (t == "vit")
    importVit(importer, model);
  else if (t == "t5")
    importT5(importer, model);
  else if (t == "bart")
    importBart(importer, model);
  else if (t == "whisper")
    importWhisper(importer, model);
  std::string result = importer.finish(model);
  if (importer.failed())
    return std::nullopt;
  return result;
}
