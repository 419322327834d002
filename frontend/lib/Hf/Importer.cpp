//===- Importer.cpp - reading a config.json, writing a .tfm ---------------===//
//
// The Importer's bookkeeping and the mappings every model type shares
// (activations, RoPE in both transformers forms, sliding-window masks), and
// the writing of the .tfm file with its header comment.
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

#include "Importer.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include <cmath>

using namespace mlir::tfm;
using namespace mlir::tfm::hf;
using llvm::StringRef;
using llvm::Twine;
namespace json = llvm::json;

std::string mlir::tfm::hf::formatNumber(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  for (int precision = 1; precision <= 17; ++precision) {
    std::string s = llvm::formatv("{0}", llvm::format("%.*g", precision, v));
    if (std::strtod(s.c_str(), nullptr) == v)
      return s;
  }
  return llvm::formatv("{0}", llvm::format("%.17g", v));
}

std::string mlir::tfm::hf::show(const json::Value &v) {
  if (auto s = v.getAsString())
    return s->str();
  if (auto d = v.getAsNumber(); d && !v.getAsInteger())
    return formatNumber(*d);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  return text;
}

std::string mlir::tfm::hf::showJson(const json::Value &v) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << v;
  return text;
}

void Section::set(StringRef key, const Twine &value) {
  for (auto &kv : keys)
    if (kv.first == key) {
      kv.second = value.str();
      return;
    }
  keys.emplace_back(key.str(), value.str());
}

Section &Section::sub(StringRef sectionName) {
  for (Section &s : sections)
    if (s.name == sectionName)
      return s;
  sections.push_back(Section{sectionName.str(), {}, {}});
  return sections.back();
}

