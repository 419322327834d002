//===- TfmOps.cpp - tfm dialect operations --------------------------------===//
//
// Verifiers for every shape and attribute rule of the model-level tfm ops
// (TfmOps.td; the kernel level's are in TfmKernelOps.cpp). Dynamic
// dimensions are compatible with anything; static ones must agree.
//
//===----------------------------------------------------------------------===//

#include "VerifierUtils.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallBitVector.h"
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::checks;

//===----------------------------------------------------------------------===//
// Checks shared with the kernel level (VerifierUtils.h)
//===----------------------------------------------------------------------===//

bool checks::dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string checks::dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

LogicalResult checks::checkAttentionSizes(Operation *op, int64_t heads,
                                          int64_t kvHeads, int64_t headDim,
                                          int64_t valueDim) {
  auto positive = [&](int64_t d, StringRef what) -> LogicalResult {
    if (!ShapedType::isDynamic(d) && d <= 0)
      return op->emitOpError() << what << " must be > 0, got " << d;
    return success();
  };
  if (failed(positive(heads, "the query's heads (dimension 1)")) ||
      failed(positive(kvHeads, "the key's heads (dimension 1)")) ||
      failed(positive(headDim, "the head dimension (query dimension 3)")) ||
      failed(positive(valueDim, "the value's head dimension (dimension 3)")))
    return failure();
  if (!ShapedType::isDynamic(heads) && !ShapedType::isDynamic(kvHeads) &&
      heads % kvHeads != 0)
    return op->emitOpError() << "kv_heads (" << kvHeads
                             << ") must divide heads (" << heads << ")";
  return success();
}

LogicalResult checks::checkMask(Operation *op, MaskKind kind,
                                std::optional<int64_t> window) {
  if (kind == MaskKind::sliding) {
    if (!window)
      return op->emitOpError() << "sliding mask needs a window";
    if (*window < 1)
      return op->emitOpError() << "window must be >= 1, got " << *window;
  } else if (window) {
    return op->emitOpError() << "window is only valid with a sliding mask";
  }
  return success();
}

std::optional<int64_t> checks::optInt(IntegerAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getInt();
}

LogicalResult checks::checkSoftcap(Operation *op, std::optional<double> cap,
                                   StringRef name) {
  if (cap && !(std::isfinite(*cap) && *cap > 0.0))
    return op->emitOpError() << name << " must be finite and > 0";
  return success();
}

LogicalResult checks::checkAlibi(Operation *op,
                                 std::optional<ArrayRef<double>> slopes,
                                 int64_t heads, StringRef name) {
  if (!slopes)
    return success();
  for (double s : *slopes)
    if (!std::isfinite(s))
      return op->emitOpError() << name << " must be finite";
  if (!ShapedType::isDynamic(heads) &&
      static_cast<int64_t>(slopes->size()) != heads)
    return op->emitOpError() << name << " has " << slopes->size()
                             << " entries for " << heads << " heads";
  return success();
}

std::optional<double> checks::optF64(FloatAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getValueAsDouble();
}

tfm_packing checks::weightPacking(Type packed, Type elt) {
  Type p = cast<ShapedType>(packed).getElementType();
  if (elt.isF32() && p.isBF16())
    return TFM_PACKING_BF16_PAIRS;
  if (elt.isF32() && p.isSignlessInteger(8))
    return TFM_PACKING_INT8_QUADS;
  return TFM_PACKING_F32;
}

bool checks::panelsFit(int64_t panels, int64_t panel, int64_t n) {
  return panel > 0 && tfm_packed_panels(n, panel) == panels;
}

LogicalResult checks::checkPackedWeight(Operation *op, tfm_packing packing,
                                        ArrayRef<int64_t> p, int64_t k,
                                        int64_t n) {
  bool quads = packing == TFM_PACKING_INT8_QUADS;
  if (p[2] % tfm_packed_group(packing))
    return op->emitOpError()
           << (quads ? "a weight in int8 quads has a last dimension of 4 W "
                       "bytes, not "
                     : "a weight in bf16 pairs has an even last dimension "
                       "(2 W), not ")
           << p[2];
  int64_t rows = tfm_packed_rows(packing, k);
  if (!ShapedType::isDynamic(k) && !dimsCompatible(p[1], rows))
    return op->emitOpError()
           << "K is " << k << ", so the weight in "
           << (quads ? "int8 quads has " : "bf16 pairs has ") << rows
           << (quads ? " rows per panel (quads, scales, sums), not "
                     : " pairs per panel, not ")
           << dimStr(p[1]);
  int64_t panel = tfm_packed_panel_of(packing, p[2]);
  if (!panelsFit(p[0], panel, n))
    return op->emitOpError()
           << n << " columns do not fill " << p[0] << " panels of " << panel;
  return success();
}

LogicalResult checks::checkGgmlRows(Operation *op, Type rows, Type type,
                                    int64_t n, int64_t k) {
  auto r = cast<ShapedType>(rows), t = cast<ShapedType>(type);
  if (ShapedType::isDynamic(n) || ShapedType::isDynamic(k) || k % 32 != 0)
    return op->emitOpError() << "a weight in ggml blocks has static sizes "
                                "and K a multiple of 32, not "
                             << dimStr(n) << " x " << dimStr(k);
  int64_t bytes = tfm_ggml_blocks_capacity(n, k);
  if (!r.getElementType().isSignlessInteger(8) || r.getRank() != 1 ||
      r.getDimSize(0) != bytes)
    return op->emitOpError() << "the rows of a " << n << " x " << k
                             << " weight in ggml blocks are " << bytes
                             << " bytes (i8), not " << r;
  if (!t.getElementType().isSignlessInteger(32) || t.getRank() != 1 ||
      t.getDimSize(0) != 1)
    return op->emitOpError() << "the type of a weight in ggml blocks is one "
                                "i32, not "
                             << t;
  return success();
}

