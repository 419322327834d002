//===- Keys.h - sections and keys of the .tfm language ----------*- C++ -*-===//
//
// The schema of the language, built from Keys.def: which sections nest where,
// which keys each section accepts, the kind of value of each key and the
// words and call arguments of multiple-choice keys.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_FRONTEND_KEYS_H
#define TFM_FRONTEND_KEYS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <vector>

namespace mlir::tfm {

/// A section of a model (`attention { ... }`), or the model's top level.
enum class SectionId : uint8_t {
#define TFM_SECTION(Id, Spelling, Role) Id,
#include "tfm/Frontend/Keys.def"
};

/// A key of the language, whatever the section (`heads`, `bias`).
enum class KeyId : uint8_t {
#define TFM_KEY_NAME(Id, Spelling) Id,
#include "tfm/Frontend/Keys.def"
};

/// What a section is for; see Keys.def.
enum class SectionRole : uint8_t { Model, Block, Override, Stack };

/// The kind of value a key (or a call argument) takes; see Keys.def.
enum class ValueKind : uint8_t {
  Int,
  Count,
  Float,
  NonNegative,
  Bool,
  Enum,
  FloatOrDefault
};

/// Whether a key must be set.
enum class KeyNeed : uint8_t { Required, Optional, Conditional };

/// A named argument of the call form of a value: `theta` of `rope(...)`.
struct ArgSchema {
  llvm::StringRef spelling;
  ValueKind kind;
  KeyNeed need;
  double defaultValue;                         ///< Int and Float arguments
  llvm::SmallVector<llvm::StringRef, 2> words; ///< Enum arguments
  unsigned version;
};

/// A word a multiple-choice key accepts, with the arguments of its call form.
struct ValueSchema {
  llvm::StringRef spelling;
  std::vector<ArgSchema> args;
  unsigned version;
};

/// A key as one section accepts it.
struct KeySchema {
  SectionId section;
  KeyId key;
  llvm::StringRef spelling;
  ValueKind kind;
  KeyNeed need;
  unsigned version;
  std::vector<ValueSchema> values; ///< Enum keys
};

struct SectionSchema {
  SectionId id;
  llvm::StringRef spelling;
  SectionRole role;
  /// Sections that may be opened inside this one, in table order.
  llvm::SmallVector<SectionId> children;
  std::vector<KeySchema> keys;
  /// Spellings of `keys` and `children`, in table order (for suggestions).
  std::vector<llvm::StringRef> keyNames, childNames;
};

llvm::StringRef stringifySection(SectionId section);
llvm::StringRef stringifyKey(KeyId key);
std::optional<SectionId> symbolizeSection(llvm::StringRef spelling);
std::optional<KeyId> symbolizeKey(llvm::StringRef spelling);

/// Every section, in table order.
llvm::ArrayRef<SectionSchema> getSectionSchemas();
const SectionSchema &getSectionSchema(SectionId section);

/// The key `key` (or spelled `spelling`) of `section`; null when the section
/// does not accept it.
const KeySchema *findKeySchema(SectionId section, KeyId key);
const KeySchema *findKeySchema(SectionId section, llvm::StringRef spelling);
/// The word `spelling` of an Enum key; null when the key does not accept it.
const ValueSchema *findValueSchema(const KeySchema &key,
                                   llvm::StringRef spelling);

/// How tfm spells a Hugging Face config field (`num_attention_heads` ->
/// "attention { heads = N }"); empty when it is not one users confuse.
llvm::StringRef getHuggingFaceHint(llvm::StringRef name);
/// The tfm word of `key` for a Hugging Face value word (`gelu_new` ->
/// "gelu_tanh"); empty when there is none.
llvm::StringRef getHuggingFaceWord(KeyId key, llvm::StringRef word);

/// Whether `child` may be opened inside `parent`.
bool isNestedIn(SectionId child, SectionId parent);

/// Where a key misplaced in another section belongs, for hints: the first
/// Block section that accepts it, else the model's top level; std::nullopt
/// when no such section accepts it.
std::optional<SectionId> getHomeSection(llvm::StringRef key);

} // namespace mlir::tfm

#endif // TFM_FRONTEND_KEYS_H
