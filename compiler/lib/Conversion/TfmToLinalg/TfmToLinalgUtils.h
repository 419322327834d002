//===- TfmToLinalgUtils.h - tfm-to-linalg helpers ---------------*- C++ -*-===//
//
// Builders shared by the tfm-to-linalg patterns: tensor.empty with dynamic
// sizes taken from other tensors, all-parallel and reducing linalg.generic
// ops, transposes, and the f32 widening of reductions.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_CONVERSION_TFMTOLINALG_TFMTOLINALGUTILS_H
#define TFM_LIB_CONVERSION_TFMTOLINALG_TFMTOLINALGUTILS_H

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::tfm::linalg_lowering {

/// The ranked tensor type of `v`.
RankedTensorType tensorType(Value v);

/// tensor.dim `i` of `v`.
Value dimOf(OpBuilder &b, Location loc, Value v, int64_t i);

/// tensor.empty of `type`, taking each dynamic size from `sources[i]`
/// (a tensor value and a dimension of it) for result dimension i.
Value emptyTensor(OpBuilder &b, Location loc, RankedTensorType type,
                  ArrayRef<std::pair<Value, int64_t>> sources);

/// tensor.empty shaped like `like`.
Value emptyLike(OpBuilder &b, Location loc, Value like);

/// A float constant of type `t`.
Value constF(OpBuilder &b, Location loc, Type t, double v);
/// An index constant.
Value constIdx(OpBuilder &b, Location loc, int64_t v);

/// reassoc + contract: lets reductions be reordered and vectorized.
arith::FastMathFlagsAttr reassoc(MLIRContext *ctx);

/// The body of a linalg.generic: block arguments to the yielded value.
using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// An all-parallel linalg.generic writing a tensor shaped like `init`;
/// `inputs` are read through `inputMaps` (the output map is the identity).
Value generic(OpBuilder &b, Location loc, ValueRange inputs,
              ArrayRef<AffineMap> inputMaps, Value init, BodyFn body);

/// Elementwise over same-shaped inputs.
Value elementwise(OpBuilder &b, Location loc, ValueRange inputs, BodyFn body);

/// Reduces `input` over dimension `axis` with `combine`, starting at
/// `initValue`; `extra` inputs are read through `extraMaps` and passed to
/// `combine` after the element. Accumulates in `accType` (default: the
/// element type).
Value reduce(
    OpBuilder &b, Location loc, Value input, int64_t axis, double initValue,
    ValueRange extra, ArrayRef<AffineMap> extraMaps,
    function_ref<Value(OpBuilder &, Location, Value acc, ValueRange args)>
        combine,
    Type accType = {});

/// `v` widened to f32 (reductions of f16/bf16 tensors accumulate in f32).
Value toF32(OpBuilder &b, Location loc, Value v);
/// f32 `v` narrowed to `elt`.
Value fromF32(OpBuilder &b, Location loc, Value v, Type elt);

/// The map from the full iteration space of rank `rank` dropping `axis`.
AffineMap dropDimMap(OpBuilder &b, int64_t rank, int64_t axis);

/// linalg.transpose of `x` by `perm`.
Value transposeTensor(OpBuilder &b, Location loc, Value x,
                      ArrayRef<int64_t> perm);

/// values[idx] for constants `values` and a dynamic index `idx`, as `elt`
/// (f32 or f64): a select chain of scalar constants, not a table in memory,
/// so that it also runs inside GPU kernels (an index past the end reads the
/// last entry).
Value selectByIndex(OpBuilder &b, Location loc, Value idx,
                    ArrayRef<double> values, Type elt);

/// The T5 bucket (index) of the relative position `rel` (index):
/// tfm::relativeBucket, spelled as comparisons against the compile-time
/// boundaries of the logarithmic buckets.
Value relativeBucketOf(OpBuilder &b, Location loc, Value rel, int64_t buckets,
                       int64_t maxDistance, bool bidirectional);

/// `x` [..., C] as the matrix [rows, C] (`x` itself when 2-D).
Value asMatrix(OpBuilder &b, Location loc, Value x);

/// The matrix `m` [rows, n] in the leading dimensions of `like` [..., C]:
/// [..., n] (`m` itself when `like` is 2-D).
Value withLeadingDimsOf(OpBuilder &b, Location loc, Value m, Value like,
                        int64_t n);

/// The packed [..., P, K, W] form of the weight operand `w` [..., N, K] (a
/// linear's [N, K], or a mixture of experts' stack [E, N, K]; `converted`:
/// its value after conversion): the packed parameter when `w` is
/// tfm.unpack_weight of one (tfm-model-abi), else packed here in panels of
/// `kPanel` columns (hand-written IR, a slice of an experts' stack).
Value packedWeight(OpBuilder &b, Location loc, Value w, Value converted,
                   int64_t kPanel);

/// Integer index `i` as f32.
Value indexToF32(OpBuilder &b, Location loc, Value i);

/// Whether `op` is read only by tfm.linear / tfm.patch_embed, whose kernels
/// take the packed weight directly: it then stays until they are lowered.
bool isFoldedIntoKernel(UnpackWeightOp op);

/// positions[batch] (an integer tensor [B]) as an index.
Value positionOf(OpBuilder &b, Location loc, Value positions, Value batch);

} // namespace mlir::tfm::linalg_lowering

#endif // TFM_LIB_CONVERSION_TFMTOLINALG_TFMTOLINALGUTILS_H
