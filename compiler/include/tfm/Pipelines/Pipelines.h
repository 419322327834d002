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
  Linalg,    ///< tfm-model-abi + convert-tfm-to-linalg: linalg on tensors
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

/// The stages of the CUDA pipeline after the shared Primitive / Fused /
/// Linalg ones; each is a cut point of `tfmc --target=cuda --emit=`.
enum class GpuStage {
  Primitive, ///< tfm-decompose
  Fused,     ///< tfm-fuse-attention
  Linalg,    ///< tfm-model-abi (64-column panels) + convert-tfm-to-linalg
  Gpu,       ///< bufferized, kernels outlined into gpu.module / gpu.func
  NVVM,      ///< kernels in the NVVM and LLVM dialects, host still high level
  LLVM,      ///< host in the LLVM dialect, kernels serialized in gpu.binary
};

struct CudaPipelineOptions : public PassPipelineOptions<CudaPipelineOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU architecture (sm_80, sm_90)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel binary: isa (PTX, JIT-compiled by the driver) "
                     "or fatbin (cubin + PTX, needs ptxas and fatbinary)"),
      llvm::cl::init("isa")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit directory (ptxas, fatbinary, libdevice)"),
      llvm::cl::init("/usr/local/cuda")};
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Run tfm-fuse-attention"),
                             llvm::cl::init(true)};
};

/// Adds the stages `first` to `last` (inclusive) of the CUDA pipeline.
void buildTfmCudaPipeline(OpPassManager &pm, const CudaPipelineOptions &options,
                          GpuStage first = GpuStage::Primitive,
                          GpuStage last = GpuStage::LLVM);

/// Registers `tfm-cpu-pipeline` (and the tfm passes) for tfm-opt.
void registerTfmPipelines();

} // namespace mlir::tfm

#endif // TFM_PIPELINES_PIPELINES_H
