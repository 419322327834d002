//===- AnalyzeModel.h - a .tfm text to its ModelSpec, for unit tests -----===//

#ifndef TFM_TEST_UNIT_ANALYZEMODEL_H
#define TFM_TEST_UNIT_ANALYZEMODEL_H

#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

namespace mlir::tfm::test {

/// The one model of a .tfm text; fails the test on an error (with the
/// diagnostics and the text).
inline ModelSpec analyzeOne(llvm::StringRef text) {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "t.tfm"),
                        llvm::SMLoc());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  MLIRContext ctx;
  SourceMgrDiagnosticHandler handler(sm, &ctx, os);
  DiagEmitter diags(sm, &ctx);
  FileAST ast = parseFile(text, diags);
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  EXPECT_EQ(diags.errorCount(), 0u) << errors << text.str();
  EXPECT_EQ(specs.size(), 1u);
  return specs.empty() ? ModelSpec() : specs.front();
}

} // namespace mlir::tfm::test

#endif // TFM_TEST_UNIT_ANALYZEMODEL_H
