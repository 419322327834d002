//===- LowerKernels.cpp - kernel ops to vector loop nests -----------------===//
//
// tfm-lower-kernels turns the buffer forms of the kernel ops into vector
// loop nests for the CPU, each kernel's own parallel loops marked to stay
// parallel (tfm-parallelize-outer, then OpenMP):
//
//   tfm.linear_kernel     a register-tiled GEMM over panels of the weight,
//                         f32, bf16 pairs (vdpbf16ps) or int8 quads
//                         (vpdpbusd), its epilogue applied in registers
//                         (LowerLinearKernel.cpp);
//   tfm.ggml_linear_kernel  a GEMM on weights in ggml's block-quantized
//                         rows, dequantized in registers, through one
//                         function of the module (LowerGgmlLinearKernel.cpp);
//   tfm.norm_kernel       layernorm / RMSnorm in one pass over each row,
//                         its output packed for the linear that reads it
//                         (LowerNormKernel.cpp);
//   tfm.moe_kernel        a mixture of experts' routed experts: a counting
//                         sort of the rows by expert, each chosen expert's
//                         linear kernels over its rows (LowerMoeKernel.cpp);
//   tfm.attention_kernel  FlashAttention-2 style (LowerAttentionPrefill.cpp)
//                         or, over a KV cache with few query rows per KV
//                         head, flash decoding (LowerAttentionDecode.cpp),
//                         chosen in LowerAttentionKernel.cpp;
//
// the shared builders are in CpuKernelBuilders.h. The tensor-parallel
// collectives become calls of the runtime (LowerCollectives.cpp), and a
// memref.copy between strided buffers a loop nest over its rows (here); the
// pass checks first that the kernels compute in f32.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "CpuKernelBuilders.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMLOWERKERNELS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::cpu;

namespace {

/// A copy between strided buffers (a window of a KV cache, the last row of
/// a sequence): a loop nest over the rows, innermost dimension last. Where
/// both innermost dimensions are contiguous each row moves in vectors of
/// the target's width, its last partial vector masked; otherwise element
/// by element. (Left to LLVM, the element loop of a dynamic row became
/// 4,000 instructions of runtime alias checks and unrolled remainders,
/// 1.5 s of a compile.)
struct LowerStridedCopy : OpRewritePattern<memref::CopyOp> {
  LowerStridedCopy(MLIRContext *ctx, int64_t vectorWidth)
      : OpRewritePattern(ctx), vectorWidth(vectorWidth) {}

  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &b) const override {
    if (!isStridedCopy(op))
      return b.notifyMatchFailure(op, "contiguous");
    Location loc = op.getLoc();
    Value src = op.getSource(), dst = op.getTarget();
    auto srcT = cast<MemRefType>(src.getType());
    int64_t rank = srcT.getRank();
    Type elt = srcT.getElementType();
    // Lanes: the target's vector of f32 in elements of this type.
    int64_t bits = elt.isIntOrFloat() ? elt.getIntOrFloatBitWidth() : 0;
    int64_t lanes = bits > 0 && bits % 8 == 0 ? vectorWidth * 32 / bits : 0;
    bool rows = rank > 0 && lanes > 1 && srcT.isLastDimUnitStride() &&
                cast<MemRefType>(dst.getType()).isLastDimUnitStride();
    SmallVector<Value> lbs(rank, cIdx(b, loc, 0)), steps(rank, cIdx(b, loc, 1)),
        ubs;
    for (int64_t i = 0; i < rank; ++i)
      ubs.push_back(dim(b, loc, src, i));
    if (!rows) {
      scf::buildLoopNest(b, loc, lbs, ubs, steps,
                         [&](OpBuilder &nb, Location l, ValueRange ivs) {
                           Value v = memref::LoadOp::create(nb, l, src, ivs);
                           memref::StoreOp::create(nb, l, v, dst, ivs);
                         });
      b.eraseOp(op);
      return success();
    }
    // Whole vectors, then what is left of the row (fewer than `lanes`) in
    // one masked vector: AVX2 has no masked moves of 8 or 16 bits, which
    // LLVM then makes a branch per lane.
    auto vecT = VectorType::get({lanes}, elt);
    auto maskT = VectorType::get({lanes}, b.getI1Type());
    Value n = ubs.back();
    Value step = cIdx(b, loc, lanes);
    Value rest = arith::RemUIOp::create(b, loc, n, step);
    Value whole = arith::SubIOp::create(b, loc, n, rest);
    Value anyRest = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne,
                                          rest, lbs.back());
    Value zero = arith::ConstantOp::create(
        b, loc, vecT, DenseElementsAttr::get(vecT, b.getZeroAttr(elt)));
    scf::buildLoopNest(
        b, loc, ArrayRef(lbs).drop_back(), ArrayRef(ubs).drop_back(),
        ArrayRef(steps).drop_back(),
        [&](OpBuilder &nb, Location l, ValueRange outer) {
          auto at = [&](Value j) {
            SmallVector<Value> ivs(outer);
            ivs.push_back(j);
            return ivs;
          };
          forRange(nb, l, lbs.back(), whole, step,
                   [&](OpBuilder &ib, Location il, Value j) {
                     Value v = vector::LoadOp::create(ib, il, vecT, src, at(j));
                     vector::StoreOp::create(ib, il, v, dst, at(j));
                   });
          scf::IfOp::create(nb, l, anyRest, [&](OpBuilder &ib, Location il) {
            Value mask =
                vector::CreateMaskOp::create(ib, il, maskT, ValueRange{rest});
            Value v = vector::MaskedLoadOp::create(ib, il, vecT, src, at(whole),
                                                   mask, zero);
            vector::MaskedStoreOp::create(ib, il, dst, at(whole), mask, v);
            scf::YieldOp::create(ib, il);
          });
        });
    b.eraseOp(op);
    return success();
  }

  int64_t vectorWidth;
};

