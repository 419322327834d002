//===- Driver.h - compile a model description to an artifact ----*- C++ -*-===//
//
// The library behind `tfmc`: runs the front end, the MLIR pipeline of the
// chosen target and the host back end (LLVM O3, object, header, link) up
// to one stage, and writes it. Every error goes through MLIR diagnostics;
// `DriverDiagnosticHandler` prints them clang-style (file:line:col with the
// source line and a caret, or `tfmc: error:` for errors without a place in
// the input).
//
//===----------------------------------------------------------------------===//

#ifndef TFM_DRIVER_DRIVER_H
#define TFM_DRIVER_DRIVER_H

#include "tfm/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>

namespace mlir::tfm {

/// What a binary compile writes.
enum class ArtifactKind {
  Executable, ///< MODEL, linked with the runtime's main()
  Object,     ///< `-c`: MODEL.o and the C header MODEL.h
  Shared,     ///< `--shared`: libMODEL.so
};

/// The stages `--emit` can name, in order: the spelling, the help text, and
/// for a stage that only one target has, the error for the other.
struct StageInfo {
  Stage stage;
  StringRef flag;
  StringRef help;
  StringRef otherTargetError;
};
ArrayRef<StageInfo> getStageTable();

/// The x86-64 CPUs `--cpu` accepts.
enum class CpuModel { Native, X86_64_V3, X86_64_V4 };
StringRef getCpuName(CpuModel cpu);

enum class GpuArch { SM80, SM90 };

/// `--dtype`: what the GPU computes in.
enum class ComputeType { f32, f16, bf16 };

/// `--quantize`: how the weights of linear layers are stored.
enum class Quantize { None, Int8, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K };
StringRef getGpuArchName(GpuArch arch);

struct CompileOptions {
  /// The input's name ("-" for stdin); a `.mlir` input is IR: a module
  /// that describes its model (`tfm.model`, as `--emit=tfm` prints it), or
  /// one hand-written function without parameters.
  std::string inputFilename = "-";
  /// Where a binary goes ("-": derived from the model's name).
  std::string outputFilename = "-";
  Stage emit = Stage::Exe;
  /// For `emit == Stage::Exe`: executable, object + header, or shared.
  ArtifactKind artifact = ArtifactKind::Executable;
  TargetKind target = TargetKind::CPU;
  CpuModel cpu = CpuModel::Native;
  GpuArch gpuArch = GpuArch::SM90;
  /// The GPU's compute precision when it overrides the model's dtype.
  std::optional<ComputeType> gpuDType;
  bool fuseAttention = true;
  bool fuseEpilogues = true;
  bool fuseNorms = true;
  /// int8 linear weights with per-column scales (CPU with AVX512_VNNI;
  /// elsewhere a warning, and the weights stay f32).
  Quantize quantize = Quantize::None;
  /// `--kv-cache`: the element type of the KV caches (CPU): keys and values
  /// are rounded to it as they are written and read back as f32.
  ComputeType kvCache = ComputeType::f32;
  /// `--kv-block`: positions per block of the paged KV cache (CPU): a
  /// positive multiple of 64.
  int64_t kvBlock = 128;
  /// Which model of a file with several.
  std::string modelName;
  /// `--tensor-parallel N`: the model split over N processes (1: none).
  int64_t tensorParallel = 1;
  /// `--codegen-threads N`: machine code for a large module is generated in
  /// N partitions at once (0: the machine's cores, at most 4; 1: one
  /// module). The partitions are merged into one object.
  unsigned codegenThreads = 0;
  /// Kernels that depend on no model (the ggml GEMM) are compiled once and
  /// kept in the kernel cache ($TFM_CACHE_DIR, else ~/.cache/tfm); false
  /// (`--no-kernel-cache`): compiled with the model every time.
  bool useKernelCache = true;
  /// Progress lines on stderr: always, never, or (unset) when stderr is a
  /// terminal and the compile has run for more than a second.
  std::optional<bool> progress;
};

/// Fails with an error when writing `path` would replace the input file
/// (the same file, by any name); "-" is stdout and never the input.
LogicalResult checkNotInput(MLIRContext &ctx, const CompileOptions &options,
                            StringRef path);

/// Checks option combinations that no single option can (`--dtype` without
/// `--target=cuda`, `-c` with `--emit`); reports through `ctx`.
LogicalResult verifyOptions(MLIRContext &ctx, const CompileOptions &options);

/// Compiles the main buffer of `sourceMgr` as `options` say. Text stages are
/// written to `os`; binaries to files named after the model or
/// `options.outputFilename`. Errors are reported through `ctx`'s
/// diagnostics. Stage times nest under `timing` (`--mlir-timing`).
LogicalResult compile(MLIRContext &ctx, llvm::SourceMgr &sourceMgr,
                      const CompileOptions &options, llvm::raw_ostream &os,
                      TimingScope &timing);

/// The dialects, interfaces and translations the pipelines need.
void registerDriverDialects(DialectRegistry &registry);

/// Prints diagnostics clang-style with the source line and a caret, except
/// for lines longer than a terminal could show (a 100k-character line would
/// otherwise be printed under every diagnostic); a diagnostic without a
/// place in the input is printed as `<tool>: error: message`.
class DriverDiagnosticHandler : public SourceMgrDiagnosticHandler {
public:
  DriverDiagnosticHandler(llvm::SourceMgr &sourceMgr, MLIRContext *ctx,
                          StringRef tool);

private:
  void show(Location loc, const std::string &message,
            DiagnosticSeverity severity);
  std::string tool;
};

} // namespace mlir::tfm

#endif // TFM_DRIVER_DRIVER_H
