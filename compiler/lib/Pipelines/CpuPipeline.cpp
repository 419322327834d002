//===- CpuPipeline.cpp - the CPU stages of the tfm pipeline ---------------===//
//
//   tfm-model-abi{panel-width=2*lanes},
//   convert-tfm-to-linalg{norm-kernels}                         --emit=linalg
//   tfm-outline-layers, one-shot-bufferize, deallocation,
//   tfm-outline-kernels, tfm-lower-kernels, tfm-parallelize-outer
//                                                               --emit=loops
//   OpenMP, vector, math and memref to LLVM                 --emit=llvm-mlir
//
//===----------------------------------------------------------------------===//

#include "PipelineUtils.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::pipelines;

/// The kernels' lowering, the end of the loops stage: loop nests, their
/// outer loops parallel.
static void addKernelLowering(OpPassManager &pm, const PipelineConfig &config,
                              bool skipShared) {
  TfmLowerKernelsOptions kernels;
  kernels.vectorWidth = config.vectorWidth;
  kernels.int8Dot = config.int8Dot;
  kernels.skipSharedKernels = skipShared;
  pm.addPass(createTfmLowerKernels(kernels));
  pm.addNestedPass<func::FuncOp>(createTfmParallelizeOuter());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void pipelines::buildCpuLinalgStage(OpPassManager &pm,
                                    const PipelineConfig &config) {
  TfmModelAbiOptions abi;
  abi.panelWidth = 2 * config.vectorWidth;
  abi.bf16Pairs = config.bf16Weights;
  abi.int8Quads = config.int8Weights;
  abi.ggmlBlocks = config.ggmlWeights;
  pm.addPass(createTfmModelAbi(abi));
  ConvertTfmToLinalgOptions linalg;
  linalg.normKernels = config.fuseNorms;
  linalg.transposedValues = true;
  linalg.panelWidth = abi.panelWidth;
  pm.addNestedPass<func::FuncOp>(createConvertTfmToLinalg(linalg));
  // arith on tensors (hand-written or imported graphs) becomes linalg too.
  addText(pm, "func.func(convert-elementwise-to-linalg)");
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void pipelines::buildCpuLoopsStage(OpPassManager &pm,
                                   const PipelineConfig &config) {
  // One function per distinct layer: compile time independent of depth.
  pm.addPass(createTfmOutlineLayers());
  // A layer that updates a KV cache in place returns the cache it was
  // given: drop-equivalent-buffer-results lets its callers use their own
  // buffer instead of a copy.
  addText(pm, "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map}, "
              "canonicalize, drop-equivalent-buffer-results, canonicalize, "
              "buffer-deallocation-pipeline, convert-bufferization-to-memref, "
              "func.func(convert-linalg-to-parallel-loops)");
  // Each kernel a function of its own, which the driver's kernel cache
  // compiles once (and lowers only if the cache lacks it, where
  // lowerSharedKernels is off).
  if (config.outlineKernels)
    pm.addPass(createTfmOutlineKernels());
  addKernelLowering(pm, config,
                    config.outlineKernels && !config.lowerSharedKernels);
}

void mlir::tfm::buildCpuSharedKernelLowering(OpPassManager &pm,
                                             const PipelineConfig &config) {
  addKernelLowering(pm, config, /*skipShared=*/false);
}

void pipelines::buildCpuLLVMStage(OpPassManager &pm, const PipelineConfig &) {
  // Heap buffers through the runtime's _mlir_memref_to_llvm_* functions
  // (use-generic-functions), which report a failed allocation instead of
  // returning null to the generated code (runtime/src/forward.c).
  addText(pm, "convert-scf-to-openmp, "
              "func.func(tfm-serial-small-parallel, tfm-expand-math, "
              "tfm-expand-shape-to-cast), "
              "expand-strided-metadata, lower-affine, convert-scf-to-cf, "
              "convert-vector-to-llvm{enable-x86vector}, "
              "convert-math-to-llvm, "
              "convert-math-to-libm, "
              "finalize-memref-to-llvm{use-generic-functions=true}, "
              "convert-arith-to-llvm, convert-index-to-llvm, "
              "convert-cf-to-llvm, convert-openmp-to-llvm, "
              "convert-func-to-llvm, convert-ub-to-llvm, "
              "reconcile-unrealized-casts, canonicalize, cse");
}
