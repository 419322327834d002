//===- FuzzMlir.cpp - .mlir input through the tfm verifiers ---------------===//
//
// Parses the input as an MLIR module with the tfm, func and arith dialects
// and runs the verifiers, as tfm-opt and tfmc do on hand-written IR.
//
//===----------------------------------------------------------------------===//

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registry.insert<tfm::TfmDialect, func::FuncDialect, arith::ArithDialect,
                    memref::MemRefDialect, tensor::TensorDialect>();
    auto *c = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->getDiagEngine().registerHandler([](Diagnostic &) {});
    return c;
  }();
  // MLIR's lexer reads up to a terminating NUL, as a file buffer has.
  std::string text(reinterpret_cast<const char *>(data), size);
  // As tfmc: MLIR's own parser has no nesting limit (an upstream stack
  // overflow this target found), so tfm tools refuse deeper IR first.
  if (tfm::findExcessiveNesting(text))
    return 0;
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, ParserConfig(ctx));
  if (module)
    (void)verify(*module);
  return 0;
}
