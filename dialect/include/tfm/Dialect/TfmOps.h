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
/// The activation function `kind` (the gate's, for a gated one) of `x`, a
/// float or a vector of floats, as arith and math ops.
Value buildActivation(OpBuilder &b, Location loc, Activation kind, Value x);
/// T5's `_relative_position_bucket` of the relative position `rel` = key
/// position - query position: bidirectional (half the buckets per sign) or
/// not, exact below buckets / 2 (/ 4 bidirectional), logarithmic up to
/// `maxDistance`. Computed in f32 as the Hugging Face reference does, so
/// that the boundaries between logarithmic buckets agree with it. Needs
/// maxDistance > the exact range; from |rel| >= maxDistance on the bucket
/// is constant (the last of its sign).
int64_t relativeBucket(int64_t rel, int64_t buckets, int64_t maxDistance,
                       bool bidirectional);
/// The rows of a shape [..., C]: the product of its leading dimensions,
/// dynamic if one of them is (the kernel ops' [M, C] operands may come with
/// their rows split in several dimensions).
int64_t leadingRows(ArrayRef<int64_t> shape);
/// Attaches BufferizableOpInterface to the kernel ops (One-Shot Bufferize).
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);
} // namespace tfm
} // namespace mlir

#endif // TFM_DIALECT_TFMOPS_H
