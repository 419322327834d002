//===- FuzzImport.cpp - tfmc import of a config.json ----------------------===//
//
// importHfConfig on the input as the text of a config.json, then the written
// .tfm through the front end: an import that succeeds must write a file the
// compiler reads without a crash.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/HfImport.h"
#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <cstdint>

using namespace mlir;
using namespace mlir::tfm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *ctx = [] {
    auto *c = new MLIRContext(MLIRContext::Threading::DISABLED);
    c->getDiagEngine().registerHandler([](Diagnostic &) {});
    return c;
  }();
  std::optional<std::string> tfm = importHfConfig(
      "fuzz/config.json",
      llvm::StringRef(reinterpret_cast<const char *>(data), size),
      [](HfSeverity, const llvm::Twine &) {},
      // Unknown fields pass, so that the written file reaches the front end.
      HfImportOptions{/*allowUnknown=*/true});
  if (!tfm)
    return 0;
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(*tfm, "fuzz.tfm"), llvm::SMLoc());
  DiagEmitter diags(sourceMgr, ctx);
  FileAST ast = parseFile(*tfm, diags);
  (void)analyzeFile(ast, diags);
  return 0;
}