LogicalResult checks::checkEpilogueOperands(Operation *op, Value mul,
                                            Value residual,
                                            ArrayRef<int64_t> out) {
  for (Value e : {mul, residual}) {
    if (!e)
      continue;
    auto es = cast<ShapedType>(e.getType()).getShape();
    int64_t rows = leadingRows(es);
    if (es.size() < 2 || !dimsCompatible(rows, out[0]) ||
        !dimsCompatible(es.back(), out[1]))
      return op->emitOpError() << "mul and residual must have the output's "
                                  "shape, or its rows split in several "
                                  "dimensions";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Checks of the model level
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Checks that `v` has rank `rank`.
LogicalResult checkRank(Operation *op, Value v, int64_t rank, StringRef what) {
  int64_t actual = tensorType(v).getRank();
  if (actual != rank)
    return op->emitOpError()
           << what << " must have rank " << rank << ", got rank " << actual;
  return success();
}

/// Checks that dimension `actual` can equal `expected` (either may be `?`).
LogicalResult checkDim(Operation *op, int64_t actual, int64_t expected,
                       const Twine &what) {
  if (!dimsCompatible(actual, expected))
    return op->emitOpError() << what << " is " << dimStr(actual)
                             << ", expected " << dimStr(expected);
  return success();
}

/// That every float operand and result of `op` shares one element type,
/// the KV caches `caches` aside (operands and results), whose element type is
/// the others' or a narrower one they are rounded to: f16 or bf16.
LogicalResult checkSameElementTypeExceptCaches(Operation *op,
                                               ValueRange caches) {
  Type elt;
  auto visit = [&](Value v) -> LogicalResult {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !isa<FloatType>(t.getElementType()) ||
        llvm::is_contained(caches, v))
      return success();
    if (!elt)
      elt = t.getElementType();
    else if (elt != t.getElementType())
      return op->emitOpError()
             << "mixes element types " << elt << " and " << t.getElementType();
    return success();
  };
  for (Value v : op->getOperands())
    if (failed(visit(v)))
      return failure();
  for (Value v : op->getResults())
    if (failed(visit(v)))
      return failure();
  for (Value c : caches) {
    Type ct = cast<ShapedType>(c.getType()).getElementType();
    if (elt && ct != elt && !ct.isF16() && !ct.isBF16())
      return op->emitOpError()
             << "a KV cache holds the element type of the computation (" << elt
             << "), or f16 or bf16, not " << ct;
  }
  return success();
}

/// Checks that every float operand and result share one element type.
LogicalResult checkSameElementType(Operation *op) {
  return checkSameElementTypeExceptCaches(op, ValueRange{});
}

/// Checks that `actual` has the shape `expected` (with `?` compatible).
LogicalResult checkShape(Operation *op, Value v, ArrayRef<int64_t> expected,
                         StringRef what) {
  auto t = tensorType(v);
  if (t.getRank() != static_cast<int64_t>(expected.size()))
    return op->emitOpError() << what << " must have rank " << expected.size()
                             << ", got rank " << t.getRank();
  for (auto [i, dims] : llvm::enumerate(llvm::zip(t.getShape(), expected)))
    if (failed(checkDim(op, std::get<0>(dims), std::get<1>(dims),
                        Twine(what) + " dimension " + Twine(i))))
      return failure();
  return success();
}

int64_t mulDims(int64_t a, int64_t b) {
  if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b))
    return ShapedType::kDynamic;
  return a * b;
}

LogicalResult checkPositive(Operation *op, int64_t v, StringRef name) {
  if (v <= 0)
    return op->emitOpError() << name << " must be > 0, got " << v;
  return success();
}

/// An optional per-sequence operand (`lengths`, `positions`): [B].
LogicalResult checkPerSequence(Operation *op, Value v, int64_t batch,
                               StringRef name) {
  if (!v)
    return success();
  if (failed(checkRank(op, v, 1, name)))
    return failure();
  return checkDim(op, tensorType(v).getDimSize(0), batch,
                  Twine(name) + " dimension 0");
}

LogicalResult checkLengths(Operation *op, Value lengths, int64_t batch) {
  return checkPerSequence(op, lengths, batch, "lengths");
}

/// `positions` (each sequence's first position) is [B] like `lengths`.
LogicalResult checkPositions(Operation *op, Value positions, int64_t batch) {
  return checkPerSequence(op, positions, batch, "positions");
}

/// A cache operand list of `count` tensors with `positions` for `batch`
/// sequences (`what` says what the cache is).
LogicalResult checkCacheOperands(Operation *op, ValueRange cache,
                                 Value positions, int64_t batch, size_t count,
                                 StringRef what) {
  if (cache.size() != count || !positions)
    return op->emitOpError()
           << what << " with positions, got " << cache.size() << " tensors"
           << (positions ? "" : " and no positions");
  return checkPositions(op, positions, batch);
}

/// A paged cache's block table ([B, M] i32, none without one): it needs
/// positions and no ring buffer, and `pools` (the caches, each of rank 4
/// with positions in dimension `posDim[i]`) hold blocks of a static number
/// of positions.
LogicalResult checkBlockTable(Operation *op, Value table, Value positions,
                              bool ring, int64_t batch, ValueRange pools,
                              ArrayRef<unsigned> posDim) {
  if (!table)
    return success();
  if (!positions)
    return op->emitOpError() << "a block table needs positions";
  if (ring)
    return op->emitOpError() << "a ring buffer cannot be paged";
  if (failed(checkRank(op, table, 2, "block_table")) ||
      failed(checkDim(op, tensorType(table).getDimSize(0), batch,
                      "block_table dimension 0")))
    return failure();
  if (!tensorType(table).getElementType().isInteger(32))
    return op->emitOpError() << "block_table must hold i32 block indices";
  for (auto [pool, dim] : llvm::zip(pools, posDim)) {
    auto t = tensorType(pool);
    if (t.getRank() != 4)
      continue; // the rank is checked with the other operands
    int64_t bs = t.getDimSize(dim);
    if (ShapedType::isDynamic(bs) || bs < 1)
      return op->emitOpError()
             << "a paged cache's blocks need a static number of positions "
                "(dimension "
             << dim << ")";
  }
  return success();
}

LogicalResult checkScale(Operation *op, double scale, StringRef name) {
  if (!std::isfinite(scale) || scale == 0.0)
    return op->emitOpError() << name << " must be finite and nonzero";
  return success();
}

/// The rotary table rule shared by tfm.rope and tfm.multi_head_attention:
/// a non-empty table of finite, non-negative frequencies for at most
/// `headDim` (if known) dimensions.
LogicalResult checkInvFreq(Operation *op, ArrayRef<double> invFreq,
                           int64_t headDim, StringRef name) {
  if (invFreq.empty())
    return op->emitOpError() << name << " must not be empty";
  for (double f : invFreq)
    if (!std::isfinite(f) || f < 0.0)
      return op->emitOpError()
             << name << " entries must be finite and >= 0, got " << f;
  int64_t r = 2 * static_cast<int64_t>(invFreq.size());
  if (!ShapedType::isDynamic(headDim) && r > headDim)
    return op->emitOpError() << name << " rotates " << r
                             << " dimensions, more than the head's " << headDim;
  return success();
}

/// The T5 relative bias: a [buckets, heads] table, given exactly with a
/// max_distance beyond the exact buckets.
LogicalResult checkRelative(Operation *op, Value table,
                            std::optional<int64_t> maxDistance,
                            bool bidirectional, int64_t heads) {
  if (!table) {
    if (maxDistance || bidirectional)
      return op->emitOpError()
             << "relative_max_distance and relative_bidirectional need a "
                "relative bias table";
    return success();
  }
  if (!maxDistance)
    return op->emitOpError() << "a relative bias table needs "
                                "relative_max_distance";
  if (failed(checkRank(op, table, 2, "relative bias table")))
    return failure();
  auto shape = tensorType(table).getShape();
  if (failed(checkDim(op, shape[1], heads, "relative bias table dimension 1")))
    return failure();
  int64_t buckets = shape[0];
  if (ShapedType::isDynamic(buckets))
    return op->emitOpError() << "relative bias table needs a static number "
                                "of buckets";
  int64_t exact = bidirectional ? buckets / 4 : buckets / 2;
  if (exact < 1)
    return op->emitOpError()
           << buckets << " buckets are too few"
           << (bidirectional ? " (bidirectional: >= 4)" : " (>= 2)");
  if (*maxDistance <= exact)
    return op->emitOpError()
           << "max_distance (" << *maxDistance << ") must exceed the " << exact
           << " exact buckets";
  return success();
}

} // namespace

