//===- Sema.cpp - .tfm semantic analysis ----------------------------------===//
//
// Defaults and the rules of the language (shared/DSL.md). Each section of the
// source becomes a scope of bindings (Eval.h). A stack of an encoder_decoder
// model sees, for each section kind, the shared section's bindings overridden
// by its own; the decoder's cross-attention starts from its attention
// bindings. Which sections and keys exist, and the kind of each value, come
// from Keys.def.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Sema.h"
#include "tfm/Frontend/Eval.h"
#include "tfm/Frontend/HfCheckpoint.h"
#include "tfm/Frontend/Keys.h"
#include "llvm/Support/ErrorHandling.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using llvm::SMLoc;
using llvm::StringRef;
using llvm::Twine;

/// The enum value of a word that Keys.def accepts for a key (the parser
/// checked the word; KeysTest checks that every word of the key is one of
/// the enum's spellings): an internal error, never undefined behaviour, if
/// the two lists ever disagree.
template <typename E>
static E enumOf(std::optional<E> value, StringRef word) {
  if (!value)
    llvm::report_fatal_error(llvm::Twine("internal error: the word '") + word +
                             "' of Keys.def is not a value of its enum");
  return *value;
}

namespace {

/// The section a key belongs to, for hints on misplaced keys: a section
/// name, "model" for the top level, or "" for no section.
StringRef homeOfKey(StringRef key) {
  std::optional<SectionId> home = getHomeSection(key);
  return home ? stringifySection(*home) : StringRef();
}

/// The resolved value of a multiple-choice key.
struct ChoiceValue {
  StringRef name;
  llvm::StringMap<Num> nums;
  llvm::StringMap<StringRef> words;
};

enum class Got { Unset, Ok, Bad };

class Sema {
public:
  Sema(DiagEmitter &diags) : diags(diags), ev(diags) {}
  std::optional<ModelSpec> analyze(const ModelDecl &decl);

private:
  // Scope construction.
  void collect(const Section &section, Scope &scope);

  // Typed accessors for the keys of a scope, checked against Keys.def.
  Got getInt(Scope &s, KeyId key, int64_t &out);
  Got getNumber(Scope &s, KeyId key, double &out);
  Got getBool(Scope &s, KeyId key, bool &out);
  Got getChoice(Scope &s, KeyId key, ChoiceValue &out);
  bool checkPositive(Scope &s, KeyId key, const Num &v, int64_t &out);

  /// The file, line and column of `loc`, for the spec.
  SourceLoc sourceLoc(SMLoc loc) const;

  // Sections.
  void resolveEmbedding(Scope &s, EmbeddingSpec &out);
  /// The latent attention keys of self-attention (kv_rank and the keys
  /// that need it); `kv` and `bias` say whether kv_heads and bias were set.
  void resolveLatent(Scope &s, Got kv, Got bias, AttentionSpec &out);
  void resolveAttention(Scope &s, int64_t dModel, bool decoder, bool cross,
                        AttentionSpec &out);
  void resolveFfn(Scope &s, int64_t dModel, FfnSpec &out);
  void resolveNorm(Scope &s, NormSpec &out);
  /// Defaults of one stack that depend on keys of other sections, and the
  /// rules between them.
  void resolveRules(const ModelSpec &spec, StackSpec &stack, Scope &emb,
                    Scope &norm, bool imageInput, bool featuresInput,
                    bool encDec, bool decoder);

  DiagEmitter &diags;
  Evaluator ev;
};

} // namespace

//===----------------------------------------------------------------------===//
// Scope construction
//===----------------------------------------------------------------------===//

void Sema::collect(const Section &section, Scope &scope) {
  const SectionSchema &schema = getSectionSchema(scope.section);
  for (const Stmt &stmt : section.stmts) {
    if (!stmt.isSection()) {
      if (!findKeySchema(schema.id, stmt.name)) {
        if (llvm::is_contained(schema.childNames, stmt.name)) {
          diags.error(stmt.loc, "'" + stmt.name + "' is a section: write " +
                                    stmt.name + " { ... }");
          continue;
        }
        std::string msg =
            ("unknown key '" + stmt.name + "' in '" + scope.name + "'").str();
        StringRef near = closestMatch(stmt.name, schema.keyNames);
        StringRef home = homeOfKey(stmt.name);
        StringRef hf = getHuggingFaceHint(stmt.name);
        if (!hf.empty())
          msg += ("; Hugging Face's '" + stmt.name + "' is written '" + hf +
                  "' in tfm")
                     .str();
        else if (!near.empty())
          msg += ("; did you mean '" + near + "'?").str();
        else if (!home.empty() && home != schema.spelling)
          msg += ("; '" + stmt.name + "' belongs in " +
                  (home == "model" ? std::string("the model's top level")
                                   : (home + " { ... }").str()))
                     .str();
        diags.error(stmt.loc, msg);
        continue;
      }
      if (Binding *prev = scope.local(stmt.name)) {
        auto diag = diags.error(stmt.loc, "duplicate key '" + stmt.name +
                                              "' in '" + scope.name + "'");
        if (diag)
          diag.attachNote(diags.loc(prev->stmt->loc)) << "first set here";
        continue;
      }
      Binding b;
      b.stmt = &stmt;
      b.scope = &scope;
      scope.keys.insert({stmt.name, b});
      continue;
    }
    if (!llvm::is_contained(schema.childNames, stmt.name)) {
      if (findKeySchema(schema.id, stmt.name)) {
        diags.error(stmt.loc, "'" + stmt.name + "' is a key: write " +
                                  stmt.name + " = value");
        continue;
      }
      std::string msg =
          ("unknown section '" + stmt.name + "' in '" + scope.name + "'").str();
      StringRef near = closestMatch(stmt.name, schema.childNames);
      std::optional<SectionId> known = symbolizeSection(stmt.name);
      if (!near.empty())
        msg += ("; did you mean '" + near + "'?").str();
      else if (known && isNestedIn(*known, SectionId::Model))
        msg +=
            ("; '" + stmt.name + "' is not valid inside '" + scope.name + "'")
                .str();
      diags.error(stmt.loc, msg);
      continue;
    }
    auto it = scope.sections.find(stmt.name);
    if (it != scope.sections.end()) {
      auto diag = diags.error(stmt.loc, "duplicate section '" + stmt.name +
                                            "' in '" + scope.name + "'");
      if (diag)
        diag.attachNote(diags.loc(it->second->loc)) << "first opened here";
      continue;
    }
    scope.sections.insert({stmt.name, stmt.section.get()});
  }
}

//===----------------------------------------------------------------------===//
// Typed keys
//===----------------------------------------------------------------------===//

