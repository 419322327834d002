//===- HfModelTypesTest.cpp - the table of Hugging Face model types -------===//
//
// frontend/lib/Hf/ModelTypes.def is the one list of Hugging Face model types:
// the words of `checkpoint = huggingface(type = ...)`, the types `tfmc
// import` reads and the layouts the runtime reads all come from it. Every
// row must import from the defaults of its configuration class into a model
// whose checkpoint layout provides every parameter, its tensor names may use
// only the placeholders the mapper fills in (and the runtime's expert index
// in the modules of one expert), and the docs list every type.
// The keys the importer writes are checked against Keys.def when it is
// compiled (Block::set); the static_asserts below show the check.
//
//===----------------------------------------------------------------------===//

#include "../../frontend/lib/Hf/Importer.h"

#include "AnalyzeModel.h"
#include "tfm/Frontend/HfCheckpoint.h"
#include "tfm/Frontend/HfImport.h"
#include "tfm/Frontend/Keys.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>
#include <map>

using namespace mlir;
using namespace mlir::tfm;
using mlir::tfm::test::analyzeOne;

namespace {

// A key of another section, or a section nested where Keys.def does not
// allow it, does not compile: Block<S>::set<K>() and sub<C>() assert these.
static_assert(hf::sectionHasKey(SectionId::Attention, KeyId::Heads));
static_assert(hf::sectionHasKey(SectionId::Model, KeyId::Checkpoint));
static_assert(!hf::sectionHasKey(SectionId::Ffn, KeyId::Heads));
static_assert(!hf::sectionHasKey(SectionId::Model, KeyId::Heads));
static_assert(hf::sectionNests(SectionId::Encoder, SectionId::Attention));
static_assert(!hf::sectionNests(SectionId::Ffn, SectionId::Attention));

std::vector<std::string> strings(llvm::ArrayRef<llvm::StringRef> refs) {
  return std::vector<std::string>(refs.begin(), refs.end());
}

TEST(HfModelTypes, OneListOfTypes) {
  const KeySchema *key = findKeySchema(SectionId::Model, KeyId::Checkpoint);
  ASSERT_TRUE(key);
  const ValueSchema *hf = findValueSchema(*key, "huggingface");
  ASSERT_TRUE(hf);
  // type = T (and, v3, the FP8 blocks fp8_block_rows / fp8_block_cols).
  const ArgSchema *typeArg = nullptr;
  for (const ArgSchema &a : hf->args)
    if (a.spelling == "type")
      typeArg = &a;
  ASSERT_TRUE(typeArg);
  EXPECT_EQ(hf->args.size(), 3u);
  std::vector<std::string> words = strings(typeArg->words);
  EXPECT_EQ(words, strings(hfCheckpointTypes()));
  EXPECT_EQ(words, strings(getHfImportModelTypes()));
  EXPECT_EQ(words.size(), hf::getModelTypes().size());
  for (const hf::ModelTypeInfo &type : hf::getModelTypes()) {
    EXPECT_EQ(hf::lookupModelType(type.name), &type) << type.name.str();
    EXPECT_EQ(&hf::getModelType(type.id), &type) << type.name.str();
    EXPECT_TRUE(isHfCheckpointType(type.name)) << type.name.str();
  }
  EXPECT_FALSE(isHfCheckpointType("mamba"));
  // A type the importer refuses, with the reason, is no type of the list
  // (none is refused at present: olmoe, deepseek_v2 and deepseek_v3 were
  // until language v3).
  EXPECT_TRUE(isHfCheckpointType("olmoe"));
  EXPECT_TRUE(isHfCheckpointType("deepseek_v3"));
  EXPECT_TRUE(hf::refusedModelType("mamba").empty());
  for (llvm::StringRef type : words)
    EXPECT_TRUE(hf::refusedModelType(type).empty()) << type.str();
}

/// A config of nothing but its model_type takes every default of the type's
/// configuration class: it imports, and the checkpoint layout of the type
/// provides every parameter of the model it describes. DeepseekV2Config's
/// default num_experts_per_tok is None, which chooses no experts: that
/// config also says how many.
TEST(HfModelTypes, EveryTypeImportsItsDefaults) {
  const std::map<std::string, std::string> needs = {
      {"deepseek_v2", ", \"num_experts_per_tok\": 6"}};
  for (llvm::StringRef type : getHfImportModelTypes()) {
    std::string messages;
    auto diag = [&](HfSeverity, const llvm::Twine &message) {
      messages += message.str() + "\n";
    };
    auto extra = needs.find(type.str());
    std::optional<std::string> tfm =
        importHfConfig("config.json",
                       "{\"model_type\": \"" + type.str() + "\"" +
                           (extra == needs.end() ? "" : extra->second) + "}",
                       diag);
    ASSERT_TRUE(tfm) << type.str() << ": " << messages;
    EXPECT_EQ(messages, "") << type.str();
    ModelSpec spec = analyzeOne(*tfm);
    EXPECT_EQ(spec.hfType, type.str());
    for (const std::string &problem : hfCheckpointProblems(spec))
      ADD_FAILURE() << type.str() << ": " << problem;
  }
}

/// The placeholders the mapper fills in; a layer prefix names the layer.
TEST(HfModelTypes, TensorPatterns) {
  const hf::Tensor kinds[] = {
#define TFM_HF_TENSOR_KIND(Id, WhyMissing) hf::Tensor::Id,
#include "../../frontend/lib/Hf/ModelTypes.def"
  };
  auto placeholders = [](llvm::StringRef pattern) {
    std::vector<std::string> out;
    while (true) {
      size_t open = pattern.find('{');
      if (open == llvm::StringRef::npos)
        return out;
      size_t close = pattern.find('}', open);
      EXPECT_NE(close, llvm::StringRef::npos) << pattern.str();
      if (close == llvm::StringRef::npos)
        return out;
      out.push_back(pattern.slice(open + 1, close).str());
      pattern = pattern.drop_front(close + 1);
    }
  };
  for (const hf::ModelTypeInfo &type : hf::getModelTypes()) {
    const hf::FamilyInfo &fam = hf::getFamily(type.family);
    EXPECT_TRUE(fam.layer.contains("{i}")) << type.name.str();
    EXPECT_TRUE(fam.has(hf::Tensor::AttnNorm)) << type.name.str();
    EXPECT_TRUE(type.prefix.empty() || type.prefix.ends_with("."))
        << type.name.str();
    for (hf::Tensor kind : kinds) {
      EXPECT_FALSE(hf::whyMissing(kind).empty() && kind != hf::Tensor::Ignore &&
                   kind != hf::Tensor::IgnoreWithoutDecoder);
      // The modules of one expert name it with {e} (the runtime reads one
      // tensor per expert); no other tensor has an expert.
      bool perExpert = kind == hf::Tensor::ExpertGate ||
                       kind == hf::Tensor::ExpertUp ||
                       kind == hf::Tensor::ExpertDown;
      for (llvm::StringRef pattern : fam.names(kind)) {
        EXPECT_FALSE(pattern.empty()) << type.name.str();
        std::vector<std::string> found = placeholders(pattern);
        for (const std::string &p : found)
          EXPECT_TRUE(p == "stack" || (p == "ffn" && hf::isLayerTensor(kind)) ||
                      (p == "e" && perExpert))
              << type.name.str() << ": {" << p << "} in " << pattern.str();
        EXPECT_EQ(llvm::count(found, "e"), perExpert ? 1 : 0)
            << type.name.str() << ": " << pattern.str();
      }
    }
  }
}

std::string readDoc(llvm::StringRef name) {
  auto buf = llvm::MemoryBuffer::getFile(std::string(TFM_MODELS_DIR) +
                                         "/../docs/" + name.str());
  EXPECT_TRUE(buf) << name.str();
  return buf ? (*buf)->getBuffer().str() : std::string();
}

/// The language reference lists every type in the `checkpoint` row, and
/// docs/HuggingFace.md has a row per type in its table.
TEST(HfModelTypes, DocsListEveryType) {
  std::string language = readDoc("Language.md");
  std::string huggingFace = readDoc("HuggingFace.md");
  llvm::StringRef row;
  for (llvm::StringRef line : llvm::split(language, '\n'))
    if (line.starts_with("| `checkpoint` |"))
      row = line;
  ASSERT_FALSE(row.empty());
  for (llvm::StringRef type : getHfImportModelTypes()) {
    EXPECT_TRUE(row.contains("`" + type.str() + "`")) << type.str();
    EXPECT_TRUE(
        llvm::StringRef(huggingFace).contains("\n| " + type.str() + " | "))
        << type.str();
  }
}

} // namespace