int64_t mlir::tfm::relativeBucket(int64_t rel, int64_t buckets,
                                  int64_t maxDistance, bool bidirectional) {
  int64_t base = 0, n = buckets;
  if (bidirectional) {
    n /= 2;
    if (rel > 0)
      base = n;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;
  }
  int64_t exact = n / 2;
  if (rel < exact)
    return base + rel;
  if (rel >= maxDistance)
    return base + n - 1;
  // f32 as torch: log(rel / exact) / log(max_distance / exact) * (n - exact).
  float x = static_cast<float>(rel) / static_cast<float>(exact);
  float ratio =
      std::log(x) /
      static_cast<float>(std::log(double(maxDistance) / double(exact)));
  int64_t large = exact + static_cast<int64_t>(ratio * float(n - exact));
  return base + std::min(large, n - 1);
}

//===----------------------------------------------------------------------===//
// Model level
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  if (!getType().hasStaticShape())
    return emitOpError() << "must have a static shape";
  return success();
}

LogicalResult EmbedOp::verify() {
  if (failed(checkRank(*this, getTokens(), 2, "tokens")) ||
      failed(checkRank(*this, getTable(), 2, "table")))
    return failure();
  if (std::optional<int64_t> shards = getVocabShards(); shards && *shards < 1)
    return emitOpError() << "vocab_shards must be positive, got " << *shards;
  auto tok = tensorType(getTokens()).getShape();
  auto table = tensorType(getTable()).getShape();
  if (failed(
          checkShape(*this, getResult(), {tok[0], tok[1], table[1]}, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult AllReduceOp::verify() {
  Operation *op = *this;
  if (getRanks() < 1)
    return emitOpError() << "ranks must be positive, got " << getRanks();
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have at least one dimension";
  if (getBias() &&
      failed(
          checkShape(op, getBias(), {in.getDimSize(in.getRank() - 1)}, "bias")))
    return failure();
  return checkSameElementType(op);
}

LogicalResult AllGatherOp::verify() {
  Operation *op = *this;
  int64_t ranks = getRanks();
  if (ranks < 1)
    return emitOpError() << "ranks must be positive, got " << ranks;
  auto in = tensorType(getInput());
  if (in.getRank() < 2)
    return emitOpError() << "input must have rows: rank 2 or more";
  SmallVector<int64_t> shape(in.getShape());
  int64_t &last = shape.back();
  if (ShapedType::isDynamic(last))
    return emitOpError() << "input's last dimension must be static";
  last *= ranks;
  if (failed(checkShape(op, getResult(), shape, "result")))
    return failure();
  return checkSameElementType(op);
}

LogicalResult PositionsOp::verify() {
  if (failed(checkRank(*this, getInput(), 3, "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  auto in = tensorType(getInput()).getShape();
  if (failed(checkPositions(*this, getPositions(), in[0])))
    return failure();
  if (getKind() == PositionKind::sinusoidal) {
    if (getTable())
      return emitOpError() << "sinusoidal positions take no table";
    return success();
  }
  if (!getTable())
    return emitOpError() << "learned positions need a table";
  if (failed(checkRank(*this, getTable(), 2, "table")))
    return failure();
  auto table = tensorType(getTable()).getShape();
  if (failed(checkDim(*this, table[1], in[2], "table dimension 1")))
    return failure();
  if (!ShapedType::isDynamic(in[1]) && !ShapedType::isDynamic(table[0]) &&
      in[1] > table[0])
    return emitOpError() << "sequence length " << in[1]
                         << " exceeds the position table's " << table[0]
                         << " rows";
  return checkSameElementType(*this);
}

LogicalResult NormOp::verify() {
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  int64_t d = in.getShape().back();
  if (failed(checkShape(*this, getWeight(), {d}, "weight")))
    return failure();
  if (getKind() == NormKind::layernorm && !getBias())
    return emitOpError() << "layernorm needs a bias";
  if (getKind() == NormKind::rmsnorm && getBias())
    return emitOpError() << "rmsnorm has no bias";
  if (getBias() && failed(checkShape(*this, getBias(), {d}, "bias")))
    return failure();
  if (!(getEps().convertToDouble() > 0.0))
    return emitOpError() << "eps must be > 0";
  return checkSameElementType(*this);
}

LogicalResult LinearOp::verify() {
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (failed(checkRank(*this, getWeight(), 2, "weight")))
    return failure();
  auto w = tensorType(getWeight()).getShape();
  if (failed(checkDim(*this, in.getShape().back(), w[1],
                      "input dimension " + Twine(in.getRank() - 1))))
    return failure();
  if (getBias() && failed(checkShape(*this, getBias(), {w[0]}, "bias")))
    return failure();
  SmallVector<int64_t> expected(in.getShape());
  expected.back() = w[0];
  if (failed(checkShape(*this, getResult(), expected, "result")))
    return failure();
  for (auto [e, what] :
       {std::pair{getMul(), "mul"}, std::pair{getResidual(), "residual"}})
    if (e && e.getType() != getType())
      return emitOpError() << what << " must have the result's type "
                           << getType() << ", not " << e.getType();
  if (auto act = getActivation(); act && isGatedActivation(*act))
    return emitOpError() << "activation " << stringifyActivation(*act)
                         << " is gated: spell it with mul";
  return checkSameElementType(*this);
}

LogicalResult MultiHeadAttentionOp::verify() {
  Operation *op = *this;
  if (failed(checkRank(op, getQuery(), 3, "query")) ||
      failed(checkRank(op, getSource(), 3, "source")))
    return failure();
  if (getSinks() &&
      (failed(checkRank(op, getSinks(), 1, "sinks")) ||
       failed(checkDim(op, tensorType(getSinks()).getDimSize(0),
                       getHeadsAttr().getInt(), "sinks dimension 0"))))
    return failure();
  int64_t heads = getHeadsAttr().getInt(), kvHeads = getKvHeadsAttr().getInt(),
          hd = getHeadDimAttr().getInt();
  if (failed(checkPositive(op, heads, "heads")) ||
      failed(checkPositive(op, kvHeads, "kv_heads")) ||
      failed(checkPositive(op, hd, "head_dim")))
    return failure();
  if (heads % kvHeads != 0)
    return emitOpError() << "kv_heads (" << kvHeads << ") must divide heads ("
                         << heads << ")";
  auto q = tensorType(getQuery()).getShape();
  auto src = tensorType(getSource()).getShape();
  if (failed(checkDim(op, src[0], q[0], "source dimension 0")))
    return failure();
  int64_t d = q[2], dk = src[2];
  if (failed(checkShape(op, getWq(), {heads * hd, d}, "wq")) ||
      failed(checkShape(op, getWk(), {kvHeads * hd, dk}, "wk")) ||
      failed(checkShape(op, getWv(), {kvHeads * hd, dk}, "wv")) ||
      failed(checkShape(op, getWo(), {d, heads * hd}, "wo")))
    return failure();
  auto biases = getBiases();
  if (!biases.empty()) {
    if (biases.size() != 3)
      return emitOpError() << "takes 0 or 3 biases (q, k, v), got "
                           << biases.size();
    if (failed(checkShape(op, biases[0], {heads * hd}, "q bias")) ||
        failed(checkShape(op, biases[1], {kvHeads * hd}, "k bias")) ||
        failed(checkShape(op, biases[2], {kvHeads * hd}, "v bias")))
      return failure();
  }
  if (getOutBias() && failed(checkShape(op, getOutBias(), {d}, "o bias")))
    return failure();
  if (failed(checkLengths(op, getLengths(), q[0])) ||
      failed(checkMask(op, getMask(), optInt(getWindowAttr()))) ||
      failed(checkScale(op, getScale().convertToDouble(), "scale")))
    return failure();
  if (getRopeInvFreq().has_value() != getRopeStyle().has_value())
    return emitOpError() << "rope_inv_freq and rope_style go together";
  if (auto f = getRopeInvFreq())
    if (failed(checkInvFreq(op, *f, hd, "rope_inv_freq")))
      return failure();
  auto qkNorm = getQkNorm();
  bool qkAttrs = getQkNormKind() || getQkNormEpsAttr();
  if (qkNorm.empty() != !qkAttrs)
    return emitOpError() << "qk_norm weights go with qk_norm_kind and "
                            "qk_norm_eps";
  if (!qkNorm.empty()) {
    if (qkNorm.size() != 2)
      return emitOpError() << "takes 0 or 2 qk_norm weights (q, k), got "
                           << qkNorm.size();
    if (!getQkNormKind() || !getQkNormEpsAttr())
      return emitOpError() << "qk_norm weights go with qk_norm_kind and "
                              "qk_norm_eps";
    // Each head's, or with qk_norm_full the whole projections'.
    bool full = getQkNormFull();
    if (failed(checkShape(op, qkNorm[0], {full ? heads * hd : hd},
                          "q_norm weight")) ||
        failed(checkShape(op, qkNorm[1], {full ? kvHeads * hd : hd},
                          "k_norm weight")))
      return failure();
    if (!(getQkNormEpsAttr().getValueAsDouble() > 0.0))
      return emitOpError() << "qk_norm_eps must be > 0";
  } else if (getQkNormOffsetAttr()) {
    return emitOpError() << "qk_norm_offset needs qk_norm weights";
  } else if (getQkNormFull()) {
    return emitOpError() << "qk_norm_full needs qk_norm weights";
  }
  if (getClipAttr() && !(getClipAttr().getValueAsDouble() > 0.0))
    return emitOpError() << "clip must be > 0";
  if (failed(checkSoftcap(op, optF64(getSoftcapAttr()), "softcap")) ||
      failed(checkAlibi(op, getAlibiSlopes(), heads, "alibi_slopes")) ||
      failed(checkRelative(op, getRelative(),
                           optInt(getRelativeMaxDistanceAttr()),
                           getRelativeBidirectional(), heads)))
    return failure();
  if (getQuery().getType() != getResult().getType())
    return emitOpError() << "result type must equal the query type";
  auto cache = getCache();
  if (!cache.empty() || getPositions()) {
    if (failed(checkCacheOperands(op, cache, getPositions(), q[0], 2,
                                  "a KV cache is 2 tensors (keys "
                                  "transposed, values)")) ||
        failed(checkShape(
            op, cache[0],
            {ShapedType::kDynamic, kvHeads, hd, ShapedType::kDynamic},
            "key cache")) ||
        failed(checkShape(
            op, cache[1],
            {ShapedType::kDynamic, kvHeads, ShapedType::kDynamic, hd},
            "value cache")) ||
        failed(checkBlockTable(op, getBlockTable(), getPositions(), getRing(),
                               q[0], cache, {3, 2})))
      return failure();
    if (getQuery() != getSource())
      return emitOpError() << "a KV cache is for self-attention (source must "
                              "be the query)";
  }
  if (getRing() && cache.empty())
    return emitOpError() << "ring needs a KV cache";
  if (getCacheOut().size() != cache.size())
    return emitOpError() << "returns one updated cache per cache operand";
  for (auto [in, out] : llvm::zip(cache, getCacheOut()))
    if (in.getType() != out.getType())
      return emitOpError() << "an updated cache has its cache's type";
  SmallVector<Value> caches(cache);
  llvm::append_range(caches, getCacheOut());
  return checkSameElementTypeExceptCaches(op, caches);
}

LogicalResult LatentAttentionOp::verify() {
  Operation *op = *this;
  if (failed(checkRank(op, getInput(), 3, "input")))
    return failure();
  int64_t heads = getHeadsAttr().getInt(), hd = getHeadDimAttr().getInt(),
          rope = getRopeDimAttr().getInt(), dv = getValueDimAttr().getInt(),
          rank = getKvRankAttr().getInt();
  if (failed(checkPositive(op, heads, "heads")) ||
      failed(checkPositive(op, dv, "value_dim")) ||
      failed(checkPositive(op, rank, "kv_rank")) ||
      failed(checkPositive(op, rope, "rope_dim")))
    return failure();
  if (rope % 2 != 0 || rope >= hd)
    return emitOpError() << "rope_dim (" << rope
                         << ") must be even and less than head_dim (" << hd
                         << ")";
  int64_t nope = hd - rope;
  auto x = tensorType(getInput()).getShape();
  int64_t d = x[2];
  // The query's projection reads the input, or the query latent.
  int64_t qIn = d;
  if (bool(getWqA()) != bool(getQANorm()))
    return emitOpError() << "wq_a and q_a_norm go together";
  if (Value wqa = getWqA()) {
    if (failed(checkRank(op, wqa, 2, "wq_a")))
      return failure();
    qIn = tensorType(wqa).getDimSize(0);
    if (failed(checkShape(op, wqa, {qIn, d}, "wq_a")) ||
        failed(checkShape(op, getQANorm(), {qIn}, "q_a_norm")))
      return failure();
  }
  if (failed(checkShape(op, getWq(), {heads * hd, qIn}, "wq")) ||
      failed(checkShape(op, getWkvA(), {rank + rope, d}, "wkv_a")) ||
      failed(checkShape(op, getKvANorm(), {rank}, "kv_a_norm")) ||
      failed(checkShape(op, getWkvB(), {heads * (nope + dv), rank}, "wkv_b")) ||
      failed(checkShape(op, getWo(), {d, heads * dv}, "wo")))
    return failure();
  if (failed(checkLengths(op, getLengths(), x[0])) ||
      failed(checkMask(op, getMask(), std::nullopt)) ||
      failed(checkScale(op, getScale().convertToDouble(), "scale")))
    return failure();
  if (getRopeInvFreq().has_value() != getRopeStyle().has_value())
    return emitOpError() << "rope_inv_freq and rope_style go together";
  if (auto f = getRopeInvFreq()) {
    if (failed(checkInvFreq(op, *f, rope, "rope_inv_freq")))
      return failure();
    if (int64_t(f->size()) * 2 != rope)
      return emitOpError() << "rope_inv_freq rotates all rope_dim (" << rope
                           << ") values, got " << f->size() << " pairs";
  }
  if (!(getNormEpsAttr().getValueAsDouble() > 0.0))
    return emitOpError() << "norm_eps must be > 0";
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  auto cache = getCache();
  if (!cache.empty() || getPositions()) {
    if (failed(checkCacheOperands(op, cache, getPositions(), x[0], 1,
                                  "a latent cache is 1 tensor (the "
                                  "latents, transposed)")) ||
        failed(checkShape(
            op, cache[0],
            {ShapedType::kDynamic, 1, rank + rope, ShapedType::kDynamic},
            "latent cache")) ||
        failed(checkBlockTable(op, getBlockTable(), getPositions(), false, x[0],
                               cache, {3})))
      return failure();
  } else if (getBlockTable()) {
    return emitOpError() << "a block table needs a cache";
  }
  if (getCacheOut().size() != cache.size())
    return emitOpError() << "returns one updated cache per cache operand";
  for (auto [in, out] : llvm::zip(cache, getCacheOut()))
    if (in.getType() != out.getType())
      return emitOpError() << "an updated cache has its cache's type";
  SmallVector<Value> caches(cache);
  llvm::append_range(caches, getCacheOut());
  return checkSameElementTypeExceptCaches(op, caches);
}

bool mlir::tfm::isGatedActivation(Activation a) {
  return a == Activation::swiglu || a == Activation::geglu ||
         a == Activation::geglu_tanh || a == Activation::swiglu_clamp;
}

std::optional<Activation> mlir::tfm::getUpActivation(Activation a) {
  if (a == Activation::swiglu_clamp)
    return Activation::swiglu_clamp_up;
  return std::nullopt;
}

Activation mlir::tfm::getGateActivation(Activation a) {
  switch (a) {
  case Activation::swiglu:
    return Activation::silu;
  case Activation::geglu:
    return Activation::gelu;
  case Activation::geglu_tanh:
    return Activation::gelu_tanh;
  case Activation::swiglu_clamp:
    return Activation::swiglu_clamp_gate;
  default:
    return a;
  }
}

Value mlir::tfm::buildActivation(OpBuilder &b, Location l, Activation kind,
                                 Value x) {
  Type t = x.getType();
  auto c = [&](double v) -> Value {
    auto elt = cast<FloatType>(getElementTypeOrSelf(t));
    TypedAttr a = b.getFloatAttr(elt, v);
    if (auto vt = dyn_cast<VectorType>(t))
      a = DenseElementsAttr::get(vt, a);
    return arith::ConstantOp::create(b, l, a);
  };
  switch (kind) {
  case Activation::relu:
    return arith::MaximumFOp::create(b, l, x, c(0.0));
  case Activation::gelu:
  case Activation::geglu: {
    Value e =
        math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, c(M_SQRT1_2)));
    return arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, c(0.5)),
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  case Activation::gelu_tanh:
  case Activation::geglu_tanh: {
    Value x3 =
        arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, x), x);
    Value inner = arith::MulFOp::create(
        b, l, c(0.7978845608028654),
        arith::AddFOp::create(b, l, x,
                              arith::MulFOp::create(b, l, x3, c(0.044715))));
    Value th = math::TanhOp::create(b, l, inner);
    return arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, x, c(0.5)),
                                 arith::AddFOp::create(b, l, th, c(1.0)));
  }
  case Activation::silu:
  case Activation::swiglu: {
    Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x));
    return arith::DivFOp::create(b, l, x,
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  case Activation::swiglu_clamp:
  case Activation::swiglu_clamp_gate: {
    // gpt-oss (GptOssExperts.forward): g = min(gate, 7), g * sigmoid(1.702 g).
    Value g = arith::MinimumFOp::create(b, l, x, c(kSwigluClampLimit));
    Value e = math::ExpOp::create(
        b, l, arith::MulFOp::create(b, l, g, c(-kSwigluClampAlpha)));
    return arith::DivFOp::create(b, l, g,
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  case Activation::swiglu_clamp_up: {
    // clamp(up, -7, 7) + 1.
    Value u = arith::MaximumFOp::create(
        b, l, arith::MinimumFOp::create(b, l, x, c(kSwigluClampLimit)),
        c(-kSwigluClampLimit));
    return arith::AddFOp::create(b, l, u, c(1.0));
  }
  case Activation::sigmoid: {
    // A gate's weight (Qwen2-MoE's shared expert), not a ffn activation.
    Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x));
    return arith::DivFOp::create(b, l, c(1.0),
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  case Activation::quick_gelu: {
    // x * sigmoid(1.702 x), as CLIP.
    Value e =
        math::ExpOp::create(b, l, arith::MulFOp::create(b, l, x, c(-1.702)));
    return arith::DivFOp::create(b, l, x,
                                 arith::AddFOp::create(b, l, e, c(1.0)));
  }
  }
  return x;
}

LogicalResult FfnOp::verify() {
  Operation *op = *this;
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  if (failed(checkRank(op, getUpWeight(), 2, "up weight")))
    return failure();
  int64_t d = in.getShape().back();
  int64_t hidden = tensorType(getUpWeight()).getDimSize(0);
  if (failed(checkShape(op, getUpWeight(), {hidden, d}, "up weight")) ||
      failed(checkShape(op, getDownWeight(), {d, hidden}, "down weight")))
    return failure();
  bool gated = isGatedActivation(getActivation());
  if (gated && !getGateWeight())
    return emitOpError() << stringifyActivation(getActivation())
                         << " needs a gate weight";
  if (!gated && getGateWeight())
    return emitOpError() << stringifyActivation(getActivation())
                         << " takes no gate weight";
  if (getGateWeight() &&
      failed(checkShape(op, getGateWeight(), {hidden, d}, "gate weight")))
    return failure();
  auto biases = getBiases();
  size_t nWeights = gated ? 3 : 2;
  if (!biases.empty()) {
    // All but down's: the row-parallel form (tensor parallelism).
    if (biases.size() != nWeights && biases.size() != nWeights - 1)
      return emitOpError() << "takes 0, " << nWeights - 1
                           << " (no down bias) or " << nWeights
                           << " biases, got " << biases.size();
    if (failed(checkShape(op, biases[0], {hidden}, "up bias")) ||
        (gated && failed(checkShape(op, biases[1], {hidden}, "gate bias"))) ||
        (biases.size() == nWeights &&
         failed(checkShape(op, biases.back(), {d}, "down bias"))))
      return failure();
  }
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  return checkSameElementType(op);
}

/// The experts' stacks of a mixture of experts (tfm.moe, tfm.moe_experts):
/// up (and gate) [E, F, D], down [E, D, F], biases none or up [E, F], gate
/// [E, F] (gated), down [E, D]. Sets `experts` and `hidden` (E and F).
static LogicalResult checkExperts(Operation *op, int64_t d, Value up,
                                  Value gate, Value down, ValueRange biases,
                                  Activation act, int64_t &experts,
                                  int64_t &hidden) {
  if (failed(checkRank(op, up, 3, "up weight")))
    return failure();
  experts = tensorType(up).getDimSize(0);
  hidden = tensorType(up).getDimSize(1);
  if (failed(checkShape(op, up, {experts, hidden, d}, "up weight")) ||
      failed(checkShape(op, down, {experts, d, hidden}, "down weight")))
    return failure();
  bool gated = isGatedActivation(act);
  if (gated != bool(gate))
    return op->emitOpError()
           << stringifyActivation(act)
           << (gated ? " needs a gate weight" : " takes no gate weight");
  if (gate && failed(checkShape(op, gate, {experts, hidden, d}, "gate weight")))
    return failure();
  if (biases.empty())
    return success();
  size_t want = gated ? 3 : 2;
  if (biases.size() != want)
    return op->emitOpError()
           << "takes 0 or " << want << " expert biases, got " << biases.size();
  if (failed(checkShape(op, biases[0], {experts, hidden}, "up bias")) ||
      (gated &&
       failed(checkShape(op, biases[1], {experts, hidden}, "gate bias"))) ||
      failed(checkShape(op, biases.back(), {experts, d}, "down bias")))
    return failure();
  return success();
}

static LogicalResult checkRouting(Operation *op, int64_t experts, int64_t k,
                                  double scale, int64_t groups,
                                  int64_t topkGroups, Value selectionBias) {
  if (k < 1 || (!ShapedType::isDynamic(experts) && k > experts))
    return op->emitOpError() << "experts_per_token must be in [1, "
                             << dimStr(experts) << "], got " << k;
  if (!(scale > 0.0))
    return op->emitOpError() << "routed_scale must be > 0, got " << scale;
  if (groups < 1 || topkGroups < 1 || topkGroups > groups ||
      ShapedType::isDynamic(experts) || experts % groups != 0)
    return op->emitOpError() << "groups (" << groups << ") must divide the "
                             << dimStr(experts) << " experts and topk_groups ("
                             << topkGroups << ") be in [1, groups]";
  if (selectionBias &&
      failed(checkShape(op, selectionBias, {experts}, "selection bias")))
    return failure();
  return success();
}

LogicalResult MoeOp::verify() {
  Operation *op = *this;
  auto in = tensorType(getInput());
  if (in.getRank() < 1)
    return emitOpError() << "input must have rank >= 1";
  int64_t d = in.getShape().back(), experts, hidden;
  if (failed(checkExperts(op, d, getUpWeight(), getGateWeight(),
                          getDownWeight(), getExpertBiases(), getActivation(),
                          experts, hidden)) ||
      failed(
          checkShape(op, getRouterWeight(), {experts, d}, "router weight")) ||
      (getRouterBias() &&
       failed(checkShape(op, getRouterBias(), {experts}, "router bias"))) ||
      failed(checkRouting(op, experts, getExpertsPerToken(),
                          getRoutedScale().convertToDouble(), getGroups(),
                          getTopkGroups(), getSelectionBias())))
    return failure();
  auto shared = getShared();
  bool gated = isGatedActivation(getActivation());
  if (!shared.empty()) {
    if (shared.size() != (gated ? 3u : 2u))
      return emitOpError() << "a shared expert takes " << (gated ? 3 : 2)
                           << " weights, got " << shared.size();
    if (failed(checkRank(op, shared[0], 2, "shared up weight")))
      return failure();
    int64_t s = tensorType(shared[0]).getDimSize(0);
    if ((gated &&
         failed(checkShape(op, shared[1], {s, d}, "shared gate weight"))) ||
        failed(checkShape(op, shared[0], {s, d}, "shared up weight")) ||
        failed(checkShape(op, shared.back(), {d, s}, "shared down weight")))
      return failure();
  }
  if (getSharedScale()) {
    if (shared.empty())
      return emitOpError() << "shared_scale needs a shared expert";
    if (failed(checkShape(op, getSharedScale(), {1, d}, "shared scale")))
      return failure();
  }
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  return checkSameElementType(op);
}

LogicalResult RouteOp::verify() {
  auto t = tensorType(getLogits());
  if (t.getRank() < 1)
    return emitOpError() << "logits must have rank >= 1";
  if (getSelectionBias() && getRouter() != RouterKind::sigmoid)
    return emitOpError() << "takes a selection bias with the sigmoid router "
                            "only";
  int64_t e = t.getShape().back();
  if (getGroups() > 1 && getRouter() == RouterKind::topk_softmax)
    return emitOpError() << "groups need the softmax or sigmoid router";
  if (getGroups() > 1 && !ShapedType::isDynamic(e) &&
      getTopkGroups() * (e / getGroups()) < getExpertsPerToken())
    return emitOpError() << "the " << getTopkGroups() << " best of "
                         << getGroups() << " groups hold fewer than "
                         << getExpertsPerToken() << " experts";
  return checkRouting(*this, t.getShape().back(), getExpertsPerToken(),
                      getRoutedScale().convertToDouble(), getGroups(),
                      getTopkGroups(), getSelectionBias());
}

LogicalResult MoeExpertsOp::verify() {
  Operation *op = *this;
  auto in = tensorType(getInput()), w = tensorType(getWeights());
  if (in.getRank() < 1 || w.getRank() != in.getRank())
    return emitOpError() << "input and weights must have one rank (>= 1)";
  int64_t d = in.getShape().back(), experts, hidden;
  if (failed(checkExperts(op, d, getUpWeight(), getGateWeight(),
                          getDownWeight(), getBiases(), getActivation(),
                          experts, hidden)))
    return failure();
  for (int64_t i = 0; i + 1 < in.getRank(); ++i)
    if (!dimsCompatible(in.getDimSize(i), w.getDimSize(i)))
      return emitOpError() << "weights must have the input's rows";
  if (!dimsCompatible(w.getShape().back(), experts))
    return emitOpError() << "weights must have " << experts
                         << " columns (one per expert), got "
                         << dimStr(w.getShape().back());
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  return checkSameElementType(op);
}

LogicalResult RowScaleOp::verify() {
  auto in = tensorType(getInput()), sc = tensorType(getScale());
  if (in.getRank() < 1 || sc.getRank() != in.getRank() ||
      sc.getShape().back() != 1)
    return emitOpError() << "scale must be [..., 1] of the input's rank";
  for (int64_t i = 0; i + 1 < in.getRank(); ++i)
    if (!dimsCompatible(in.getDimSize(i), sc.getDimSize(i)))
      return emitOpError() << "scale must have the input's rows";
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  return checkSameElementType(*this);
}

LogicalResult PatchEmbedOp::verify() {
  Operation *op = *this;
  if (failed(checkRank(op, getPixels(), 4, "pixels")) ||
      failed(checkRank(op, getWeight(), 2, "weight")))
    return failure();
  int64_t p = getPatchAttr().getInt();
  if (failed(checkPositive(op, p, "patch")))
    return failure();
  auto px = tensorType(getPixels()).getShape();
  int64_t c = px[1], s = px[2];
  if (ShapedType::isDynamic(c) || ShapedType::isDynamic(s) ||
      ShapedType::isDynamic(px[3]))
    return emitOpError() << "pixels must have static channels and size";
  if (px[3] != s)
    return emitOpError() << "image must be square, got " << s << "x" << px[3];
  if (s % p != 0)
    return emitOpError() << "patch (" << p << ") must divide the image size ("
                         << s << ")";
  int64_t d = tensorType(getWeight()).getDimSize(0);
  if (failed(checkShape(op, getWeight(), {d, c * p * p}, "weight")) ||
      failed(checkShape(op, getBias(), {d}, "bias")) ||
      failed(
          checkShape(op, getResult(), {px[0], (s / p) * (s / p), d}, "result")))
    return failure();
  return checkSameElementType(op);
}

LogicalResult PrependTokenOp::verify() {
  if (failed(checkRank(*this, getInput(), 3, "input")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  int64_t t = ShapedType::isDynamic(in[1]) ? in[1] : in[1] + 1;
  if (failed(checkShape(*this, getToken(), {in[2]}, "token")) ||
      failed(checkShape(*this, getResult(), {in[0], t, in[2]}, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult PoolOp::verify() {
  if (failed(checkRank(*this, getInput(), 3, "input")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  if (failed(checkShape(*this, getResult(), {in[0], in[2]}, "result")) ||
      failed(checkLengths(*this, getLengths(), in[0])))
    return failure();
  return checkSameElementType(*this);
}

//===----------------------------------------------------------------------===//
// Primitive level
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::verify() {
  auto lhs = tensorType(getLhs()), rhs = tensorType(getRhs());
  int64_t rank = lhs.getRank();
  if (rank < 2)
    return emitOpError() << "operands must have rank >= 2, got rank " << rank;
  if (rhs.getRank() != rank)
    return emitOpError() << "operands must have the same rank, got " << rank
                         << " and " << rhs.getRank();
  SmallVector<int64_t> expected;
  for (int64_t i = 0; i < rank - 2; ++i) {
    int64_t a = lhs.getDimSize(i), b = rhs.getDimSize(i);
    if (!dimsCompatible(a, b))
      return emitOpError() << "batch dimension " << i
                           << " differs: " << dimStr(a) << " vs " << dimStr(b);
    expected.push_back(ShapedType::isDynamic(a) ? b : a);
  }
  int64_t m = lhs.getDimSize(getTransposeLhs() ? rank - 1 : rank - 2);
  int64_t k = lhs.getDimSize(getTransposeLhs() ? rank - 2 : rank - 1);
  int64_t k2 = rhs.getDimSize(getTransposeRhs() ? rank - 1 : rank - 2);
  int64_t n = rhs.getDimSize(getTransposeRhs() ? rank - 2 : rank - 1);
  if (!dimsCompatible(k, k2))
    return emitOpError() << "contraction dimensions differ: " << dimStr(k)
                         << " vs " << dimStr(k2);
  expected.push_back(m);
  expected.push_back(n);
  if (failed(checkShape(*this, getResult(), expected, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult ClipOp::verify() {
  if (!(getLimit().convertToDouble() > 0.0))
    return emitOpError() << "limit must be > 0, got "
                         << getLimit().convertToDouble();
  return success();
}

LogicalResult ScaleOp::verify() {
  return checkScale(*this, getFactor().convertToDouble(), "factor");
}

LogicalResult MaskOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  if (getKind() == MaskKind::none && !getLengths())
    return emitOpError() << "mask of kind none needs lengths";
  if (failed(checkMask(*this, getKind(), optInt(getWindowAttr()))))
    return failure();
  return checkLengths(*this, getLengths(),
                      tensorType(getInput()).getDimSize(0));
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getType().getRank();
  if (getAxisAttr().getInt() < 0 || getAxisAttr().getInt() >= rank)
    return emitOpError() << "axis " << getAxisAttr().getInt()
                         << " is out of range for rank " << rank;
  if (Value sinks = getSinks()) {
    if (rank != 4 || getAxisAttr().getInt() != 3)
      return emitOpError() << "takes sinks for attention scores only: rank 4, "
                              "axis 3";
    if (failed(checkRank(*this, sinks, 1, "sinks")) ||
        failed(checkDim(*this, tensorType(sinks).getDimSize(0),
                        getType().getDimSize(1), "sinks dimension 0")) ||
        failed(checkSameElementType(*this)))
      return failure();
  }
  return success();
}

LogicalResult ActivationOp::verify() {
  if (isGatedActivation(getKind()))
    return emitOpError() << "kind " << stringifyActivation(getKind())
                         << " is gated: spell it with tfm.mul";
  return success();
}

LogicalResult SplitHeadsOp::verify() {
  if (failed(checkRank(*this, getInput(), 3, "input")) ||
      failed(checkPositive(*this, getHeadsAttr().getInt(), "heads")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  int64_t h = getHeadsAttr().getInt(), d = ShapedType::kDynamic;
  if (!ShapedType::isDynamic(in[2])) {
    if (in[2] % h != 0)
      return emitOpError() << "heads (" << h << ") must divide dimension 2 ("
                           << in[2] << ")";
    d = in[2] / h;
  }
  if (failed(checkShape(*this, getResult(), {in[0], h, in[1], d}, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult MergeHeadsOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  if (failed(checkShape(*this, getResult(),
                        {in[0], in[2], mulDims(in[1], in[3])}, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult TransposeOp::verify() {
  auto in = tensorType(getInput());
  ArrayRef<int64_t> perm = getPermutation();
  if (static_cast<int64_t>(perm.size()) != in.getRank())
    return emitOpError() << "permutation has " << perm.size()
                         << " entries for rank " << in.getRank();
  llvm::SmallBitVector seen(perm.size());
  SmallVector<int64_t> expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= in.getRank() || seen.test(p))
      return emitOpError() << "permutation is not a permutation of 0.."
                           << in.getRank() - 1;
    seen.set(p);
    expected.push_back(in.getDimSize(p));
  }
  if (failed(checkShape(*this, getResult(), expected, "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult RopeOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")) ||
      failed(checkPositions(*this, getPositions(), getType().getDimSize(0))))
    return failure();
  return checkInvFreq(*this, getInvFreq(), getType().getDimSize(3), "inv_freq");
}

LogicalResult SoftcapOp::verify() {
  return checkSoftcap(*this, getCap().convertToDouble(), "cap");
}

LogicalResult AlibiOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")))
    return failure();
  return checkAlibi(*this, getSlopes(), getType().getDimSize(1), "slopes");
}

LogicalResult RelativeBiasOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")))
    return failure();
  if (getInput().getType() != getResult().getType())
    return emitOpError() << "result type must equal the input type";
  if (failed(checkRelative(*this, getTable(), getMaxDistance(),
                           getBidirectional(),
                           tensorType(getInput()).getDimSize(1))))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult RepeatKvOp::verify() {
  if (failed(checkRank(*this, getInput(), 4, "input")) ||
      failed(checkPositive(*this, getRepeatsAttr().getInt(), "repeats")))
    return failure();
  auto in = tensorType(getInput()).getShape();
  if (failed(checkShape(
          *this, getResult(),
          {in[0], mulDims(in[1], getRepeatsAttr().getInt()), in[2], in[3]},
          "result")))
    return failure();
  return checkSameElementType(*this);
}

LogicalResult CacheWriteOp::verify() {
  if (failed(checkRank(*this, getUpdate(), 4, "update")) ||
      failed(checkRank(*this, getCache(), 4, "cache")))
    return failure();
  auto u = tensorType(getUpdate()).getShape();
  SmallVector<int64_t> c(tensorType(getCache()).getShape());
  if (getTransposed())
    std::swap(c[2], c[3]);
  // A paged cache's dimension 0 counts blocks, not sequences.
  if (!getBlockTable() && !ShapedType::isDynamic(c[0]) &&
      !ShapedType::isDynamic(u[0]) && c[0] < u[0])
    return emitOpError() << "the cache holds " << c[0]
                         << " sequences, fewer than the update's " << u[0];
  if (failed(checkDim(*this, c[1], u[1], "cache heads")) ||
      failed(checkDim(*this, c[3], u[3], "cache head dimension")) ||
      failed(checkPositions(*this, getPositions(), u[0])))
    return failure();
  if (failed(checkBlockTable(*this, getBlockTable(), getPositions(), getRing(),
                             u[0], getCache(), {getTransposed() ? 3u : 2u})))
    return failure();
  // A paged cache's blocks hold any run of positions.
  if (!getBlockTable() && !ShapedType::isDynamic(c[2]) &&
      !ShapedType::isDynamic(u[2]) && c[2] < u[2])
    return emitOpError() << "the cache holds " << c[2]
                         << " positions, fewer than the update's " << u[2];
  return checkSameElementTypeExceptCaches(*this, {getCache(), getResult()});
}

//===----------------------------------------------------------------------===//
// Fused level
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  Operation *op = *this;
  if (failed(checkRank(op, getQuery(), 4, "query")) ||
      failed(checkRank(op, getKey(), 4, "key")) ||
      failed(checkRank(op, getValue(), 4, "value")))
    return failure();
  if (getSinks() && (failed(checkRank(op, getSinks(), 1, "sinks")) ||
                     failed(checkDim(op, tensorType(getSinks()).getDimSize(0),
                                     tensorType(getQuery()).getDimSize(1),
                                     "sinks dimension 0"))))
    return failure();
  auto q = tensorType(getQuery()).getShape();
  SmallVector<int64_t> k(tensorType(getKey()).getShape());
  SmallVector<int64_t> v(tensorType(getValue()).getShape());
  // A transposed key [B, KV, D, S] is checked as [B, KV, S, D], a
  // transposed value likewise.
  if (getKeyTransposed())
    std::swap(k[2], k[3]);
  if (getValueTransposed())
    std::swap(v[2], v[3]);
  if (getPositions()) {
    // A cache may hold more sequences than the batch (a paged one counts
    // blocks).
    if (!getBlockTable() && !ShapedType::isDynamic(k[0]) &&
        !ShapedType::isDynamic(q[0]) && k[0] < q[0])
      return emitOpError() << "key dimension 0 is " << k[0]
                           << ", less than the batch " << q[0];
    if (failed(checkDim(op, v[0], k[0], "value dimension 0")))
      return failure();
  } else if (failed(checkDim(op, k[0], q[0], "key dimension 0")) ||
             failed(checkDim(op, v[0], q[0], "value dimension 0"))) {
    return failure();
  }
  if (failed(checkDim(op, v[1], k[1], "value dimension 1")) ||
      failed(checkDim(op, v[2], k[2], "value dimension 2")) ||
      failed(checkDim(op, k[3], q[3], "key dimension 3")) ||
      failed(checkPositions(op, getPositions(), q[0])) ||
      failed(checkAttentionSizes(op, q[1], k[1], q[3], v[3])))
    return failure();
  if (getRing() && !getPositions())
    return emitOpError() << "a ring buffer needs positions";
  if (failed(checkBlockTable(
          op, getBlockTable(), getPositions(), getRing(), q[0],
          {getKey(), getValue()},
          {getKeyTransposed() ? 3u : 2u, getValueTransposed() ? 3u : 2u})))
    return failure();
  if (failed(checkShape(op, getResult(), {q[0], q[1], q[2], v[3]}, "result")) ||
      failed(checkLengths(op, getLengths(), q[0])) ||
      failed(checkMask(op, getMask(), optInt(getWindowAttr()))) ||
      failed(checkScale(op, getScale().convertToDouble(), "scale")) ||
      failed(checkSoftcap(op, optF64(getSoftcapAttr()), "softcap")) ||
      failed(checkAlibi(op, getAlibiSlopes(), q[1], "alibi_slopes")) ||
      failed(checkRelative(op, getRelative(),
                           optInt(getRelativeMaxDistanceAttr()),
                           getRelativeBidirectional(), q[1])))
    return failure();
  // Over a KV cache (positions), the keys and values are the caches.
  if (getPositions())
    return checkSameElementTypeExceptCaches(op, {getKey(), getValue()});
  return checkSameElementType(op);
}

//===----------------------------------------------------------------------===//
// Packed weights (tfm/packed_layout.h)
//===----------------------------------------------------------------------===//

LogicalResult UnpackWeightOp::verify() {
  auto p = getPacked().getType().getShape();
  auto r = getType().getShape();
  // A stack [E, N, K] of weights is packed weight by weight: [E, P, K, W].
  if (p.size() < 3 || r.size() + 1 != p.size())
    return emitOpError() << "unpacks a [..., P, K, W] tensor into a "
                            "[..., N, K] one";
  for (size_t i = 0; i + 2 < r.size(); ++i)
    if (p[i] != r[i] || ShapedType::isDynamic(p[i]))
      return emitOpError() << "the stacked dimensions must be static and "
                              "equal";
  p = p.take_back(3);
  r = r.take_back(2);
  if (ShapedType::isDynamic(r[0]) || ShapedType::isDynamic(p[0]) ||
      ShapedType::isDynamic(p[2]))
    return emitOpError() << "needs static sizes";
  tfm_packing packing =
      weightPacking(getPacked().getType(), getType().getElementType());
  if (packing != TFM_PACKING_F32)
    return checkPackedWeight(*this, packing, p, r[1], r[0]);
  if (!dimsCompatible(p[1], tfm_packed_rows(packing, r[1])))
    return emitOpError() << "K is " << dimStr(p[1]) << " packed but "
                         << dimStr(r[1]) << " unpacked";
  if (!panelsFit(p[0], tfm_packed_panel_of(packing, p[2]), r[0]))
    return emitOpError() << r[0] << " rows do not fill " << p[0]
                         << " panels of " << p[2];
  return success();
}

LogicalResult GgmlWeightOp::verify() {
  auto r = getType();
  if (r.getRank() != 2 || !r.getElementType().isF32())
    return emitOpError() << "views a 2-D f32 weight, not " << r;
  return checkGgmlRows(*this, getRows().getType(), getGgmlType().getType(),
                       r.getDimSize(0), r.getDimSize(1));
}

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmOps.cpp.inc"
