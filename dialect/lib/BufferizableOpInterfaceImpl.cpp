//===- BufferizableOpInterfaceImpl.cpp - One-Shot Bufferize for kernels ---===//
//
// The kernel ops are destination-style: inputs are read, the output operand
// is the destination (fully overwritten, so not read) and aliases the
// result. One-Shot Bufferize thus sees every read of a tensor a kernel
// consumes, and never writes into a buffer a later kernel still reads.
//
//===----------------------------------------------------------------------===//

#include "tfm/Dialect/TfmOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::tfm;

namespace {

/// The buffers of every tensor operand (others as they are).
FailureOr<SmallVector<Value>> operandBuffers(Operation *op,
                                             RewriterBase &rewriter,
                                             const BufferizationOptions &opts,
                                             BufferizationState &state) {
  SmallVector<Value> out;
  for (OpOperand &o : op->getOpOperands()) {
    if (!isa<TensorType>(o.get().getType())) {
      out.push_back(o.get());
      continue;
    }
    FailureOr<Value> buf = getBuffer(rewriter, o.get(), opts, state);
    if (failed(buf))
      return failure();
    out.push_back(*buf);
  }
  return out;
}

/// Builds the buffer form of a kernel from the buffers of its operands.
Operation *createLinear(RewriterBase &rewriter, LinearKernelOp k,
                        ArrayRef<Value> bufs) {
  unsigned next = 2;
  Value bias = k.getBias() ? bufs[next++] : Value();
  Value mul = k.getMul() ? bufs[next++] : Value();
  Value residual = k.getResidual() ? bufs[next++] : Value();
  return LinearKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                                bufs[1], bias, mul, residual, bufs.back(),
                                k.getActivationAttr());
}

Operation *createGgmlLinear(RewriterBase &rewriter, GgmlLinearKernelOp k,
                            ArrayRef<Value> bufs) {
  unsigned next = 3;
  Value bias = k.getBias() ? bufs[next++] : Value();
  Value mul = k.getMul() ? bufs[next++] : Value();
  Value residual = k.getResidual() ? bufs[next++] : Value();
  return GgmlLinearKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                                    bufs[1], bufs[2], bias, mul, residual,
                                    bufs.back(), k.getActivationAttr());
}

Operation *createGgmlEmbed(RewriterBase &rewriter, GgmlEmbedKernelOp k,
                           ArrayRef<Value> bufs) {
  return GgmlEmbedKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                                   bufs[1], bufs[2], bufs[3], k.getScaleAttr());
}

Operation *createNorm(RewriterBase &rewriter, NormKernelOp k,
                      ArrayRef<Value> bufs) {
  return NormKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                              bufs[1], k.getBias() ? bufs[2] : Value(),
                              bufs.back(), k.getKindAttr(), k.getEpsAttr(),
                              k.getOffsetAttr());
}

Operation *createAttention(RewriterBase &rewriter, AttentionKernelOp k,
                           ArrayRef<Value> bufs) {
  unsigned next = 3;
  Value lengths = k.getLengths() ? bufs[next++] : Value();
  Value positions = k.getPositions() ? bufs[next++] : Value();
  Value bias = k.getBias() ? bufs[next++] : Value();
  Value sinks = k.getSinks() ? bufs[next++] : Value();
  Value table = k.getBlockTable() ? bufs[next++] : Value();
  return AttentionKernelOp::create(
      rewriter, k.getLoc(), TypeRange{}, bufs[0], bufs[1], bufs[2], lengths,
      positions, bias, sinks, table, bufs.back(), k.getMaskAttr(),
      k.getWindowAttr(), k.getScaleAttr(), k.getSoftcapAttr(),
      k.getAlibiSlopesAttr(), k.getBiasDistanceAttr(), k.getRingAttr(),
      k.getValueTransposedAttr());
}

Operation *createAllReduce(RewriterBase &rewriter, AllReduceKernelOp k,
                           ArrayRef<Value> bufs) {
  return AllReduceKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                                   k.getBias() ? bufs[1] : Value(),
                                   bufs.back());
}

Operation *createAllGather(RewriterBase &rewriter, AllGatherKernelOp k,
                           ArrayRef<Value> bufs) {
  return AllGatherKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                                   bufs.back());
}

Operation *createMoe(RewriterBase &rewriter, MoeKernelOp k,
                     ArrayRef<Value> bufs) {
  unsigned next = 3;
  Value gate = k.getGateP() ? bufs[next++] : Value();
  Value down = bufs[next++];
  SmallVector<Value> biases(bufs.begin() + next, bufs.end() - 1);
  return MoeKernelOp::create(rewriter, k.getLoc(), TypeRange{}, bufs[0],
                             bufs[1], bufs[2], gate, down, biases, bufs.back(),
                             k.getHiddenAttr(), k.getActivationAttr());
}

/// The kernels read their inputs, overwrite their destination (so do not
/// read it) and alias it with their result.
template <typename OpTy,
          Operation *(*Create)(RewriterBase &, OpTy, ArrayRef<Value>)>
struct KernelModel
    : DstBufferizableOpInterfaceExternalModel<KernelModel<OpTy, Create>, OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &opts,
                          BufferizationState &state) const {
    auto k = cast<OpTy>(op);
    if (k.hasPureBufferSemantics())
      return success();
    FailureOr<SmallVector<Value>> bufs =
        operandBuffers(op, rewriter, opts, state);
    if (failed(bufs))
      return failure();
    rewriter.setInsertionPoint(op);
    Create(rewriter, k, *bufs);
    replaceOpWithBufferizedValues(rewriter, op, bufs->back());
    return success();
  }
};

} // namespace

void mlir::tfm::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, TfmDialect *) {
    LinearKernelOp::attachInterface<KernelModel<LinearKernelOp, createLinear>>(
        *ctx);
    GgmlLinearKernelOp::attachInterface<
        KernelModel<GgmlLinearKernelOp, createGgmlLinear>>(*ctx);
    GgmlEmbedKernelOp::attachInterface<
        KernelModel<GgmlEmbedKernelOp, createGgmlEmbed>>(*ctx);
    NormKernelOp::attachInterface<KernelModel<NormKernelOp, createNorm>>(*ctx);
    AttentionKernelOp::attachInterface<
        KernelModel<AttentionKernelOp, createAttention>>(*ctx);
    AllReduceKernelOp::attachInterface<
        KernelModel<AllReduceKernelOp, createAllReduce>>(*ctx);
    AllGatherKernelOp::attachInterface<
        KernelModel<AllGatherKernelOp, createAllGather>>(*ctx);
    MoeKernelOp::attachInterface<KernelModel<MoeKernelOp, createMoe>>(*ctx);
  });
}
