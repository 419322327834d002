//===- TfmKernelOps.h - tfm dialect kernel-level ops -----------*- C++ -*-===//
//
// The destination-style kernel ops (TfmKernelOps.td) that
// convert-tfm-to-linalg forms and the kernel lowerings consume. TfmOps.h
// includes this header: it declares every op of the dialect.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_TFMKERNELOPS_H
#define TFM_DIALECT_TFMKERNELOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/Dialect/TfmAttrs.h"
#include "tfm/packed_layout.h"

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmKernelOps.h.inc"

namespace mlir {
class DialectRegistry;
namespace tfm {
/// The rows of a shape [..., C]: the product of its leading dimensions,
/// dynamic if one of them is (the kernel ops' [M, C] operands may come with
/// their rows split in several dimensions).
int64_t leadingRows(ArrayRef<int64_t> shape);
/// Attaches BufferizableOpInterface to the kernel ops (One-Shot Bufferize).
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace tfm
} // namespace mlir

#endif // TFM_DIALECT_TFMKERNELOPS_H
