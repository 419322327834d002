//===- VerifierUtils.h - checks shared by the tfm verifiers ----*- C++ -*-===//
//
// The checks that verifiers of both levels use (TfmOps.cpp, the model level;
// TfmKernelOps.cpp, the kernel level), among them the packed-weight shapes
// of runtime/include/tfm/packed_layout.h. Dynamic dimensions are compatible
// with anything; static ones must agree.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DIALECT_LIB_VERIFIERUTILS_H
#define TFM_DIALECT_LIB_VERIFIERUTILS_H

#include "tfm/Dialect/TfmOps.h"
#include "tfm/ggml_blocks.h"
#include "tfm/packed_layout.h"

#include <optional>
#include <string>

namespace mlir::tfm::checks {

/// Whether dimensions `a` and `b` can be equal (either may be `?`).
bool dimsCompatible(int64_t a, int64_t b);
/// A dimension for a message: its size or `?`.
std::string dimStr(int64_t d);

/// Checks the sizes that attention divides by or loops over: the heads of
/// the query and of the keys/values, and the head dimensions of the query
/// and of the values, each > 0 where static (GQA divides by the kv heads).
LogicalResult checkAttentionSizes(Operation *op, int64_t heads, int64_t kvHeads,
                                  int64_t headDim, int64_t valueDim);
/// Mask rule shared by tfm.mask, tfm.attention, tfm.multi_head_attention
/// and tfm.attention_kernel: `window` is given exactly when the kind is
/// `sliding`, and is >= 1.
LogicalResult checkMask(Operation *op, MaskKind kind,
                        std::optional<int64_t> window);
/// A soft cap, when given, is finite and > 0.
LogicalResult checkSoftcap(Operation *op, std::optional<double> cap,
                           StringRef name);
/// ALiBi slopes: one finite value per head (when the head count is known).
LogicalResult checkAlibi(Operation *op, std::optional<ArrayRef<double>> slopes,
                         int64_t heads, StringRef name);
/// Reads an optional integer attribute as a signed value.
std::optional<int64_t> optInt(IntegerAttr attr);
/// Reads an optional float attribute.
std::optional<double> optF64(FloatAttr attr);

/// How a weight of type `packed` that a matmul of `elt` values reads holds
/// K: in bf16 pairs (bf16 for f32 values, tfm-model-abi bf16-pairs), in
/// int8 quads (i8 for f32 values, int8-quads), else in panels of the
/// values' own type.
tfm_packing weightPacking(Type packed, Type elt);
/// Whether `panels` panels of `panel` columns hold exactly `n` (>= 0)
/// columns: the last panel is not empty.
bool panelsFit(int64_t panels, int64_t panel, int64_t n);
/// Checks a weight `p` [P, R, X] packed in bf16 pairs or int8 quads
/// against K = `k` (may be dynamic: not checked) and its `n` (static)
/// output columns.
LogicalResult checkPackedWeight(Operation *op, tfm_packing packing,
                                ArrayRef<int64_t> p, int64_t k, int64_t n);
/// Checks the operands of a weight [n, k] in ggml's blocks: `rows` 1-D i8
/// of tfm_ggml_blocks_capacity(n, k) bytes, `type` [1] i32, n and k static,
/// k a multiple of 32 (tfm/ggml_blocks.h).
LogicalResult checkGgmlRows(Operation *op, Type rows, Type type, int64_t n,
                            int64_t k);
/// The epilogue operands of a linear kernel with output `out` [M, N]: `mul`
/// and `residual` (either may be null) [M, N], or [..., N] with leading
/// dimensions of M elements in all.
LogicalResult checkEpilogueOperands(Operation *op, Value mul, Value residual,
                                    ArrayRef<int64_t> out);

} // namespace mlir::tfm::checks

#endif // TFM_DIALECT_LIB_VERIFIERUTILS_H
