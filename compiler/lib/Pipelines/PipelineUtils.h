//===- PipelineUtils.h - helpers shared by the tfm pipelines ----*- C++ -*-===//

#ifndef TFM_LIB_PIPELINES_PIPELINEUTILS_H
#define TFM_LIB_PIPELINES_PIPELINEUTILS_H

#include "tfm/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

namespace mlir::tfm::pipelines {

/// Appends a textual pipeline (a bad one is a bug in tfm).
inline void addText(OpPassManager &pm, StringRef text) {
  if (failed(parsePassPipeline(text, pm)))
    llvm::report_fatal_error("tfm: bad pass pipeline: " + text);
}

/// The target-independent stages: decompose (`primitive`) and fuse
/// attention (`fused`).
inline void addModelStages(OpPassManager &pm, bool primitive, bool fused,
                           bool fuseAttention) {
  if (primitive)
    pm.addNestedPass<func::FuncOp>(createTfmDecompose());
  if (fused) {
    if (fuseAttention)
      pm.addNestedPass<func::FuncOp>(createTfmFuseAttention());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
}

} // namespace mlir::tfm::pipelines

#endif // TFM_LIB_PIPELINES_PIPELINEUTILS_H
