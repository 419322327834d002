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

template <typename Model, typename OpTy>
struct KernelModel : DstBufferizableOpInterfaceExternalModel<Model, OpTy> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }
};

struct LinearKernelModel : KernelModel<LinearKernelModel, LinearKernelOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &opts,
                          BufferizationState &state) const {
    auto k = cast<LinearKernelOp>(op);
    if (k.hasPureBufferSemantics())
      return success();
    FailureOr<SmallVector<Value>> bufs =
        operandBuffers(op, rewriter, opts, state);
    if (failed(bufs))
      return failure();
    rewriter.setInsertionPoint(op);
    Value bias = k.getBias() ? (*bufs)[2] : Value();
    LinearKernelOp::create(rewriter, op->getLoc(), TypeRange{}, (*bufs)[0],
                           (*bufs)[1], bias, bufs->back());
    replaceOpWithBufferizedValues(rewriter, op, bufs->back());
    return success();
  }
};

struct AttentionKernelModel
    : KernelModel<AttentionKernelModel, AttentionKernelOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &opts,
                          BufferizationState &state) const {
    auto k = cast<AttentionKernelOp>(op);
    if (k.hasPureBufferSemantics())
      return success();
    FailureOr<SmallVector<Value>> bufs =
        operandBuffers(op, rewriter, opts, state);
    if (failed(bufs))
      return failure();
    rewriter.setInsertionPoint(op);
    Value lengths = k.getLengths() ? (*bufs)[3] : Value();
    AttentionKernelOp::create(rewriter, op->getLoc(), TypeRange{}, (*bufs)[0],
                              (*bufs)[1], (*bufs)[2], lengths, bufs->back(),
                              k.getMaskAttr(), k.getWindowAttr(),
                              k.getScaleAttr());
    replaceOpWithBufferizedValues(rewriter, op, bufs->back());
    return success();
  }
};

} // namespace

void mlir::tfm::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, TfmDialect *) {
    LinearKernelOp::attachInterface<LinearKernelModel>(*ctx);
    AttentionKernelOp::attachInterface<AttentionKernelModel>(*ctx);
  });
}
