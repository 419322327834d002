//===- KeysTest.cpp - the schema table of the .tfm language ---------------===//
//
// Keys.def is the one list of the sections and keys the language accepts.
// These tests check that the table is well formed: every section is
// reachable from the model, every key spelling is used, multiple-choice keys
// and only they have words, and call arguments are of a kind Sema checks.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Keys.h"

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
