//===- TfmDialect.h - tfm dialect ------------------------------*- C++ -*-===//

#ifndef TFM_DIALECT_TFMDIALECT_H
#define TFM_DIALECT_TFMDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "tfm/Dialect/TfmOpsDialect.h.inc"

#endif // TFM_DIALECT_TFMDIALECT_H
