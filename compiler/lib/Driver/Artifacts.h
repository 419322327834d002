//===- Artifacts.h - the driver's host back end -----------------*- C++ -*-===//
//
// Internal to the driver: the model's interface read off the lowered
// module, the host back end that turns the LLVM dialect into LLVM IR, an
// object, a header or a linked binary, and the progress lines.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_DRIVER_ARTIFACTS_H
#define TFM_LIB_DRIVER_ARTIFACTS_H

#include "tfm/Driver/Driver.h"
#include "tfm/Target/HostTarget.h"

#include <chrono>
#include <optional>

namespace mlir::tfm::driver {

/// Progress lines on stderr (`tfmc: 1.3 s gpt2_small: optimizing`): always,
/// never, or when stderr is a terminal and the compile has already run for
/// more than a second.
class Progress {
public:
  explicit Progress(std::optional<bool> mode);
  void step(StringRef model, StringRef what);

private:
  std::optional<bool> mode;
  bool terminal;
  std::chrono::steady_clock::time_point start;
};

/// What the entry points need from the model function once it is lowered to
/// buffers (before the LLVM dialect erases its signature).
struct HostInterface {
  std::vector<AbiArg> abi;
  /// The KV-cache entry point's (`<name>_step`), parameters numbered as the
  /// forward pass's; empty without one.
  std::optional<std::vector<AbiArg>> stepAbi;
  /// An encoder-decoder's `<name>_encode` (over `<name>_encoder`), numbered
  /// the same way; empty without one.
  std::optional<std::vector<AbiArg>> encodeAbi;
  std::vector<AbiParam> params;
  std::string metadata; ///< the description embedded in the artifact
};

/// Reads the interface of `name`; `model` is null for a hand-written
/// function without a description. `target` holds the description's target
/// fields.
FailureOr<HostInterface> readInterface(ModuleOp module,
                                       const ModelDescription *model,
                                       StringRef name,
                                       const llvm::json::Object &target);

/// Calls `fn` with each symbol of the object file at `path` and whether the
/// object defines it (symbols whose name or flags cannot be read are
/// skipped); false when `path` is not an object file.
bool forEachObjectSymbol(StringRef path,
                         function_ref<void(StringRef name, bool defined)> fn);

/// The directory holding ptxas and fatbinary, or "" when there is none.
std::string findCudaToolkit();

/// Translates a module in the LLVM dialect to LLVM IR, adds the entry
/// points and writes the requested artifact.
class HostEmitter {
public:
  HostEmitter(MLIRContext &ctx, const CompileOptions &options,
              TimingScope &timing, Progress &progress)
      : ctx(ctx), options(options), timing(timing), progress(progress) {}

  /// `objects` are more objects to link or merge into a binary artifact
  /// (the shared kernels').
  LogicalResult emit(const ModelDescription *model, StringRef name,
                     ModuleOp module, const HostCpu &cpu,
                     const HostInterface &iface, llvm::raw_ostream &os,
                     ArrayRef<std::string> objects = {});

  /// Whether emit() can take more objects: every binary artifact can,
  /// except an object when there is no clang to merge objects with (LLVM
  /// IR and assembly are printed whole).
  bool takesObjects() const;

  /// A group of shared kernels on its way to its object: LLVM IR in a
  /// context of its own, and where the object goes.
  struct KernelObject {
    std::unique_ptr<llvm::LLVMContext> ctx;
    std::unique_ptr<llvm::Module> module;
    std::string path;
  };

  /// The shared kernels `module` (in the LLVM dialect) as LLVM IR with
  /// `symbols` weak_odr and hidden, for the object at `path`.
  FailureOr<KernelObject> translateSharedKernels(
      ModuleOp module, const std::vector<std::string> &symbols, StringRef path);

  /// Optimizes each group and writes its object, the groups spread over up
  /// to --codegen-threads threads; each is written to a temporary file
  /// beside its path and renamed, so that a reader of the path (another
  /// tfmc using the same cache) never sees part of it.
  LogicalResult writeSharedKernels(MutableArrayRef<KernelObject> kernels,
                                   const HostCpu &cpu);

  /// Checks, before any work, that the files a binary stage writes can be
  /// written: none is the input, and `-c`'s header is a file of its own
  /// beside the object.
  LogicalResult checkOutputs(StringRef name);

private:
  /// The machine code of `module` as object files: one at `path`, or for a
  /// large module one per partition, generated on threads of their own
  /// (`--codegen-threads`). With `merge` (an object the user gets) the
  /// partitions are merged into `path`; otherwise their temporary files are
  /// returned, for the caller to link and remove.
  FailureOr<SmallVector<std::string>> writeObjects(llvm::Module &module,
                                                   llvm::TargetMachine &tm,
                                                   StringRef path, bool merge);
  /// `threads` partitions of `module`, each an object in a temporary file.
  FailureOr<SmallVector<std::string>> writePartitions(llvm::Module &module,
                                                      llvm::TargetMachine &tm,
                                                      unsigned threads);
  /// Writes the object at `from` to `path` with its hidden global symbols
  /// made local.
  LogicalResult localizeHidden(StringRef from, StringRef path);
  /// One relocatable object at `path` from `parts` (`driver -r`, lld).
  LogicalResult mergeObjects(StringRef driver, ArrayRef<std::string> parts,
                             StringRef path);
  LogicalResult writeHeader(const ModelDescription *model, StringRef name,
                            const HostInterface &iface, StringRef objectPath);
  LogicalResult link(ArrayRef<std::string> objects, StringRef output);
  std::string outputPath(StringRef name) const;
  InFlightDiagnostic error() { return emitError(UnknownLoc::get(&ctx)); }

  MLIRContext &ctx;
  const CompileOptions &options;
  TimingScope &timing;
  Progress &progress;
};

} // namespace mlir::tfm::driver

#endif // TFM_LIB_DRIVER_ARTIFACTS_H