/// Sizes above this are rejected: no real model comes near, and generated
/// code indexes dimensions with 32-bit-safe arithmetic.
constexpr int64_t kMaxSize = 2147483647;
/// More layers than this would only make the IR huge, never a real model.
constexpr int64_t kMaxLayers = 1024;

/// The schema of `id` in the section of `s`, which must accept it with a
/// value of `kind`.
static const KeySchema &keySchema(const Scope &s, KeyId id, ValueKind kind) {
  const KeySchema *k = findKeySchema(s.section, id);
  assert(k && "Sema reads a key that Keys.def does not give the section");
  assert(k->kind == kind && "Sema reads a key as another kind than Keys.def");
  (void)kind;
  return *k;
}

bool Sema::checkPositive(Scope &s, KeyId id, const Num &v, int64_t &out) {
  StringRef key = stringifyKey(id);
  if (!v.isInt) {
    diags.error(s.valueLoc(id),
                "'" + key + "' must be an integer, got " + formatNum(v));
    return false;
  }
  if (v.i <= 0) {
    diags.error(s.valueLoc(id),
                "'" + key + "' must be > 0, got " + formatNum(v));
    return false;
  }
  int64_t limit = id == KeyId::Layers ? kMaxLayers : kMaxSize;
  if (v.i > limit) {
    diags.error(s.valueLoc(id), llvm::formatv("'{0}' ({1}) is larger than "
                                              "the limit of {2}",
                                              key, v.i, limit)
                                    .str());
    return false;
  }
  out = v.i;
  return true;
}

Got Sema::getInt(Scope &s, KeyId id, int64_t &out) {
  const KeySchema *schema = findKeySchema(s.section, id);
  assert(schema &&
         (schema->kind == ValueKind::Int || schema->kind == ValueKind::Count) &&
         "Sema reads a key as another kind than Keys.def");
  StringRef key = schema->spelling;
  Binding *b = s.local(key);
  if (!b)
    return Got::Unset;
  const Expr &e = *b->stmt->value;
  if (!Evaluator::isNumeric(e, s)) {
    diags.error(e.loc,
                "'" + key + "' must be an integer, got '" + e.spelling + "'");
    return Got::Bad;
  }
  std::optional<Num> v = ev.evalBinding(*b, e.loc);
  if (!v)
    return Got::Bad;
  if (schema->kind == ValueKind::Count && v->isInt && v->i == 0) {
    out = 0;
    return Got::Ok;
  }
  return checkPositive(s, id, *v, out) ? Got::Ok : Got::Bad;
}

Got Sema::getNumber(Scope &s, KeyId id, double &out) {
  const KeySchema *schema = findKeySchema(s.section, id);
  assert(schema &&
         (schema->kind == ValueKind::Float ||
          schema->kind == ValueKind::NonNegative) &&
         "Sema reads a key as another kind than Keys.def");
  StringRef key = schema->spelling;
  Binding *b = s.local(key);
  if (!b)
    return Got::Unset;
  const Expr &e = *b->stmt->value;
  if (!Evaluator::isNumeric(e, s)) {
    diags.error(e.loc,
                "'" + key + "' must be a number, got '" + e.spelling + "'");
    return Got::Bad;
  }
  std::optional<Num> v = ev.evalBinding(*b, e.loc);
  if (!v)
    return Got::Bad;
  if (schema->kind == ValueKind::NonNegative && !(v->asDouble() >= 0.0)) {
    diags.error(e.loc, "'" + key + "' must be >= 0, got " + formatNum(*v));
    return Got::Bad;
  }
  out = v->asDouble();
  return Got::Ok;
}

Got Sema::getBool(Scope &s, KeyId id, bool &out) {
  StringRef key = keySchema(s, id, ValueKind::Bool).spelling;
  Binding *b = s.local(key);
  if (!b)
    return Got::Unset;
  const Expr &e = *b->stmt->value;
  if (e.kind == Expr::Kind::Name &&
      (e.spelling == "true" || e.spelling == "false")) {
    out = e.spelling == "true";
    return Got::Ok;
  }
  std::string got;
  llvm::raw_string_ostream os(got);
  printExpr(e, os);
  std::string msg =
      ("'" + key + "' must be true or false, got '" + got + "'").str();
  if (e.kind == Expr::Kind::Name) {
    StringRef near = closestMatch(e.spelling, {"true", "false"});
    if (!near.empty())
      msg += ("; did you mean '" + near + "'?").str();
  }
  diags.error(e.loc, msg);
  return Got::Bad;
}

static std::string listChoice(const ValueSchema &c) {
  std::string out = c.spelling.str();
  if (!c.args.empty()) {
    out += "(";
    for (auto [j, a] : llvm::enumerate(c.args))
      out += (j ? ", " : "") + a.spelling.str() + " = ...";
    out += ")";
  }
  return out;
}

static std::string listChoices(llvm::ArrayRef<ValueSchema> choices) {
  std::string out;
  for (auto [i, c] : llvm::enumerate(choices)) {
    if (i)
      out += i + 1 == choices.size() ? " or " : ", ";
    out += listChoice(c);
  }
  return out;
}