void mlir::tfm::hf::printSection(const Section &s, unsigned indent,
                                 llvm::raw_ostream &os) {
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

void mlir::tfm::hf::printWrapped(StringRef text, StringRef first,
                                 StringRef rest, llvm::raw_ostream &os) {
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

void mlir::tfm::hf::printModel(const Section &model, llvm::raw_ostream &os) {
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
}

namespace {

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

} // namespace

//===----------------------------------------------------------------------===//
// Diagnostics and fields
//===----------------------------------------------------------------------===//

void Importer::error(const Twine &field, const Twine &problem) {
  ++numErrors;
  diag(HfSeverity::Error, file + ": " + field + ": " + problem);
}

void Importer::unsupported(const Twine &field, const Twine &value,
                           const Twine &why) {
  ++numErrors;
  std::string whyText = why.str();
  diag(HfSeverity::Error, file + ": " + field + " = " + value +
                              " is not supported" +
                              (whyText.empty() ? "" : " (" + whyText + ")"));
}

void Importer::unknownField(const Twine &name) {
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

const json::Value *Importer::raw(StringRef key) {
  read.insert(key);
  const json::Value *v = cfg.get(key);
  return v && v->kind() != json::Value::Null ? v : nullptr;
}

/// The value of `key` as `convert` reads it; an error naming `expected`
/// when it is of another kind.
template <typename T, typename Convert>
static std::optional<T> getAs(Importer &I, StringRef key, Convert convert,
                              StringRef expected) {
  const json::Value *v = I.raw(key);
  if (!v)
    return std::nullopt;
  if (auto x = convert(*v))
    return T(*x);
  I.error(key, "expected " + expected + ", got " + showJson(*v));
  return std::nullopt;
}

std::optional<int64_t> Importer::getInt(StringRef key) {
  return getAs<int64_t>(
      *this, key, [](const json::Value &v) { return v.getAsInteger(); },
      "an integer");
}

std::optional<double> Importer::getNum(StringRef key) {
  return getAs<double>(
      *this, key, [](const json::Value &v) { return v.getAsNumber(); },
      "a number");
}

std::optional<bool> Importer::getBool(StringRef key) {
  return getAs<bool>(
      *this, key, [](const json::Value &v) { return v.getAsBoolean(); },
      "true or false");
}

std::optional<std::string> Importer::getStr(StringRef key) {
  return getAs<std::string>(
      *this, key, [](const json::Value &v) { return v.getAsString(); },
      "a string");
}

int64_t Importer::checkSize(StringRef key, int64_t v) {
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

int64_t Importer::sizeOr(StringRef key, StringRef alias, int64_t dflt) {
  std::optional<int64_t> a = getInt(key), b = getInt(alias);
  if (a && b && *a != *b)
    error(alias, std::to_string(*b) + " disagrees with " + key + " = " +
                     std::to_string(*a));
  return checkSize(a ? key : alias, a ? *a : b ? *b : dflt);
}

std::optional<int64_t> Importer::optionalSize(StringRef key) {
  if (!has(key)) {
    (void)raw(key);
    return std::nullopt;
  }
  return sizeOr(key, 1);
}

std::optional<double> Importer::getNum(StringRef key, StringRef alias,
                                       StringRef &which) {
  std::optional<double> a = getNum(key), b = getNum(alias);
  if (a && b && *a != *b)
    error(alias, formatNumber(*b) + " disagrees with " + key + " = " +
                     formatNumber(*a));
  which = a || !b ? key : alias;
  return a ? a : b;
}

void Importer::ignore(StringRef key, StringRef reason) {
  if (!cfg.get(key) || read.contains(key) || ignoredSet.contains(key))
    return;
  ignoredSet.insert(key);
  ignored[reason.str()].push_back(key.str());
}

void Importer::expect(StringRef key, const json::Value &expected,
                      StringRef reason, StringRef whyNot) {
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

int64_t Importer::headSize(StringRef dField, int64_t d, StringRef hField,
                           int64_t heads) {
  if (d % heads != 0) {
    error(hField, str(heads) + " does not divide " + dField + " = " + str(d));
    return 1;
  }
  return d / heads;
}

//===----------------------------------------------------------------------===//
// Shared mappings
//===----------------------------------------------------------------------===//

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
                           int64_t headDim, std::optional<int64_t> yarnContext,
                           RopeScaling *info) {
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
  if (info)
    info->type = type->str();

  // A setting of the scaling from either source (they must agree): a
  // number, or (`boolean`) true or false; `required` makes a missing one an
  // error. `where` names the field it came from.
  std::string where;
  auto setting = [&](StringRef key, bool required,
                     bool boolean) -> std::optional<json::Value> {
    std::optional<json::Value> value;
    where.clear();
    for (Source &src : sources) {
      src.read->insert(key);
      const json::Value *f = src.obj->get(key);
      if (!f || f->kind() == json::Value::Null)
        continue;
      bool ok = boolean ? f->getAsBoolean().has_value()
                        : f->getAsNumber().has_value();
      if (!ok) {
        error(src.path + "." + key,
              std::string(boolean ? "expected true or false"
                                  : "expected a "
                                    "number") +
                  ", got " + showJson(*f));
        return std::nullopt;
      }
      if (value && (boolean ? *value->getAsBoolean() != *f->getAsBoolean()
                            : *value->getAsNumber() != *f->getAsNumber())) {
        error(src.path + "." + key,
              show(*f) + " disagrees with " + where + " = " + show(*value));
        return std::nullopt;
      }
      value = *f;
      where = src.path + "." + key.str();
    }
    if (!value && required)
      error(sources.empty() ? "rope_scaling." + key
                            : sources.front().path + "." + key,
            "missing (rope_type = " + *type + " needs it)");
    return value;
  };
  auto number = [&](StringRef key,
                    bool required = true) -> std::optional<double> {
    std::optional<json::Value> v = setting(key, required, false);
    return v ? v->getAsNumber() : std::nullopt;
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
  } else if (*type == "yarn" && yarnContext) {
    // _compute_yarn_parameters: the correction range from beta_fast and
    // beta_slow (`or 32`, `or 1`: absent, null or 0 take the default) over
    // original_max_position_embeddings (max_position_embeddings when
    // absent), truncated unless truncate = false; the attention factor
    // given, or from mscale and mscale_all_dim when both are set, or from
    // the factor.
    std::optional<double> factor = number("factor");
    double context = double(*yarnContext);
    std::optional<double> original =
        number("original_max_position_embeddings", false);
    std::string originalField = where;
    if (original && !(*original >= 1 && *original == std::floor(*original) &&
                      *original <= double(kMaxSize))) {
      error(originalField, "expected an integer > 0");
      original.reset();
    } else if (factor && original && context / *original != *factor) {
      // transformers 4 replaces the factor by this ratio
      // whenever original_max_position_embeddings is given; transformers 5
      // reads the factor.
      unsupported(originalField, formatNumber(*original),
                  "transformers 4 takes the YaRN factor to be "
                  "max_position_embeddings / original_max_position_embeddings"
                  " = " +
                      formatNumber(context / *original) +
                      " and transformers 5 the factor " +
                      formatNumber(*factor) + ": the versions disagree");
    }
    std::optional<double> fast = number("beta_fast", false);
    std::optional<double> slow = number("beta_slow", false);
    std::optional<json::Value> truncate = setting("truncate", false, true);
    std::optional<double> attention = number("attention_factor", false);
    std::string attentionField = where;
    std::optional<double> mscale = number("mscale", false);
    std::string mscaleField = where;
    std::optional<double> mscaleAll = number("mscale_all_dim", false);
    std::string mscaleAllField = where;
    if (info) {
      info->factor = factor;
      info->mscaleAllDim = mscaleAll;
    }
    if (attention && !(*attention > 0))
      unsupported(attentionField, formatNumber(*attention),
                  "cos and sin would be multiplied by it: it must be > 0");
    for (auto [value, field] :
         {std::pair(mscale, mscaleField), std::pair(mscaleAll, mscaleAllField)})
      if (value && *value < 0)
        unsupported(field, formatNumber(*value),
                    "the language's mscale and mscale_all_dim are >= 0");
    if (factor) {
      args += ", scaling = yarn, factor = " + formatNumber(*factor) +
              ", original_context = " +
              formatNumber(original ? *original : context) + ", beta_fast = " +
              formatNumber(fast && *fast != 0 ? *fast : 32.0) +
              ", beta_slow = " + formatNumber(slow && *slow != 0 ? *slow : 1.0);
      if (mscale && *mscale > 0)
        args += ", mscale = " + formatNumber(*mscale);
      if (mscaleAll && *mscaleAll > 0)
        args += ", mscale_all_dim = " + formatNumber(*mscaleAll);
      if (attention && *attention > 0)
        args += ", attention_factor = " + formatNumber(*attention);
      if (truncate && !*truncate->getAsBoolean())
        args += ", truncate = false";
    }
  } else if (*type != "default") {
    unsupported(typeField, *type,
                yarnContext ? "supported: default, linear, llama3, yarn"
                            : "supported: default, linear, llama3");
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
  printModel(model, os);
  return text;
}
