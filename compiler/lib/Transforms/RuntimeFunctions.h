//===- RuntimeFunctions.h - declarations of the runtime's C functions -----===//
//
// Lowerings that call into the C runtime (tfm_get_threads, the
// tensor-parallel collectives) declare the function they call in the module
// of the op they lower, once.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TRANSFORMS_RUNTIMEFUNCTIONS_H
#define TFM_TRANSFORMS_RUNTIMEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::tfm {

/// Declares the private function `name` of `type` in the symbol table (the
/// module) that holds `op`, unless it is declared already.
inline void declareRuntimeFunction(OpBuilder &b, Operation *op, StringRef name,
                                   FunctionType type) {
  Operation *table = SymbolTable::getNearestSymbolTable(op->getParentOp());
  if (SymbolTable::lookupSymbolIn(table, name))
    return;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&table->getRegion(0).front());
  func::FuncOp::create(b, op->getLoc(), name, type).setPrivate();
}

} // namespace mlir::tfm

#endif // TFM_TRANSFORMS_RUNTIMEFUNCTIONS_H