Got Sema::getChoice(Scope &s, KeyId id, ChoiceValue &out) {
  const KeySchema &schema = keySchema(s, id, ValueKind::Enum);
  StringRef key = schema.spelling;
  llvm::ArrayRef<ValueSchema> choices = schema.values;
  Binding *b = s.local(key);
  if (!b)
    return Got::Unset;
  const Expr &e = *b->stmt->value;
  if (e.kind != Expr::Kind::Name && e.kind != Expr::Kind::Call) {
    diags.error(e.loc, "'" + key + "' must be one of " + listChoices(choices));
    return Got::Bad;
  }
  const ValueSchema *choice = findValueSchema(schema, e.spelling);
  if (!choice) {
    std::vector<StringRef> names;
    for (const ValueSchema &c : choices)
      names.push_back(c.spelling);
    std::string msg = ("unknown " + key + " '" + e.spelling + "'").str();
    StringRef near = closestMatch(e.spelling, names);
    StringRef hf = getHuggingFaceWord(id, e.spelling);
    if (!hf.empty())
      msg += ("; Hugging Face's '" + e.spelling + "' is '" + hf + "' in tfm")
                 .str();
    else if (!near.empty())
      msg += ("; did you mean '" + near + "'?").str();
    else
      msg += "; expected " + listChoices(choices);
    diags.error(e.loc, msg);
    return Got::Bad;
  }
  StringRef name = choice->spelling;
  out.name = name;
  if (e.kind == Expr::Kind::Call && choice->args.empty() && !e.args.empty()) {
    diags.error(e.loc, "'" + name + "' takes no arguments");
    return Got::Bad;
  }
  bool ok = true;
  llvm::StringMap<SMLoc> given;
  for (const CallArg &arg : e.args) {
    const ArgSchema *spec = nullptr;
    for (const ArgSchema &a : choice->args)
      if (a.spelling == arg.name)
        spec = &a;
    if (!spec) {
      std::vector<StringRef> names;
      for (const ArgSchema &a : choice->args)
        names.push_back(a.spelling);
      std::string msg =
          ("unknown argument '" + arg.name + "' of '" + name + "'").str();
      StringRef near = closestMatch(arg.name, names);
      if (!near.empty())
        msg += ("; did you mean '" + near + "'?").str();
      else
        msg += "; expected " + listChoice(*choice);
      diags.error(arg.loc, msg);
      ok = false;
      continue;
    }
    if (!given.insert({arg.name, arg.loc}).second) {
      auto diag = diags.error(arg.loc, "duplicate argument '" + arg.name +
                                           "' of '" + name + "'");
      if (diag)
        diag.attachNote(diags.loc(given[arg.name])) << "first given here";
      ok = false;
      continue;
    }
    const Expr &v = *arg.value;
    if (spec->kind == ValueKind::Enum) {
      if (v.kind != Expr::Kind::Name ||
          !llvm::is_contained(spec->words, v.spelling)) {
        std::string msg =
            ("'" + arg.name + "' of '" + name + "' must be ").str();
        for (auto [i, w] : llvm::enumerate(spec->words))
          msg += (i ? " or " : "") + w.str();
        if (v.kind == Expr::Kind::Name) {
          StringRef near = closestMatch(v.spelling, spec->words);
          if (!near.empty())
            msg += ("; did you mean '" + near + "'?").str();
        }
        diags.error(v.loc, msg);
        ok = false;
        continue;
      }
      out.words[arg.name] = v.spelling;
      continue;
    }
    std::optional<Num> n = ev.eval(v, s);
    if (!n) {
      ok = false;
      continue;
    }
    if (spec->kind == ValueKind::Int || spec->kind == ValueKind::Count) {
      if (!n->isInt) {
        diags.error(v.loc, "'" + arg.name + "' of '" + name +
                               "' must be an integer, got " + formatNum(*n));
        ok = false;
        continue;
      }
      bool count = spec->kind == ValueKind::Count;
      if (count ? n->i < 0 : n->i <= 0) {
        diags.error(v.loc, "'" + arg.name + "' of '" + name + "' must be " +
                               (count ? ">= 0" : "> 0") + ", got " +
                               formatNum(*n));
        ok = false;
        continue;
      }
      if (n->i > kMaxSize) {
        diags.error(v.loc, llvm::formatv("'{0}' of '{1}' ({2}) is larger "
                                         "than the limit of {3}",
                                         arg.name, name, n->i, kMaxSize)
                               .str());
        ok = false;
        continue;
      }
    } else if (spec->kind == ValueKind::NonNegative ? !(n->asDouble() >= 0.0)
                                                    : !(n->asDouble() > 0.0)) {
      diags.error(v.loc,
                  "'" + arg.name + "' of '" + name + "' must be " +
                      (spec->kind == ValueKind::NonNegative ? ">= 0" : "> 0") +
                      ", got " + formatNum(*n));
      ok = false;
      continue;
    }
    out.nums[arg.name] = *n;
  }
  for (const ArgSchema &a : choice->args) {
    if (given.count(a.spelling))
      continue;
    if (a.need == KeyNeed::Required) {
      diags.error(e.loc, "'" + name + "' needs the argument '" + a.spelling +
                             "': write " + listChoice(*choice));
      ok = false;
    } else if (a.kind == ValueKind::Enum) {
      out.words[a.spelling] = a.words.front();
    } else {
      bool isInt = a.kind == ValueKind::Int || a.kind == ValueKind::Count;
      out.nums[a.spelling] =
          Num{isInt, static_cast<int64_t>(a.defaultValue), a.defaultValue};
    }
  }
  return ok ? Got::Ok : Got::Bad;
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

SourceLoc Sema::sourceLoc(SMLoc loc) const {
  auto fileLoc = dyn_cast<FileLineColLoc>(diags.loc(loc));
  if (!fileLoc)
    return {};
  return {fileLoc.getFilename().str(), fileLoc.getLine(), fileLoc.getColumn()};
}

void Sema::resolveEmbedding(Scope &s, EmbeddingSpec &out) {
  out.loc = sourceLoc(s.loc);
  ChoiceValue pos;
  if (getChoice(s, KeyId::Position, pos) == Got::Ok) {
    if (pos.name == "learned")
      out.position = PositionEncoding::learned;
    else if (pos.name == "sinusoidal")
      out.position = PositionEncoding::sinusoidal;
    else if (pos.name == "none")
      out.position = PositionEncoding::none;
    else if (pos.name == "alibi")
      out.position = PositionEncoding::alibi;
    else if (pos.name == "relative") {
      out.position = PositionEncoding::relative;
      out.relativeBuckets = pos.nums["buckets"].i;
      out.relativeMaxDistance = pos.nums["max_distance"].i;
    } else {
      out.position = PositionEncoding::rope;
      out.ropeTheta = pos.nums["theta"].asDouble();
      out.ropeStyle = pos.words["style"] == "interleaved"
                          ? RopeStyle::interleaved
                          : RopeStyle::half;
      // 0: resolved to head_dim / context once those are known.
      out.ropeDim = pos.nums["dim"].i;
      out.ropeOriginalContext = pos.nums["original_context"].i;
      StringRef scaling = pos.words["scaling"];
      out.ropeScaling = scaling == "linear"   ? RopeScaling::linear
                        : scaling == "llama3" ? RopeScaling::llama3
                        : scaling == "yarn"   ? RopeScaling::yarn
                                              : RopeScaling::none;
      out.ropeFactor = pos.nums["factor"].asDouble();
      out.ropeLowFreqFactor = pos.nums["low_freq_factor"].asDouble();
      out.ropeHighFreqFactor = pos.nums["high_freq_factor"].asDouble();
      out.ropeBetaFast = pos.nums["beta_fast"].asDouble();
      out.ropeBetaSlow = pos.nums["beta_slow"].asDouble();
      out.ropeTruncate = pos.words["truncate"] != "false";
      out.ropeLocalTheta = pos.nums["local_theta"].asDouble();
      if (out.ropeScaling == RopeScaling::yarn) {
        // Hugging Face's _compute_yarn_parameters: the given factor, or
        // get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        // when both are set, or get_mscale(factor).
        auto mscale = [&](double m) {
          return out.ropeFactor <= 1.0
                     ? 1.0
                     : 0.1 * m * std::log(out.ropeFactor) + 1.0;
        };
        double given = pos.nums["attention_factor"].asDouble();
        double m = pos.nums["mscale"].asDouble();
        double all = pos.nums["mscale_all_dim"].asDouble();
        out.ropeAttentionFactor = given > 0.0 ? given
                                  : m > 0.0 && all > 0.0
                                      ? mscale(m) / mscale(all)
                                      : mscale(1.0);
      }
    }
  }
  getInt(s, KeyId::Types, out.types);
  getBool(s, KeyId::Norm, out.norm);
  getBool(s, KeyId::TieOutput, out.tieOutput);
  getBool(s, KeyId::Scale, out.scale);
  if (getNumber(s, KeyId::Multiplier, out.multiplier) == Got::Ok &&
      !(out.multiplier > 0.0))
    diags.error(s.valueLoc(KeyId::Multiplier), "'multiplier' must be > 0");
  getBool(s, KeyId::ClsToken, out.clsToken);
}

void Sema::resolveAttention(Scope &s, int64_t dModel, bool decoder, bool cross,
                            AttentionSpec &out) {
  out.loc = sourceLoc(s.loc);
  Got heads = getInt(s, KeyId::Heads, out.heads);
  if (heads == Got::Unset)
    diags.error(s.loc, "'" + s.name + "' needs 'heads'");
  Got kv = getInt(s, KeyId::KvHeads, out.kvHeads);
  Got hd = getInt(s, KeyId::HeadDim, out.headDim);
  if (heads == Got::Ok) {
    if (kv == Got::Unset)
      out.kvHeads = out.heads;
    else if (kv == Got::Ok && out.heads % out.kvHeads != 0)
      diags.error(s.valueLoc(KeyId::KvHeads),
                  llvm::formatv("kv_heads ({0}) must divide heads ({1})",
                                out.kvHeads, out.heads)
                      .str());
    if (hd == Got::Unset && dModel > 0) {
      if (dModel % out.heads != 0)
        diags.error(s.valueLoc(KeyId::Heads),
                    llvm::formatv("head_dim defaults to d_model / heads, but "
                                  "d_model ({0}) is not divisible by heads "
                                  "({1}); set head_dim",
                                  dModel, out.heads)
                        .str());
      else
        out.headDim = dModel / out.heads;
    }
  }
  if (!cross) {
    out.mask = decoder ? MaskKind::causal : MaskKind::none;
    ChoiceValue mask;
    if (getChoice(s, KeyId::Mask, mask) == Got::Ok) {
      out.mask = enumOf(symbolizeMaskKind(mask.name), mask.name);
      if (out.mask == MaskKind::sliding) {
        out.window = mask.nums["window"].i;
        out.globalEvery = mask.nums["global_every"].i;
      }
    }
    getBool(s, KeyId::Padding, out.padding);
  }
  Got bias = getBool(s, KeyId::Bias, out.bias);
  if (!cross)
    resolveLatent(s, kv, bias, out);
  out.outBias = out.bias;
  getBool(s, KeyId::OutBias, out.outBias);
  getBool(s, KeyId::QkNorm, out.qkNorm);
  // v3 keys of self-attention only (Keys.def).
  ChoiceValue width;
  if (!cross && getChoice(s, KeyId::QkNormWidth, width) == Got::Ok) {
    out.qkNormFull = width.name == "projection";
    if (!out.qkNorm)
      diags.error(s.valueLoc(KeyId::QkNormWidth),
                  "'qk_norm_width' needs 'qk_norm = true'");
  }
  if (!cross)
    getNumber(s, KeyId::Clip, out.clip);
  getNumber(s, KeyId::Softcap, out.softcap);
  // Cross-attention has no sinks (Keys.def).
  if (!cross)
    getBool(s, KeyId::Sinks, out.sinks);
  // scale = default | number
  StringRef scaleKey =
      keySchema(s, KeyId::Scale, ValueKind::FloatOrDefault).spelling;
  if (Binding *b = s.local(scaleKey)) {
    const Expr &e = *b->stmt->value;
    if (e.kind == Expr::Kind::Name && e.spelling == "default") {
      out.scaleIsDefault = true;
    } else if (!Evaluator::isNumeric(e, s)) {
      diags.error(e.loc, "'scale' must be 'default' or a number, got '" +
                             e.spelling + "'");
    } else if (std::optional<Num> v = ev.evalBinding(*b, e.loc)) {
      if (v->asDouble() == 0.0)
        diags.error(e.loc, "'scale' must be nonzero");
      out.scaleIsDefault = false;
      out.scale = v->asDouble();
    }
  }
  if (out.scaleIsDefault && out.headDim > 0)
    out.scale = 1.0 / std::sqrt(static_cast<double>(out.headDim));
  if (out.latent()) {
    // What latent attention has no form for (DeepSeek's has none of it).
    for (KeyId k : {KeyId::QkNorm, KeyId::Sinks, KeyId::Clip, KeyId::Softcap,
                    KeyId::OutBias})
      if (Binding *b = s.local(stringifyKey(k)))
        diags.error(b->stmt->loc,
                    ("'" + stringifyKey(k) +
                     "' has no form in latent attention (kv_rank)")
                        .str());
    if (out.mask == MaskKind::sliding)
      diags.error(s.valueLoc(KeyId::Mask),
                  "latent attention (kv_rank) attends to the whole cache: "
                  "mask = sliding has no form in it");
  }
}

void Sema::resolveLatent(Scope &s, Got kv, Got bias, AttentionSpec &out) {
  static constexpr KeyId kLatentKeys[] = {KeyId::QRank, KeyId::RopeDim,
                                          KeyId::ValueDim};
  if (getInt(s, KeyId::KvRank, out.kvRank) != Got::Ok) {
    for (KeyId k : kLatentKeys)
      if (Binding *b = s.local(stringifyKey(k)))
        diags.error(b->stmt->loc, ("'" + stringifyKey(k) +
                                   "' needs latent attention: set "
                                   "'kv_rank' to the latent's width")
                                      .str());
    return;
  }
  // DeepSeek's attention has no biases: the default is none, and asking
  // for them is an error.
  if (bias == Got::Unset)
    out.bias = false;
  else if (bias == Got::Ok && out.bias)
    diags.error(s.valueLoc(KeyId::Bias),
                "latent attention (kv_rank) has no biases: write 'bias = "
                "false' or leave it out");
  if (kv == Got::Ok && out.kvHeads != out.heads)
    diags.error(s.valueLoc(KeyId::KvHeads),
                llvm::formatv("latent attention (kv_rank) gives every head "
                              "its own key and value from the latent: "
                              "kv_heads ({0}) must equal heads ({1}) or be "
                              "left out",
                              out.kvHeads, out.heads)
                    .str());
  getInt(s, KeyId::QRank, out.qRank);
  if (getInt(s, KeyId::RopeDim, out.ropeDim) == Got::Unset)
    diags.error(s.loc, "latent attention (kv_rank) needs 'rope_dim', the "
                       "rotated part of each query and key head "
                       "(qk_rope_head_dim)");
  else if (out.ropeDim > 0 && out.headDim > 0 &&
           (out.ropeDim % 2 != 0 || out.ropeDim >= out.headDim))
    diags.error(s.valueLoc(KeyId::RopeDim),
                llvm::formatv("'rope_dim' must be even and less than "
                              "head_dim ({0}, the query and key head: the "
                              "unrotated part plus rope_dim), got {1}",
                              out.headDim, out.ropeDim)
                    .str());
  out.valueDim = std::max<int64_t>(out.headDim - out.ropeDim, 0);
  getInt(s, KeyId::ValueDim, out.valueDim);
}

void Sema::resolveFfn(Scope &s, int64_t dModel, FfnSpec &out) {
  out.loc = sourceLoc(s.loc);
  out.hidden = 4 * dModel;
  getInt(s, KeyId::Hidden, out.hidden);
  ChoiceValue act;
  if (getChoice(s, KeyId::Activation, act) == Got::Ok)
    out.activation = enumOf(symbolizeActivation(act.name), act.name);
  getBool(s, KeyId::Bias, out.bias);

  // A mixture of experts (v3): every other key needs experts > 0.
  getInt(s, KeyId::Experts, out.experts);
  static constexpr KeyId kMoeKeys[] = {
      KeyId::ExpertsPerToken, KeyId::ExpertHidden, KeyId::Router,
      KeyId::Normalize,       KeyId::RouterBias,   KeyId::RoutedScale,
      KeyId::SelectionBias,   KeyId::SharedHidden, KeyId::SharedGate,
      KeyId::FirstDense,      KeyId::SparseEvery};
  if (out.experts == 0) {
    for (KeyId k : kMoeKeys)
      if (Binding *b = s.local(stringifyKey(k)))
        diags.error(b->stmt->loc, ("'" + stringifyKey(k) +
                                   "' needs a mixture of experts: set "
                                   "'experts' to their number")
                                      .str());
    return;
  }
  out.expertHidden = out.hidden;
  if (getInt(s, KeyId::ExpertsPerToken, out.perToken) == Got::Unset)
    diags.error(s.loc, "a mixture of experts needs 'experts_per_token', the "
                       "experts each token runs");
  else if (out.perToken > out.experts)
    diags.error(s.valueLoc(KeyId::ExpertsPerToken),
                llvm::formatv("'experts_per_token' ({0}) must be at most "
                              "'experts' ({1})",
                              out.perToken, out.experts)
                    .str());
  getInt(s, KeyId::ExpertHidden, out.expertHidden);
  ChoiceValue router;
  if (getChoice(s, KeyId::Router, router) == Got::Ok) {
    out.router = enumOf(symbolizeRouterKind(router.name), router.name);
    if (router.nums.count("groups")) {
      out.groups = router.nums["groups"].i;
      out.topkGroups = router.nums["topk_groups"].i;
      if (out.experts % out.groups != 0 || out.topkGroups > out.groups)
        diags.error(s.valueLoc(KeyId::Router),
                    llvm::formatv("'groups' ({0}) must divide the {1} experts "
                                  "and 'topk_groups' ({2}) be at most groups",
                                  out.groups, out.experts, out.topkGroups)
                        .str());
    }
  }
  if (getBool(s, KeyId::SelectionBias, out.selectionBias) == Got::Ok &&
      out.selectionBias && out.router != RouterKind::sigmoid)
    diags.error(s.valueLoc(KeyId::SelectionBias),
                "'selection_bias' needs router = sigmoid");
  getBool(s, KeyId::Normalize, out.normalize);
  getBool(s, KeyId::RouterBias, out.routerBias);
  if (getNumber(s, KeyId::RoutedScale, out.routedScale) == Got::Ok &&
      !(out.routedScale > 0.0))
    diags.error(s.valueLoc(KeyId::RoutedScale), "'routed_scale' must be > 0");
  getInt(s, KeyId::SharedHidden, out.sharedHidden);
  getBool(s, KeyId::SharedGate, out.sharedGate);
  if (out.sharedGate && out.sharedHidden == 0)
    diags.error(s.valueLoc(KeyId::SharedGate),
                "'shared_gate' needs a shared expert: set 'shared_hidden'");
  if (out.sharedHidden > 0 && out.bias)
    diags.error(s.valueLoc(KeyId::SharedHidden),
                "a shared expert has no biases: write 'bias = false' (the "
                "models with shared experts have none)");
  getInt(s, KeyId::FirstDense, out.firstDense);
  getInt(s, KeyId::SparseEvery, out.sparseEvery);
}

void Sema::resolveNorm(Scope &s, NormSpec &out) {
  out.loc = sourceLoc(s.loc);
  ChoiceValue kind, placement;
  if (getChoice(s, KeyId::Kind, kind) == Got::Ok)
    out.kind = enumOf(symbolizeNormKind(kind.name), kind.name);
  if (getChoice(s, KeyId::Placement, placement) == Got::Ok)
    out.placement =
        enumOf(symbolizeNormPlacement(placement.name), placement.name);
  if (getNumber(s, KeyId::Eps, out.eps) == Got::Ok && !(out.eps > 0.0))
    diags.error(s.valueLoc(KeyId::Eps), "'eps' must be > 0");
  out.final = out.placement != NormPlacement::Post;
  getBool(s, KeyId::Final, out.final);
  getNumber(s, KeyId::Offset, out.offset);
  out.finalEps = out.eps;
  if (getNumber(s, KeyId::FinalEps, out.finalEps) == Got::Ok &&
      !(out.finalEps > 0.0))
    diags.error(s.valueLoc(KeyId::FinalEps), "'final_eps' must be > 0");
}

void Sema::resolveRules(const ModelSpec &spec, StackSpec &stack, Scope &emb,
                        Scope &norm, bool imageInput, bool featuresInput,
                        bool encDec, bool decoder) {
  EmbeddingSpec &e = stack.embedding;
  AttentionSpec &a = stack.attention;
  SMLoc posLoc = emb.valueLoc(KeyId::Position);
  if (e.position == PositionEncoding::rope && a.latent()) {
    // Latent attention rotates the last rope_dim values of each query
    // head and the shared RoPE key: rope's dim is that.
    if (e.ropeDim != 0 && e.ropeDim != a.ropeDim)
      diags.error(posLoc, llvm::formatv("with latent attention rope rotates "
                                        "the rope_dim ({0}) values of each "
                                        "head: leave 'dim' out, got {1}",
                                        a.ropeDim, e.ropeDim)
                              .str());
    e.ropeDim = a.ropeDim;
  }
  if (e.position == PositionEncoding::rope && e.ropeLocalTheta > 0.0 &&
      a.mask != MaskKind::sliding)
    diags.error(posLoc, "'local_theta' of 'rope' is the base of the sliding "
                        "layers, but the attention has no 'mask = sliding'");
  if (a.latent() && (e.position == PositionEncoding::alibi ||
                     e.position == PositionEncoding::relative))
    diags.error(posLoc, "latent attention (kv_rank) has no form for alibi "
                        "or relative positions");
  if (e.position == PositionEncoding::rope) {
    if (e.ropeDim == 0) {
      e.ropeDim = a.headDim;
      if (a.headDim % 2 != 0)
        diags.error(posLoc, llvm::formatv("position = rope needs an even "
                                          "head_dim, got {0}",
                                          a.headDim)
                                .str());
    } else if (e.ropeDim % 2 != 0 || e.ropeDim > a.headDim)
      diags.error(posLoc, llvm::formatv("'dim' of 'rope' must be even and at "
                                        "most head_dim ({0}), got {1}",
                                        a.headDim, e.ropeDim)
                              .str());
    if (e.ropeOriginalContext == 0)
      e.ropeOriginalContext = spec.context;
    if (e.ropeScaling == RopeScaling::llama3 &&
        !(e.ropeHighFreqFactor > e.ropeLowFreqFactor))
      diags.error(posLoc, "rope scaling = llama3 needs high_freq_factor > "
                          "low_freq_factor");
  }
  if (e.position == PositionEncoding::relative) {
    // T5's buckets: half of them exact (a quarter when bidirectional), the
    // rest logarithmic up to max_distance.
    int64_t exact = decoder ? e.relativeBuckets / 2 : e.relativeBuckets / 4;
    if (exact < 1 || e.relativeMaxDistance <= exact)
      diags.error(posLoc,
                  llvm::formatv("relative positions need at least {0} "
                                "buckets and max_distance > {1} (the exact "
                                "buckets), got buckets = {2}, max_distance "
                                "= {3}",
                                decoder ? 2 : 4, std::max<int64_t>(exact, 1),
                                e.relativeBuckets, e.relativeMaxDistance)
                      .str());
  }
  if (e.types > 0 && (imageInput || featuresInput || encDec))
    diags.error(emb.valueLoc(KeyId::Types),
                "'types' needs token input and arch = encoder or decoder");
  if (e.scale && (featuresInput || imageInput))
    diags.warning(emb.keyLoc(KeyId::Scale),
                  llvm::formatv("embedding scale multiplies the token "
                                "embedding by sqrt(d_model), and {0} input "
                                "has none: it has no effect",
                                featuresInput ? "features" : "image")
                      .str());
  if (e.tieOutput && (featuresInput || imageInput))
    diags.error(emb.keyLoc(KeyId::TieOutput),
                llvm::formatv("tie_output needs a token embedding, and {0} "
                              "input has none",
                              featuresInput ? "features" : "image")
                    .str());
  if (stack.norm.placement == NormPlacement::Sandwich && encDec && decoder)
    diags.error(norm.valueLoc(KeyId::Placement),
                "placement = sandwich has no form for a decoder with "
                "cross_attention");
}

//===----------------------------------------------------------------------===//
// Models
//===----------------------------------------------------------------------===//

std::optional<ModelSpec> Sema::analyze(const ModelDecl &decl) {
  unsigned errorsBefore = diags.errorCount();
  ModelSpec spec;
  spec.name = decl.name.str();
  spec.loc = sourceLoc(decl.loc);

  Scope *top = ev.newScope("model " + decl.name.str(), SectionId::Model,
                           decl.loc, nullptr);
  collect(decl.body, *top);

  // Raw scopes of the sections at the top level and inside the stacks.
  llvm::StringMap<Scope *> raw;
  auto rawScope = [&](Scope *parent, StringRef prefix,
                      SectionId section) -> Scope * {
    auto it = parent->sections.find(stringifySection(section));
    if (it == parent->sections.end())
      return nullptr;
    std::string name = (prefix + stringifySection(section)).str();
    Scope *s = ev.newScope(name, section, it->second->loc, parent);
    collect(*it->second, *s);
    raw[name] = s;
    return s;
  };
  // The shared sections, then the stacks, then the sections of each stack.
  auto isStack = [](SectionId id) {
    return getSectionSchema(id).role == SectionRole::Stack;
  };
  const SectionSchema &model = getSectionSchema(SectionId::Model);
  for (SectionId sec : model.children)
    if (!isStack(sec))
      rawScope(top, "", sec);
  Scope *encScope = rawScope(top, "", SectionId::Encoder);
  Scope *decScope = rawScope(top, "", SectionId::Decoder);
  for (Scope *stack : {encScope, decScope})
    if (stack)
      for (SectionId sec : getSectionSchema(stack->section).children)
        rawScope(stack, stack->name + ".", sec);

  // arch comes first: it decides which sections are valid.
  ChoiceValue arch;
  Got gotArch = getChoice(*top, KeyId::Arch, arch);
  if (gotArch == Got::Unset)
    diags.error(decl.loc, "model '" + decl.name +
                              "' needs 'arch' (encoder, decoder or "
                              "encoder_decoder)");
  if (gotArch != Got::Ok)
    return std::nullopt;
  spec.arch = arch.name == "encoder"   ? Arch::encoder
              : arch.name == "decoder" ? Arch::decoder
                                       : Arch::encoder_decoder;
  bool encDec = spec.arch == Arch::encoder_decoder;
  if (!encDec) {
    for (StringRef sec : {"encoder", "decoder", "cross_attention"})
      if (auto it = top->sections.find(sec); it != top->sections.end())
        diags.error(it->second->loc, "'" + sec +
                                         "' is only valid with arch = "
                                         "encoder_decoder");
  } else {
    if (Binding *b = top->local(KeyId::Layers))
      diags.error(b->stmt->loc, "'layers' is set per stack in an "
                                "encoder_decoder model: move it into "
                                "encoder { } and decoder { }");
    if (!encScope)
      diags.error(decl.loc, "arch = encoder_decoder needs an "
                            "'encoder { layers = N }' section");
    if (!decScope)
      diags.error(decl.loc, "arch = encoder_decoder needs a "
                            "'decoder { layers = N }' section");
  }

  // Top-level keys.
  ChoiceValue dtype, input, output, residual;
  if (getChoice(*top, KeyId::DType, dtype) == Got::Ok)
    spec.dtype = dtype.name == "f32"   ? DType::f32
                 : dtype.name == "f16" ? DType::f16
                                       : DType::bf16;
  spec.input.loc = sourceLoc(top->keyLoc(KeyId::Input));
  if (getChoice(*top, KeyId::Input, input) == Got::Ok &&
      input.name == "image") {
    spec.input.image = true;
    spec.input.size = input.nums["size"].i;
    spec.input.patch = input.nums["patch"].i;
    spec.input.channels = input.nums["channels"].i;
    if (spec.input.size % spec.input.patch != 0) {
      diags.error(top->valueLoc(KeyId::Input),
                  llvm::formatv("patch ({0}) must divide size ({1})",
                                spec.input.patch, spec.input.size)
                      .str());
      spec.input.image = false;
    }
  }
  bool featuresInput = input.name == "features";
  spec.input.features = featuresInput;
  if (featuresInput && encDec)
    diags.error(top->valueLoc(KeyId::Input),
                "input = features is only supported with arch = encoder or "
                "decoder");
  if (getChoice(*top, KeyId::Residual, residual) == Got::Ok) {
    spec.residual = enumOf(symbolizeResidual(residual.name), residual.name);
    if (spec.residual == Residual::Sequential) {
      spec.residualScale = residual.nums["scale"].asDouble();
      if (!(spec.residualScale > 0.0))
        diags.error(top->valueLoc(KeyId::Residual),
                    "'scale' of 'sequential' must be > 0");
    }
    if (spec.residual == Residual::Parallel) {
      spec.parallelNorms = residual.nums["norms"].i;
      if (spec.parallelNorms != 1 && spec.parallelNorms != 2)
        diags.error(top->valueLoc(KeyId::Residual),
                    llvm::formatv("'norms' of 'parallel' must be 1 or 2, "
                                  "got {0}",
                                  spec.parallelNorms)
                        .str());
    }
  }
  ChoiceValue checkpoint;
  Got gotCheckpoint = getChoice(*top, KeyId::Checkpoint, checkpoint);
  if (gotCheckpoint == Got::Ok && checkpoint.name == "huggingface") {
    spec.hfType = checkpoint.words["type"].str();
    // FP8 with block scales: an R x C block per scale, both given or none.
    spec.hfFp8BlockRows = checkpoint.nums["fp8_block_rows"].i;
    spec.hfFp8BlockCols = checkpoint.nums["fp8_block_cols"].i;
    if ((spec.hfFp8BlockRows > 0) != (spec.hfFp8BlockCols > 0)) {
      diags.error(top->valueLoc(KeyId::Checkpoint),
                  "FP8 blocks need both 'fp8_block_rows' and "
                  "'fp8_block_cols' (quantization_config's "
                  "weight_block_size [rows, cols])");
      spec.hfFp8BlockRows = spec.hfFp8BlockCols = 0;
    }
  }
  // llama.cpp's tensors of a GGUF file (ggufCheckpointProblems checks the
  // model against the architecture below).
  if (gotCheckpoint == Got::Ok && checkpoint.name == "gguf")
    spec.ggufArch = checkpoint.words["arch"].str();
  Got gotVocab = getInt(*top, KeyId::Vocab, spec.vocab);
  Got gotContext = getInt(*top, KeyId::Context, spec.context);
  if (getInt(*top, KeyId::DModel, spec.dModel) == Got::Unset)
    diags.error(decl.loc, "model '" + decl.name + "' needs 'd_model'");
  bool imageInput = input.name == "image";
  if (gotVocab == Got::Unset && !imageInput && !featuresInput)
    diags.error(decl.loc,
                "model '" + decl.name + "' needs 'vocab' (token input)");
  if (gotContext == Got::Unset && !imageInput)
    diags.error(decl.loc, "model '" + decl.name +
                              "' needs 'context' (the longest sequence)");
  if (imageInput && encDec)
    diags.error(top->valueLoc(KeyId::Input),
                "image input is only supported with arch = encoder or "
                "decoder");

  spec.output.loc = sourceLoc(top->keyLoc(KeyId::Output));
  spec.output.kind =
      spec.arch == Arch::encoder ? OutputKind::hidden : OutputKind::lm_head;
  if (getChoice(*top, KeyId::Output, output) == Got::Ok) {
    if (output.name == "lm_head") {
      spec.output.kind = OutputKind::lm_head;
      spec.output.lmBias = output.words["bias"] == "true";
      spec.output.lmScale = output.nums["scale"].asDouble();
      spec.output.lmSoftcap = output.nums["softcap"].asDouble();
    } else if (output.name == "hidden")
      spec.output.kind = OutputKind::hidden;
    else {
      spec.output.kind = OutputKind::classifier;
      spec.output.classes = output.nums["classes"].i;
      spec.output.pool =
          output.words["pool"] == "mean" ? PoolKind::mean : PoolKind::cls;
    }
  }
  if (spec.output.kind == OutputKind::lm_head && gotVocab == Got::Unset &&
      (imageInput || featuresInput))
    diags.error(top->keyLoc(KeyId::Output).isValid()
                    ? top->keyLoc(KeyId::Output)
                    : decl.loc,
                "output = lm_head needs 'vocab'");

  // Stacks.
  struct StackScopes {
    StringRef name;
    Scope *stack;
  };
  std::vector<StackScopes> stackScopes;
  if (encDec) {
    if (encScope)
      stackScopes.push_back({"encoder", encScope});
    if (decScope)
      stackScopes.push_back({"decoder", decScope});
  } else {
    stackScopes.push_back(
        {spec.arch == Arch::encoder ? "encoder" : "decoder", top});
  }
  for (StackScopes &ss : stackScopes) {
    StackSpec stack;
    stack.name = ss.name.str();
    stack.loc = sourceLoc(ss.stack->keyLoc(KeyId::Layers));
    stack.prefix = encDec ? (ss.name + ".").str() : "";
    bool decoder = ss.name == "decoder";
    std::string pre = encDec ? (ss.name + ".").str() : "";
    if (getInt(*ss.stack, KeyId::Layers, stack.layers) == Got::Unset &&
        !(encDec && ss.stack == top))
      diags.error(encDec ? ss.stack->loc : decl.loc,
                  encDec ? "'" + ss.name + "' needs 'layers'"
                         : "model '" + decl.name + "' needs 'layers'");
    auto view = [&](SectionId id) {
      StringRef section = stringifySection(id);
      Scope *shared = raw.lookup(section);
      Scope *own = encDec ? raw.lookup(pre + section.str()) : nullptr;
      Scope *s = ev.merged(pre + section.str(), id,
                           own      ? own->loc
                           : shared ? shared->loc
                                    : ss.stack->loc,
                           ss.stack, {shared, own});
      return s;
    };
    Scope *emb = view(SectionId::Embedding);
    Scope *attn = view(SectionId::Attention);
    Scope *ffn = view(SectionId::Ffn);
    Scope *norm = view(SectionId::Norm);
    resolveEmbedding(*emb, stack.embedding);
    resolveAttention(*attn, spec.dModel, decoder, /*cross=*/false,
                     stack.attention);
    resolveFfn(*ffn, spec.dModel, stack.ffn);
    resolveNorm(*norm, stack.norm);
    if (stack.embedding.clsToken && !imageInput)
      diags.error(emb->keyLoc(KeyId::ClsToken),
                  "cls_token needs image input (input = image(...))");
    resolveRules(spec, stack, *emb, *norm, imageInput, featuresInput, encDec,
                 decoder);
    if (spec.residual == Residual::Parallel &&
        stack.norm.placement != NormPlacement::Pre)
      diags.error(top->keyLoc(KeyId::Residual),
                  "residual = parallel needs norm placement = pre");
    if (spec.residual == Residual::Parallel && encDec && decoder)
      diags.error(top->keyLoc(KeyId::Residual),
                  "residual = parallel has no form for a decoder with "
                  "cross_attention; an encoder_decoder model is sequential");
    if (stack.embedding.tieOutput && spec.output.kind != OutputKind::lm_head)
      diags.warning(emb->keyLoc(KeyId::TieOutput),
                    "tie_output has no effect without output = lm_head");
    if (encDec && decoder) {
      stack.hasCross = true;
      Scope *cross =
          ev.merged("decoder.cross_attention", SectionId::CrossAttention,
                    raw.lookup("decoder.cross_attention")
                        ? raw.lookup("decoder.cross_attention")->loc
                        : (raw.lookup("cross_attention")
                               ? raw.lookup("cross_attention")->loc
                               : attn->loc),
                    ss.stack,
                    {attn, raw.lookup("cross_attention"),
                     raw.lookup("decoder.cross_attention")});
      resolveAttention(*cross, spec.dModel, decoder, /*cross=*/true,
                       stack.cross);
    }
    spec.stacks.push_back(stack);
  }

  // Image input: the sequence is the patches (and the class token).
  if (imageInput && !encDec && spec.input.image && !spec.stacks.empty()) {
    int64_t positions =
        spec.input.patches() + (spec.mainStack().embedding.clsToken ? 1 : 0);
    if (gotContext == Got::Unset)
      spec.context = positions;
    else if (gotContext == Got::Ok && spec.context != positions)
      diags.error(top->valueLoc(KeyId::Context),
                  llvm::formatv("context ({0}) differs from the {1} "
                                "positions of the image input (the "
                                "sequence is always the patches{2}); leave "
                                "context out",
                                spec.context, positions,
                                spec.mainStack().embedding.clsToken
                                    ? " and the class token"
                                    : "")
                      .str());
  }

  // Past the error limit errors are no longer counted: the model may have
  // some that went unshown.
  if (diags.errorCount() != errorsBefore || diags.tooManyErrors())
    return std::nullopt;

  // Every parameter tensor and the total must stay addressable.
  constexpr int64_t kMaxParams = int64_t(1) << 48;
  int64_t total = 0;
  bool tooBig = false;
  for (const ParamSpec &p : spec.params()) {
    int64_t n = 1;
    for (int64_t d : p.shape)
      tooBig |= __builtin_mul_overflow(n, d, &n);
    tooBig |= __builtin_add_overflow(total, n, &total) || total > kMaxParams;
    if (tooBig)
      break;
  }
  if (tooBig) {
    diags.error(decl.loc, "model '" + decl.name +
                              "' has more than 2^48 "
                              "parameters");
    return std::nullopt;
  }
  // A Hugging Face layout must provide every parameter of the model; report
  // what it cannot at compile time rather than at load time.
  if (!spec.hfType.empty() || !spec.ggufArch.empty()) {
    std::vector<std::string> problems = hfCheckpointProblems(spec);
    for (const std::string &p : problems)
      diags.error(top->valueLoc(KeyId::Checkpoint), p);
    if (!problems.empty())
      return std::nullopt;
  }
  return spec;
}

const ModelDecl *mlir::tfm::selectModel(const FileAST &file,
                                        llvm::StringRef name,
                                        DiagEmitter &diags) {
  // The models' names for a message: the first few, then how many more.
  constexpr size_t kMaxListed = 10;
  std::string names;
  for (auto [i, m] : llvm::enumerate(file.models)) {
    if (i == kMaxListed) {
      names += llvm::formatv(" and {0} more", file.models.size() - i).str();
      break;
    }
    names += (i ? ", " : "") + m.name.str();
  }
  if (name.empty()) {
    if (file.models.size() == 1)
      return &file.models.front();
    if (file.models.empty())
      diags.error(llvm::SMLoc::getFromPointer(
                      diags.getSourceMgr()
                          .getMemoryBuffer(diags.getSourceMgr().getMainFileID())
                          ->getBufferStart()),
                  "no model in this file: write model NAME { ... }");
    else
      diags.error(file.models[1].loc,
                  "this file holds " + llvm::Twine(file.models.size()) +
                      " models (" + names + "): pick one with --model NAME");
    return nullptr;
  }
  for (const ModelDecl &m : file.models)
    if (m.name == name)
      return &m;
  std::vector<StringRef> cands;
  for (const ModelDecl &m : file.models)
    cands.push_back(m.name);
  std::string msg = ("no model named '" + name + "' in this file").str();
  StringRef near = closestMatch(name, cands);
  if (!near.empty())
    msg += ("; did you mean '" + near + "'?").str();
  msg += " (models: " + (names.empty() ? std::string("none") : names) + ")";
  diags.error(
      file.models.empty()
          ? llvm::SMLoc::getFromPointer(
                diags.getSourceMgr()
                    .getMemoryBuffer(diags.getSourceMgr().getMainFileID())
                    ->getBufferStart())
          : file.models.front().loc,
      msg);
  return nullptr;
}

std::optional<ModelSpec> mlir::tfm::analyzeModel(const ModelDecl &model,
                                                 DiagEmitter &diags) {
  return Sema(diags).analyze(model);
}

std::vector<ModelSpec> mlir::tfm::analyzeFile(const FileAST &file,
                                              DiagEmitter &diags) {
  std::vector<ModelSpec> specs;
  llvm::StringMap<const ModelDecl *> seen;
  for (const ModelDecl &m : file.models) {
    auto [it, inserted] = seen.insert({m.name, &m});
    if (!inserted) {
      auto diag = diags.error(m.loc, "duplicate model '" + m.name + "'");
      if (diag)
        diag.attachNote(diags.loc(it->second->loc)) << "first defined here";
      continue;
    }
    if (std::optional<ModelSpec> spec = analyzeModel(m, diags))
      specs.push_back(std::move(*spec));
  }
  return specs;
}
