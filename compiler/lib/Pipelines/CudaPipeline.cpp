//===- CudaPipeline.cpp - the tfm CUDA lowering pipeline ------------------===//
//
// Model-level tfm IR to a host module in the LLVM dialect whose kernels are
// serialized (PTX, or a fatbin with cubin and PTX) in a gpu.binary:
//
//   decompose, fuse attention          (shared with the CPU pipeline)
//   tfm-model-abi{panel-width=64}, convert-tfm-to-linalg, elementwise fusion
//   one-shot-bufferize, deallocation
//   tfm-gpu-lower-kernels               attention / GEMM kernels (gpu.launch)
//   convert-linalg-to-parallel-loops, tfm-gpu-map-loops
//                                       everything else, device buffers
//   gpu-kernel-outlining                                    --emit=gpu
//   convert-gpu-to-nvvm (+ nvgpu, vector, scf, arith)       --emit=nvvm
//   gpu-async-region, gpu-to-llvm, gpu-module-to-binary     --emit=ptx / llvm
//
//===----------------------------------------------------------------------===//

#include "tfm/Pipelines/Pipelines.h"

#include "PipelineUtils.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::tfm;

using namespace mlir::tfm::pipelines;

void pipelines::buildCudaLinalgStage(OpPassManager &pm,
                                     const PipelineConfig &) {
  TfmModelAbiOptions abi;
  abi.panelWidth = 64;
  pm.addPass(createTfmModelAbi(abi));
  ConvertTfmToLinalgOptions linalg;
  linalg.panelWidth = abi.panelWidth;
  pm.addNestedPass<func::FuncOp>(createConvertTfmToLinalg(linalg));
  addText(pm, "func.func(convert-elementwise-to-linalg, "
              "linalg-fuse-elementwise-ops), canonicalize, cse");
}

void pipelines::buildCudaGpuStage(OpPassManager &pm, const PipelineConfig &) {
  addText(pm, "one-shot-bufferize, buffer-deallocation-pipeline, "
              "func.func(tfm-gpu-lower-kernels, "
              "convert-linalg-to-parallel-loops, tfm-gpu-map-loops), "
              "func.func(gpu-launch-sink-index-computations), "
              "gpu-kernel-outlining, canonicalize, tfm-gpu-merge-modules, "
              "cse");
}

void pipelines::buildCudaNVVMStage(OpPassManager &pm,
                                   const PipelineConfig &config) {
  addText(pm, llvm::formatv(
                  "convert-nvgpu-to-nvvm, convert-vector-to-scf, "
                  "convert-scf-to-cf, "
                  "nvvm-attach-target{{chip={0} features=+ptx80 "
                  "O=3}, gpu.module(expand-strided-metadata, lower-affine, "
                  "convert-gpu-to-nvvm, "
                  "canonicalize, cse, reconcile-unrealized-casts)",
                  config.chip)
                  .str());
}

void pipelines::buildCudaLLVMStage(OpPassManager &pm,
                                   const PipelineConfig &config) {
  addText(pm, llvm::formatv(
                  "func.func(gpu-async-region, tfm-expand-shape-to-cast), "
                  "expand-strided-metadata, lower-affine, "
                  "convert-scf-to-cf, convert-func-to-llvm, "
                  "gpu-to-llvm, "
                  "gpu-module-to-binary{{format={0} toolkit={1}}, "
                  "finalize-memref-to-llvm, convert-math-to-llvm, "
                  "convert-arith-to-llvm, convert-index-to-llvm, "
                  "convert-cf-to-llvm, convert-ub-to-llvm, "
                  "reconcile-unrealized-casts, canonicalize, cse",
                  config.format, config.toolkit)
                  .str());
}
