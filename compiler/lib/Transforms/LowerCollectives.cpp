//===- LowerCollectives.cpp - tensor-parallel ops to runtime calls --------===//
//
// Tensor parallelism (`tfmc --tensor-parallel N`) exchanges data between the
// N processes through the runtime, which calls MPI:
//
//   tfm.all_reduce_kernel ins(%x, %b) outs(%y)
//     -> tfm_tp_all_reduce_f32(x, y, numel(x), b, numel(b))
//   tfm.all_gather_kernel ins(%x : [R, C]) outs(%y : [R, N * C])
//     -> tfm_tp_all_gather_f32(x, y, R, C)
//   tfm.tp_rank -> tfm_tp_rank()
//
// Buffers are passed as the address of their first element (i64, which the
// x86-64 C ABI passes as it passes a pointer); a buffer with a layout that
// is not the identity is copied to (or from) a contiguous one first.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Transforms.h"

#include "tfm/Dialect/TfmOps.h"

#include "RuntimeFunctions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::tfm;

namespace {

constexpr StringLiteral kAllReduceFn = "tfm_tp_all_reduce_f32";
constexpr StringLiteral kAllGatherFn = "tfm_tp_all_gather_f32";
constexpr StringLiteral kRankFn = "tfm_tp_rank";

Value numElements(OpBuilder &b, Location loc, Value buf) {
  auto t = cast<MemRefType>(buf.getType());
  Value n = arith::ConstantIndexOp::create(b, loc, 1);
  for (int64_t i = 0; i < t.getRank(); ++i)
    n = arith::MulIOp::create(b, loc, n, memref::DimOp::create(b, loc, buf, i));
  return n;
}

Value toI64(OpBuilder &b, Location loc, Value index) {
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), index);
}

/// A contiguous buffer with the contents of `buf` (itself when its layout
/// is the identity). `copyIn`: copy `buf` into a new one.
Value contiguous(OpBuilder &b, Location loc, Value buf, bool copyIn) {
  auto t = cast<MemRefType>(buf.getType());
  if (t.getLayout().isIdentity())
    return buf;
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      dyn.push_back(memref::DimOp::create(b, loc, buf, i));
  Value fresh = memref::AllocOp::create(
      b, loc, MemRefType::get(t.getShape(), t.getElementType()), dyn);
  if (copyIn)
    memref::CopyOp::create(b, loc, buf, fresh);
  return fresh;
}

/// The address of the first element of contiguous `buf`, as i64.
Value address(OpBuilder &b, Location loc, Value buf) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buf);
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, buf);
  Value bytes = arith::MulIOp::create(
      b, loc, meta.getOffset(),
      arith::ConstantIndexOp::create(
          b, loc,
          cast<MemRefType>(buf.getType()).getElementTypeBitWidth() / 8));
  return toI64(b, loc, arith::AddIOp::create(b, loc, base, bytes));
}

/// Writes `tmp` back to `out` when the call wrote a contiguous copy.
void copyOut(OpBuilder &b, Location loc, Value tmp, Value out) {
  if (tmp == out)
    return;
  memref::CopyOp::create(b, loc, tmp, out);
  memref::DeallocOp::create(b, loc, tmp);
}

/// Calls `fn` with `args`, then frees the contiguous copies of the inputs
/// `ins` made for it (of the op's operands `origIns`), writes `out` back to
/// the op's `origOut` and erases `op`.
void callAndFinish(PatternRewriter &b, Operation *op, StringRef fn,
                   ValueRange args, ValueRange ins, ValueRange origIns,
                   Value out, Value origOut) {
  Location loc = op->getLoc();
  func::CallOp::create(b, loc, fn, TypeRange{}, args);
  for (auto [tmp, orig] : llvm::zip(ins, origIns))
    if (tmp != orig)
      memref::DeallocOp::create(b, loc, tmp);
  copyOut(b, loc, out, origOut);
  b.eraseOp(op);
}

struct LowerAllReduce : OpRewritePattern<AllReduceKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllReduceKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "runs on buffers");
    Location loc = op.getLoc();
    Type i64 = b.getI64Type();
    declareRuntimeFunction(b, op, kAllReduceFn,
                           b.getFunctionType({i64, i64, i64, i64, i64}, {}));
    Value in = contiguous(b, loc, op.getInput(), /*copyIn=*/true);
    Value out = contiguous(b, loc, op.getOutput(), /*copyIn=*/false);
    Value bias = op.getBias()
                     ? contiguous(b, loc, op.getBias(), /*copyIn=*/true)
                     : Value();
    Value zero = arith::ConstantIntOp::create(b, loc, i64, 0);
    SmallVector<Value> args{address(b, loc, in), address(b, loc, out),
                            toI64(b, loc, numElements(b, loc, in)),
                            bias ? address(b, loc, bias) : zero,
                            bias ? toI64(b, loc, numElements(b, loc, bias))
                                 : zero};
    SmallVector<Value> ins{in}, origIns{op.getInput()};
    if (bias) {
      ins.push_back(bias);
      origIns.push_back(op.getBias());
    }
    callAndFinish(b, op, kAllReduceFn, args, ins, origIns, out, op.getOutput());
    return success();
  }
};

struct LowerAllGather : OpRewritePattern<AllGatherKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AllGatherKernelOp op,
                                PatternRewriter &b) const override {
    if (!op.hasPureBufferSemantics())
      return b.notifyMatchFailure(op, "runs on buffers");
    Location loc = op.getLoc();
    Type i64 = b.getI64Type();
    declareRuntimeFunction(b, op, kAllGatherFn,
                           b.getFunctionType({i64, i64, i64, i64}, {}));
    Value in = contiguous(b, loc, op.getInput(), /*copyIn=*/true);
    Value out = contiguous(b, loc, op.getOutput(), /*copyIn=*/false);
    SmallVector<Value> args{
        address(b, loc, in), address(b, loc, out),
        toI64(b, loc, memref::DimOp::create(b, loc, in, 0)),
        toI64(b, loc, memref::DimOp::create(b, loc, in, 1))};
    callAndFinish(b, op, kAllGatherFn, args, in, op.getInput(), out,
                  op.getOutput());
    return success();
  }
};

struct LowerTpRank : OpRewritePattern<TpRankOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TpRankOp op,
                                PatternRewriter &b) const override {
    declareRuntimeFunction(b, op, kRankFn,
                           b.getFunctionType({}, {b.getI32Type()}));
    b.replaceOpWithNewOp<func::CallOp>(op, kRankFn, TypeRange{b.getI32Type()},
                                       ValueRange{});
    return success();
  }
};

} // namespace

void mlir::tfm::populateLowerCollectivePatterns(RewritePatternSet &patterns) {
  patterns.add<LowerAllReduce, LowerAllGather, LowerTpRank>(
      patterns.getContext());
}
