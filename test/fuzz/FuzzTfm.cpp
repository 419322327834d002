//===- FuzzTfm.cpp - the .tfm front end under libFuzzer -------------------===//
//
// Lexer, parser, Sema and the resolved description (--emit=json) of every
// model of the input, as tfmc runs them; diagnostics are discarded. Any
// crash, sanitizer report or hang is a bug: bad input must be an error.
//
//===----------------------------------------------------------------------===//

#include "tfm/Frontend/Parser.h"
#include "tfm/Frontend/Sema.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

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
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          llvm::StringRef(reinterpret_cast<const char *>(data), size),
          "fuzz.tfm"),
      llvm::SMLoc());
  DiagEmitter diags(sourceMgr, ctx);
  StringRef buf =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  FileAST ast = parseFile(buf, diags);
  std::vector<ModelSpec> specs = analyzeFile(ast, diags);
  for (const ModelSpec &spec : specs) {
    std::string json;
    llvm::raw_string_ostream os(json);
    os << spec.toJSON();
  }
  return 0;
}
