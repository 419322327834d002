//===- TfmOps.cpp - tfm dialect operations --------------------------------===//
//
// Verifiers for every shape and attribute rule of the tfm ops. Dynamic
// dimensions are compatible with anything; static ones must agree.
//
//===----------------------------------------------------------------------===//

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/SmallBitVector.h"
#include <cmath>

using namespace mlir;
using namespace mlir::tfm;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool dimsCompatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
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

/// Checks the sizes that attention divides by or loops over: the heads of
/// the query and of the keys/values, and the head dimensions of the query
/// and of the values, each > 0 where static (GQA divides by the kv heads).
LogicalResult checkAttentionSizes(Operation *op, int64_t heads, int64_t kvHeads,
                                  int64_t headDim, int64_t valueDim) {
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

/// Checks that every float operand and result share one element type.
LogicalResult checkSameElementType(Operation *op) {
  Type elt;
  auto visit = [&](Value v) -> LogicalResult {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || !isa<FloatType>(t.getElementType()))
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
  return success();
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

/// Mask rule shared by tfm.mask, tfm.attention and tfm.multi_head_attention:
/// `window` is given exactly when the kind is `sliding`, and is >= 1.
LogicalResult checkMask(Operation *op, MaskKind kind,
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

LogicalResult checkScale(Operation *op, double scale, StringRef name) {
  if (!std::isfinite(scale) || scale == 0.0)
    return op->emitOpError() << name << " must be finite and nonzero";
  return success();
}

/// Reads an optional integer attribute as a signed value.
std::optional<int64_t> optInt(IntegerAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getInt();
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

LogicalResult checkSoftcap(Operation *op, std::optional<double> cap,
                           StringRef name) {
  if (cap && !(std::isfinite(*cap) && *cap > 0.0))
    return op->emitOpError() << name << " must be finite and > 0";
  return success();
}

/// ALiBi slopes: one finite value per head (when the head count is known).
LogicalResult checkAlibi(Operation *op, std::optional<ArrayRef<double>> slopes,
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

std::optional<double> optF64(FloatAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getValueAsDouble();
}

} // namespace

int64_t mlir::tfm::leadingRows(ArrayRef<int64_t> shape) {
  int64_t rows = 1;
  for (int64_t d : shape.drop_back())
    rows = ShapedType::isDynamic(d) || ShapedType::isDynamic(rows)
               ? ShapedType::kDynamic
               : rows * d;
  return rows;
}

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
    if (failed(checkShape(op, qkNorm[0], {hd}, "q_norm weight")) ||
        failed(checkShape(op, qkNorm[1], {hd}, "k_norm weight")))
      return failure();
    if (!(getQkNormEpsAttr().getValueAsDouble() > 0.0))
      return emitOpError() << "qk_norm_eps must be > 0";
  } else if (getQkNormOffsetAttr()) {
    return emitOpError() << "qk_norm_offset needs qk_norm weights";
  }
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
    if (cache.size() != 2 || !getPositions())
      return emitOpError() << "a KV cache is 2 tensors (keys transposed, "
                              "values) with positions, got "
                           << cache.size() << " tensors"
                           << (getPositions() ? "" : " and no positions");
    if (failed(checkPositions(op, getPositions(), q[0])) ||
        failed(checkShape(
            op, cache[0],
            {ShapedType::kDynamic, kvHeads, hd, ShapedType::kDynamic},
            "key cache")) ||
        failed(checkShape(
            op, cache[1],
            {ShapedType::kDynamic, kvHeads, ShapedType::kDynamic, hd},
            "value cache")))
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
  return checkSameElementType(op);
}

bool mlir::tfm::isGatedActivation(Activation a) {
  return a == Activation::swiglu || a == Activation::geglu ||
         a == Activation::geglu_tanh;
}

Activation mlir::tfm::getGateActivation(Activation a) {
  switch (a) {
  case Activation::swiglu:
    return Activation::silu;
  case Activation::geglu:
    return Activation::gelu;
  case Activation::geglu_tanh:
    return Activation::gelu_tanh;
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
  if (!ShapedType::isDynamic(c[0]) && !ShapedType::isDynamic(u[0]) &&
      c[0] < u[0])
    return emitOpError() << "the cache holds " << c[0]
                         << " sequences, fewer than the update's " << u[0];
  if (failed(checkDim(*this, c[1], u[1], "cache heads")) ||
      failed(checkDim(*this, c[3], u[3], "cache head dimension")) ||
      failed(checkPositions(*this, getPositions(), u[0])))
    return failure();
  if (!ShapedType::isDynamic(c[2]) && !ShapedType::isDynamic(u[2]) &&
      c[2] < u[2])
    return emitOpError() << "the cache holds " << c[2]
                         << " positions, fewer than the update's " << u[2];
  return checkSameElementType(*this);
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
  auto q = tensorType(getQuery()).getShape();
  SmallVector<int64_t> k(tensorType(getKey()).getShape());
  auto v = tensorType(getValue()).getShape();
  // A transposed key [B, KV, D, S] is checked as [B, KV, S, D].
  if (getKeyTransposed())
    std::swap(k[2], k[3]);
  if (getPositions()) {
    // A cache may hold more sequences than the batch.
    if (!ShapedType::isDynamic(k[0]) && !ShapedType::isDynamic(q[0]) &&
        k[0] < q[0])
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
  return checkSameElementType(op);
}

//===----------------------------------------------------------------------===//
// Kernel level
//===----------------------------------------------------------------------===//

static ArrayRef<int64_t> bufShape(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

/// Kernel ops read their inputs and write their output, on buffers only.
static void kernelEffects(
    Operation *op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &o : op->getOpOperands()) {
    if (!isa<MemRefType>(o.get().getType()))
      continue;
    if (o.getOperandNumber() + 1 == op->getNumOperands())
      effects.emplace_back(MemoryEffects::Write::get(), &o,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &o,
                           SideEffects::DefaultResource::get());
  }
}

void LinearKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void AllReduceKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

void AllGatherKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

LogicalResult AllReduceKernelOp::verify() {
  for (Value v : getOperands())
    if (!cast<ShapedType>(v.getType()).getElementType().isF32() ||
        !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32 tensors or buffers";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() != out.size() || in.empty())
    return emitOpError() << "input and output must have one rank (>= 1)";
  for (auto [a, b] : llvm::zip(in, out))
    if (!dimsCompatible(a, b))
      return emitOpError() << "output must have the input's shape";
  if (getBias() && (bufShape(getBias()).size() != 1 ||
                    !dimsCompatible(bufShape(getBias())[0], in.back())))
    return emitOpError() << "bias must be 1-D, the input's last dimension";
  return success();
}

LogicalResult AllGatherKernelOp::verify() {
  for (Value v : getOperands())
    if (!cast<ShapedType>(v.getType()).getElementType().isF32() ||
        !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32 tensors or buffers";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() != 2 || out.size() != 2)
    return emitOpError() << "input and output must be 2-D";
  if (!dimsCompatible(in[0], out[0]))
    return emitOpError() << "output must have " << dimStr(in[0]) << " rows";
  if (ShapedType::isDynamic(in[1]) || ShapedType::isDynamic(out[1]) ||
      out[1] % in[1] != 0)
    return emitOpError() << "output columns must be a static multiple of the "
                            "input's";
  return success();
}

void AttentionKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

/// Element types the kernel ops compute in (f16/bf16 on GPUs).
static bool isKernelFloat(Type t) {
  return t.isF32() || t.isF16() || t.isBF16();
}

/// Whether a weight packed as `packed` for a matmul of `elt` values is in
/// bf16 pairs of K (tfm-model-abi bf16-pairs).
static bool isBf16Pairs(Type packed, Type elt) {
  return cast<ShapedType>(packed).getElementType().isBF16() && elt.isF32();
}

/// Checks K and the output columns `n` of a weight in bf16 pairs `p`
/// ([P, ceil(K / 2), 2 W]).
static LogicalResult checkPairs(Operation *op, ArrayRef<int64_t> p, int64_t k,
                                int64_t n) {
  if (p[2] % 2)
    return op->emitOpError() << "a weight in bf16 pairs has an even last "
                             << "dimension (2 W), not " << p[2];
  if (!ShapedType::isDynamic(k) && !dimsCompatible(p[1], (k + 1) / 2))
    return op->emitOpError() << "K is " << k << ", so the weight in bf16 "
                             << "pairs has " << (k + 1) / 2
                             << " pairs per panel, not " << dimStr(p[1]);
  if (n > p[0] * (p[2] / 2) || n <= (p[0] - 1) * (p[2] / 2))
    return op->emitOpError()
           << n << " columns do not fill " << p[0] << " panels of " << p[2] / 2;
  return success();
}

/// Whether a weight packed as `packed` for a matmul of `elt` values is
/// int8 in quads of K with per-column scales (tfm-model-abi int8-quads).
static bool isInt8Quads(Type packed, Type elt) {
  return cast<ShapedType>(packed).getElementType().isSignlessInteger(8) &&
         elt.isF32();
}

/// Checks K and the output columns `n` of a weight in int8 quads `p`
/// ([P, ceil(K / 4) + 2, 4 W] bytes: the quads, then the columns' scales
/// and sums).
static LogicalResult checkQuads(Operation *op, ArrayRef<int64_t> p, int64_t k,
                                int64_t n) {
  if (p[2] % 4)
    return op->emitOpError() << "a weight in int8 quads has a last dimension "
                             << "of 4 W bytes, not " << p[2];
  if (!ShapedType::isDynamic(k) && !dimsCompatible(p[1], (k + 3) / 4 + 2))
    return op->emitOpError()
           << "K is " << k << ", so the weight in int8 quads has "
           << (k + 3) / 4 + 2 << " rows per panel (quads, scales, sums), not "
           << dimStr(p[1]);
  if (n > p[0] * (p[2] / 4) || n <= (p[0] - 1) * (p[2] / 4))
    return op->emitOpError()
           << n << " columns do not fill " << p[0] << " panels of " << p[2] / 4;
  return success();
}

LogicalResult LinearKernelOp::verify() {
  Type elt = cast<ShapedType>(getOutput().getType()).getElementType();
  bool pairs = isBf16Pairs(getWeightP().getType(), elt);
  bool quads = isInt8Quads(getWeightP().getType(), elt);
  // A packed for those weights already (tfm.norm_kernel's packed output).
  Type inElt = cast<ShapedType>(getInput().getType()).getElementType();
  bool packedInput =
      (pairs && inElt.isBF16()) || (quads && inElt.isSignlessInteger(8));
  for (Value v : getOperands())
    if ((cast<ShapedType>(v.getType()).getElementType() != elt &&
         !((pairs || quads) && v == getWeightP()) &&
         !(packedInput && v == getInput())) ||
        !isKernelFloat(elt) || !cast<ShapedType>(v.getType()).hasRank())
      return emitOpError() << "operands must be ranked f32, f16 or bf16 "
                              "tensors or buffers of one element type (or "
                              "f32 with weights in bf16 pairs or int8 quads, "
                              "the input perhaps packed for them)";
  if (packedInput) {
    auto in = bufShape(getInput()), w = bufShape(getWeightP());
    // K as the weight's panels pad it.
    int64_t cols =
        pairs ? NormKernelOp::packedColumns(NormKernelOp::Packing::Bf16Pairs,
                                            2 * w[1])
              : NormKernelOp::packedColumns(NormKernelOp::Packing::Int8Quads,
                                            4 * (w[1] - 2));
    if (in.size() == 2 && w.size() == 3 && !ShapedType::isDynamic(w[1]) &&
        !dimsCompatible(in[1], cols))
      return emitOpError() << "a packed input for this weight has " << cols
                           << " columns, not " << dimStr(in[1]);
  }
  if (bufShape(getInput()).size() != 2 || bufShape(getWeightP()).size() != 3 ||
      bufShape(getOutput()).size() != 2 ||
      (getBias() && bufShape(getBias()).size() != 1))
    return emitOpError() << "input and output must be 2-D, weight_p 3-D and "
                            "bias 1-D";
  auto in = bufShape(getInput()), w = bufShape(getWeightP()),
       out = bufShape(getOutput());
  if (ShapedType::isDynamic(w[0]) || ShapedType::isDynamic(w[1]) ||
      ShapedType::isDynamic(w[2]) || ShapedType::isDynamic(out[1]))
    return emitOpError() << "weight_p and the output columns must be static";
  if (pairs || quads) {
    // K is known from a packed input only up to its padding: the panel's
    // rows were checked against its columns above.
    int64_t k = packedInput ? ShapedType::kDynamic : in[1];
    if (failed(pairs ? checkPairs(*this, w, k, out[1])
                     : checkQuads(*this, w, k, out[1])))
      return failure();
  } else if (!dimsCompatible(in[1], w[1]))
    return emitOpError() << "input has " << dimStr(in[1])
                         << " columns but weight_p has " << dimStr(w[1])
                         << " rows per panel";
  if (!dimsCompatible(out[0], in[0]))
    return emitOpError() << "output must have " << dimStr(in[0]) << " rows";
  if (!pairs && !quads && (out[1] > w[0] * w[2] || out[1] <= (w[0] - 1) * w[2]))
    return emitOpError() << "output has " << out[1] << " columns, which "
                         << w[0] << " panels of " << w[2] << " do not fit";
  if (getBias() && !dimsCompatible(bufShape(getBias())[0], out[1]))
    return emitOpError() << "bias must have " << out[1] << " elements";
  // [M, N], or [..., N] with leading dimensions of M elements in all.
  for (Value e : {getMul(), getResidual()}) {
    if (!e)
      continue;
    auto es = bufShape(e);
    int64_t rows = leadingRows(es);
    if (es.size() < 2 || !dimsCompatible(rows, out[0]) ||
        !dimsCompatible(es.back(), out[1]))
      return emitOpError() << "mul and residual must have the output's "
                              "shape, or its rows split in several dimensions";
  }
  return success();
}

void NormKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  kernelEffects(*this, effects);
}

NormKernelOp::Packing NormKernelOp::packingOf(Type elt) {
  if (elt.isBF16())
    return Packing::Bf16Pairs;
  if (elt.isSignlessInteger(8))
    return Packing::Int8Quads;
  return Packing::None;
}

int64_t NormKernelOp::packedColumns(Packing packing, int64_t k) {
  switch (packing) {
  case Packing::None:
    return k;
  case Packing::Bf16Pairs:
    return 2 * ((k + 1) / 2);
  case Packing::Int8Quads:
    return 4 * ((k + 3) / 4) + 4;
  }
  llvm_unreachable("packing");
}

LogicalResult NormKernelOp::verify() {
  for (Value v : getOperands()) {
    auto st = cast<ShapedType>(v.getType());
    if (!st.hasRank() || (v != getOutput() && !st.getElementType().isF32()))
      return emitOpError() << "operands must be ranked f32 tensors or "
                              "buffers (the output f32, bf16 or i8)";
  }
  Type outElt = cast<ShapedType>(getOutput().getType()).getElementType();
  if (!outElt.isF32() && !outElt.isBF16() && !outElt.isSignlessInteger(8))
    return emitOpError() << "output must be f32, bf16 (pairs) or i8 (quads)";
  auto in = bufShape(getInput()), out = bufShape(getOutput());
  if (in.size() < 2)
    return emitOpError() << "input must have rank 2 or more";
  int64_t k = in.back();
  if (ShapedType::isDynamic(k))
    return emitOpError() << "the input's last dimension must be static";
  Packing packing = getPacking();
  if (packing == Packing::None) {
    if (out.size() != in.size() ||
        !llvm::all_of(llvm::zip(in, out), [](auto d) {
          return dimsCompatible(std::get<0>(d), std::get<1>(d));
        }))
      return emitOpError() << "output of f32 rows must have the input's shape";
  } else {
    int64_t rows = leadingRows(in);
    if (out.size() != 2)
      return emitOpError() << "packed output must be 2-D";
    if (!dimsCompatible(rows, out[0]))
      return emitOpError() << "output must have " << dimStr(rows) << " rows";
  }
  int64_t cols = packedColumns(packing, k);
  if (!dimsCompatible(out.back(), cols))
    return emitOpError() << "output must have " << cols << " columns for " << k
                         << " values a row, not " << dimStr(out.back());
  for (Value v : {getWeight(), getBias()})
    if (v && (bufShape(v).size() != 1 || !dimsCompatible(bufShape(v)[0], k)))
      return emitOpError() << "weight and bias must be 1-D of " << k;
  if (getKind() == NormKind::layernorm && !getBias())
    return emitOpError() << "layernorm needs a bias";
  if (getKind() == NormKind::rmsnorm && getBias())
    return emitOpError() << "rmsnorm takes no bias";
  return success();
}

LogicalResult UnpackWeightOp::verify() {
  auto p = getPacked().getType().getShape();
  auto r = getType().getShape();
  if (p.size() != 3 || r.size() != 2)
    return emitOpError() << "unpacks a 3-D [P, K, W] tensor into a 2-D one";
  if (getType().isDynamicDim(0) || getPacked().getType().isDynamicDim(0) ||
      getPacked().getType().isDynamicDim(2))
    return emitOpError() << "needs static sizes";
  if (isBf16Pairs(getPacked().getType(), getType().getElementType()))
    return checkPairs(*this, p, r[1], r[0]);
  if (isInt8Quads(getPacked().getType(), getType().getElementType()))
    return checkQuads(*this, p, r[1], r[0]);
  if (!dimsCompatible(p[1], r[1]))
    return emitOpError() << "K is " << dimStr(p[1]) << " packed but "
                         << dimStr(r[1]) << " unpacked";
  if (r[0] > p[0] * p[2] || r[0] <= (p[0] - 1) * p[2])
    return emitOpError() << r[0] << " rows do not fill " << p[0]
                         << " panels of " << p[2];
  return success();
}

LogicalResult AttentionKernelOp::verify() {
  Type elt = cast<ShapedType>(getQuery().getType()).getElementType();
  for (Value v : {getQuery(), getKey(), getValue(), getOutput()})
    if (!cast<ShapedType>(v.getType()).hasRank() || bufShape(v).size() != 4 ||
        !isKernelFloat(elt) ||
        cast<ShapedType>(v.getType()).getElementType() != elt)
      return emitOpError() << "query, key, value and output must be 4-D, of "
                              "one element type: f32, f16 or bf16";
  if (getLengths() && bufShape(getLengths()).size() != 1)
    return emitOpError() << "lengths must be 1-D";
  if (getPositions() && bufShape(getPositions()).size() != 1)
    return emitOpError() << "positions must be 1-D";
  if (getRing() && !getPositions())
    return emitOpError() << "a ring buffer needs positions";
  auto q = bufShape(getQuery()), k = bufShape(getKey()),
       v = bufShape(getValue()), o = bufShape(getOutput());
  // key is transposed: [B, KV, D, S].
  if (!dimsCompatible(k[2], q[3]) || !dimsCompatible(v[2], k[3]) ||
      !dimsCompatible(v[1], k[1]))
    return emitOpError() << "query, key (transposed) and value shapes do not "
                            "agree";
  for (int i = 0; i < 3; ++i)
    if (!dimsCompatible(o[i], q[i]))
      return emitOpError() << "output must match the query in dimension " << i;
  if (!dimsCompatible(o[3], v[3]))
    return emitOpError() << "output dimension 3 must match the value's";
  if (failed(checkAttentionSizes(*this, q[1], k[1], q[3], v[3])))
    return failure();
  if (static_cast<bool>(getBias()) != static_cast<bool>(getBiasDistanceAttr()))
    return emitOpError() << "bias and bias_distance go together";
  if (Value bias = getBias()) {
    auto bt = cast<ShapedType>(bias.getType());
    int64_t m = getBiasDistanceAttr().getInt();
    if (m < 0)
      return emitOpError() << "bias_distance must be >= 0, got " << m;
    if (!bt.hasRank() || bt.getRank() != 2 || !bt.getElementType().isF32() ||
        !dimsCompatible(bt.getDimSize(0), q[1]) ||
        !dimsCompatible(bt.getDimSize(1), 2 * m + 1))
      return emitOpError() << "bias must be f32 [heads, 2 * bias_distance + "
                              "1]";
  }
  if (failed(checkSoftcap(*this, optF64(getSoftcapAttr()), "softcap")) ||
      failed(checkAlibi(*this, getAlibiSlopes(), q[1], "alibi_slopes")))
    return failure();
  return checkMask(*this, getMask(), optInt(getWindowAttr()));
}

#define GET_OP_CLASSES
#include "tfm/Dialect/TfmOps.cpp.inc"
