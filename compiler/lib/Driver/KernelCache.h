//===- KernelCache.h - model-independent kernels, compiled once -*- C++ -*-===//
//
// Internal to the driver. Kernels are most of a model's code, and depend on
// the model only through their shapes and options: tfm-outline-kernels
// moves each linear, norm, attention and experts kernel into a function of
// its own, and tfm_ggml_gemm and tfm_ggml_row (LowerGgmlLinearKernel.cpp)
// take every shape and ggml type at run time. The driver moves the
// functions marked tfm.shared_kernel into modules of their own (one per
// kernel), names them after a hash of their IR, the CPU and this tfmc, and
// compiles each once: its object is kept in a cache directory, and the
// next model with that kernel, compiled for the same CPU, links the same
// object. The functions are weak_odr and hidden in it, so that two models'
// objects (`tfmc -c`) link into one program.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_LIB_DRIVER_KERNELCACHE_H
#define TFM_LIB_DRIVER_KERNELCACHE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::tfm::driver {

/// The shared kernels of a module, moved into one of their own.
struct SharedKernels {
  OwningOpRef<ModuleOp> module;
  /// A hash of their IR, `target` and this tfmc: the cache entry's name and
  /// the suffix of their symbols.
  std::string key;
  /// Their symbols, as renamed.
  std::vector<std::string> symbols;
};

/// What identifies this tfmc: a hash of its executable (every pass and
/// pattern that lowers a kernel is in it; LLVM and MLIR are named by their
/// version in the key).
std::string tfmcIdentity();

/// Moves the functions of `module` marked tfm.shared_kernel into modules
/// of their own, one per group of kernels that call one another (each
/// kernel tfm-outline-kernels made is a group of its own), with the
/// external declarations they call, and renames them `<name>_<key>` in
/// both, leaving declarations in `module`; none when there are none.
/// `target` is what else their machine code depends on (the CPU and its
/// features), `tool` the compiler that generates it (tfmcIdentity()).
/// Fails (with an error) where one of them references a symbol that is
/// neither another of them nor an external declaration.
FailureOr<std::vector<SharedKernels>>
extractSharedKernels(ModuleOp module, StringRef target, StringRef tool);

/// The cache directory: $TFM_CACHE_DIR when it is set (empty: no cache),
/// else $XDG_CACHE_HOME/tfm, else $HOME/.cache/tfm; "" when there is none.
std::string kernelCacheDir();

/// The entry of `key` in `dir`.
std::string kernelCachePath(StringRef dir, StringRef key);

/// Whether `path` is an object file that defines every one of `symbols`
/// (a cache entry that is whole).
bool definesSymbols(StringRef path, const std::vector<std::string> &symbols);

} // namespace mlir::tfm::driver

#endif // TFM_LIB_DRIVER_KERNELCACHE_H
