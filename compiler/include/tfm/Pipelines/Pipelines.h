//===- Pipelines.h - tfm lowering pipelines ---------------------*- C++ -*-===//
//
// One ordered list of stages serves every target: `Stage` names each cut
// point of the compiler, from the token stream to the linked executable;
// the pipelines build the MLIR part of it (`Primitive` to `LLVMDialect`)
// from one table in which each stage says which targets it runs on.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_PIPELINES_PIPELINES_H
#define TFM_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::tfm {

enum class TargetKind { CPU, CUDA };

/// Every cut point of `tfmc --emit=`, in pipeline order.
enum class Stage {
  Tokens,      ///< the token stream
  AST,         ///< the syntax tree
  JSON,        ///< the resolved description
  Tfm,         ///< model-level tfm IR (MLIRGen)
  Primitive,   ///< tfm-decompose: primitive tfm ops
  Fused,       ///< tfm-fuse-attention: tfm.attention
  Linalg,      ///< tfm-model-abi + convert-tfm-to-linalg: linalg on tensors
  Loops,       ///< CPU: bufferized loops, vector kernels, parallel loops
  Gpu,         ///< CUDA: bufferized, kernels outlined into gpu.func
  NVVM,        ///< CUDA: kernels in the NVVM dialect
  LLVMDialect, ///< host code in the LLVM dialect (CUDA: kernels serialized)
  PTX,         ///< CUDA: the kernels' PTX
  LLVMIR,      ///< LLVM IR after O3
  Asm,         ///< assembly
  Obj,         ///< an object file
  Exe,         ///< a linked executable
};

/// Whether `stage` exists for `target` (`Loops` is CPU only, `Gpu`, `NVVM`
/// and `PTX` CUDA only).
bool stageRunsOn(Stage stage, TargetKind target);

/// Everything the MLIR pipelines need to know about the target.
struct PipelineConfig {
  TargetKind target = TargetKind::CPU;
  /// CPU: f32 lanes per vector register (16: AVX-512, 8: AVX2).
  int64_t vectorWidth = 16;
  /// CUDA: the architecture, the kernel binary format (isa: PTX, fatbin:
  /// cubin + PTX) and the toolkit that assembles it.
  std::string chip = "sm_90";
  std::string format = "isa";
  std::string toolkit = "/usr/local/cuda";
  /// Off: attention runs as the primitive matmul / mask / softmax ops.
  bool fuseAttention = true;
  /// CPU: run tfm-fuse-epilogues (off: activations, gated products and
  /// residual adds run as passes of their own).
  bool fuseEpilogues = true;
  /// CPU: norms as tfm.norm_kernel (one pass a row), writing the packed
  /// rows of the bf16/int8 linears that read them (off: linalg norms).
  bool fuseNorms = true;
  /// CPU: linear weights in bf16 panels, multiplied with vdpbf16ps (a bf16
  /// model on a CPU with AVX512_BF16).
  bool bf16Weights = false;
  /// CPU: tfm.linear weights quantized to int8 with a scale per output
  /// column, multiplied with vpdpbusd by activations quantized per row
  /// (--quantize=int8 on a CPU with AVX512_VNNI).
  bool int8Weights = false;
  /// CPU: the target has AVX512_VNNI (vpdpbusd), which the GEMMs on ggml's
  /// Q8_0 and Q4_0 blocks then multiply bytes with.
  bool int8Dot = false;
  /// CPU: tfm.linear weights in ggml's block-quantized rows of a type
  /// chosen at load (a GGUF checkpoint, --quantize=q8_0 / q4_0 / q4_k ...),
  /// dequantized in registers by tfm.ggml_linear_kernel.
  bool ggmlWeights = false;
  /// CPU: run tfm-outline-kernels (each kernel a function of its own, which
  /// the driver's kernel cache compiles once; off: kernels inline).
  bool outlineKernels = true;
  /// CPU: with outlineKernels, lower the outlined kernels in the loops
  /// stage (off: they stay kernel ops, and the driver lowers those its
  /// kernel cache lacks with buildCpuSharedKernelLowering).
  bool lowerSharedKernels = true;
};

/// Adds the stages `first` to `last` (inclusive, both in `Primitive` ..
/// `LLVMDialect`) that run on `config.target`.
void buildTfmPipeline(OpPassManager &pm, const PipelineConfig &config,
                      Stage first = Stage::Primitive,
                      Stage last = Stage::LLVMDialect);

/// CPU: lowers the kernel ops of a module of shared kernels (the functions
/// tfm-outline-kernels made, which the loops stage left as kernel ops with
/// `lowerSharedKernels` off) as the loops stage lowers them in a model.
void buildCpuSharedKernelLowering(OpPassManager &pm,
                                  const PipelineConfig &config);

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
  Option<bool> fuseEpilogues{
      *this, "fuse-epilogues",
      llvm::cl::desc("Run tfm-fuse-epilogues (off: activations, gated "
                     "products and residual adds are ops of their own)"),
      llvm::cl::init(true)};
  Option<bool> fuseNorms{
      *this, "fuse-norms",
      llvm::cl::desc("Norms as tfm.norm_kernel, packed for the bf16/int8 "
                     "linears that read them (off: linalg norms)"),
      llvm::cl::init(true)};
  Option<bool> bf16Weights{
      *this, "bf16-weights",
      llvm::cl::desc("Linear weights in bf16, multiplied with vdpbf16ps "
                     "(needs AVX512_BF16)"),
      llvm::cl::init(false)};
  Option<bool> int8Weights{
      *this, "int8-weights",
      llvm::cl::desc("Linear weights in int8 with per-column scales, "
                     "multiplied with vpdpbusd (needs AVX512_VNNI)"),
      llvm::cl::init(false)};
  Option<bool> int8Dot{
      *this, "int8-dot",
      llvm::cl::desc("The CPU has AVX512_VNNI: GEMMs on ggml's Q8_0 and Q4_0 "
                     "blocks multiply bytes with vpdpbusd"),
      llvm::cl::init(false)};
  Option<bool> ggmlWeights{
      *this, "ggml-weights",
      llvm::cl::desc("tfm.linear weights in ggml's block-quantized rows, "
                     "their type chosen at load"),
      llvm::cl::init(false)};
  Option<bool> outlineKernels{
      *this, "outline-kernels",
      llvm::cl::desc("Run tfm-outline-kernels (each kernel a shared "
                     "function of its own; off: kernels inline)"),
      llvm::cl::init(true)};
  PipelineConfig getConfig() const;
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
  PipelineConfig getConfig() const;
};

/// Registers `tfm-cpu-pipeline` and `tfm-cuda-pipeline` (and the tfm
/// passes) for tfm-opt.
void registerTfmPipelines();

} // namespace mlir::tfm

#endif // TFM_PIPELINES_PIPELINES_H
