//===- Importer.h - reading a config.json, writing a .tfm -------*- C++ -*-===//
//
// The bookkeeping of `tfmc import`, shared by the readers of every model
// type (HfImport.cpp): the Importer reads the fields of a config.json and
// marks each one read, ignored or expected, so that every other field is an
// unknown one; the typed Blocks write the .tfm model, with keys checked
// against Keys.def when the importer is compiled.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_HF_IMPORTER_H
#define TFM_FRONTEND_HF_IMPORTER_H

#include "ModelTypes.h"

#include "tfm/Frontend/HfImport.h"
#include "tfm/Frontend/Keys.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"
#include <list>
#include <map>

namespace mlir::tfm::hf {

//===----------------------------------------------------------------------===//
// Writing the model
//===----------------------------------------------------------------------===//

/// Whether Keys.def gives `section` the key `key` (TFM_KEY).
constexpr bool sectionHasKey(SectionId section, KeyId key) {
#define TFM_KEY(Section, Key, Kind, Need, Version)                             \
  if (section == SectionId::Section && key == KeyId::Key)                      \
    return true;
#include "tfm/Frontend/Keys.def"
  return false;
}

/// Whether Keys.def lets `child` be opened inside `parent` (TFM_NESTED).
constexpr bool sectionNests(SectionId parent, SectionId child) {
#define TFM_NESTED(Parent, Child)                                              \
  if (parent == SectionId::Parent && child == SectionId::Child)                \
    return true;
#include "tfm/Frontend/Keys.def"
  return false;
}

/// A section of the written model: keys in the order they were first set,
/// then nested sections in the order they were opened.
struct Section {
  std::string name;
  std::vector<std::pair<std::string, std::string>> keys;
  std::list<Section> sections;

  /// Sets `key`, keeping the place of an earlier value.
  void set(llvm::StringRef key, const llvm::Twine &value);
  /// The nested section `name`, opened at the end when it is new.
  Section &sub(llvm::StringRef name);
};

/// Section `S` of the written model. Only the keys Keys.def gives `S` can be
/// set and only the sections it nests in `S` opened: a misspelt or misplaced
/// key does not compile.
template <SectionId S>
class Block {
public:
  explicit Block(Section &section) : section(&section) {}

  template <KeyId K>
  Block &set(const llvm::Twine &value) {
    static_assert(sectionHasKey(S, K), "Keys.def: no such key in this section");
    section->set(stringifyKey(K), value);
    return *this;
  }
  template <SectionId C>
  Block<C> sub() {
    static_assert(sectionNests(S, C), "Keys.def: no such section in this one");
    return Block<C>(section->sub(stringifySection(C)));
  }

private:
  Section *section;
};

using ModelBlock = Block<SectionId::Model>;

/// Writes `s` at `indent` columns: on one line when it has no sections and
/// fits in 90 columns, else a key a line.
void printSection(const Section &s, unsigned indent, llvm::raw_ostream &os);
/// Writes `model` as `model NAME { ... }`, its keys aligned.
void printModel(const Section &model, llvm::raw_ostream &os);
/// Writes `text` as comment lines of at most 90 columns, the first starting
/// with `first` and the rest with `rest`.
void printWrapped(llvm::StringRef text, llvm::StringRef first,
                  llvm::StringRef rest, llvm::raw_ostream &os);

/// A number as the .tfm lexer reads it back exactly: integers without a
/// point, others in the shortest form that round-trips.
std::string formatNumber(double v);
/// A JSON value as messages show it: strings without quotes.
std::string show(const llvm::json::Value &v);
/// A JSON value as JSON, for messages about its type.
std::string showJson(const llvm::json::Value &v);
inline std::string str(int64_t v) { return std::to_string(v); }
inline std::string str(bool v) { return v ? "true" : "false"; }

//===----------------------------------------------------------------------===//
// Reading the config
//===----------------------------------------------------------------------===//

class Importer {
public:
  Importer(llvm::StringRef file, const llvm::json::Object &cfg,
           const ModelTypeInfo &type, HfDiagnosticFn diag,
           const HfImportOptions &options)
      : file(file), cfg(cfg), type(type), modelType(type.name), diag(diag),
        options(options) {}

