//===- DiagnosticsTest.cpp - the front end's error limit and clipping -----===//
//
// DiagEmitter shows at most kMaxErrors errors but counts every one, so that
// code comparing counts before and after a model's checks never takes a model
// with unshown errors as valid (issue 14: an encoder_decoder model without
// stacks reached MLIRGen). Long words in messages are clipped.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Diagnostics.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::tfm;

namespace {

TEST(Diagnostics, CountsErrorsPastTheLimit) {
  MLIRContext ctx;
  llvm::SourceMgr sourceMgr;
  std::string text(100, '@');
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(text, "t.tfm"),
                               llvm::SMLoc());
  unsigned shown = 0;
  ctx.getDiagEngine().registerHandler([&](Diagnostic &) { ++shown; });
  DiagEmitter diags(sourceMgr, &ctx);
  const char *buf = sourceMgr.getMemoryBuffer(1)->getBufferStart();
  for (unsigned i = 0; i < DiagEmitter::kMaxErrors; ++i)
    EXPECT_TRUE(static_cast<bool>(
        diags.error(llvm::SMLoc::getFromPointer(buf + i), "bad")));
  EXPECT_TRUE(diags.tooManyErrors());
  unsigned before = diags.errorCount();
  // A later model's errors are not shown, but they are counted.
  EXPECT_FALSE(static_cast<bool>(
      diags.error(llvm::SMLoc::getFromPointer(buf + 50), "later")));
  EXPECT_EQ(diags.errorCount(), before + 1);
  EXPECT_EQ(shown, DiagEmitter::kMaxErrors);
}

TEST(Diagnostics, DuplicatesAreShownAndCountedOnce) {
  MLIRContext ctx;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer("x", "t.tfm"),
                               llvm::SMLoc());
  ctx.getDiagEngine().registerHandler([](Diagnostic &) {});
  DiagEmitter diags(sourceMgr, &ctx);
  llvm::SMLoc at = llvm::SMLoc::getFromPointer(
      sourceMgr.getMemoryBuffer(1)->getBufferStart());
  EXPECT_TRUE(static_cast<bool>(diags.error(at, "same")));
  EXPECT_FALSE(static_cast<bool>(diags.error(at, "same")));
  EXPECT_EQ(diags.errorCount(), 1u);
}

TEST(Diagnostics, ClipsLongWords) {
  std::string name(10'000'000, 'x');
  std::string clipped = clipLongWords("unknown key '" + name + "' in 'model'");
  EXPECT_EQ(clipped, "unknown key '" + std::string(kMaxWordInMessage - 3, 'x') +
                         "...' in 'model'");
  EXPECT_EQ(clipLongWords("a short 'message' (with 12 words)"),
            "a short 'message' (with 12 words)");
  // A multi-byte character is not cut in two.
  std::string wide;
  for (int i = 0; i < 40; ++i)
    wide += "\xc3\xa9"; // é
  std::string cut = clipLongWords(wide);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_EQ((cut.size() - 3) % 2, 0u);
}

} // namespace
