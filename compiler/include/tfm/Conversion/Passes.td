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
    `tfm.attention_kernel`. With `norm-kernels` (the CPU pipeline), f32
    norms become `tfm.norm_kernel` instead, and a norm read only by linears
    of weights in bf16 pairs or int8 quads writes its rows packed for them.
  }];
  let options = [
    Option<"panelWidth", "panel-width", "int64_t", /*default=*/"32",
           "Panel width of the weights packed in the IR (those that "
           "tfm-model-abi does not pass packed): the target GEMM's">,
    Option<"normKernels", "norm-kernels", "bool", /*default=*/"false",
           "f32 norms to tfm.norm_kernel (one pass a row), packed for the "
           "linears that read them where they all take packed rows">,
    Option<"transposedValues", "transposed-values", "bool",
           /*default=*/"false",
           "tfm.attention's transposed values (latent attention's cache) "
           "to the kernel as they are, for kernels that read them so (the "
           "CPU's); otherwise a transposed copy">
  ];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::bufferization::BufferizationDialect"];
}

#endif // TFM_CONVERSION_PASSES_TD
