//===- TfmOps.h - tfm dialect operations -----------------------*- C++ -*-===//
//
// Every op of the tfm dialect: the model level (TfmOps.td) here, the kernel
// level (TfmKernelOps.td) from TfmKernelOps.h, included at the end.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_TFMOPS_H
#define TFM_DIALECT_TFMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tfm/Dialect/TfmAttrs.h"

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmOps.h.inc"

namespace mlir {
namespace tfm {
/// Whether an ffn activation is gated (`down(act(gate(x)) * up(x))`).
bool isGatedActivation(Activation a);
/// The activation applied to the gate of a gated ffn activation.
Activation getGateActivation(Activation a);
/// gpt-oss's clamped SwiGLU (`swiglu_clamp`): the limit of the gate and up
/// projections and the factor in the gate's sigmoid, constants of its
/// modeling code (GptOssExperts: limit = config.swiglu_limit, 7 in every
/// published config; alpha = 1.702).
constexpr double kSwigluClampLimit = 7.0;
constexpr double kSwigluClampAlpha = 1.702;
/// What a gated activation applies to the up projection before the
/// product (gpt-oss's clamp and + 1 of `swiglu_clamp`), if anything.
std::optional<Activation> getUpActivation(Activation a);
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
} // namespace tfm
} // namespace mlir

#include "tfm/Dialect/TfmKernelOps.h"

#endif // TFM_DIALECT_TFMOPS_H
