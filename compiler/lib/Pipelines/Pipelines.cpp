//===- Pipelines.cpp - the stage table of the tfm pipelines ---------------===//
//
// The CPU and CUDA pipelines are one ordered table of stages; a stage that
// differs between targets has one row per target.
//
//===----------------------------------------------------------------------===//

#include "tfm/Pipelines/Pipelines.h"

#include "PipelineUtils.h"

#include "tfm/Conversion/Passes.h"
#include "tfm/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::tfm;
using namespace mlir::tfm::pipelines;

namespace {
enum TargetMask : unsigned { kCPU = 1, kCUDA = 2, kAll = kCPU | kCUDA };

unsigned maskOf(TargetKind target) {
  return target == TargetKind::CPU ? kCPU : kCUDA;
}

struct StageRow {
  Stage stage;
  unsigned targets;
  void (*build)(OpPassManager &, const PipelineConfig &);
};

/// In pipeline order.
constexpr StageRow kStages[] = {
    {Stage::Primitive, kAll, buildPrimitiveStage},
    {Stage::Fused, kAll, buildFusedStage},
    {Stage::Linalg, kCPU, buildCpuLinalgStage},
    {Stage::Linalg, kCUDA, buildCudaLinalgStage},
    {Stage::Loops, kCPU, buildCpuLoopsStage},
    {Stage::Gpu, kCUDA, buildCudaGpuStage},
    {Stage::NVVM, kCUDA, buildCudaNVVMStage},
    {Stage::LLVMDialect, kCPU, buildCpuLLVMStage},
    {Stage::LLVMDialect, kCUDA, buildCudaLLVMStage},
};
} // namespace

void pipelines::buildPrimitiveStage(OpPassManager &pm,
                                    const PipelineConfig &config) {
  // The CPU runs a mixture of experts' routed experts sparsely
  // (tfm.moe_kernel); the CUDA pipeline, which has no such kernel yet, runs
  // the reference form.
  TfmDecomposeOptions options;
  options.denseExperts = config.target == TargetKind::CUDA;
  // Long prompts of latent attention in the naive form (fewer FLOPs than
  // the absorbed one); the CPU's choice at run time.
  options.naiveLatentPrefill = config.target == TargetKind::CPU;
  pm.addNestedPass<func::FuncOp>(createTfmDecompose(options));
}

void pipelines::buildFusedStage(OpPassManager &pm,
                                const PipelineConfig &config) {
  if (config.fuseAttention)
    pm.addNestedPass<func::FuncOp>(createTfmFuseAttention());
  // The GPU GEMM applies epilogues too, but has not run them on a device.
  if (config.fuseEpilogues && config.target == TargetKind::CPU)
    pm.addNestedPass<func::FuncOp>(createTfmFuseEpilogues());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

bool mlir::tfm::stageRunsOn(Stage stage, TargetKind target) {
  switch (stage) {
  case Stage::Loops:
    return target == TargetKind::CPU;
  case Stage::Gpu:
  case Stage::NVVM:
  case Stage::PTX:
    return target == TargetKind::CUDA;
  default:
    return true;
  }
}

void mlir::tfm::buildTfmPipeline(OpPassManager &pm,
                                 const PipelineConfig &config, Stage first,
                                 Stage last) {
  assert(first >= Stage::Primitive && last <= Stage::LLVMDialect &&
         "the MLIR pipelines cover Primitive .. LLVMDialect");
  for (const StageRow &row : kStages)
    if (first <= row.stage && row.stage <= last &&
        (row.targets & maskOf(config.target)))
      row.build(pm, config);
}

PipelineConfig CpuPipelineOptions::getConfig() const {
  PipelineConfig config;
  config.target = TargetKind::CPU;
  config.vectorWidth = vectorWidth;
  config.fuseAttention = fuseAttention;
  config.fuseEpilogues = fuseEpilogues;
  config.fuseNorms = fuseNorms;
  config.bf16Weights = bf16Weights;
  config.int8Weights = int8Weights;
  config.int8Dot = int8Dot;
  config.ggmlWeights = ggmlWeights;
  config.outlineKernels = outlineKernels;
  return config;
}

PipelineConfig CudaPipelineOptions::getConfig() const {
  PipelineConfig config;
  config.target = TargetKind::CUDA;
  config.chip = chip;
  config.format = format;
  config.toolkit = toolkit;
  config.fuseAttention = fuseAttention;
  return config;
}

template <typename Options>
static void registerPipeline(StringRef name, StringRef description) {
  PassPipelineRegistration<Options>(
      name, description, [](OpPassManager &pm, const Options &options) {
        buildTfmPipeline(pm, options.getConfig());
      });
}

void mlir::tfm::registerTfmPipelines() {
  registerTfmPasses();
  registerTfmConversionPasses();
  registerPipeline<CpuPipelineOptions>(
      "tfm-cpu-pipeline",
      "Lower model-level tfm IR to the LLVM dialect for x86-64: decompose, "
      "fuse attention, linalg, bufferize, vector kernels, OpenMP, LLVM");
  registerPipeline<CudaPipelineOptions>(
      "tfm-cuda-pipeline",
      "Lower model-level tfm IR for NVIDIA GPUs: decompose, fuse attention, "
      "linalg, bufferize, tensor-core attention and GEMM kernels, "
      "elementwise kernels, NVVM, host code calling the CUDA runtime shim");
}
