//===- TfmOps.h - tfm dialect operations -----------------------*- C++ -*-===//

#ifndef TFM_DIALECT_TFMOPS_H
#define TFM_DIALECT_TFMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/Dialect/TfmDialect.h"
#include "tfm/Dialect/TfmEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tfm/Dialect/TfmAttrs.h.inc"

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmOps.h.inc"

namespace mlir {
class DialectRegistry;
namespace tfm {
/// Whether an ffn activation is gated (`down(act(gate(x)) * up(x))`).
bool isGatedActivation(Activation a);
/// The activation applied to the gate of a gated ffn activation.
Activation getGateActivation(Activation a);
/// Attaches BufferizableOpInterface to the kernel ops (One-Shot Bufferize).
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace tfm
} // namespace mlir

#endif // TFM_DIALECT_TFMOPS_H