struct TfmLowerKernelsPass
    : mlir::tfm::impl::TfmLowerKernelsBase<TfmLowerKernelsPass> {
  using TfmLowerKernelsBase::TfmLowerKernelsBase;
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    // With skip-shared-kernels, the functions tfm-outline-kernels made are
    // left as they are (taken before the ggml functions, which are lowered,
    // are defined).
    llvm::SmallPtrSet<Operation *, 16> skipped;
    if (skipSharedKernels) {
      TfmDialect::SharedKernelAttrHelper shared(ctx);
      for (auto fn : getOperation().getOps<func::FuncOp>())
        if (shared.isAttrPresent(fn))
          skipped.insert(fn);
    }
    // The kernels on ggml blocks call one function of the module.
    if (getOperation()
            .walk([](GgmlLinearKernelOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      defineGgmlGemm(getOperation(), vectorWidth, int8Dot);
    if (getOperation()
            .walk([](GgmlEmbedKernelOp) { return WalkResult::interrupt(); })
            .wasInterrupted())
      defineGgmlRow(getOperation(), vectorWidth);
    SmallVector<Operation *> lowered;
    for (Operation &op : getOperation().getBody()->getOperations())
      if (!skipped.contains(&op))
        lowered.push_back(&op);
    // The CPU kernels compute in f32 (f16 and bf16 kernels are the GPU's),
    // the linear's weight in bf16 pairs or int8 quads aside.
    auto walkLowered = [&](auto fn) {
      for (Operation *op : lowered)
        if (op->walk(fn).wasInterrupted())
          return WalkResult::interrupt();
      return WalkResult::advance();
    };
    WalkResult types = walkLowered([&](Operation *op) {
      if (!isa<LinearKernelOp, AttentionKernelOp>(op))
        return WalkResult::advance();
      auto lin = dyn_cast<LinearKernelOp>(op);
      for (Value v : op->getOperands()) {
        Type elt = cast<ShapedType>(v.getType()).getElementType();
        // The weight in pairs or quads, and the input perhaps packed for
        // it (by a tfm.norm_kernel).
        if (lin && (v == lin.getWeightP() || v == lin.getInput()) &&
            (elt.isBF16() || elt.isSignlessInteger(8)) &&
            cast<ShapedType>(lin.getOutput().getType())
                .getElementType()
                .isF32() &&
            cast<ShapedType>(lin.getWeightP().getType()).getElementType() ==
                elt) {
          if (vectorWidth != 16) {
            op->emitOpError()
                << (elt.isBF16() ? "multiplies weights in bf16 pairs, which "
                                   "needs AVX-512 (AVX512_BF16)"
                                 : "multiplies weights in int8 quads, which "
                                   "needs AVX-512 (AVX512_VNNI)");
            return WalkResult::interrupt();
          }
          continue;
        }
        // KV caches of f16 or bf16 (--kv-cache), read as f32.
        auto att = dyn_cast<AttentionKernelOp>(op);
        if (att && att.getPositions() &&
            (v == att.getKey() || v == att.getValue()) &&
            (elt.isF16() || elt.isBF16()))
          continue;
        if (isa<FloatType>(elt) && !elt.isF32()) {
          op->emitOpError() << "computes in " << elt
                            << ", which the CPU kernels do not support (they "
                               "compute in f32)";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (types.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, func::FuncDialect,
                           math::MathDialect, memref::MemRefDialect,
                           scf::SCFDialect, vector::VectorDialect,
                           x86vector::X86VectorDialect, LLVM::LLVMDialect>();
    target.addIllegalOp<LinearKernelOp, GgmlLinearKernelOp, GgmlEmbedKernelOp,
                        NormKernelOp, AttentionKernelOp, AllReduceKernelOp,
                        AllGatherKernelOp, MoeKernelOp, TpRankOp>();
    // A contiguous copy lowers to a plain memcpy; a strided one would
    // become the generic `memrefCopy` of MLIR's C runner utilities, which
    // tfm artifacts do not link.
    target.addDynamicallyLegalOp<memref::CopyOp>(
        [](memref::CopyOp op) { return !isStridedCopy(op); });
    RewritePatternSet patterns(ctx);
    populateLowerKernelPatterns(patterns, vectorWidth);
    populateLowerCollectivePatterns(patterns);
    patterns.add<LowerStridedCopy>(ctx, vectorWidth);
    if (failed(applyPartialConversion(lowered, target, std::move(patterns))))
      return signalPassFailure();
    // Fold the kernels' index arithmetic and share their constants.
    for (Operation *op : lowered)
      (void)applyPatternsGreedily(op, FrozenRewritePatternSet());
  }
};

} // namespace

bool mlir::tfm::isStridedCopy(Operation *op) {
  auto copy = dyn_cast<memref::CopyOp>(op);
  return copy && llvm::any_of(copy->getOperandTypes(), [](Type t) {
           return !cast<MemRefType>(t).getLayout().isIdentity();
         });
}

void mlir::tfm::populateLowerKernelPatterns(RewritePatternSet &patterns,
                                            int64_t vectorWidth) {
  populateLowerLinearKernelPattern(patterns, vectorWidth);
  populateLowerGgmlLinearKernelPattern(patterns, vectorWidth);
  populateLowerAttentionKernelPattern(patterns, vectorWidth);
  populateLowerNormKernelPattern(patterns);
  populateLowerMoeKernelPattern(patterns);
}