  bool failed() const { return numErrors != 0; }

  //===--- diagnostics ----------------------------------------------------===//

  void error(const llvm::Twine &field, const llvm::Twine &problem);
  /// `field = value is not supported (why)`.
  void unsupported(const llvm::Twine &field, const llvm::Twine &value,
                   const llvm::Twine &why);
  /// A line for the header's "Choices" list.
  void note(const llvm::Twine &text) { notes.push_back(text.str()); }
  /// A field nothing reads (`name` may be nested: `rope_scaling.beta_fast`):
  /// an error, or with --allow-unknown a warning; listed in the header.
  void unknownField(const llvm::Twine &name);

  //===--- reading fields -------------------------------------------------===//

  bool has(llvm::StringRef key) const {
    const llvm::json::Value *v = cfg.get(key);
    return v && v->kind() != llvm::json::Value::Null;
  }
  /// The value of `key` (null when absent or null); marks it read.
  const llvm::json::Value *raw(llvm::StringRef key);
  std::optional<int64_t> getInt(llvm::StringRef key);
  int64_t intOr(llvm::StringRef key, int64_t dflt) {
    return getInt(key).value_or(dflt);
  }
  /// A size: an integer > 0.
  int64_t sizeOr(llvm::StringRef key, int64_t dflt) {
    return checkSize(key, intOr(key, dflt));
  }
  /// A size Hugging Face also reads under a second name (attribute_map or a
  /// legacy spelling); both present must agree.
  int64_t sizeOr(llvm::StringRef key, llvm::StringRef alias, int64_t dflt);
  /// A size that is absent or null when unset (GPT-2's n_inner).
  std::optional<int64_t> optionalSize(llvm::StringRef key);
  /// Sizes are > 0 and small enough that products of a few stay in int64.
  int64_t checkSize(llvm::StringRef key, int64_t v);
  static constexpr int64_t kMaxSize = int64_t(1) << 32;
  std::optional<double> getNum(llvm::StringRef key);
  double numOr(llvm::StringRef key, double dflt) {
    return getNum(key).value_or(dflt);
  }
  /// A number Hugging Face also reads under a second name; both present
  /// must agree. `which` names the field the value came from.
  std::optional<double> getNum(llvm::StringRef key, llvm::StringRef alias,
                               llvm::StringRef &which);
  double numOr(llvm::StringRef key, llvm::StringRef alias, double dflt) {
    llvm::StringRef which;
    return getNum(key, alias, which).value_or(dflt);
  }
  std::optional<bool> getBool(llvm::StringRef key);
  bool boolOr(llvm::StringRef key, bool dflt) {
    return getBool(key).value_or(dflt);
  }
  std::optional<std::string> getStr(llvm::StringRef key);
  std::string strOr(llvm::StringRef key, llvm::StringRef dflt) {
    return getStr(key).value_or(dflt.str());
  }

  /// Lists `key` (when present and not read) under `reason` in the header.
  void ignore(llvm::StringRef key, llvm::StringRef reason);
  void ignore(std::initializer_list<llvm::StringRef> keys,
              llvm::StringRef reason) {
    for (llvm::StringRef key : keys)
      ignore(key, reason);
  }
  /// A field the modeling code does not read: listed when it holds
  /// `expected` (or null), an error otherwise.
  void expect(llvm::StringRef key, const llvm::json::Value &expected,
              llvm::StringRef reason, llvm::StringRef whyNot);

  /// Applies the generic lists, reports the fields nobody read, and writes
  /// the file.
  std::string finish(const Section &model);

  //===--- shared mappings ------------------------------------------------===//

