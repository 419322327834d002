//===- Passes.h - tfm conversion passes -------------------------*- C++ -*-===//

#ifndef TFM_CONVERSION_PASSES_H
#define TFM_CONVERSION_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "tfm/Conversion/TfmToLinalg/TfmToLinalg.h"
#include "tfm/Dialect/TfmOps.h"

namespace mlir::tfm {

#define GEN_PASS_DECL
#include "tfm/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tfm/Conversion/Passes.h.inc"

} // namespace mlir::tfm

#endif // TFM_CONVERSION_PASSES_H
