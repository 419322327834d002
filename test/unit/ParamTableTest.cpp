//===- ParamTableTest.cpp - the parameter table and the IR agree ----------===//
//
// MLIRGen creates every tfm.param from ModelSpec::params(); the description,
// the header and the runtime read the same table. These tests fail if the
// IR and the table ever disagree: same names, shapes and element types, in
// both directions, for every model in models/ and for small models that
// cover every key that changes the parameters.
//
//===----------------------------------------------------------------------===//

#include "AnalyzeModel.h"
#include "tfm/Frontend/MLIRGen.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace mlir;
using namespace mlir::tfm;
using mlir::tfm::test::analyzeAll;

namespace {

/// Checks that the tfm.params of the model's IR are exactly the table.
void expectIRMatchesTable(const ModelSpec &spec) {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module = buildModule(ctx, spec, UnknownLoc::get(&ctx));
  ASSERT_TRUE(module) << spec.name;
  std::map<std::string, RankedTensorType> inIR;
  module->walk([&](ParamOp p) {
    auto [it, inserted] = inIR.emplace(p.getName().str(), p.getType());
    if (!inserted)
      EXPECT_EQ(it->second, p.getType())
          << spec.name << ": " << p.getName().str() << " used with two types";
  });
  ParamTable table = spec.params();
  std::set<std::string> names;
  for (const ParamSpec &p : table) {
    EXPECT_TRUE(names.insert(p.name).second)
        << spec.name << ": duplicate table entry " << p.name;
    EXPECT_EQ(table.indexOf(p.name), std::optional<unsigned>(&p - &table[0]));
    EXPECT_EQ(table.find(p.key), &p);
    auto it = inIR.find(p.name);
    if (it == inIR.end()) {
      ADD_FAILURE() << spec.name << ": " << p.name << " not in the IR";
      continue;
    }
    EXPECT_EQ(it->second.getShape(), ArrayRef<int64_t>(p.shape))
        << spec.name << ": " << p.name;
    Type elt = spec.dtype == DType::f16    ? Type(Float16Type::get(&ctx))
               : spec.dtype == DType::bf16 ? Type(BFloat16Type::get(&ctx))
                                           : Type(Float32Type::get(&ctx));
    EXPECT_EQ(it->second.getElementType(), elt) << spec.name;
  }
  for (const auto &[name, type] : inIR)
    EXPECT_TRUE(names.count(name))
        << spec.name << ": the IR uses " << name << ", not in the table";
  EXPECT_EQ(table.numElements(), spec.paramCount());
}

TEST(ParamTable, ModelsDirectory) {
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(TFM_MODELS_DIR, ec), end;
       it != end && !ec; it.increment(ec)) {
    if (llvm::sys::path::extension(it->path()) != ".tfm")
      continue;
    auto buf = llvm::MemoryBuffer::getFile(it->path());
    ASSERT_TRUE(bool(buf)) << it->path();
    for (const ModelSpec &spec : analyzeAll((*buf)->getBuffer(), it->path()))
      expectIRMatchesTable(spec);
    ++files;
  }
  EXPECT_GE(files, 5);
}

/// Small models that together set every key that changes the parameters.
const char *kVariants = R"(
model gqa {
  arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 2
  embedding { tie_output = true; position = rope }
  attention { heads = 4; kv_heads = 2; bias = false }
  ffn { hidden = 48; activation = swiglu; bias = false }
  norm { kind = rmsnorm; final = false }
}
model parallel {
  arch = decoder; vocab = 50; context = 16; d_model = 32; layers = 2
  residual = parallel; dtype = f16
  attention { heads = 4; head_dim = 4 }
  ffn { activation = geglu }
}
model post {
  arch = encoder; vocab = 50; context = 16; d_model = 32; layers = 3
  output = classifier(classes = 3, pool = mean)
  attention { heads = 4; padding = true }
  norm { placement = post }
}
model vit {
  arch = encoder; d_model = 32; layers = 1; dtype = bf16
  input = image(size = 16, patch = 4, channels = 2)
  output = classifier(classes = 5)
  embedding { cls_token = true }
  attention { heads = 4 }
}
model seq2seq {
  arch = encoder_decoder; vocab = 50; context = 16; d_model = 32
  embedding { position = sinusoidal; tie_output = true }
  attention { heads = 4; padding = true }
  encoder { layers = 2 }
  decoder { layers = 1 }
}
)";

TEST(ParamTable, Variants) {
  std::vector<ModelSpec> specs = analyzeAll(kVariants, "variants.tfm");
  ASSERT_EQ(specs.size(), 5u);
  for (const ModelSpec &spec : specs)
    expectIRMatchesTable(spec);
}

TEST(ParamTable, KeysAndNames) {
  std::vector<ModelSpec> specs = analyzeAll(kVariants, "variants.tfm");
  ASSERT_EQ(specs.size(), 5u);
  const ModelSpec &seq2seq = specs[4];
  ParamTable table = seq2seq.params();
  const ParamSpec *k = table.find(
      {/*stack=*/1, /*layer=*/0, ParamBlock::CrossAttn, ParamRole::KBias});
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->name, "decoder.layers.0.cross_attn.k.bias");
  EXPECT_EQ(k->init(), ParamInit::zeros);
  const ParamSpec *n =
      table.find({0, -1, ParamBlock::FinalNorm, ParamRole::Weight});
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "encoder.final_norm.weight");
  EXPECT_EQ(n->init(), ParamInit::ones);
  // The decoder has one layer.
  EXPECT_EQ(table.find({1, 1, ParamBlock::Attn, ParamRole::QWeight}), nullptr);
  EXPECT_FALSE(table.indexOf("lm_head.weight")); // tied
}

} // namespace
