//===- PipelineUtils.h - the stages of the tfm pipelines --------*- C++ -*-===//
//
// Each function adds the passes of one stage for one target; Pipelines.cpp
// orders them in one table.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_PIPELINES_PIPELINEUTILS_H
#define TFM_LIB_PIPELINES_PIPELINEUTILS_H

#include "tfm/Pipelines/Pipelines.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/ErrorHandling.h"

namespace mlir::tfm::pipelines {

/// Appends a textual pipeline (a bad one is a bug in tfm).
inline void addText(OpPassManager &pm, StringRef text) {
  if (failed(parsePassPipeline(text, pm)))
    llvm::report_fatal_error("tfm: bad pass pipeline: " + text);
}

// Target-independent stages (Pipelines.cpp).
void buildPrimitiveStage(OpPassManager &pm, const PipelineConfig &config);
void buildFusedStage(OpPassManager &pm, const PipelineConfig &config);

// CPU stages (CpuPipeline.cpp).
void buildCpuLinalgStage(OpPassManager &pm, const PipelineConfig &config);
void buildCpuLoopsStage(OpPassManager &pm, const PipelineConfig &config);
void buildCpuLLVMStage(OpPassManager &pm, const PipelineConfig &config);

// CUDA stages (CudaPipeline.cpp).
void buildCudaLinalgStage(OpPassManager &pm, const PipelineConfig &config);
void buildCudaGpuStage(OpPassManager &pm, const PipelineConfig &config);
void buildCudaNVVMStage(OpPassManager &pm, const PipelineConfig &config);
void buildCudaLLVMStage(OpPassManager &pm, const PipelineConfig &config);

} // namespace mlir::tfm::pipelines

#endif // TFM_LIB_PIPELINES_PIPELINEUTILS_H
