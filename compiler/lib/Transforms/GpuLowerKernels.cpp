//===- GpuLowerKernels.cpp - kernel ops to GPU kernels --------------------===//
//
// tfm-gpu-lower-kernels turns the buffer forms of tfm.attention_kernel and
// tfm.linear_kernel into gpu.launch regions (the kernel families live in
// GpuAttentionKernels.cpp and GpuGemmKernels.cpp; see Passes.td for the
// blocking) and memref.copy into linalg.copy, so that it runs as a kernel
// too.
//
//===----------------------------------------------------------------------===//

#include "tfm/Transforms/Passes.h"
#include "tfm/Transforms/Transforms.h"

#include "GpuKernelBuilders.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::tfm {
#define GEN_PASS_DEF_TFMGPULOWERKERNELS
#include "tfm/Transforms/Passes.h.inc"
} // namespace mlir::tfm

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::kernels;

namespace {

struct GpuAttention : OpRewritePattern<AttentionKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionKernelOp op,
                                PatternRewriter &rw) const override {
    if (!op.hasPureBufferSemantics())
      return rw.notifyMatchFailure(op, "not bufferized yet");
    if (op.getBlockTable())
      return op.emitOpError("a paged KV cache (block_table) is not supported "
                            "on the GPU yet");
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    KB k{b};
    AttentionShape s;
    s.q = op.getQuery();
    s.kt = op.getKey();
    s.v = op.getValue();
    s.lengths = op.getLengths();
    s.out = op.getOutput();
    auto qt = cast<MemRefType>(s.q.getType());
    auto vt = cast<MemRefType>(s.v.getType());
    if (qt.isDynamicDim(3) || vt.isDynamicDim(3))
      return op.emitOpError("GPU attention needs static head dimensions");
    s.d = qt.getDimSize(3);
    s.dv = vt.getDimSize(3);
    s.elt = qt.getElementType();
    s.kind = op.getMask();
    s.window = op.getWindowAttr() ? op.getWindowAttr().getInt() : 0;
    s.scale = op.getScale().convertToDouble();
    if (auto cap = op.getSoftcapAttr())
      s.softcap = cap.getValueAsDouble();
    if (auto slopes = op.getAlibiSlopes())
      s.slopes.assign(slopes->begin(), slopes->end());
    s.bias = op.getBias();
    s.sinks = op.getSinks();
    if (s.bias)
      s.biasDistance = op.getBiasDistanceAttr().getInt();
    s.bsz = k.dim(s.q, 0);
    s.heads = k.dim(s.q, 1);
    s.tq = k.dim(s.q, 2);
    s.kvHeads = k.dim(s.kt, 1);
    s.tk = k.dim(s.kt, 3);
    s.group = arith::DivUIOp::create(b, s.heads, s.kvHeads);
    s.offset = k.sub(s.tk, s.tq);
    if ((s.positions = op.getPositions())) {
      // A KV cache: the decode kernel, with the group's query heads
      // together (their count must be static).
      int64_t h = qt.getDimSize(1);
      int64_t kv = cast<MemRefType>(s.kt.getType()).getDimSize(1);
      if (ShapedType::isDynamic(h) || ShapedType::isDynamic(kv))
        return op.emitOpError("GPU attention over a KV cache needs static "
                              "head counts");
      s.ring = op.getRing();
      emitAttentionDecode(b, s, h / kv);
      rw.eraseOp(op);
      return success();
    }
    if (isHalf(s.elt) && s.d % 16 == 0 && s.dv % 8 == 0 &&
        std::max(s.d, s.dv) <= 512)
      emitAttentionMma(b, s);
    else
      emitAttentionSimt(b, s);
    rw.eraseOp(op);
    return success();
  }
};

struct GpuLinear : OpRewritePattern<LinearKernelOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearKernelOp op,
                                PatternRewriter &rw) const override {
    if (!op.hasPureBufferSemantics())
      return rw.notifyMatchFailure(op, "not bufferized yet");
    auto wt = cast<MemRefType>(op.getWeightP().getType());
    if (wt.getDimSize(2) != kGpuPanel)
      return rw.notifyMatchFailure(op, "weights not in 64-column panels");
    auto ot = cast<MemRefType>(op.getOutput().getType());
    ImplicitLocOpBuilder b(op.getLoc(), rw);
    if (isHalf(ot.getElementType()))
      emitLinearMma(b, op);
    else
      emitLinearSimt(b, op);
    rw.eraseOp(op);
    return success();
  }
};

struct CopyToLinalg : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp op,
                                PatternRewriter &rw) const override {
    rw.replaceOpWithNewOp<linalg::CopyOp>(op, op.getSource(), op.getTarget());
    return success();
  }
};

struct TfmGpuLowerKernelsPass
    : mlir::tfm::impl::TfmGpuLowerKernelsBase<TfmGpuLowerKernelsPass> {
  void runOnOperation() override {
    WalkResult bad = getOperation().walk([](LinearKernelOp op) {
      auto wt = cast<ShapedType>(op.getWeightP().getType());
      if (wt.getDimSize(2) == kGpuPanel)
        return WalkResult::advance();
      op.emitOpError("the GPU GEMM needs weights packed in ")
          << kGpuPanel << "-column panels, got " << wt.getDimSize(2);
      return WalkResult::interrupt();
    });
    if (bad.wasInterrupted())
      return signalPassFailure();
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addLegalDialect<
        arith::ArithDialect, gpu::GPUDialect, linalg::LinalgDialect,
        LLVM::LLVMDialect, math::MathDialect, memref::MemRefDialect,
        NVVM::NVVMDialect, scf::SCFDialect, vector::VectorDialect>();
    target.addIllegalOp<LinearKernelOp, AttentionKernelOp, memref::CopyOp>();
    RewritePatternSet patterns(ctx);
    populateGpuLowerKernelPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns))))
      return signalPassFailure();
    // Fold the kernels' index arithmetic and share their constants.
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet());
  }
};

} // namespace

void mlir::tfm::populateGpuLowerKernelPatterns(RewritePatternSet &patterns) {
  patterns.add<GpuAttention, GpuLinear, CopyToLinalg>(patterns.getContext());
}
