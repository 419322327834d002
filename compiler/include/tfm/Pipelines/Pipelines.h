//===- Pipelines.h - tfm lowering pipelines ---------------------*- C++ -*-===//

#ifndef TFM_PIPELINES_PIPELINES_H
#define TFM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::tfm {

/// The stages of the CPU pipeline, in order; each is a cut point of
/// `tfmc --emit=`.
enum class CpuStage {
  Primitive, ///< tfm-decompose: primitive tfm ops
  Fused,     ///< tfm-fuse-attention: tfm.attention
  Linalg,    ///< tfm-cpu-abi + convert-tfm-to-linalg: linalg on tensors
  Loops,     ///< bufferization, kernels, loops and vectors on buffers
  LLVM,      ///< the LLVM dialect
};

struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector register (16: AVX-512, 8: AVX2)"),
      llvm::cl::init(16)};
  Option<bool> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("Run tfm-fuse-attention (off: attention runs as the "
                     "primitive matmul / mask / softmax ops)"),
      llvm::cl::init(true)};
};

/// Adds the stages `first` to `last` (inclusive) of the CPU pipeline.
void buildTfmCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options,
                         CpuStage first = CpuStage::Primitive,
                         CpuStage last = CpuStage::LLVM);

/// Registers `tfm-cpu-pipeline` (and the tfm passes) for tfm-opt.
void registerTfmPipelines();

} // namespace mlir::tfm

#endif // TFM_PIPELINES_PIPELINES_H
