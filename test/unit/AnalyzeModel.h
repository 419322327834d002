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

/// The models of the .tfm text `text` (named `file` in diagnostics); fails
/// the test on an error (with the diagnostics and the text).
inline std::vector<ModelSpec> analyzeAll(llvm::StringRef text,
                                         llvm::StringRef file = "t.tfm") {
  llvm::SourceMgr sm;
  sm.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, file),
                        llvm::SMLoc());
  std::string errors;
  llvm::raw_string_ostream os(errors);
  MLIRContext ctx;
  SourceMgrDiagnosticHandler handler(sm, &ctx, os);
  DiagEmitter diags(sm, &ctx);
  FileAST ast = parseFile(text, diags);
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  EXPECT_EQ(diags.errorCount(), 0u)
      << file.str() << ": " << errors << text.str();
  return specs;
}

/// The one model of a .tfm text; fails the test on an error.
inline ModelSpec analyzeOne(llvm::StringRef text) {
  std::vector<ModelSpec> specs = analyzeAll(text);
  EXPECT_EQ(specs.size(), 1u);
  return specs.empty() ? ModelSpec() : specs.front();
}

} // namespace mlir::tfm::test

#endif // TFM_TEST_UNIT_ANALYZEMODEL_H
