//===- KeysTest.cpp - the schema table of the .tfm language ---------------===//
//
// Keys.def is the one list of the sections and keys the language accepts.
// These tests check that the table is well formed: every section is
// reachable from the model, every key spelling is used, multiple-choice keys
// and only they have words, and call arguments are of a kind Sema checks;
// the words of keys that name a dialect or ModelSpec enum are that enum's
// spellings, both ways.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Keys.h"
#include "tfm/Frontend/ModelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir::tfm;

namespace {

TEST(Keys, SectionsAreReachableFromTheModel) {
  llvm::SmallVector<SectionId> work{SectionId::Model};
  std::set<SectionId> seen{SectionId::Model};
  while (!work.empty()) {
    SectionId s = work.pop_back_val();
    for (SectionId c : getSectionSchema(s).children)
      if (seen.insert(c).second)
        work.push_back(c);
  }
  for (const SectionSchema &s : getSectionSchemas()) {
    EXPECT_TRUE(seen.count(s.id)) << s.spelling.str();
    EXPECT_EQ(symbolizeSection(s.spelling), s.id);
    EXPECT_EQ(stringifySection(s.id), s.spelling);
  }
}

TEST(Keys, EveryKeySpellingIsUsedOnce) {
  llvm::StringSet<> used;
  for (const SectionSchema &s : getSectionSchemas()) {
    llvm::StringSet<> inSection;
    for (const KeySchema &k : s.keys) {
      EXPECT_TRUE(inSection.insert(k.spelling).second)
          << "key '" << k.spelling.str() << "' twice in '" << s.spelling.str()
          << "'";
      EXPECT_EQ(k.section, s.id);
      EXPECT_EQ(symbolizeKey(k.spelling), k.key);
      EXPECT_GE(k.version, 1u);
      used.insert(k.spelling);
      // A key and a section of the same name in one section would make
      // "'x' is a section: write x { ... }" ambiguous (`embedding { norm =
      // true }` and the model's `norm { ... }` are in different sections).
      EXPECT_FALSE(llvm::is_contained(s.childNames, k.spelling))
          << k.spelling.str();
    }
  }
  const KeyId allKeys[] = {
#define TFM_KEY_NAME(Id, Spelling) KeyId::Id,
#include "tfm/Frontend/Keys.def"
  };
  for (KeyId k : allKeys)
    EXPECT_TRUE(used.contains(stringifyKey(k))) << stringifyKey(k).str();
}

TEST(Keys, EnumKeysAndOnlyThemHaveWords) {
  for (const SectionSchema &s : getSectionSchemas())
    for (const KeySchema &k : s.keys) {
      EXPECT_EQ(k.kind == ValueKind::Enum, !k.values.empty())
          << s.spelling.str() << "." << k.spelling.str();
      llvm::StringSet<> words;
      for (const ValueSchema &v : k.values) {
        EXPECT_TRUE(words.insert(v.spelling).second) << v.spelling.str();
        EXPECT_EQ(findValueSchema(k, v.spelling), &v);
        for (const ArgSchema &a : v.args) {
          EXPECT_TRUE(a.kind == ValueKind::Int || a.kind == ValueKind::Count ||
                      a.kind == ValueKind::Float ||
                      a.kind == ValueKind::NonNegative ||
                      a.kind == ValueKind::Enum)
              << a.spelling.str();
          EXPECT_EQ(a.kind == ValueKind::Enum, !a.words.empty())
              << a.spelling.str();
          EXPECT_NE(a.need, KeyNeed::Conditional) << a.spelling.str();
        }
      }
    }
}

/// The words of `section`.`key` in Keys.def.
std::set<std::string> wordsOf(SectionId section, KeyId key) {
  const KeySchema *k = findKeySchema(section, key);
  EXPECT_NE(k, nullptr);
  std::set<std::string> words;
  if (k)
    for (const ValueSchema &v : k->values)
      words.insert(v.spelling.str());
  return words;
}

/// Every word of the key symbolizes to a value of the enum (Sema takes
/// `*symbolize(word)`), and every value of the enum (0 .. max) but those of
/// the IR only (`internal`) is a word.
template <typename E>
void expectSameWords(SectionId section, KeyId key, unsigned maxValue,
                     std::optional<E> (*symbolize)(llvm::StringRef),
                     llvm::StringRef (*stringify)(E),
                     std::set<E> internal = {}) {
  std::set<std::string> words = wordsOf(section, key);
  for (const std::string &w : words) {
    std::optional<E> v = symbolize(w);
    ASSERT_TRUE(v.has_value()) << stringifyKey(key).str() << " = " << w;
    EXPECT_EQ(stringify(*v).str(), w);
  }
  for (unsigned i = 0; i <= maxValue; ++i)
    EXPECT_TRUE(internal.count(E(i)) || words.count(stringify(E(i)).str()))
        << stringifyKey(key).str() << ": '" << stringify(E(i)).str()
        << "' is not in Keys.def";
}

TEST(Keys, EnumWordsAreTheEnumsSpellings) {
  expectSameWords<MaskKind>(SectionId::Attention, KeyId::Mask,
                            getMaxEnumValForMaskKind(), symbolizeMaskKind,
                            stringifyMaskKind);
  // The sigmoid of a shared expert's gate and the two halves of
  // swiglu_clamp are the IR's, not words of the language.
  expectSameWords<Activation>(
      SectionId::Ffn, KeyId::Activation, getMaxEnumValForActivation(),
      symbolizeActivation, stringifyActivation,
      {Activation::sigmoid, Activation::swiglu_clamp_gate,
       Activation::swiglu_clamp_up});
  expectSameWords<NormKind>(SectionId::Norm, KeyId::Kind,
                            getMaxEnumValForNormKind(), symbolizeNormKind,
                            stringifyNormKind);
  expectSameWords<NormPlacement>(
      SectionId::Norm, KeyId::Placement, unsigned(NormPlacement::Sandwich),
      symbolizeNormPlacement, stringifyNormPlacement);
  expectSameWords<Residual>(SectionId::Model, KeyId::Residual,
                            unsigned(Residual::Parallel), symbolizeResidual,
                            stringifyResidual);
}

TEST(Keys, CrossAttentionTakesAttentionKeys) {
  for (const KeySchema &k : getSectionSchema(SectionId::CrossAttention).keys) {
    const KeySchema *a = findKeySchema(SectionId::Attention, k.key);
    ASSERT_NE(a, nullptr) << k.spelling.str();
    EXPECT_EQ(a->kind, k.kind) << k.spelling.str();
  }
}

TEST(Keys, HomeSections) {
  EXPECT_EQ(getHomeSection("heads"), SectionId::Attention);
  EXPECT_EQ(getHomeSection("scale"), SectionId::Embedding);
  EXPECT_EQ(getHomeSection("layers"), SectionId::Model);
  EXPECT_EQ(getHomeSection("nonsense"), std::nullopt);
}

} // namespace