  /// The .tfm activation of a Hugging Face ACT2FN name; `gated` for the GLU
  /// feed-forwards (gate and up projections).
  std::optional<std::string> activation(llvm::StringRef field,
                                        llvm::StringRef name, bool gated);
  /// The activation named by `field` (`dflt` when absent), not gated.
  std::optional<std::string> activationOr(llvm::StringRef field,
                                          llvm::StringRef dflt) {
    return activation(field, strOr(field, dflt), false);
  }
  /// transformers 5's `rope_parameters` (read once): the dict itself, or,
  /// when it holds one dict per layer type, the one they all share (an error
  /// when they differ). Null when absent.
  const llvm::json::Object *ropeParameters();
  /// A RoPE setting given at the top level as `key` (or its legacy `alias`)
  /// and/or in `rope_parameters` as `dictKey`: both must agree; `dflt` when
  /// neither is present.
  double ropeNum(llvm::StringRef key, llvm::StringRef alias,
                 llvm::StringRef dictKey, double dflt);
  /// ropeNum of a setting that has the same name in both forms.
  double ropeNum(llvm::StringRef key, double dflt) {
    return ropeNum(key, "", key, dflt);
  }
  /// Whether a RoPE setting is present in either form.
  bool hasRope(llvm::StringRef key, llvm::StringRef dictKey);
  /// The scaling `rope(...)` read: its rope_type and, where given, the
  /// factor and mscale_all_dim (DeepSeek's attention scale reads them).
  struct RopeScaling {
    std::string type = "default";
    std::optional<double> factor, mscaleAllDim;
  };
  /// `rope(...)` from theta, style, rotary dim (0: head_dim) and the
  /// scaling in `rope_scaling` or `rope_parameters`. With `yarnContext`
  /// (the type's max_position_embeddings) rope_type yarn is read too, as
  /// the types whose modeling code tfm's YaRN is checked against (gpt-oss,
  /// DeepSeek); for the others it is an error. `scaling`, when given,
  /// receives what was read.
  std::string rope(double theta, llvm::StringRef style, int64_t dim,
                   int64_t headDim,
                   std::optional<int64_t> yarnContext = std::nullopt,
                   RopeScaling *scaling = nullptr);
  /// The rotary dimension for a fraction of head_dim, as int(head_dim * f).
  int64_t partialRotary(llvm::StringRef field, double fraction,
                        int64_t headDim);
  /// The mask of a decoder whose layers are either full or sliding
  /// (`sliding[i]`), as `causal`, `sliding(window = W)` or
  /// `sliding(window = W, global_every = K)`.
  std::optional<std::string> slidingMask(const std::vector<bool> &sliding,
                                         std::optional<int64_t> window,
                                         llvm::StringRef why);
  /// Reads `layer_types` (newer configs) into `sliding`; false when absent.
  bool layerTypes(int64_t layers, std::vector<bool> &sliding);
  /// Checks that `heads` divides `d`, as every type with d_model / heads
  /// head size requires; returns the head size.
  int64_t headSize(llvm::StringRef dField, int64_t d, llvm::StringRef hField,
                   int64_t heads);

  llvm::StringRef file;
  const llvm::json::Object &cfg;
  const ModelTypeInfo &type;
  llvm::StringRef modelType;

private:
  HfDiagnosticFn diag;
  HfImportOptions options;
  unsigned numErrors = 0;
  /// `rope_parameters` after ropeParameters(); `ropePath` names it in
  /// messages (`rope_parameters` or `rope_parameters.full_attention`).
  std::optional<const llvm::json::Object *> ropeParams;
  std::string ropePath = "rope_parameters";
  /// Keys of `rope_parameters` that were read.
  llvm::StringSet<> ropeRead;
  std::vector<std::string> unknown;
  llvm::StringSet<> read;
  llvm::StringSet<> ignoredSet;
  std::map<std::string, std::vector<std::string>> ignored;
  std::vector<std::string> notes;
};

} // namespace mlir::tfm::hf

#endif // TFM_FRONTEND_HF_IMPORTER_H
