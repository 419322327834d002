//===- HostTarget.h - the host side of every artifact -----------*- C++ -*-===//
//
// Whatever the target, an artifact's host code is x86-64: the C entry point
// over tfm_tensor structs and the parameter table, the embedded description
// the runtime reads, the C header of `tfmc -c`, and the machine code. The
// CPU target runs the model there; the CUDA target launches kernels from it.
//
//===----------------------------------------------------------------------===//

#ifndef TFM_TARGET_HOSTTARGET_H
#define TFM_TARGET_HOSTTARGET_H

#include "tfm/Dialect/ModelDescription.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/JSON.h"
#include "llvm/Target/TargetMachine.h"

namespace mlir::tfm {

/// One memref argument of the lowered model function.
struct AbiArg {
  enum Kind { Input, Output, Param } kind;
  int64_t index;              ///< input / parameter number
  std::vector<int64_t> shape; ///< negative = dynamic
  std::string dtype;          ///< numpy-style: float32, int32, ...
};

/// Reads the destination-passing signature that tfm-model-abi gave `func`.
FailureOr<std::vector<AbiArg>> readAbi(ModuleOp module, StringRef funcName);

/// The host or named x86-64 CPU.
struct HostCpu {
  std::string cpu;
  std::string features;
  int64_t vectorWidth = 16;
  /// AVX512_BF16 (vdpbf16ps): bf16 weights multiply in hardware.
  bool bf16Dot = false;
  /// AVX512_VNNI (vpdpbusd): int8 weights multiply in hardware.
  bool int8Dot = false;
};
FailureOr<HostCpu> resolveHostCpu(StringRef name, std::string &error);

std::unique_ptr<llvm::TargetMachine> createTargetMachine(const HostCpu &target,
                                                         std::string &error);

/// Adds `<name>_forward` (the C entry point over tfm_tensor structs and a
/// parameter pointer table) and `<name>_model_json` (`metadataJson`) to
/// `module`; with
/// `exeAliases`, also the `tfm_model_forward` / `tfm_model_json` aliases the
/// runtime's main() links against.
/// The compiler's view of the runtime's `tfm_tensor` (tfm/runtime.h), which
/// the entry points read inputs and the output through.
llvm::StructType *getTensorStructType(llvm::LLVMContext &ctx);

/// With `stepAbi`, also `<name>_step` over the lowered `<name>_cached` (its
/// parameters numbered as the forward pass's), and with `exeAliases` its
/// `tfm_model_step` alias; with `encodeAbi`, `<name>_encode` over
/// `<name>_encoder` (an encoder-decoder's) and its `tfm_model_encode`
/// alias.
LogicalResult addEntryPoints(llvm::Module &module, StringRef name,
                             StringRef metadataJson, ArrayRef<AbiArg> abi,
                             bool exeAliases, std::string &error,
                             const std::vector<AbiArg> *stepAbi = nullptr,
                             const std::vector<AbiArg> *encodeAbi = nullptr);

/// The JSON the runtime reads: the description plus "abi_params", plus the
/// fields of `target` (for a CUDA artifact "target" and "compute_dtype").
/// One parameter of the entry point, in argument order: which entry of the
/// model's parameter table, and its panel width (0: plain row-major).
struct AbiParam {
  unsigned index;
  int64_t panel;
  /// Packed in bf16 pairs of K rather than f32 panels (TFM_PACKING_BF16_PAIRS;
  /// the layout: runtime/include/tfm/packed_layout.h).
  bool bf16Pairs = false;
  /// Quantized to int8 in quads of K, with the columns' scales and sums
  /// (TFM_PACKING_INT8_QUADS of runtime/include/tfm/packed_layout.h).
  bool int8Quads = false;
  /// A weight in ggml's block-quantized rows (runtime/include/tfm/
  /// ggml_blocks.h) is two parameters: its rows ("rows") and their ggml
  /// type ("type"); empty for every other parameter.
  std::string ggml;
};

/// Maps the entry point's `tfm.params` list (written by the ABI pass) onto
/// the model's parameter table; an entry the table lacks is an error at
/// `loc`.
FailureOr<std::vector<AbiParam>> resolveAbiParams(const ModelDescription &model,
                                                  ArrayAttr abiParams,
                                                  Location loc);

/// The model's description with its version, "abi_params" and the fields
/// of `target` (which override the description's).
std::string modelMetadata(const ModelDescription &model,
                          ArrayRef<AbiParam> abiParams,
                          const llvm::json::Object &target = {});
/// The same for a hand-written function (`tfmc f.mlir`): its name, its
/// inputs and output, no parameters.
std::string functionMetadata(StringRef name, ArrayRef<AbiArg> abi,
                             const llvm::json::Object &target = {});

/// Runs LLVM's O3 pipeline.
void optimizeModule(llvm::Module &module, llvm::TargetMachine &tm);

/// Writes an object file or assembly.
LogicalResult emitMachineCode(llvm::Module &module, llvm::TargetMachine &tm,
                              bool assembly, llvm::raw_pwrite_stream &os,
                              std::string &error);

/// The C header for `tfmc -c`.
std::string generateHeader(const ModelDescription &model,
                           ArrayRef<AbiParam> abiParams);

} // namespace mlir::tfm

#endif // TFM_TARGET_HOSTTARGET_H
