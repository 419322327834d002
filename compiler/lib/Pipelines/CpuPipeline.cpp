//===- CpuPipeline.cpp - the tfm CPU lowering pipeline --------------------===//

#include "tfm/Pipelines/Pipelines.h"

#include "PipelineUtils.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;
using namespace mlir::tfm;

using pipelines::addText;

static void buildLoopsStage(OpPassManager &pm,
                            const CpuPipelineOptions &options);
static void buildLLVMStage(OpPassManager &pm);

void mlir::tfm::buildTfmCpuPipeline(OpPassManager &pm,
                                    const CpuPipelineOptions &options,
                                    CpuStage first, CpuStage last) {
  auto want = [&](CpuStage s) { return first <= s && s <= last; };
  pipelines::addModelStages(pm, want(CpuStage::Primitive),
                            want(CpuStage::Fused), options.fuseAttention);
  if (want(CpuStage::Linalg)) {
    TfmModelAbiOptions abi;
    abi.panelWidth = 2 * options.vectorWidth;
    pm.addPass(createTfmModelAbi(abi));
    pm.addNestedPass<func::FuncOp>(createConvertTfmToLinalg());
    // arith on tensors (hand-written or imported graphs) becomes linalg too.
    addText(pm, "func.func(convert-elementwise-to-linalg)");
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (want(CpuStage::Loops))
    buildLoopsStage(pm, options);
  if (want(CpuStage::LLVM))
    buildLLVMStage(pm);
}

static void buildLoopsStage(OpPassManager &pm,
                            const CpuPipelineOptions &options) {
  // One function per distinct layer: compile time independent of depth.
  pm.addPass(createTfmOutlineLayers());
  addText(pm, "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map}, "
              "buffer-deallocation-pipeline, convert-bufferization-to-memref, "
              "func.func(convert-linalg-to-parallel-loops)");
  TfmLowerKernelsOptions kernels;
  kernels.vectorWidth = options.vectorWidth;
  pm.addNestedPass<func::FuncOp>(createTfmLowerKernels(kernels));
  pm.addNestedPass<func::FuncOp>(createTfmParallelizeOuter());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

static void buildLLVMStage(OpPassManager &pm) {
  addText(pm, "convert-scf-to-openmp, "
              "func.func(tfm-expand-math, tfm-expand-shape-to-cast), "
              "expand-strided-metadata, lower-affine, convert-scf-to-cf, "
              "convert-vector-to-llvm, convert-math-to-llvm, "
              "convert-math-to-libm, finalize-memref-to-llvm, "
              "convert-arith-to-llvm, convert-index-to-llvm, "
              "convert-cf-to-llvm, convert-openmp-to-llvm, "
              "convert-func-to-llvm, convert-ub-to-llvm, "
              "reconcile-unrealized-casts, canonicalize, cse");
}

void mlir::tfm::registerTfmPipelines() {
  registerTfmPasses();
  registerTfmConversionPasses();
  PassPipelineRegistration<CpuPipelineOptions>(
      "tfm-cpu-pipeline",
      "Lower model-level tfm IR to the LLVM dialect for x86-64: decompose, "
      "fuse attention, linalg, bufferize, vector kernels, OpenMP, LLVM",
      [](OpPassManager &pm, const CpuPipelineOptions &options) {
        buildTfmCpuPipeline(pm, options);
      });
  PassPipelineRegistration<CudaPipelineOptions>(
      "tfm-cuda-pipeline",
      "Lower model-level tfm IR for NVIDIA GPUs: decompose, fuse attention, "
      "linalg, bufferize, tensor-core attention and GEMM kernels, "
      "elementwise kernels, NVVM, host code calling the CUDA runtime shim",
      [](OpPassManager &pm, const CudaPipelineOptions &options) {
        buildTfmCudaPipeline(pm, options);
      });
}
