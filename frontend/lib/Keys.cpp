//===- Keys.cpp - sections and keys of the .tfm language ------------------===//
//
// Builds the schema tables from Keys.def once.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Keys.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir::tfm;
using llvm::StringRef;

namespace {

constexpr unsigned kNumSections = 0
#define TFM_SECTION(Id, Spelling, Role) +1
#include "tfm/Frontend/Keys.def"
    ;

const StringRef kKeySpellings[] = {
#define TFM_KEY_NAME(Id, Spelling) Spelling,
#include "tfm/Frontend/Keys.def"
};

struct Schema {
  std::vector<SectionSchema> sections;

  Schema();
  SectionSchema &section(SectionId id) {
    return sections[static_cast<unsigned>(id)];
  }
  KeySchema &key(SectionId s, KeyId k) {
    for (KeySchema &ks : section(s).keys)
      if (ks.key == k)
        return ks;
    llvm_unreachable("Keys.def: a value of a key the section does not have");
  }
  ValueSchema &value(SectionId s, KeyId k, StringRef v) {
    for (ValueSchema &vs : key(s, k).values)
      if (vs.spelling == v)
        return vs;
    llvm_unreachable("Keys.def: an argument of an unknown value");
  }
  ArgSchema &arg(SectionId s, KeyId k, StringRef v, StringRef a) {
    for (ArgSchema &as : value(s, k, v).args)
      if (as.spelling == a)
        return as;
    llvm_unreachable("Keys.def: a word of an unknown argument");
  }
};

Schema::Schema() {
  sections.resize(kNumSections);
#define TFM_SECTION(Id, Spelling, Role)                                        \
  section(SectionId::Id).id = SectionId::Id;                                   \
  section(SectionId::Id).spelling = Spelling;                                  \
  section(SectionId::Id).role = SectionRole::Role;
#include "tfm/Frontend/Keys.def"
#define TFM_NESTED(Parent, Child)                                              \
  section(SectionId::Parent).children.push_back(SectionId::Child);
#include "tfm/Frontend/Keys.def"
#define TFM_KEY(Section, Key, Kind, Need, Version)                             \
  section(SectionId::Section)                                                  \
      .keys.push_back(KeySchema{SectionId::Section,                            \
                                KeyId::Key,                                    \
                                stringifyKey(KeyId::Key),                      \
                                ValueKind::Kind,                               \
                                KeyNeed::Need,                                 \
                                Version,                                       \
                                {}});
#include "tfm/Frontend/Keys.def"
#define TFM_VALUE(Section, Key, Spelling, Version)                             \
  key(SectionId::Section, KeyId::Key)                                          \
      .values.push_back(ValueSchema{Spelling, {}, Version});
#include "tfm/Frontend/Keys.def"
#define TFM_ARG(Section, Key, Value, Spelling, Kind, Need, Default, Version)   \
  value(SectionId::Section, KeyId::Key, Value)                                 \
      .args.push_back(ArgSchema{                                               \
          Spelling, ValueKind::Kind, KeyNeed::Need, Default, {}, Version});
#include "tfm/Frontend/Keys.def"
#define TFM_ARG_VALUE(Section, Key, Value, Arg, Spelling)                      \
  arg(SectionId::Section, KeyId::Key, Value, Arg).words.push_back(Spelling);
#include "tfm/Frontend/Keys.def"
  // The model types of Hugging Face checkpoints, from their table.
#define TFM_HF_TYPE(Id, Name, Family, Prefix, PositionOffset, Import)          \
  arg(SectionId::Model, KeyId::Checkpoint, "huggingface", "type")              \
      .words.push_back(Name);
#include "Hf/ModelTypes.def"
  // The architectures of GGUF checkpoints, from their table.
#define TFM_GGUF_ARCH(Id, Name, Rope, Flags)                                   \
  arg(SectionId::Model, KeyId::Checkpoint, "gguf", "arch")                     \
      .words.push_back(Name);
#include "Gguf/GgufArchs.def"
  for (SectionSchema &s : sections) {
    for (const KeySchema &k : s.keys)
      s.keyNames.push_back(k.spelling);
    for (SectionId c : s.children)
      s.childNames.push_back(stringifySection(c));
  }
}

const Schema &schema() {
  static const Schema s;
  return s;
}

} // namespace

StringRef mlir::tfm::stringifySection(SectionId section) {
  switch (section) {
#define TFM_SECTION(Id, Spelling, Role)                                        \
  case SectionId::Id:                                                          \
    return Spelling;
#include "tfm/Frontend/Keys.def"
  }
  llvm_unreachable("unknown section");
}

StringRef mlir::tfm::stringifyKey(KeyId key) {
  return kKeySpellings[static_cast<unsigned>(key)];
}

std::optional<SectionId> mlir::tfm::symbolizeSection(StringRef spelling) {
#define TFM_SECTION(Id, Spelling, Role)                                        \
  if (spelling == Spelling)                                                    \
    return SectionId::Id;
#include "tfm/Frontend/Keys.def"
  return std::nullopt;
}

std::optional<KeyId> mlir::tfm::symbolizeKey(StringRef spelling) {
  for (auto [i, s] : llvm::enumerate(kKeySpellings))
    if (s == spelling)
      return static_cast<KeyId>(i);
  return std::nullopt;
}

llvm::ArrayRef<SectionSchema> mlir::tfm::getSectionSchemas() {
  return schema().sections;
}

const SectionSchema &mlir::tfm::getSectionSchema(SectionId section) {
  return schema().sections[static_cast<unsigned>(section)];
}

const KeySchema *mlir::tfm::findKeySchema(SectionId section, KeyId key) {
  for (const KeySchema &k : getSectionSchema(section).keys)
    if (k.key == key)
      return &k;
  return nullptr;
}

const KeySchema *mlir::tfm::findKeySchema(SectionId section,
                                          StringRef spelling) {
  for (const KeySchema &k : getSectionSchema(section).keys)
    if (k.spelling == spelling)
      return &k;
  return nullptr;
}

const ValueSchema *mlir::tfm::findValueSchema(const KeySchema &key,
                                              StringRef spelling) {
  for (const ValueSchema &v : key.values)
    if (v.spelling == spelling)
      return &v;
  return nullptr;
}

StringRef mlir::tfm::getHuggingFaceHint(StringRef name) {
#define TFM_HF_NAME(Name, Hint)                                                \
  if (name == Name)                                                            \
    return Hint;
#include "tfm/Frontend/Keys.def"
  return {};
}

StringRef mlir::tfm::getHuggingFaceWord(KeyId key, StringRef word) {
#define TFM_HF_WORD(Key, Word, Spelling)                                       \
  if (key == KeyId::Key && word == Word)                                       \
    return Spelling;
#include "tfm/Frontend/Keys.def"
  return {};
}

bool mlir::tfm::isNestedIn(SectionId child, SectionId parent) {
  return llvm::is_contained(getSectionSchema(parent).children, child);
}

std::optional<SectionId> mlir::tfm::getHomeSection(StringRef key) {
  for (const SectionSchema &s : getSectionSchemas())
    if (s.role == SectionRole::Block && findKeySchema(s.id, key))
      return s.id;
  if (findKeySchema(SectionId::Model, key))
    return SectionId::Model;
  return std::nullopt;
}
