//===- Passes.td - tfm conversion passes -------------------*- tablegen -*-===//

#ifndef TFM_CONVERSION_PASSES_TD
#define TFM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTfmToLinalg : Pass<"convert-tfm-to-linalg", "func::FuncOp"> {
  let summary = "Lower primitive and fused tfm ops to linalg on tensors";
  let description = [{
    Elementwise ops, norms, softmax, masks, embeddings, RoPE and head
    reshapes become linalg/tensor ops on tensors; `tfm.linear` (with a
    transposed weight from tfm-model-abi) and `tfm.attention` become the
    destination-style kernel ops `tfm.linear_kernel` and
    `tfm.attention_kernel`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect"];
}

#endif // TFM_CONVERSION_PASSES_TD
